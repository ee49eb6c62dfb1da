"""A batched product against a Python loop of 2-D calls, and cumm's host time per call beside cupy's (and torch's).

    PYTHONPATH=. python3 bench/batched.py [--batch 64] [--n 256] [--kernels auto,tf32x3,warptile]

For each kernel: ``cumm.matmul`` on a (batch, n, n) @ (batch, n, n) product (one launch) against ``batch`` calls
of ``cumm.matmul`` on the 2-D slices, each timed as a user sees it (wall clock of the Python call with the
device synchronized, cumm._timing.host_us), after both were checked against float64; then cupy.matmul on the
same batch for reference.
"""

from __future__ import annotations

import argparse
import sys

import cumm
from cumm import _timing


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--n", type=int, default=256)
    p.add_argument("--kernels", default="auto,tf32x3,warptile,double_buffer")
    p.add_argument("--calls", type=int, default=200)
    a = p.parse_args(argv)
    why = _timing.gpu_unavailable()
    if why:
        print(f"batched.py: {why}", file=sys.stderr)
        return 1
    import cupy

    rng = cupy.random.default_rng(0)
    x = rng.standard_normal((a.batch, a.n, a.n), dtype=cupy.float32)
    y = rng.standard_normal((a.batch, a.n, a.n), dtype=cupy.float32)
    ref = cupy.matmul(x.astype(cupy.float64), y.astype(cupy.float64))
    norm = float(cupy.linalg.norm(ref))
    print(f"{a.batch} x ({a.n} x {a.n} x {a.n}), float32; us per batch (host wall clock, device synchronized)")
    print(f"{'kernel':<16} {'batched':>10} {'loop':>10} {'loop/batched':>13} {'rel. error':>11}  ran")
    for k in a.kernels.split(","):
        out = cumm.matmul(x, y, kernel=k)
        err = float(cupy.linalg.norm(out.astype(cupy.float64) - ref)) / norm
        loop_out = cupy.stack([cumm.matmul(x[i], y[i], kernel=k) for i in range(a.batch)])
        err_loop = float(cupy.linalg.norm(loop_out.astype(cupy.float64) - ref)) / norm
        if not (err < 1e-5 and err_loop < 1e-5):
            print(f"{k:<16} FAIL (relative error {err:.2e}, loop {err_loop:.2e})")
            continue
        outs = [cupy.empty((a.n, a.n), cupy.float32) for _ in range(a.batch)]
        xs, ys = [x[i] for i in range(a.batch)], [y[i] for i in range(a.batch)]

        def loop(k=k, outs=outs, xs=xs, ys=ys):
            for i in range(a.batch):
                cumm.matmul(xs[i], ys[i], kernel=k, out=outs[i])

        t_b = _timing.host_us(lambda k=k, out=out: cumm.matmul(x, y, kernel=k, out=out), a.calls, 20)
        t_l = _timing.host_us(loop, max(5, a.calls // 10), 3)
        from cumm._matmul import decision

        print(f"{k:<16} {t_b:>10.1f} {t_l:>10.1f} {t_l / t_b:>12.1f}x {err:>11.1e}  {decision(x, y, out, kernel=k)}")
    t_c = _timing.host_us(lambda: cupy.matmul(x, y), a.calls, 20)
    print(f"{'cupy.matmul':<16} {t_c:>10.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
