"""Time cumm.multi_dot on A @ B @ C against cupy's ``a @ b @ c`` (two cuBLAS calls, true FP32).

    PYTHONPATH=. python3 bench/chain.py [--json PATH] [--sizes 128,256,512] [--repeat 100] [--configs]

For every chain: each method is first verified against a float64 product (output NaN-poisoned first; a
method whose relative error is not below 1e-5 gets FAIL and no time), then timed by CUDA events, warm-up
excluded, median of at least 50 runs, inputs rotated over enough sets to exceed twice the L2 cache (the
project's timing, cumm._bench.sample_ms), two ways:

* loop: calls queued back to back behind a short untimed leader, as cumm._bench does. Where a method's host
  side (Python, argument checks, launches) is slower than its kernels, the GPU waits for the host and the
  host's time is what is measured: what a caller sees calling it in a loop.
* device: the timed calls are queued while the GPU is held busy by a spinning leader kernel, so all of
  them are in the queue before the first runs and each pair of events times the GPU alone (the kernels
  and the gaps between them), whatever the host costs.
* batch: one event pair around each batch of BATCH calls issued back to back (host included, as in loop),
  per call = batch time / BATCH, median over the batches. An event recorded between two launches costs the
  GPU ~2 us (H200: an empty kernel takes 3.4 us per call with an event pair around each call, 1.4 us in
  a batch, bench/probe_pdl.py) and stops programmatic dependent launch from overlapping them: this is
  what a loop that records no events sees.
* host: the host's time to issue those batches, per call (the host side alone).

Columns: cupy a@b@c, multi_dot forced to fused3, fused3_tc and fused3_wg (sm_90 only), multi_dot auto;
speedup = cupy / auto. The JSON also has pairwise and what auto chose. --configs also times every fused
configuration (JSON and a third table).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time

import cupy
import numpy as np

import cumm
from cumm import _bench, _chain

SQUARE = (128, 256, 512, 1024, 2048, 4096)
EXTRA = [(4096, 64, 4096, 64)]
MIN_RUNS = 50
TOL = 1e-5
BATCH, BATCHES = 50, 7


def _sets(rng, dims):
    dev = cupy.cuda.Device()
    l2 = dev.attributes.get("L2CacheSize") or _bench.L2_FALLBACK_BYTES
    free = cupy.cuda.runtime.memGetInfo()[0] + cupy.get_default_memory_pool().free_bytes()
    m, k, p, n = dims
    operand = 4 * (m * k + k * p + p * n)
    count = _bench.n_input_sets(operand, operand + 4 * m * n, l2, free)
    f32 = cupy.float32
    return [([rng.standard_normal((dims[i], dims[i + 1]), dtype=f32) for i in range(3)], cupy.empty((m, n), f32))
            for _ in range(count)]


# fused3_tc tile shapes timed with --configs (each over _chain.TC_CONFIG)
TC_SWEEP = {
    "32x64": {}, "32x32": dict(BN=32, WN=16), "64x64": dict(BM=64, WM=32), "64x64k16": dict(BM=64, WM=32, BK=16),
    "32x64s2": dict(STAGES=2), "128x128": dict(BM=128, BN=128, WM=64, WN=32, NUM_THREADS=256, STAGES=3),
    "32x64ks2": dict(KS=2), "32x64ks4": dict(KS=4), "32x32ks4": dict(BN=32, WN=16, KS=4),
    "32x32ks8": dict(BN=32, WN=16, KS=8), "64x64ks4": dict(BM=64, WM=32, KS=4),
    "64x64k32ks4": dict(BM=64, WM=32, BK=32, KS=4),
    # one warp per slice with the whole tile as its warp tile: fewer fragment loads and splits per mma
    "32x32w1ks4": dict(BN=32, WM=32, WN=32, NUM_THREADS=32, KS=4),
    "32x32w1ks8": dict(BN=32, WM=32, WN=32, NUM_THREADS=32, KS=8),
    "32x64w1ks4": dict(WM=32, WN=64, NUM_THREADS=32, KS=4), "32x64w2ks4": dict(WN=64, NUM_THREADS=64, KS=4),
    "32x32w2ks4": dict(BN=32, WN=32, NUM_THREADS=64, KS=4),
}


# fused3_wg configurations timed with --configs (sm_90 only): BMxBN tiles, cK = K split over a cluster of K
WG_BASE = dict(BM=128, BN=64, BK=16, CL=4, STAGES=4, MINB=1, XA=0)  # what WG_SWEEP's entries override
WG_SWEEP = {  # sS: S stages (S - 1 chunks in flight; with K / (CL * BK) <= S - 1 a rank's whole K at once)
    "128x64c4k16s4": {}, "64x64c2k32s3": dict(BM=64, CL=2, BK=32, STAGES=3),
    "128x32c2k32s3": dict(BN=32, CL=2, BK=32, STAGES=3), "128x32c2k32s5": dict(BN=32, CL=2, BK=32, STAGES=5),
    "128x32c2k32s8": dict(BN=32, CL=2, BK=32, STAGES=8), "64x32c4k32s6": dict(BM=64, BN=32, CL=4, BK=32, STAGES=6),
    "128x32c4k32s4": dict(BN=32, CL=4, BK=32), "128x64c2k16s6": dict(CL=2, STAGES=6),
    "128x64c2k16s8": dict(CL=2, STAGES=8), "128x64c2k32s6": dict(CL=2, BK=32, STAGES=6),
    # xa: X's fragments one chunk ahead (XA = 1)
    "128x32c2k32s8xa": dict(BN=32, CL=2, BK=32, STAGES=8, XA=1),
    "128x32c2k32s5xa": dict(BN=32, CL=2, BK=32, STAGES=5, XA=1),
    "64x64c2k32s3xa": dict(BM=64, CL=2, BK=32, STAGES=3, XA=1), "128x64c2k32s6xa": dict(CL=2, BK=32, STAGES=6, XA=1),
    # tma: chunks by the copy engine (TMA = 1; STAGES chunks in flight, one block barrier per chunk)
    "128x32c2k32s8xa-tma": dict(BN=32, CL=2, BK=32, STAGES=8, XA=1, TMA=1),
    "128x32c2k32s4xa-tma": dict(BN=32, CL=2, BK=32, STAGES=4, XA=1, TMA=1),
    "128x32c2k32s8-tma": dict(BN=32, CL=2, BK=32, STAGES=8, TMA=1),
    "64x64c2k32s3-tma": dict(BM=64, CL=2, BK=32, STAGES=3, TMA=1),
    "64x64c2k32s4xa-tma": dict(BM=64, CL=2, BK=32, STAGES=4, XA=1, TMA=1),
    "128x64c2k32s5": dict(CL=2, BK=32, STAGES=5), "128x64c2k32s5-tma": dict(CL=2, BK=32, STAGES=5, TMA=1),
    "128x32c4k32s4xa-tma": dict(BN=32, CL=4, BK=32, STAGES=4, XA=1, TMA=1),
    "64x64c2k32s6-tma": dict(BM=64, CL=2, BK=32, STAGES=6, TMA=1),
    "128x64c2k32s4-tma": dict(CL=2, BK=32, STAGES=4, TMA=1),
    "128x64c2k16s8-tma": dict(CL=2, BK=16, STAGES=8, TMA=1),
    "128x64c2k16s8xa-tma": dict(CL=2, BK=16, STAGES=8, XA=1, TMA=1),
    "128x32c2k16s8xa-tma": dict(BN=32, CL=2, BK=16, STAGES=8, XA=1, TMA=1),
    # one warpgroup per block, two blocks per multiprocessor where the shared memory allows
    "64x32c1k32s8xa-tma": dict(BM=64, BN=32, CL=1, BK=32, STAGES=8, XA=1, TMA=1),
    "64x32c2k32s6xa-tma": dict(BM=64, BN=32, CL=2, BK=32, STAGES=6, XA=1, TMA=1),
    "64x32c2k32s4xa-tma": dict(BM=64, BN=32, CL=2, BK=32, STAGES=4, XA=1, TMA=1),
    "64x32c4k32s4xa-tma": dict(BM=64, BN=32, CL=4, BK=32, STAGES=4, XA=1, TMA=1),
    # pa2: two sets of partial sums, a chunk's wgmma queued behind the last one's (PA = 2)
    "128x32c2k32s8xa-tma-pa2": dict(BN=32, CL=2, BK=32, STAGES=8, XA=1, TMA=1, PA=2),
    "128x32c2k16s8xa-tma-pa2": dict(BN=32, CL=2, BK=16, STAGES=8, XA=1, TMA=1, PA=2),
    "128x32c2k32s8xa-pa2": dict(BN=32, CL=2, BK=32, STAGES=8, XA=1, PA=2),
    "64x32c2k32s6xa-tma-pa2": dict(BM=64, BN=32, CL=2, BK=32, STAGES=6, XA=1, TMA=1, PA=2),
    "128x64c2k16s8xa-tma-pa2": dict(CL=2, BK=16, STAGES=8, XA=1, TMA=1, PA=2),
    "128x64c2k32s4xa-tma-pa2": dict(CL=2, BK=32, STAGES=4, XA=1, TMA=1, PA=2),
    # st2: the two small terms in their own accumulators (ST = 2): three chains of wgmma per chunk
    "128x32c2k32s8xa-tma-st2": dict(BN=32, CL=2, BK=32, STAGES=8, XA=1, TMA=1, ST=2),
    "128x32c2k32s8-tma-st2": dict(BN=32, CL=2, BK=32, STAGES=8, TMA=1, ST=2),
    "128x32c2k32s8xa-tma-pa2-st2": dict(BN=32, CL=2, BK=32, STAGES=8, XA=1, TMA=1, PA=2, ST=2),
    "128x64c2k32s4-tma-st2": dict(CL=2, BK=32, STAGES=4, TMA=1, ST=2),
    # session 11: the named configurations, K split over two K groups of one block (KW = 2) instead of a
    # cluster, and 128 x 32 tiles in chunks of 64 (2 stages)
    "s11-wg64x32": dict(BM=64, BN=32, BK=64, CL=2, STAGES=2, TMA=1),
    "s11-kw64x32": dict(BM=64, BN=32, BK=64, CL=1, STAGES=2, TMA=1, KW=2),
    "s11-wg128x64": dict(BM=128, BN=64, BK=32, CL=2, STAGES=4, TMA=1),
    "s11-k64xa0s2": dict(BM=128, BN=32, BK=64, CL=2, STAGES=2, TMA=1),
    "s11-kw64x64": dict(BM=64, BN=64, BK=32, CL=1, STAGES=2, TMA=1, KW=2),
    "s11-kw128x32": dict(BM=128, BN=32, BK=32, CL=1, STAGES=2, TMA=1, KW=2),
}


def _tc_with(over, dev: int):
    return lambda x, e: _chain._fused3_tc(*x, e, {**_chain.TC_CONFIG, **over}, dev)


def _wg_with(over, dev: int):
    return lambda x, e: _chain._fused3_wg(*x, e, {**WG_BASE, **over}, dev)


def _fused_with(name: str, dev: int):
    return lambda x, e: _chain._fused3(*x, e, name, dev)


def _methods():
    dev = cupy.cuda.runtime.getDevice()
    methods = {
        "cupy": lambda x, e: cupy.matmul(cupy.matmul(x[0], x[1]), x[2], out=e),
        "fused3": lambda x, e: cumm.multi_dot(x, kernel="fused3", out=e),
        "fused3_tc": lambda x, e: cumm.multi_dot(x, kernel="fused3_tc", out=e),
        "fused3_wg": lambda x, e: cumm.multi_dot(x, kernel="fused3_wg", out=e),
        "auto": lambda x, e: cumm.multi_dot(x, kernel="auto", out=e),
        "pairwise": lambda x, e: cumm.multi_dot(x, kernel="pairwise", out=e),
    }
    configs = {f"fused3:{name}": _fused_with(name, dev) for name in _chain.CONFIGS}
    configs.update({f"fused3_tc:{name}": _tc_with(over, dev) for name, over in TC_SWEEP.items()})
    if int(cupy.cuda.Device(dev).compute_capability) != 90:  # fused3_wg: sm_90 only
        del methods["fused3_wg"]
    else:
        configs.update({f"fused3_wg:{name}": _wg_with(over, dev) for name, over in WG_SWEEP.items()})
    return methods, configs


_SPIN = r"""
extern "C" __global__ void cumm_bench_spin(long long ns) {
    long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns);
}
"""


def device_ms(call, runs: int) -> list[float]:
    """Per-call GPU times (ms) of ``call``: all timed calls are enqueued while a spinning kernel holds the GPU,
    so none waits for the host. The spin lasts 3x the measured host time of the enqueueing (at least 20 ms)."""
    spin = cupy.RawKernel(_SPIN, "cumm_bench_spin")
    t0 = time.perf_counter()
    for _ in range(5):
        call()
    cupy.cuda.Device().synchronize()
    host_s = (time.perf_counter() - t0) / 5 * runs
    events = [(cupy.cuda.Event(), cupy.cuda.Event()) for _ in range(runs)]
    spin((1,), (1,), (np.int64(max(0.02, 3 * host_s) * 1e9),))
    t0 = time.perf_counter()
    for s, e in events:
        s.record()
        call()
        e.record()
    enqueue_s = time.perf_counter() - t0
    events[-1][1].synchronize()
    if enqueue_s > max(0.02, 3 * host_s):
        print(f"warning: enqueueing took {enqueue_s * 1e3:.1f} ms, longer than the spin: device times include "
              "host time", file=sys.stderr)
    return [cupy.cuda.get_elapsed_time(s, e) for s, e in events]


def batch_us(call) -> tuple[float, float]:
    """Medians over BATCHES of (time of BATCH calls issued back to back) / BATCH, in us, host included, and of
    the host's time to issue them / BATCH (the host side of a call alone: 50 calls never fill the launch
    queue, so the host never waits for the GPU)."""
    a, b = cupy.cuda.Event(), cupy.cuda.Event()
    per, host = [], []
    for _ in range(BATCHES):
        call()  # an untimed leader, as in _bench.sample_ms
        a.record()
        t0 = time.perf_counter()
        for _ in range(BATCH):
            call()
        host.append((time.perf_counter() - t0) * 1e6 / BATCH)
        b.record()
        b.synchronize()
        per.append(cupy.cuda.get_elapsed_time(a, b) * 1e3 / BATCH)
    return statistics.median(per), statistics.median(host)


def _measure(fn, sets, ref, ref_norm, repeat):
    """(relative error, median us in a loop, median device us, back-to-back us, host us, runs); times are None
    if the result is wrong."""
    x, e = sets[0]
    e.fill(math.nan)
    fn(x, e)
    err = float(cupy.linalg.norm(e.astype(cupy.float64) - ref)) / ref_norm
    if not err < TOL:  # NaN (an element never written) included
        return (err if math.isfinite(err) else None), None, None, None, None, 0
    state = {"i": 0}

    def call():
        xs, es = sets[state["i"] % len(sets)]
        state["i"] += 1
        fn(xs, es)

    times = _bench.sample_ms(call, warmup=5, repeat=max(repeat, MIN_RUNS), min_runs=MIN_RUNS)
    dev = device_ms(call, max(repeat, MIN_RUNS))
    return err, statistics.median(times) * 1e3, statistics.median(dev) * 1e3, *batch_us(call), len(times)


def run(chains, repeat: int, with_configs: bool, only: str = "") -> list[dict]:
    rng = cupy.random.default_rng(0)
    dev = cupy.cuda.runtime.getDevice()
    cc = int(cupy.cuda.Device(dev).compute_capability)
    rows = []
    for dims in chains:
        sets = _sets(rng, dims)
        x = sets[0][0]
        ref = (x[0].astype(cupy.float64) @ x[1].astype(cupy.float64)) @ x[2].astype(cupy.float64)
        ref_norm = float(cupy.linalg.norm(ref))
        methods, configs = _methods()
        if with_configs:
            prefixes = tuple(x for x in only.split(",") if x)
            methods.update({k: v for k, v in configs.items() if not prefixes or k.startswith(prefixes)})
        row = {"shape": "x".join(map(str, dims)), "dims": list(dims),
               "auto_choice": _chain.select(*dims, cc) or "pairwise"}
        for name, fn in methods.items():
            err, us, dev_us, b_us, h_us, runs = _measure(fn, sets, ref, ref_norm, repeat)
            row[name] = {"us": us, "device_us": dev_us, "batch_us": b_us, "host_us": h_us, "rel_err": err,
                         "runs": runs, "status": "ok" if us is not None else "FAIL"}
        for key, suffix in (("us", ""), ("device_us", "_device"), ("batch_us", "_batch"), ("host_us", "_host")):
            cu, au = row["cupy"][key], row["auto"][key]
            row["speedup" + suffix] = cu / au if cu and au else None
        rows.append(row)
        print(_line(row, "us") + " device: " + _line(row, "device_us") + " batch: " + _line(row, "batch_us"),
              file=sys.stderr, flush=True)
        del sets, ref
        cupy.get_default_memory_pool().free_all_blocks()
    return rows


def _us(cell, key="us") -> str:
    if cell[key] is not None:
        return f"{cell[key]:.1f}"
    return "FAIL (NaN)" if cell["rel_err"] is None else f"FAIL ({cell['rel_err']:.1e})"


def _line(row, key) -> str:
    sp = row["speedup" + {"us": "", "device_us": "_device", "batch_us": "_batch", "host_us": "_host"}[key]]
    return (f"| {row['shape']} | {_us(row['cupy'], key)} | {_us(row['fused3'], key)} | "
            f"{_us(row['fused3_tc'], key)} | {_us(row['fused3_wg'], key) if 'fused3_wg' in row else '-'} | "
            f"{_us(row['auto'], key)} "
            f"({row['auto_choice']}) | {f'{sp:.2f}x' if sp else '-'} |")


def table(rows) -> str:
    head = ["| shape | cupy a@b@c us | fused3 us | fused3_tc us | fused3_wg us | auto us | speedup |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    out = ["In a loop (host included):", "", *head, *(_line(r, "us") for r in rows), "",
           "Device time (calls queued behind a busy GPU; host excluded):", "", *head,
           *(_line(r, "device_us") for r in rows), "",
           f"Back to back (one event pair around each batch of {BATCH} calls; host included):", "", *head,
           *(_line(r, "batch_us") for r in rows), "",
           "Host time per call (issuing the batches above; ratio = cupy's / auto's):", "", *head,
           *(_line(r, "host_us") for r in rows)]
    cfg_names = [k for k in rows[0] if k.startswith(("fused3:", "fused3_tc:", "fused3_wg:"))] if rows else []
    if cfg_names:
        out += ["", "Pairwise and each fused3 configuration, loop us / device us / back-to-back us:", "",
                "| shape | pairwise | " + " | ".join(cfg_names) + " |",
                "| --- | ---: | " + " | ".join("---:" for _ in cfg_names) + " |"]
        out += [f"| {r['shape']} | " + " | ".join(f"{_us(r[c])} / {_us(r[c], 'device_us')} / {_us(r[c], 'batch_us')}"
                                                   for c in ["pairwise", *cfg_names]) + " |" for r in rows]
    return "\n".join(out)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    p.add_argument("--sizes", default=",".join(map(str, SQUARE)), help="square sizes n (n x n x n x n chains)")
    p.add_argument("--no-extra", action="store_true", help="skip the 4096x64 . 64x4096 . 4096x64 chain")
    p.add_argument("--repeat", type=int, default=100, help=f"timed runs per method (at least {MIN_RUNS})")
    p.add_argument("--configs", action="store_true", help="also time every fused3 configuration")
    p.add_argument("--only", default="", help="with --configs: only the configurations whose names start with one "
                   "of these comma-separated prefixes (e.g. fused3_wg:,fused3_tc:32x32)")
    a = p.parse_args()
    why = _bench.gpu_unavailable()
    if why:
        sys.exit(why)
    _bench.check_tf32()
    _bench._check_cupy_compute_type()
    chains = [(n, n, n, n) for n in (int(s) for s in a.sizes.split(",") if s.strip())]
    if not a.no_extra:
        chains += EXTRA
    rows = run(chains, a.repeat, a.configs, a.only)
    info = _bench.device_info()
    print(f"{info['device']} (cc {info['cc']}), CuPy {info['cupy']}, CUDA {info['cuda']}; median of >= {MIN_RUNS} "
          "CUDA-event timed runs, warm-up excluded; speedup = cupy / auto\n")
    print(table(rows))
    if a.json:
        _bench.write_json(a.json, {"device": info, "min_runs": MIN_RUNS, "tolerance": TOL, "results": rows})


if __name__ == "__main__":
    main()
