"""Where a 4097^3 product's time goes with edge strips: the whole call, the repack copies, the GEMM kernel on
the aligned part, the strips. Same inputs every run (in L2 where they fit: a lower bound per step).

    PYTHONPATH=. python3 bench/probe_edges.py [--n 4097] [--kernels warptile,tf32x3]
"""

from __future__ import annotations

import argparse
import statistics

import cupy

import cumm
from cumm import _auto, _bench, _edges, _matmul, _repack
from cumm._ladder import get_spec


def ms(fn) -> float:
    return statistics.median(_bench.sample_ms(fn, warmup=3, repeat=15, min_runs=5))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=4097)
    p.add_argument("--kernels", default="warptile,tf32x3")
    args = p.parse_args()
    n = args.n
    a = cupy.random.standard_normal((n, n), dtype=cupy.float32)
    b = cupy.random.standard_normal((n, n), dtype=cupy.float32)
    c = cupy.empty((n, n), dtype=cupy.float32)
    for kernel in args.kernels.split(","):
        one(kernel, a, b, c, n)


def one(kernel: str, a, b, c, n: int) -> None:
    spec = get_spec(kernel)
    ap, lda = _repack.repack(a)
    bp, ldb = _repack.repack(b)
    plan = _matmul.get_plan(kernel, None, (1, 1, _matmul._aligned(c, n)), 0)  # c: ldc = n
    mm, nn = _edges.split(n, n, plan.cfg["BM"], plan.cfg["BN"], lambda m, q: plan.blocks(m, q, n), plan.slots(0))
    row = {
        "matmul": ms(lambda: cumm.matmul(a, b, kernel=kernel, out=c)),
        "repack a+b": ms(lambda: (_repack.repack(a), _repack.repack(b))),
        "kernel full grid": ms(lambda: plan.launch(n, n, n, 1.0, ap, lda, bp, ldb, 0.0, c, n)),
        "kernel aligned part": ms(lambda: plan.launch(mm, nn, n, 1.0, ap, lda, bp, ldb, 0.0, c, n)),
        "strips": ms(lambda: _edges.run(n, n, n, mm, nn, 1.0, ap, lda, bp, ldb, 0.0, c, n, _auto._sms(0), 0)),
    }
    print(f"{kernel} {n}^3 (split at {mm} x {nn}, {plan.slots(0)} slots, spec {spec.name}):")
    for k, v in row.items():
        print(f"  {k:22s} {v:7.3f} ms  {2 * n**3 / v / 1e9:7.2f} TFLOP/s-equivalent")


if __name__ == "__main__":
    main()
