"""Back-to-back persistent chain launches of one fused3_wg configuration (no synchronization between calls,
inputs rotated), then a check against float64: a launch failure or a hang shows here, in its own process.

    PYTHONPATH=. python3 bench/stress_b2b.py "dict(BM=64, BN=32, BK=32, CL=2, STAGES=4, XA=1, TMA=1)" 384 [calls]
"""

from __future__ import annotations

import sys

import cupy

from cumm import _chain


def main() -> None:
    cfg = eval(sys.argv[1], {"dict": dict})  # a dict literal from the command line
    n, calls = int(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else 200
    dev = cupy.cuda.runtime.getDevice()
    sets = [[cupy.random.standard_normal((n, n), dtype=cupy.float32) for _ in range(3)] for _ in range(8)]
    outs = [cupy.empty((n, n), cupy.float32) for _ in sets]
    for i in range(calls):
        _chain._fused3_wg(*sets[i % len(sets)], outs[i % len(sets)], cfg, dev)
    cupy.cuda.Device().synchronize()
    worst = 0.0
    for x, e in list(zip(sets, outs, strict=True))[:calls]:
        ref = x[0].astype(cupy.float64) @ x[1].astype(cupy.float64) @ x[2].astype(cupy.float64)
        worst = max(worst, float(cupy.linalg.norm(e - ref) / cupy.linalg.norm(ref)))
    print(f"{sys.argv[1]} n={n}: {calls} calls ok, worst error {worst:.1e}")


if __name__ == "__main__":
    main()
