"""fused3_wg on the device: T and E of a small chain for three configurations (the operand layouts: a wrong
descriptor or fragment order gives O(1) errors or an illegal address), then the error over odd shapes for
every listed configuration.

    PYTHONPATH=. python3 bench/probe_wg.py
"""

from __future__ import annotations

import itertools
import math

import cupy

from cumm import _chain
from cumm._compile import _arch_specific_kernel
from cumm._ladder import get_spec
from cumm._render import render


def ref64(x):
    return (x[0].astype(cupy.float64) @ x[1].astype(cupy.float64)) @ x[2].astype(cupy.float64)


def run_source(spec, cfg, name, src, dims, x, e):
    kern = _arch_specific_kernel(spec, cfg, name, src, 90)
    threads, smem = spec.block(cfg)[0], spec.smem(cfg)
    kern.max_dynamic_shared_size_bytes = smem
    m, k, p, n = dims
    ldt = -(-p // 4) * 4
    grid = min(spec.grid(cfg, m, n, p)[0], 132)
    launch = _chain._Launch(kern, grid, threads, smem, (m, k, p, n, k, p, n, n, ldt))
    t = cupy.empty((m, ldt), cupy.float32)
    bar = cupy.zeros(2, cupy.uint32)
    e.fill(math.nan)
    launch(x[0].data.ptr, x[1].data.ptr, x[2].data.ptr, e.data.ptr, t.data.ptr, bar.data.ptr,
           cupy.cuda.get_current_stream().ptr)
    cupy.cuda.Device().synchronize()
    return t


def layouts() -> None:
    spec = get_spec("fused3_wg")
    for cfg_over in (dict(BM=32, KS=1), dict(BM=16, KS=2, BK=16), dict(BM=64, KS=1)):
        cfg = spec.resolve(cfg_over, 90)
        name, src = render(spec, cfg, (1, 1, 1))
        dims = (96, 72, 136, 64)
        x = [cupy.random.standard_normal((dims[i], dims[i + 1]), dtype=cupy.float32) for i in range(3)]
        e = cupy.empty((dims[0], dims[3]), cupy.float32)
        ref = ref64(x)
        t_ref = x[0].astype(cupy.float64) @ x[1].astype(cupy.float64)
        t = run_source(spec, cfg, name, src, dims, x, e)
        err = float(cupy.linalg.norm(e - ref) / cupy.linalg.norm(ref))
        t_err = float(cupy.linalg.norm(t[:, : dims[2]] - t_ref) / cupy.linalg.norm(t_ref))
        print(f"layout {cfg_over}: T err {t_err:.2e}  E err {err:.2e}", flush=True)


SHAPES = [(512, 512, 512, 512), (1, 1, 1, 1), (127, 131, 137, 139), (33, 600, 7, 65), (1000, 3, 1000, 5),
          (64, 4096, 64, 4096), (300, 1, 300, 1), (2049, 65, 129, 33)]


def shapes() -> None:
    dev = cupy.cuda.runtime.getDevice()
    configs = list(_chain.WG_CONFIGS.values()) + [
        dict(BM=16, BK=16, KS=4, STAGES=3), dict(BM=32, BK=16, KS=4, STAGES=4), dict(BM=64, BK=32, KS=1, STAGES=3)]
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
    layouts()
    shapes()
