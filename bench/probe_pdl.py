"""What a persistent chain launch costs between kernels, and whether programmatic dependent launch (PDL) hides it.

Back-to-back launches queued behind a spinning kernel (so the host never limits them), timed two ways: an event
pair around every call (as bench/chain.py's device column), and one pair around the whole batch (per call =
total / calls). Kernels: empty ones (plain; clusters of 2 with 216 KB of shared memory, like fused3_wg's
wg128x32), then fused3_wg itself at n = 512, launched plainly (cuLaunchKernel), through cuLaunchKernelEx without
attributes, and with PDL (the kernel starts with griddepcontrol.wait: no global access before the previous
kernel in the stream has completed and its writes are visible). Every result is checked against float64.

    PYTHONPATH=. python3 bench/probe_pdl.py [--n 512] [--config wg128x32] [--runs 200]
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import time

import cupy
import numpy as np
from cupy_backends.cuda.api import driver

from cumm import _chain
from cumm._compile import _arch_specific_kernel
from cumm._ladder import get_spec
from cumm._render import render

_SPIN = r"""
extern "C" __global__ void spin(long long ns) {
    long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns);
}
extern "C" __global__ void empty_plain() {
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
}
extern "C" __global__ void __cluster_dims__(2, 1, 1) empty_cluster() {
    extern __shared__ float s[];
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
    if (threadIdx.x == 1000) s[0] = 0.0f;
}
"""
_LIB = ctypes.CDLL("libcuda.so.1")
_PSS = 6  # CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION


class _Attr(ctypes.Structure):  # CUlaunchAttribute: id, 4 bytes of padding, a 64-byte union
    _fields_ = [("id", ctypes.c_uint), ("pad", ctypes.c_uint), ("value", ctypes.c_int * 16)]


def launcher(func: int, grid: int, threads: int, smem: int, params: int, mode: str):
    """A zero-argument callable that launches ``func``: mode plain (cuLaunchKernel through CuPy), ex (ctypes
    cuLaunchKernelEx, no attribute) or pdl (cuLaunchKernelEx with programmatic stream serialization)."""
    if mode == "plain":
        def go():
            driver.launchKernel(func, grid, 1, 1, threads, 1, 1, smem, cupy.cuda.get_current_stream().ptr, params, 0)
        return go
    attr = _Attr(_PSS, 0)
    attr.value[0] = 1
    cfg = _chain._LaunchConfig((grid, 1, 1), (threads, 1, 1), smem, None,
                               ctypes.cast(ctypes.pointer(attr), ctypes.c_void_p) if mode == "pdl" else None,
                               1 if mode == "pdl" else 0)
    f, p = ctypes.c_void_p(func), ctypes.c_void_p(params)
    ex = _LIB.cuLaunchKernelEx

    def go():
        cfg.stream = cupy.cuda.get_current_stream().ptr
        rc = ex(ctypes.byref(cfg), f, p, None)
        if rc:
            raise RuntimeError(f"cuLaunchKernelEx: CUresult {rc}")
    go.keep = (attr, cfg)
    return go


def timed(call, runs: int, spin) -> tuple[float, float, float]:
    """(median per-call event time, batch time / runs, host us per call) in us, all calls queued behind a spin."""
    for _ in range(5):
        call()
    cupy.cuda.Device().synchronize()
    pairs = [(cupy.cuda.Event(), cupy.cuda.Event()) for _ in range(runs)]
    spin((1,), (1,), (np.int64(30_000_000),))
    for s, e in pairs:
        s.record()
        call()
        e.record()
    pairs[-1][1].synchronize()
    per = statistics.median(cupy.cuda.get_elapsed_time(s, e) for s, e in pairs) * 1e3
    a, b = cupy.cuda.Event(), cupy.cuda.Event()
    spin((1,), (1,), (np.int64(30_000_000),))
    t0 = time.perf_counter()
    a.record()
    for _ in range(runs):
        call()
    b.record()
    host = (time.perf_counter() - t0) / runs * 1e6
    b.synchronize()
    return per, cupy.cuda.get_elapsed_time(a, b) * 1e3 / runs, host


def empties(runs: int, spin, mod) -> None:
    smem = 221184
    zero = np.zeros(1, np.uint64)
    for name, grid, threads, nbytes in (("empty_plain", 128, 256, 0), ("empty_cluster", 128, 256, smem)):
        k = mod.get_function(name)
        if nbytes:
            k.max_dynamic_shared_size_bytes = nbytes
        for mode in ("plain", "ex", "pdl"):
            per, batch, host = timed(launcher(k.kernel.ptr, grid, threads, nbytes, zero.ctypes.data, mode), runs, spin)
            print(f"{name:14s} grid={grid} smem={nbytes:6d} {mode:5s}: per-call events {per:6.2f} us, "
                  f"batch {batch:6.2f} us/call, host {host:5.2f} us/call", flush=True)


def wg(n: int, config: str, runs: int, spin) -> None:
    spec = get_spec("fused3_wg")
    cfg = spec.resolve(_chain.WG_CONFIGS[config], 90)
    name, src = render(spec, cfg, (1, 1, 1))
    assert "cumm_grid_dependency_wait();" in src, "the kernel must wait first to be launched with PDL"
    threads, smem = spec.block(cfg)[0], spec.smem(cfg)
    l2 = cupy.cuda.Device().attributes["L2CacheSize"]
    nsets = max(1, -(-2 * l2 // (16 * n * n)))  # A, B, C and E of a set: 16 n^2 bytes; rotate past 2x L2
    sets = [[cupy.random.standard_normal((n, n), dtype=cupy.float32) for _ in range(3)] + [cupy.empty((n, n), "f")]
            for _ in range(nsets)]
    refs = [(s[0].astype("d") @ s[1].astype("d")) @ s[2].astype("d") for s in sets[:4]]
    ldt = -(-n // 4) * 4
    t = cupy.empty(n * ldt, cupy.float32)
    bar = cupy.zeros(2, cupy.uint32)
    for mode in ("plain", "ex", "pdl"):
        kern = _arch_specific_kernel(spec, cfg, name, src, 90)
        kern.max_dynamic_shared_size_bytes = smem
        grid = min(spec.grid(cfg, n, n, n)[0], _chain.resident_blocks(kern, cfg, threads, smem))
        launches = [_chain._Launch(kern, grid, threads, smem, (*_chain._layout((n,) * 8 + (ldt,)), None)) for _ in sets]
        for s, la in zip(sets, launches, strict=True):
            for slot, x in zip(la.pointer_slots, (s[0], s[1], s[2], s[3], t, bar), strict=True):
                la.slots[slot] = x.data.ptr
        for rotate in (False, True):
            calls = [launcher(la.func, grid, threads, smem, la.params, mode) for la in launches]
            state = [0]

            def call(calls=calls, state=state, rotate=rotate):
                calls[state[0] % len(calls) if rotate else 0]()
                state[0] += 1

            for s in sets[:4]:
                s[3].fill(np.nan)
            per, batch, host = timed(call, runs, spin)
            errs = []
            for i, s in enumerate(sets[:4]):  # every set was written by the rotation (or set 0 only)
                if rotate or i == 0:
                    errs.append(float(cupy.linalg.norm(s[3] - refs[i]) / cupy.linalg.norm(refs[i])))
            print(f"fused3_wg {config} n={n} grid={grid} {mode:5s} "
                  f"{'rotated ' + str(nsets) + ' sets' if rotate else 'one set':14s}: per-call events "
                  f"{per:6.2f} us, batch {batch:6.2f} us/call, host {host:5.2f} us/call, worst err "
                  f"{max(errs):.1e}", flush=True)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=512)
    p.add_argument("--config", default="wg128x32")
    p.add_argument("--runs", type=int, default=200)
    a = p.parse_args()
    mod = cupy.RawModule(code=_SPIN, options=("-std=c++17",))
    spin = mod.get_function("spin")
    empties(a.runs, spin, mod)
    wg(a.n, a.config, a.runs, spin)


if __name__ == "__main__":
    main()
