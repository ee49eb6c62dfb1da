"""Where multi_dot's time goes at one chain size: host path (cProfile and per-step timers) and, on the device,
fused3_tc's phases from %globaltimer stamps taken by thread 0 of every block (an instrumented copy of the
rendered source; the shipped kernel is not changed).

    PYTHONPATH=. python3 bench/probe_chain.py [--n 512] [--configs tc32x64,tc64x64]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import statistics
import time
from pathlib import Path

import cupy
import numpy as np

import cumm
from cumm import _chain, _render
from cumm._compile import NVRTC_OPTIONS, _arch_specific_kernel
from cumm._ladder import get_spec
from cumm._render import render

STAMPS = r"""
__device__ unsigned long long cumm_probe[8192][8];
__device__ __forceinline__ void cumm_stamp(int i) {
    if (threadIdx.x == 0) { unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
        cumm_probe[blockIdx.x][i] = t; }
}
"""


NOP = r"""
extern "C" __global__ void cumm_nop0() {}
extern "C" __global__ void cumm_nop15(int, int, int, int, const float*, int, const float*, int, const float*, int,
                                      const float*, int, const float*, int, const float*) {}
"""


def host_us(fn, iters: int = 200) -> float:
    """Host time per call of ``fn`` in us: short bursts (the launch queue never fills), best of 9."""
    best = float("inf")
    for _ in range(9):
        fn()
        cupy.cuda.Device().synchronize()
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        best = min(best, time.perf_counter() - t0)
        cupy.cuda.Device().synchronize()
    return best / iters * 1e6


def host_breakdown(n: int, iters: int = 200) -> None:
    x = [cupy.random.standard_normal((n, n), dtype=cupy.float32) for _ in range(3)]
    e = cupy.empty((n, n), cupy.float32)

    def per_call(fn):
        return host_us(fn, iters)

    dev = cupy.cuda.runtime.getDevice()
    cfg = _chain.select(n, n, n, n, 90) or "pairwise"
    print(f"n={n}: auto chooses {cfg}")
    rows = {
        "multi_dot(out=e)": lambda: cumm.multi_dot(x, out=e),
        "multi_dot() (allocates out)": lambda: cumm.multi_dot(x),
        "cupy a@b@c (out=e)": lambda: cupy.matmul(cupy.matmul(x[0], x[1]), x[2], out=e),
        "cupy.empty((n, n))": lambda: cupy.empty((n, n), dtype=cupy.float32),
        "_operands": lambda: _chain._operands(x[0], x[1], x[2], e),
        "_check_out": lambda: _chain._check_out(e, x, n, n, dev),
        "cupy.may_share_memory": lambda: cupy.may_share_memory(e, x[0]),
        "_check_operand x3": lambda: [_chain._check_operand(y, "a") for y in x],
        "getDevice": lambda: cupy.cuda.runtime.getDevice(),
        "get_current_stream().ptr": lambda: cupy.cuda.get_current_stream().ptr,
    }
    if cfg in _chain.PERSISTENT:
        launch = _chain._persistent_plan(_chain.PERSISTENT[cfg], cfg, (1, 1, 1), dev, (n, n, n, n, n, n, n, n))
        t = cupy.empty(launch.scratch // 4, cupy.float32)
        bar = cupy.zeros(2, cupy.uint32)
        ptrs = (x[0].data.ptr, x[1].data.ptr, x[2].data.ptr, e.data.ptr, t.data.ptr, bar.data.ptr)
        sp = cupy.cuda.get_current_stream().ptr
        rows["driver launch only (_Launch, pointers given)"] = lambda: launch(ptrs, sp)
        rows["_persistent (operands, scratch, launch)"] = lambda: _chain._persistent(
            x[0], x[1], x[2], e, _chain.PERSISTENT[cfg], cfg, dev)
        saved = _chain.PDL, dict(_chain._launches)
        _chain.PDL = False
        _chain._launches.clear()
        plain = _chain._persistent_plan(_chain.PERSISTENT[cfg], cfg, (1, 1, 1), dev, (n, n, n, n, n, n, n, n))
        _chain.PDL, _chain._launches = saved[0], saved[1]
        rows["driver launch only, without PDL (CuPy's cuLaunchKernel)"] = lambda: plain(ptrs, sp)
        rows["_run_persistent (stream state, scratch, launch)"] = lambda: _chain._run_persistent(
            launch, dev, ptrs[:4])
    nop = cupy.RawModule(code=NOP)
    nop0, nop15 = nop.get_function("cumm_nop0"), nop.get_function("cumm_nop15")
    i0 = np.int32(0)
    rows["nop launch, 0 args"] = lambda: nop0((1,), (32,), ())
    rows["nop launch, 15 args (6 arrays)"] = lambda: nop15((1,), (32,), (i0,) * 4 + (x[0], i0) * 4 + (x[1], i0, x[2]))
    for name, fn in rows.items():
        print(f"  {name:40s} {per_call(fn):8.2f} us/call")
    real = _chain._fast_call
    _chain._fast_call = lambda *args: (None, None)  # every call through the checks and the plan lookups
    try:
        print(f"  {'multi_dot(out=e), checked path':40s} {per_call(rows['multi_dot(out=e)']):8.2f} us/call")
    finally:
        _chain._fast_call = real
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(iters):
        cumm.multi_dot(x, out=e)
    pr.disable()
    cupy.cuda.Device().synchronize()
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(18)
    print(s.getvalue())


_B = _chain.TC_CONFIGS["tc32x64"]
EXTRA = {  # candidate tile shapes for small chains: more warps per multiprocessor
    "w16x16": dict(_B, WM=16, WN=16, NUM_THREADS=256),
    "t32x32": dict(_B, BN=32, WN=16),
    "t32x32k32": dict(_B, BN=32, WN=16, BK=32),
    "t64x64w8": dict(_chain.TC_CONFIGS["tc64x64"], WM=16, WN=32, NUM_THREADS=256),
    "t32x64k32": dict(_B, BK=32),
    # fused3_wg with chunks by the copy engine
    "wg128x32": dict(BM=128, BN=32, BK=32, CL=2, STAGES=8, MINB=1, XA=1, TMA=1),  # session 9's
    "wg128x32tma": dict(BM=128, BN=32, BK=32, CL=2, STAGES=8, MINB=1, XA=1, TMA=1),
    "wg128x64s5tma": dict(BM=128, BN=64, BK=32, CL=2, STAGES=5, MINB=1, XA=0, TMA=1),
    # session 11: K split over two K groups of one block (KW = 2)
    # (kw64x32 itself: the named configuration, _chain.WG_CONFIGS; as it was before session 15: kw64x32pc0)
    # session 15: the first phase-2 tile's C split in the grid barrier's wait (PC = 1), and without
    "kw64x32pc": dict(BM=64, BN=32, BK=64, CL=1, STAGES=2, MINB=1, XA=0, TMA=1, KW=2, PC=1),
    "kw64x32pc0": dict(BM=64, BN=32, BK=64, CL=1, STAGES=2, MINB=1, XA=0, TMA=1, KW=2, PC=0),
}


def instrumented(config: str, flags=(1, 1, 1)):
    kernel = _chain.PERSISTENT.get(config) or ("fused3_wg" if config.startswith(("wg", "kw")) else "fused3_tc")
    spec = get_spec(kernel)
    cfg = spec.resolve({**_chain.TC_CONFIGS, **_chain.WG_CONFIGS, **EXTRA}[config], 90)
    name, src = render(spec, cfg, flags)
    start = "    const int rows = (m + BM - 1) / BM"
    assert src.count(start) == 1, "template changed: update the probe's anchors"
    body = src.replace(start, "    cumm_stamp(0);\n" + start, 1)
    # fused3_wg with PC = 1: the barrier in two halves (C split between them), stamped as one
    arrive = "        const unsigned long long arrival = cumm_grid_arrive(bar);"
    wait = "        cumm_grid_wait(bar, arrival);"
    if arrive in body:
        body = body.replace(arrive, "        cumm_stamp(1);\n" + arrive, 1)
        body = body.replace(wait, wait + "\n        cumm_stamp(2);", 1)
    bar, i = "    cumm_grid_barrier(bar);", 1
    while bar in body:  # stamps 2i - 1 and 2i around the i-th grid barrier
        body = body.replace(bar, f"    cumm_stamp({i});\n    cumm_grid_barrier(bar );\n    cumm_stamp({i + 1});", 1)
        i += 2
    body = body.rstrip()
    assert body.endswith("}"), "template changed: update the probe's anchors"
    body = body[:-1] + f"    cumm_stamp({i});\n}}\n"
    k = body.find("extern \"C\" __global__")
    body = body[:k] + STAMPS + body[k:]
    if spec.arch_specific:
        kern = _arch_specific_kernel(spec, cfg, name, body, 90)
        g = kern.module.get_global_var("cumm_probe")
        ptr = g[0] if isinstance(g, tuple) else g
        return cupy.cuda.MemoryPointer(cupy.cuda.UnownedMemory(ptr, 8192 * 8 * 8, kern.module), 0), kern, spec, cfg
    mod = cupy.RawModule(code=body, options=NVRTC_OPTIONS)
    return mod.get_global("cumm_probe"), mod.get_function(name), spec, cfg


def launch_setup(n: int, kern, spec, cfg, max_clusters: int = 0):
    """(grid, threads, shared memory, arguments, [A, B, C], E) of a persistent chain kernel at n, its grid as
    multi_dot sizes it (every block resident); max_clusters > 0 caps it at that many blocks (clusters)."""
    threads, smem = spec.block(cfg)[0], spec.smem(cfg)
    kern.max_dynamic_shared_size_bytes = smem
    cl = cfg.get("CL", 1)
    grid = min(spec.grid(cfg, n, n, n)[0], _chain.resident_blocks(kern, cfg, threads, smem),
               max_clusters * cl or 1 << 30)
    x = [cupy.random.standard_normal((n, n), dtype=cupy.float32) for _ in range(3)]
    e = cupy.empty((n, n), cupy.float32)
    ldt = -(-n // 4) * 4  # as _chain._persistent_plan
    t = cupy.empty(n * ldt, cupy.float32)
    bar = cupy.zeros(2, cupy.uint32)
    i32 = np.int32
    args = (i32(n), i32(n), i32(n), i32(n), x[0], i32(n), x[1], i32(n), x[2], i32(n), e, i32(n), t, i32(ldt), bar)
    return grid, threads, smem, args, x, e


def with_maps(kern, cfg, grid: int, threads: int, smem: int, args):
    """``kern`` as stamped_runs calls it; with TMA = 1 launched as multi_dot launches it (tensor maps of the
    arguments that launch_setup made)."""
    if not cfg.get("TMA"):
        return kern
    n = int(args[0])
    ints = (n,) * 8 + (int(args[13]),)
    plain = _chain._Launch(kern, grid, threads, smem, (*_chain._layout(ints), None),
                           maps=_chain.wg_maps(cfg, ints))
    pointers = tuple(args[i].data.ptr for i in (4, 6, 8, 10, 12, 14))
    return lambda grid, block, args, shared_mem: plain(pointers, cupy.cuda.get_current_stream().ptr)


def stamped_runs(kern, grid: int, threads: int, smem: int, args, probe, reps: int, warmup: int = 3):
    """Launch an instrumented kernel warmup + reps times, ``probe`` (its stamps, a cupy array) zeroed before each;
    yield (event-timed us, the grid's rows of ``probe`` as int64) for the last reps."""
    ev = [cupy.cuda.Event(), cupy.cuda.Event()]
    for r in range(warmup + reps):
        probe.fill(0)
        ev[0].record()
        kern((grid,), (threads,), args, shared_mem=smem)
        ev[1].record()
        ev[1].synchronize()
        if r >= warmup:
            yield cupy.cuda.get_elapsed_time(*ev) * 1e3, probe[:grid].get().astype(np.int64)


def phases(n: int, config: str, reps: int = 20, max_grid: int = 0) -> None:
    """Phase times of ``config`` at n from in-kernel stamps; max_grid > 0 caps the grid (blocks then walk
    several tiles each: how a tile's time depends on how many multiprocessors load at once)."""
    probe_ptr, kern, spec, cfg = instrumented(config)
    grid, threads, smem, args, x, e = launch_setup(n, kern, spec, cfg, max_grid)
    kern = with_maps(kern, cfg, grid, threads, smem, args)
    probe = cupy.ndarray((8192, 8), cupy.uint64, probe_ptr)
    res = []
    for event_us, s in stamped_runs(kern, grid, threads, smem, args, probe, reps):
        last = int((s[0] > 0).nonzero()[0].max())  # stamps: 0, then 2 per grid barrier, then the end
        t0 = s[:, 0].min()
        row = dict(event=event_us, start_spread=(s[:, 0].max() - t0) / 1e3)
        for j in range(0, last, 2):  # work segment j -> j + 1 (median and slowest block), then a barrier
            row[f"work{j // 2}_med"] = float(np.median(s[:, j + 1] - s[:, j])) / 1e3
            row[f"work{j // 2}_max"] = (s[:, j + 1] - s[:, j]).max() / 1e3
            if j + 2 <= last:
                row[f"bar{j // 2}_release"] = (s[:, j + 2].min() - s[:, j + 1].max()) / 1e3
        row["end"] = (s[:, last].max() - t0) / 1e3
        res.append(row)
    ref = (x[0].astype(cupy.float64) @ x[1].astype(cupy.float64)) @ x[2].astype(cupy.float64)
    err = float(cupy.linalg.norm(e - ref) / cupy.linalg.norm(ref))
    med = {k: statistics.median(r[k] for r in res) for k in res[0]}
    print(f"n={n} {config} grid={grid} x {threads} smem={smem} err={err:.1e} (us, median of {reps}):")
    print("  " + "  ".join(f"{k}={v:.2f}" for k, v in med.items()))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--n", default="512")
    p.add_argument("--configs", default=",".join([*_chain.TC_CONFIGS, *_chain.WG_CONFIGS]))
    p.add_argument("--no-host", action="store_true")
    p.add_argument("--grids", default="0", help="grid caps to time the phases with (0: as multi_dot launches)")
    p.add_argument("--template", help="a directory whose kernel templates and headers replace the package's")
    a = p.parse_args()
    if a.template:
        own, folder = _render.template_text, Path(a.template)
        _render.template_text = lambda f: (folder / f).read_text() if (folder / f).exists() else own(f)
    for n in map(int, a.n.split(",")):
        if not a.no_host:
            host_breakdown(n)
        for c in a.configs.split(","):
            for g in map(int, a.grids.split(",")):
                phases(n, c, max_grid=g)


if __name__ == "__main__":
    main()
