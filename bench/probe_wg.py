"""fused3_wg's relative error over odd shapes for several configurations, against float64.

    PYTHONPATH=. python3 bench/probe_wg.py
"""

from __future__ import annotations

import itertools
import math

import cupy

from cumm import _chain


def ref64(x):
    return (x[0].astype(cupy.float64) @ x[1].astype(cupy.float64)) @ x[2].astype(cupy.float64)


SHAPES = [(512, 512, 512, 512), (1, 1, 1, 1), (127, 131, 137, 139), (33, 600, 7, 65), (1000, 3, 1000, 5),
          (64, 4096, 64, 4096), (300, 1, 300, 1), (2049, 65, 129, 33)]


def shapes() -> None:
    dev = cupy.cuda.runtime.getDevice()
    configs = list(_chain.WG_CONFIGS.values()) + [
        dict(BM=16, BK=16, KS=4, STAGES=3), dict(BM=32, BK=16, KS=4, STAGES=3), dict(BM=64, BK=32, KS=1, STAGES=3),
        dict(BM=32, BK=8, KS=3, STAGES=4), dict(BM=16, BK=64, KS=2, STAGES=2)]
    worst = 0.0
    for cfg, dims in itertools.product(configs, SHAPES):
        x = [cupy.random.standard_normal((dims[i], dims[i + 1]), dtype=cupy.float32) for i in range(3)]
        e = cupy.full((dims[0], dims[3]), math.nan, cupy.float32)
        _chain._fused3_wg(*x, e, cfg, dev)
        ref = ref64(x)
        err = float(cupy.linalg.norm(e - ref) / cupy.linalg.norm(ref))
        worst = max(worst, err) if math.isfinite(err) else math.inf
        flag = "" if err < 1e-5 else "  <-- FAIL"
        print(f"shape {dims} {cfg}: rel err {err:.2e}{flag}", flush=True)
    print(f"worst relative error {worst:.2e}")


if __name__ == "__main__":
    shapes()
