"""What a persistent chain launch costs between kernels, and whether programmatic dependent launch (PDL) hides it.

Back-to-back launches queued behind a spinning kernel (so the host never limits them), timed two ways: an event
pair around every call (as bench/chain.py's device column), and one pair around the whole batch (per call =
total / calls). Kernels: empty ones (plain; clusters of 2 with 216 KB of shared memory, like fused3_wg's
wg128x32), each starting with the persistent kernels' dependency wait, then fused3_wg itself at n = 512.
Every launch goes through the library's own cumm._chain._Launch, plainly (cuLaunchKernel) or with PDL
(cuLaunchKernelEx, programmatic stream serialization). Every fused3_wg result is checked against float64.

    PYTHONPATH=.:bench python3 bench/probe_pdl.py [--n 512] [--config wg64x32] [--runs 200]
"""

from __future__ import annotations

import argparse
import statistics
import time

import cupy
import numpy as np
from chain import _SPIN  # bench/ is this script's directory

from cumm import _chain
from cumm._compile import _arch_specific_kernel
from cumm._ladder import get_spec
from cumm._render import render, template_text

_EMPTY = r"""
extern "C" __global__ void empty_plain() { cumm_grid_dependency_wait(); }
extern "C" __global__ void __cluster_dims__(2, 1, 1) empty_cluster() {
    extern __shared__ float s[];
    cumm_grid_dependency_wait();
    if (threadIdx.x == 1000) s[0] = 0.0f;
}
"""
MODES = {"plain": False, "pdl": True}


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


def empties(runs: int, spin) -> None:
    mod = cupy.RawModule(code=template_text("grid_barrier.cuh") + _EMPTY, options=("-std=c++17",))
    for name, grid, threads, nbytes in (("empty_plain", 128, 256, 0), ("empty_cluster", 128, 256, 221184)):
        k = mod.get_function(name)
        if nbytes:
            k.max_dynamic_shared_size_bytes = nbytes
        for mode, pdl in MODES.items():
            la = _chain._Launch(k, grid, threads, nbytes, (), pdl=pdl)
            per, batch, host = timed(lambda la=la: la((), cupy.cuda.get_current_stream().ptr), runs, spin)
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
    pointers = [tuple(x.data.ptr for x in (*s, t, bar)) for s in sets]
    kern = _arch_specific_kernel(spec, cfg, name, src, 90)
    kern.max_dynamic_shared_size_bytes = smem
    grid = min(spec.grid(cfg, n, n, n)[0], _chain.resident_blocks(kern, cfg, threads, smem))
    for mode, pdl in MODES.items():
        la = _chain._Launch(kern, grid, threads, smem, (*_chain._layout((n,) * 8 + (ldt,)), None), pdl=pdl)
        for rotate in (False, True):
            state = [0]

            def call(la=la, state=state, rotate=rotate):
                la(pointers[state[0] % nsets if rotate else 0], cupy.cuda.get_current_stream().ptr)
                state[0] += 1

            for s in sets[:4]:
                s[3].fill(np.nan)
            per, batch, host = timed(call, runs, spin)
            errs = [float(cupy.linalg.norm(s[3] - refs[i]) / cupy.linalg.norm(refs[i]))
                    for i, s in enumerate(sets[:4]) if rotate or i == 0]  # the sets the calls wrote
            print(f"fused3_wg {config} n={n} grid={grid} {mode:5s} "
                  f"{'rotated ' + str(nsets) + ' sets' if rotate else 'one set':14s}: per-call events "
                  f"{per:6.2f} us, batch {batch:6.2f} us/call, host {host:5.2f} us/call, worst err "
                  f"{max(errs):.1e}", flush=True)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=512)
    p.add_argument("--config", default="wg64x32")
    p.add_argument("--runs", type=int, default=200)
    a = p.parse_args()
    spin = cupy.RawKernel(_SPIN, "cumm_bench_spin")
    empties(a.runs, spin)
    wg(a.n, a.config, a.runs, spin)


if __name__ == "__main__":
    main()
