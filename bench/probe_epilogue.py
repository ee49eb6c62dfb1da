"""What an unaligned C costs: 4096^3 into an aligned out against out = a view with ldc = 4097 (scalar stores),
beside 4095^3 and 4097^3. Same inputs every run.

    PYTHONPATH=. python3 bench/probe_epilogue.py [--kernels bank_conflict_free,warptile,double_buffer]
"""

from __future__ import annotations

import argparse
import statistics

import cupy

import cumm
from cumm import _bench


def ms(fn) -> float:
    return statistics.median(_bench.sample_ms(fn, warmup=3, repeat=20, min_runs=5))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--kernels", default="bank_conflict_free,warptile,double_buffer,tf32x3")
    args = p.parse_args()
    rng = cupy.random.default_rng(0)
    ops = {n: (rng.standard_normal((n, n), dtype=cupy.float32), rng.standard_normal((n, n), dtype=cupy.float32))
           for n in (4095, 4096, 4097)}
    wide = cupy.empty((4096, 4097), dtype=cupy.float32)
    for kernel in args.kernels.split(","):
        row = {}
        for n, (a, b) in ops.items():
            row[n] = ms(lambda a=a, b=b, k=kernel: cumm.matmul(a, b, kernel=k))
        a, b = ops[4096]
        row["4096 ldc=4097"] = ms(lambda a=a, b=b, k=kernel: cumm.matmul(a, b, kernel=k, out=wide[:, :4096]))
        print(kernel, "  ".join(f"{k}: {v:.3f} ms" for k, v in row.items()), flush=True)


if __name__ == "__main__":
    main()
