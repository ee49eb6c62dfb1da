"""Autotuning: search a kernel's configuration space for one shape on one GPU, and remember the winner.

Pipeline of :func:`tune` (one kernel, one M x N x K, one device)
------------------------------------------------------------------
1. **Enumerate** ``itertools.product`` over ``spec.space``; parameters without a space keep their
   defaults for the device's compute capability. Configurations violating ``spec.constraints`` go.
2. **Static filter** (no compile; each rule only drops what cannot win or cannot run):

   * dynamic shared memory above the device's per-block opt-in limit;
   * ``MINB`` blocks of it cannot fit in one multiprocessor's shared memory (the launch bound is void);
   * ``MINB`` values that give the same register cap as a smaller ``MINB`` (identical code);
   * accumulators per thread (``BM*BN/threads``) above the register cap minus 32 -- the cap is
     ``min(255, regs_per_SM / (threads * MINB))`` rounded down to 8; such code spills for certain;
   * a block tile ``BM`` (``BN``, ``BK``) larger than the smallest value of its space that already
     covers ``M`` (``N``, ``K``): only more padding;
   * tile shapes whose best predicted score is under ``SCORE_FLOOR`` (1/3) of the best tile shape's.

3. **Rank** by a cheap score (padding waste, load balance of the grid over the SMs, resident warps,
   FMAs per shared-memory load in registers, global intensity of the block tile), then order for
   diversity: the default configuration (and ``_auto.SMALL_TILES`` where it applies) first, then a
   round-robin over tile shapes (grids), best tile shape first, each tile shape's configurations best
   first. The order is deterministic.
4. **Offline compile** (``compile_offline`` for ``sm_<cc>``, thread pool: NVRTC releases the GIL) in that
   order, in batches, until ``n`` configurations survive: spills (> 0 bytes), shared memory above the
   opt-in limit and registers x threads above the per-block register file are rejected. ``n`` is
   ``max_configs`` when given, else ``min(DEFAULT_MAX_CONFIGS, what the time budget pays for)``.
5. **Device compile** the survivors (``device_kernel``, thread pool) and **time** each in rank order:
   CUDA events around every launch, queued behind a 2 ms spin kernel so that launch overhead is not
   timed; two warm-up launches, then the median of ``10..50`` launches (about 100 ms of samples);
   operands are rotated over several input sets when they would fit in L2 (random normal data).
   A configuration whose warm-up is more than ``PRUNE_FACTOR`` times slower than the best median is
   pruned after its warm-up. Before a configuration becomes the best it is checked against a float64
   reference (relative Frobenius error < ``TOLERANCE``).

Time budget (``budget_s``, default ``DEFAULT_BUDGET_S`` = 150 s, env ``CUMM_TUNE_BUDGET_S``): offline
compiles not started by ``OFFLINE_SHARE`` (40 %) of it are cancelled, device compiles likewise at
``COMPILE_SHARE`` (60 %), and timing starts no configuration that would end later than ``RESERVE_S``
before the budget; so one shape stays under 3 minutes on an H200 whatever the estimates say. The count
of configurations is sized in ``default_count``; ``cumm/tuned/README.md`` repeats the math.

Persistence
-----------
``tuned.json`` in the user cache dir (``$CUMM_CACHE_DIR``, else ``$XDG_CACHE_HOME/cumm``, else
``~/.cache/cumm``) and the tables shipped in ``cumm/tuned/*.json`` (user entries win). Entries are keyed
by GPU name, compute capability, kernel, dtype and shape bucket (each of M, N, K rounded to the nearest
power of two in log space); each stores the configuration, ms, TFLOP/s, the kernel's template hash at
tuning time and the schema version. Entries whose template hash differs from the current template are
ignored. Writes take an ``fcntl`` lock on ``<file>.lock`` and replace the file atomically; an unreadable
file is warned about once and treated as empty.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import itertools
import json
import math
import os
import statistics
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from . import _auto
from ._auto import bucket
from ._compile import compile_offline
from ._ladder import REGISTRY, get_spec
from ._render import COMMON_HEADER, template_text
from ._spec import KernelSpec, cdiv
from ._timing import back_to_back_ms, rotation_sets

try:
    import fcntl
except ImportError:  # pragma: no cover - not on POSIX: only the in-process lock
    fcntl = None

__all__ = [
    "DeviceInfo", "H200", "STANDARD_SHAPES", "TuneResult", "bucket", "candidates", "cli", "lookup",
    "save_entries", "tune", "tuned_entries", "user_table_path",
]

SCHEMA = 1
TABLE_NAME = "tuned.json"
DTYPES = ("float32",)
TOP_RUNGS = ("warptile", "double_buffer", "tf32x3")  # tf32x3 only where min_cc allows


def top_rungs(cc: int | None = None) -> list[str]:
    """TOP_RUNGS that run on compute capability ``cc`` (default: the current device's)."""
    if cc is None:
        import cupy

        cc = int(cupy.cuda.Device().compute_capability)
    return [k for k in TOP_RUNGS if REGISTRY[k].min_cc <= cc]
TOLERANCE = 1e-5
MAX_DISTANCE = 3.0  # log2 units over (M, N, K): farther tuned entries are not used by kernel="auto"

DEFAULT_BUDGET_S = 150.0  # per tune() call; 30 s of headroom under the 3 minutes
OFFLINE_SHARE = 0.4  # offline compiles not started by this share of the budget are cancelled
COMPILE_SHARE = 0.6  # device compiles likewise; timing has the rest
RESERVE_S = 5.0  # timing stops this long before the budget ends (verification, saving)
DEFAULT_MAX_CONFIGS = 64
COMPILE_EXTRA = 1.2  # compile this many candidates per wanted survivor (batches refill if more fail)
SCORE_FLOOR = 1 / 3
PRUNE_FACTOR = 1.5
LIKELY_SPILL_PENALTY = 0.5
MIN_REPS, MAX_REPS, SAMPLE_MS = 10, 50, 100.0
WARMUP = 2
ASSUMED_TFLOPS = 30.0  # planning estimate (H200: the top rungs reach 40-42 at 4096^3-8192^3); sizes the default count

STANDARD_SHAPES: list[tuple[int, int, int]] = [
    (512, 512, 512), (1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192),
    (8192, 8192, 256), (256, 8192, 8192), (8192, 256, 8192),  # one short dimension
    (4096, 4096, 1024), (128, 4096, 4096), (4096, 128, 4096), (16384, 16384, 64),  # skinny
]


# ---------------------------------------------------------------------------------------------------
# Device facts
# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DeviceInfo:
    """What the filter and the ranking need to know about a GPU."""

    name: str
    cc: int
    sms: int
    smem_optin: int  # per block, bytes
    smem_per_sm: int
    l2_bytes: int
    regs_per_sm: int = 65536
    regs_per_block: int = 65536
    max_threads_per_sm: int = 2048

    @classmethod
    def from_device(cls, device_id: int) -> DeviceInfo:
        import cupy

        a = cupy.cuda.Device(device_id).attributes
        name, cc = _auto._device_key(device_id)
        optin = a.get("MaxSharedMemoryPerBlockOptin", 48 * 1024)
        return cls(
            name=name, cc=cc, sms=a["MultiProcessorCount"], smem_optin=optin,
            smem_per_sm=a.get("MaxSharedMemoryPerMultiprocessor", optin), l2_bytes=a.get("L2CacheSize", 0),
            regs_per_sm=a.get("MaxRegistersPerMultiprocessor", 65536),
            regs_per_block=a.get("MaxRegistersPerBlock", 65536),
            max_threads_per_sm=a.get("MaxThreadsPerMultiProcessor", 2048),
        )


# For planning without a GPU (``candidates(..., device=H200)``, tests): the H200's published limits.
H200 = DeviceInfo(name="NVIDIA H200", cc=90, sms=132, smem_optin=232448, smem_per_sm=233472,
                  l2_bytes=50 * 1024 * 1024)


# ---------------------------------------------------------------------------------------------------
# Enumeration, static filter, ranking
# ---------------------------------------------------------------------------------------------------


def _cfg_key(spec: KernelSpec, cfg: Mapping[str, int]) -> tuple[int, ...]:
    return tuple(int(cfg[k]) for k in spec.params)


_enumerated: dict[tuple[str, int], tuple[KernelSpec, list[dict[str, int]], int]] = {}


def enumerate_configs(spec: KernelSpec, cc: int) -> tuple[list[dict[str, int]], int]:
    """(configurations of the space that satisfy every constraint, number of the space's points)."""
    hit = _enumerated.get((spec.name, cc))
    if hit is None or hit[0] is not spec:
        base = spec.default_config(cc)
        keys = list(spec.space)
        out, total = [], 0
        for values in itertools.product(*(spec.space[k] for k in keys)):
            total += 1
            cfg = {**base, **dict(zip(keys, values, strict=True))}
            if not spec.violations(cfg):
                out.append(cfg)
        hit = _enumerated[(spec.name, cc)] = (spec, out, total)
    return [dict(c) for c in hit[1]], hit[2]


def _seeds(spec: KernelSpec, cc: int) -> list[dict[str, int]]:
    """Known-good starting points timed first: the defaults, and the heuristic's small tiles."""
    seeds = [spec.default_config(cc)]
    small = _auto.SMALL_TILES.get(spec.name)
    if small is not None:
        seeds.append({**spec.default_config(cc), **small})
    return [s for s in seeds if not spec.violations(s)]


def register_cap(threads: int, minb: int, dev: DeviceInfo) -> int:
    """Registers per thread that ``__launch_bounds__(threads, minb)`` leaves (allocation unit 8)."""
    return min(255, dev.regs_per_sm // max(1, threads * minb) // 8 * 8)


def _accumulators(spec: KernelSpec, cfg: Mapping[str, int]) -> int | None:
    if "BM" in cfg and "BN" in cfg:
        return cfg["BM"] * cfg["BN"] // max(1, spec.threads(cfg))
    return None


def static_reject(spec: KernelSpec, cfg: Mapping[str, int], M: int, N: int, K: int, dev: DeviceInfo) -> str | None:
    """Why ``cfg`` cannot win (or run) for this shape on ``dev``, without compiling; None if it stays."""
    smem = spec.smem(cfg)
    if smem > dev.smem_optin:
        return f"shared memory: {smem} B > the device's per-block limit {dev.smem_optin} B"
    threads = spec.threads(cfg)
    minb = cfg.get("MINB", 1)
    if minb > 1 and minb * (smem + 1024) > dev.smem_per_sm:
        return f"MINB={minb}: that many blocks of {smem} B shared memory cannot share one SM"
    if minb > 1 and register_cap(threads, minb, dev) == register_cap(threads, minb - 1, dev):
        return f"MINB={minb}: same register cap as MINB={minb - 1} at {threads} threads (duplicate)"
    acc = _accumulators(spec, cfg)
    cap = register_cap(threads, minb, dev)
    if acc is not None and acc > cap - 32:
        return f"register spill certain: {acc} accumulators per thread, register cap {cap}"
    for p, dim, dname in (("BM", M, "M"), ("BN", N, "N"), ("BK", K, "K")):
        values = sorted(spec.space.get(p, ()))
        if p in cfg and values:
            covering = [v for v in values if v >= dim]
            if covering and cfg[p] > covering[0]:
                return f"tile {p}={cfg[p]} larger than needed: {p}={covering[0]} already covers {dname}={dim}"
    return None


def likely_spill(spec: KernelSpec, cfg: Mapping[str, int], dev: DeviceInfo) -> bool:
    """Estimated registers (accumulators + one BK slab of both tiles staged per thread + the fragments read
    from shared memory per k) within 23 of the launch bound's cap. Calibrated on 186 offline compiles (sm_90,
    NVRTC 12.9, random warptile and double_buffer configurations): of the 126 that pass the hard filters,
    27 spilled; the rule flags 14 of them and none of the 99 clean ones. Soft: flagged configurations are
    ranked lower (score x LIKELY_SPILL_PENALTY), not dropped; the compile filter has the last word."""
    acc = _accumulators(spec, cfg)
    threads = spec.threads(cfg)
    tm, tn, wn = cfg.get("TM", 1), cfg.get("TN", 1), cfg.get("WNITER", 1)
    frags = max(1, acc // (tm * tn * wn)) * tm + wn * tn
    staged = cfg["BK"] * (cfg["BM"] + cfg["BN"]) // threads
    return acc + staged + frags > register_cap(threads, cfg.get("MINB", 1), dev) - 23


def score(spec: KernelSpec, cfg: Mapping[str, int], M: int, N: int, K: int, dev: DeviceInfo) -> float:
    """A cheap predicted relative speed (higher is better); only orders candidates for timing."""
    gx, gy, gz = spec.grid(cfg, M, N, K)
    blocks = gx * gy * gz
    threads = spec.threads(cfg)
    per_sm = cdiv(blocks, dev.sms)
    balance = blocks / (per_sm * dev.sms)  # 1 when every SM gets the same number of blocks
    smem = spec.smem(cfg)
    acc = _accumulators(spec, cfg)
    est_regs = min(register_cap(threads, cfg.get("MINB", 1), dev), (acc or 16) + 64)
    resident = max(1, min(dev.max_threads_per_sm // threads, dev.regs_per_sm // (est_regs * threads),
                          dev.smem_per_sm // (smem + 1024), 32))
    warps = min(resident, per_sm) * threads / 32
    latency = min(1.0, warps / 8) ** 0.5
    s = balance * latency
    if "BM" in cfg and "BN" in cfg:
        bm, bn = cfg["BM"], cfg["BN"]
        s *= (M * N) / (cdiv(M, bm) * bm * cdiv(N, bn) * bn)  # padding waste
        gmem = bm * bn / (bm + bn)  # FMAs per global float loaded into the block tile
        s *= gmem / (gmem + 8)
        if acc is not None:
            tm, tn, wn = cfg.get("TM", 1), cfg.get("TN", 1), cfg.get("WNITER", 1)
            frags = max(1, acc // (tm * tn * wn)) * tm + wn * tn  # floats read from shared memory per k
            reg = acc / frags  # FMAs per float read from shared memory
            s *= reg / (reg + 1.5)
            if "BK" in cfg and likely_spill(spec, cfg, dev):
                s *= LIKELY_SPILL_PENALTY
    if "BK" in cfg:
        bk = cfg["BK"]
        s *= K / (cdiv(K, bk) * bk)
    return s


def _group(spec: KernelSpec, cfg: Mapping[str, int], M: int, N: int, K: int) -> tuple:
    return tuple(spec.grid(cfg, M, N, K))


def rank(spec: KernelSpec, cfgs: Sequence[Mapping[str, int]], M: int, N: int, K: int, dev: DeviceInfo,
         seeds: Sequence[Mapping[str, int]] = ()) -> tuple[list[dict[str, int]], int]:
    """(diverse, deterministic order of ``cfgs``, number dropped by the score floor); seeds first."""
    scored = sorted(((score(spec, c, M, N, K, dev), _cfg_key(spec, c), dict(c)) for c in cfgs),
                    key=lambda t: (-t[0], t[1]))
    groups: dict[tuple, list] = {}
    for t in scored:  # insertion order = order of each group's best
        groups.setdefault(_group(spec, t[2], M, N, K), []).append(t)
    best = scored[0][0] if scored else 0.0
    kept = [g for g in groups.values() if g[0][0] >= SCORE_FLOOR * best]
    dropped = sum(len(g) for g in groups.values()) - sum(len(g) for g in kept)
    seen = {_cfg_key(spec, s) for s in seeds}
    order = [dict(s) for s in seeds]
    for layer in itertools.zip_longest(*kept):
        for t in layer:
            if t is not None and t[1] not in seen:
                order.append(t[2])
    return order, dropped


def default_count(M: int, N: int, K: int, budget_s: float) -> int:
    """How many configurations to time when ``max_configs`` is not given.

    Timing one configuration costs about ``(WARMUP + MIN_REPS) * t + 0.05 s`` (spin, events, the check),
    with ``t = 2MNK / ASSUMED_TFLOPS``; the share of the budget after compiling (40 %) pays for timing.
    For 8192^3 with the default 150 s: t ~ 37 ms, ~0.5 s per configuration, 60 s / 0.5 s ~ 120 -> capped at
    DEFAULT_MAX_CONFIGS (64); with 75 s (``cumm tune`` with both top rungs): 30 s / 0.5 s ~ 61.
    Measured on the H200 (16 cores): 48 configurations of double_buffer at 4096^3 took 11 s in all
    (60 offline compiles, 48 device compiles, timing), warptile + double_buffer at 8192^3 30 s.
    """
    t = 2.0 * M * N * K / (ASSUMED_TFLOPS * 1e12) + 10e-6
    per_config = (WARMUP + MIN_REPS) * t + 0.05
    return max(1, min(DEFAULT_MAX_CONFIGS, int((1 - COMPILE_SHARE) * budget_s / per_config)))


# ---------------------------------------------------------------------------------------------------
# Offline compile filter
# ---------------------------------------------------------------------------------------------------

_offline: dict[tuple, dict] = {}  # (kernel, template hash, arch, flags, cfg) -> compile report
_offline_lock = threading.Lock()


def _offline_report(spec: KernelSpec, cfg: dict[str, int], arch: str, flags: tuple[int, int, int]) -> dict:
    key = (spec.name, _template_hash(spec), arch, flags, _cfg_key(spec, cfg))
    with _offline_lock:
        hit = _offline.get(key)
    if hit is not None:
        return hit
    t0 = time.perf_counter()
    try:
        k = compile_offline(spec, cfg, arch=arch, flags=flags)
        rep = dict(registers=k.registers, spill_bytes=k.spill_bytes, stack_bytes=k.stack_bytes,
                   shared_bytes=k.shared_bytes, threads=k.threads, error=None)
    except Exception as e:  # CompileError and anything NVRTC raises: a reason, not a crash
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        rep = dict(registers=None, spill_bytes=None, stack_bytes=None, shared_bytes=None,
                   threads=spec.threads(cfg), error=f"{type(e).__name__}: {first[:200]}")
    rep["compile_s"] = round(time.perf_counter() - t0, 3)
    with _offline_lock:
        _offline[key] = rep
    return rep


def compile_reject(rep: Mapping, dev: DeviceInfo) -> str | None:
    if rep["error"]:
        return f"compile failed: {rep['error']}"
    if rep["spill_bytes"]:
        return f"spills {rep['spill_bytes']} B (registers {rep['registers']})"
    if rep["shared_bytes"] > dev.smem_optin:
        return f"shared memory {rep['shared_bytes']} B > {dev.smem_optin} B"
    if rep["registers"] * rep["threads"] > dev.regs_per_block:
        return f"{rep['registers']} registers x {rep['threads']} threads > {dev.regs_per_block}"
    return None


@dataclass
class Candidates:
    """What :func:`candidates` decided: the configurations to time, in order, and why others went."""

    kernel: str
    configs: list[dict[str, int]]
    rows: list[dict]  # one per configuration that reached the compile stage
    counts: dict


def _workers() -> int:
    return max(2, min(32, os.cpu_count() or 4))


def _bar(total: int, desc: str, enabled: bool):
    if not enabled:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    return tqdm(total=total, desc=desc, leave=False, file=sys.stderr)


def candidates(kernel: str, M: int, N: int, K: int, *, device: DeviceInfo = H200,
               flags: tuple[int, int, int] = (1, 1, 1), max_configs: int | None = None,
               budget_s: float = DEFAULT_BUDGET_S, compile: bool = True, deadline: float | None = None,
               progress: bool = False) -> Candidates:
    """Steps 1-4 of the pipeline (no GPU needed): the configurations worth timing, in order.

    With ``compile=False`` the offline compile filter is skipped (a plan, for inspection). ``deadline``
    (``time.perf_counter()`` value) cancels compiles not yet started when it passes.
    """
    spec = get_spec(kernel)
    if spec.kind != "gemm":
        raise ValueError(f"kernel {kernel!r} is not a matrix-product kernel")
    if max_configs is not None and max_configs < 1:
        raise ValueError(f"max_configs must be at least 1, got {max_configs}")
    valid, total = enumerate_configs(spec, device.cc)
    counts: dict = {"space": total, "constraint_ok": len(valid), "static_rejects": {}}
    keep, seen = [], set()
    for cfg in valid:
        why = static_reject(spec, cfg, M, N, K, device)
        if why is None:
            keep.append(cfg)
            seen.add(_cfg_key(spec, cfg))
        else:
            rule = why.split(":")[0]
            counts["static_rejects"][rule] = counts["static_rejects"].get(rule, 0) + 1
    seeds = [s for s in _seeds(spec, device.cc) if static_reject(spec, s, M, N, K, device) is None]
    order, floored = rank(spec, keep, M, N, K, device, seeds)
    counts["score_floor"] = floored
    counts["ranked"] = len(order)
    n = max_configs if max_configs is not None else default_count(M, N, K, budget_s)
    counts["wanted"] = n
    if not compile:
        return Candidates(kernel, order[:n], [], counts)

    arch = f"sm_{device.cc}"
    rows: list[dict] = []
    survivors: list[dict[str, int]] = []
    pos = 0
    bar = _bar(0, f"compile {kernel}", progress)
    compiled = 0
    with ThreadPoolExecutor(_workers()) as ex:
        while len(survivors) < n and pos < len(order):
            if deadline is not None and time.perf_counter() > deadline:
                counts["compile_deadline"] = True
                break
            want = n - len(survivors)
            batch = order[pos : pos + math.ceil(want * COMPILE_EXTRA) + 2]
            pos += len(batch)
            if bar is not None:
                bar.total += len(batch)
                bar.refresh()
            futs = {ex.submit(_offline_report, spec, cfg, arch, flags): i for i, cfg in enumerate(batch)}
            reps: list[dict | None] = [None] * len(batch)
            for f in as_completed(futs):
                if not f.cancelled():
                    reps[futs[f]] = f.result()
                if bar is not None:
                    bar.update()
                if deadline is not None and time.perf_counter() > deadline:
                    for g in futs:
                        g.cancel()
            for cfg, rep in zip(batch, reps, strict=True):
                if rep is None:  # cancelled at the deadline
                    rows.append(dict(config=cfg, status="skipped", reason="compile deadline passed"))
                    continue
                compiled += 1
                why = compile_reject(rep, device)
                row = dict(config=cfg, **{k: v for k, v in rep.items() if k != "error"})
                if why is None and len(survivors) < n:
                    survivors.append(cfg)
                    row.update(status="candidate", reason=None)
                elif why is None:
                    row.update(status="skipped", reason="enough candidates survived")
                else:
                    row.update(status="rejected", reason=why)
                rows.append(row)
    if bar is not None:
        bar.close()
    counts["compiled"] = compiled
    counts["compile_rejects"] = sum(1 for r in rows if r["status"] == "rejected")
    counts["candidates"] = len(survivors)
    return Candidates(kernel, survivors, rows, counts)


# ---------------------------------------------------------------------------------------------------
# Timing on the GPU
# ---------------------------------------------------------------------------------------------------

@dataclass
class TuneResult:
    """The outcome of :func:`tune`: the best verified configuration and every measurement."""

    kernel: str
    shape: tuple[int, int, int]
    dtype: str
    gpu: str
    cc: int
    config: dict[str, int]
    ms: float
    tflops: float
    rel_err: float
    table: list[dict] = field(repr=False)  # one row per configuration that reached compiling
    counts: dict = field(repr=False)
    elapsed_s: float = 0.0
    entry: dict = field(default_factory=dict, repr=False)
    saved_to: str | None = None

    def summary(self) -> str:
        M, N, K = self.shape
        timed = sum(1 for r in self.table if r.get("ms") is not None)
        return (f"{self.kernel} {M}x{N}x{K} on {self.gpu}: {self.ms:.4f} ms, {self.tflops:.2f} TFLOP/s "
                f"(rel err {self.rel_err:.1e}; {timed} timed of {self.counts.get('ranked', '?')} ranked, "
                f"{self.elapsed_s:.0f} s) config {_compact(self.config)}")


class TuneError(RuntimeError):
    """No configuration compiled, ran and verified; ``table`` says what happened to each."""

    def __init__(self, message: str, table: list[dict]) -> None:
        super().__init__(message)
        self.table = table


def _compact(cfg: Mapping[str, int]) -> str:
    return " ".join(f"{k}={v}" for k, v in cfg.items())


def _budget(budget_s: float | None) -> float:
    if budget_s is not None:
        return float(budget_s)
    env = os.environ.get("CUMM_TUNE_BUDGET_S")
    try:
        return float(env) if env else DEFAULT_BUDGET_S
    except ValueError:
        warnings.warn(f"cumm: ignoring CUMM_TUNE_BUDGET_S={env!r} (not a number)", RuntimeWarning, stacklevel=3)
        return DEFAULT_BUDGET_S


def tune(kernel: str, M: int, N: int, K: int, *, dtype: str = "float32", max_configs: int | None = None,
         save: bool = True, progress: bool = True, device_id: int | None = None, budget_s: float | None = None,
         seed: int = 0) -> TuneResult:
    """Find the fastest verified configuration of ``kernel`` for an ``M x N x K`` product on a GPU.

    See the module docstring for the pipeline and the time budget (``budget_s``, default 150 s).
    With ``save`` the winner goes to the user's ``tuned.json``, where ``kernel="auto"`` finds it.
    Raises :class:`TuneError` if no configuration survives.
    """
    import cupy

    from ._compile import device_kernel
    from ._matmul import get_plan

    t0 = time.perf_counter()
    if dtype not in DTYPES:
        raise ValueError(f"dtype {dtype!r} is not supported; supported dtypes: {', '.join(DTYPES)}")
    for name, v in (("M", M), ("N", N), ("K", K)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")
    spec = get_spec(kernel)
    budget = _budget(budget_s)
    dev_id = cupy.cuda.runtime.getDevice() if device_id is None else int(device_id)
    with cupy.cuda.Device(dev_id):
        dev = DeviceInfo.from_device(dev_id)
        # Operands are fresh C-contiguous allocations (256-byte aligned): 16-byte accesses are legal
        # exactly when the row lengths are multiples of 4, as matmul decides for such arrays.
        flags = (int(K % 4 == 0), int(N % 4 == 0), int(N % 4 == 0))
        cand = candidates(kernel, M, N, K, device=dev, flags=flags, max_configs=max_configs, budget_s=budget,
                          deadline=t0 + OFFLINE_SHARE * budget, progress=progress)
        rows = cand.rows
        by_key = {_cfg_key(spec, r["config"]): r for r in rows}

        # Device compiles (CuPy), in parallel; their failures are reasons too.
        ready: list[dict[str, int]] = []
        bar = _bar(len(cand.configs), f"load {kernel}", progress)
        compile_deadline = t0 + COMPILE_SHARE * budget
        errors: dict[tuple, str] = {}
        with ThreadPoolExecutor(_workers()) as ex:
            futs = {ex.submit(device_kernel, spec, cfg, flags, dev_id): cfg for cfg in cand.configs}
            for f in as_completed(futs):
                key = _cfg_key(spec, futs[f])
                if f.cancelled():
                    errors[key] = "skipped: compile deadline passed"
                elif f.exception() is not None:
                    exc = f.exception()
                    errors[key] = f"device compile: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
                if bar is not None:
                    bar.update()
                if time.perf_counter() > compile_deadline:
                    for g in futs:
                        g.cancel()
        if bar is not None:
            bar.close()
        for cfg in cand.configs:
            err = errors.get(_cfg_key(spec, cfg))
            if err is None:
                ready.append(cfg)
            elif err.startswith("skipped: "):
                by_key[_cfg_key(spec, cfg)].update(status="skipped", reason=err[len("skipped: "):])
            else:
                by_key[_cfg_key(spec, cfg)].update(status="failed", reason=err)

        # Operands: random normal, rotated when L2 would hold one set; a float64 reference for set 0.
        rng = cupy.random.default_rng(seed)
        nsets = rotation_sets(4 * (M * K + K * N + M * N), dev.l2_bytes)
        f32 = cupy.float32
        As = [rng.standard_normal((M, K), dtype=f32) for _ in range(nsets)]
        Bs = [rng.standard_normal((K, N), dtype=f32) for _ in range(nsets)]
        Cs = [cupy.empty((M, N), dtype=f32) for _ in range(nsets)]
        ref = As[0].astype(cupy.float64) @ Bs[0].astype(cupy.float64)
        ref_norm = float(cupy.linalg.norm(ref))
        flops = 2.0 * M * N * K

        def rel_err(plan) -> float:
            out = cupy.full((M, N), math.nan, dtype=f32)
            plan.launch(M, N, K, 1.0, As[0], K, Bs[0], N, 0.0, out, N)
            err = float(cupy.linalg.norm(out.astype(cupy.float64) - ref))
            return err / ref_norm if ref_norm else err

        best: dict | None = None
        deadline = t0 + budget - RESERVE_S
        failures_in_row = 0
        last_cost = 0.0
        bar = _bar(len(ready), f"time {kernel} {M}x{N}x{K}", progress)
        for i, cfg in enumerate(ready):
            row = by_key[_cfg_key(spec, cfg)]
            now = time.perf_counter()
            if now + last_cost > deadline or failures_in_row >= 3:
                reason = "time budget spent" if failures_in_row < 3 else "stopped after 3 failures in a row"
                for c in ready[i:]:
                    by_key[_cfg_key(spec, c)].update(status="skipped", reason=reason)
                break
            try:
                plan = get_plan(kernel, cfg, flags, dev_id)

                def launch(s, plan=plan):
                    plan.launch(M, N, K, 1.0, As[s], K, Bs[s], N, 0.0, Cs[s], N)

                warm = back_to_back_ms(lambda i: launch(i % nsets), WARMUP)[-1]
                if best is not None and warm > PRUNE_FACTOR * best["ms"]:
                    row.update(status="pruned", reason=f"warm-up {warm:.4f} ms > {PRUNE_FACTOR} x best",
                               ms=None, warmup_ms=warm)
                else:
                    reps = int(min(MAX_REPS, max(MIN_REPS, math.ceil(SAMPLE_MS / max(warm, 1e-3)))))
                    times = back_to_back_ms(lambda i: launch(i % nsets), reps)
                    ms = statistics.median(times)
                    row.update(status="timed", reason=None, ms=ms, tflops=flops / (ms * 1e9), reps=reps,
                               min_ms=min(times), warmup_ms=warm)
                    if best is None or ms < best["ms"]:
                        err = rel_err(plan)
                        row["rel_err"] = err
                        if err < TOLERANCE:  # NaN fails too
                            best = row
                        else:
                            row.update(status="failed", reason=f"wrong result: relative error {err:.2e}")
                failures_in_row = 0
            except Exception as e:  # a launch or runtime error: record it, go on
                failures_in_row += 1
                row.update(status="failed", reason=f"{type(e).__name__}: {str(e).splitlines()[0][:200]}")
            last_cost = time.perf_counter() - now
            if bar is not None:
                bar.update()
        if bar is not None:
            bar.close()

    if best is None:
        raise TuneError(f"no configuration of {kernel!r} compiled, ran and verified for {M}x{N}x{K} on "
                        f"{dev.name}: {_failure_summary(rows)}", rows)
    best["status"] = "best"
    res = TuneResult(
        kernel=kernel, shape=(M, N, K), dtype=dtype, gpu=dev.name, cc=dev.cc, config=dict(best["config"]),
        ms=best["ms"], tflops=best["tflops"], rel_err=best["rel_err"], table=rows, counts=cand.counts,
    )
    res.counts["timed"] = sum(1 for r in rows if r.get("ms") is not None)
    res.entry = make_entry(dev.name, dev.cc, kernel, dtype, (M, N, K), res.config, res.ms, res.tflops,
                           timed=res.counts["timed"])
    if save:
        res.saved_to = str(save_entries([res.entry]))
    res.elapsed_s = time.perf_counter() - t0
    return res


def _failure_summary(rows: list[dict]) -> str:
    reasons: dict[str, int] = {}
    for r in rows:
        if r["status"] in ("rejected", "failed", "skipped", "pruned"):
            key = (r["reason"] or r["status"])[:80]
            reasons[key] = reasons.get(key, 0) + 1
    return "; ".join(f"{n} x {k}" for k, n in sorted(reasons.items(), key=lambda t: -t[1])) or "no candidates"


# ---------------------------------------------------------------------------------------------------
# Persistence
# ---------------------------------------------------------------------------------------------------

_hashes: dict[str, str] = {}


def _template_hash(spec: KernelSpec) -> str:
    """``_render.template_hash``'s value (sha256 of common header + template, 16 hex digits).

    Computed here from the same text because ``template_hash`` is ``functools.cache``d on the spec,
    which is not hashable (its defaults are a mappingproxy), so calling it raises TypeError.
    """
    h = _hashes.get(spec.name)
    if h is None:
        try:
            from ._render import template_hash

            h = template_hash(spec)
        except TypeError:
            text = template_text(COMMON_HEADER) + template_text(spec.template)
            h = hashlib.sha256(text.encode()).hexdigest()[:16]
        _hashes[spec.name] = h
    return h


def cache_dir() -> Path:
    env = os.environ.get("CUMM_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "cumm"


def user_table_path() -> Path:
    return cache_dir() / TABLE_NAME


def shipped_tables() -> list:
    """The package's ``cumm/tuned/*.json`` (importlib.resources Traversables), sorted by name."""
    try:
        d = resources.files("cumm").joinpath("tuned")
        return sorted((p for p in d.iterdir() if p.name.endswith(".json")), key=lambda p: p.name)
    except (FileNotFoundError, NotADirectoryError, ModuleNotFoundError):
        return []


def entry_key(e: Mapping) -> str:
    b = "x".join(str(int(v)) for v in e["bucket"])
    return f"{e['gpu']}|sm_{int(e['cc'])}|{e['kernel']}|{e['dtype']}|{b}"


def make_entry(gpu: str, cc: int, kernel: str, dtype: str, shape: Sequence[int], config: Mapping[str, int],
               ms: float, tflops: float, **extra) -> dict:
    return dict(
        schema=SCHEMA, gpu=gpu, cc=int(cc), kernel=kernel, dtype=dtype, bucket=list(bucket(*shape)),
        shape=[int(v) for v in shape], config={k: int(v) for k, v in config.items()}, ms=float(ms),
        tflops=float(tflops), template_hash=_template_hash(get_spec(kernel)),
        tuned_at=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"), **extra,
    )


_warned: set[str] = set()


def _warn_once(key: str, message: str) -> None:
    if key not in _warned:
        _warned.add(key)
        warnings.warn(message, RuntimeWarning, stacklevel=3)


def _read_raw(text: str | None, where: str) -> tuple[dict[str, dict], bool]:
    """(entries by key, readable) of a table's text; entries are kept raw (other schemas survive merges)."""
    if text is None:
        return {}, True
    try:
        doc = json.loads(text)
        if not isinstance(doc, dict) or not isinstance(doc.get("entries", {}), dict):
            raise ValueError("expected an object with an 'entries' object")
    except (ValueError, RecursionError) as e:
        _warn_once(where, f"cumm: ignoring the unreadable tuned table {where} ({e}); it counts as empty")
        return {}, False
    return {k: v for k, v in doc.get("entries", {}).items() if isinstance(v, dict)}, True


def _read_path(path) -> str | None:
    try:
        return path.read_text()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as e:
        _warn_once(str(path), f"cumm: cannot read the tuned table {path} ({e}); it counts as empty")
        return None


def read_table(path) -> dict[str, dict]:
    """Entries of one table file (a Path or a Traversable); missing or unreadable -> {} (warned once)."""
    return _read_raw(_read_path(path), str(path))[0]


_INT_FIELDS = ("schema", "cc")


def _well_formed(e: Mapping) -> bool:
    try:
        return (
            all(isinstance(e[k], int) and not isinstance(e[k], bool) for k in _INT_FIELDS)
            and all(isinstance(e[k], str) for k in ("gpu", "kernel", "dtype", "template_hash"))
            and isinstance(e["bucket"], list) and len(e["bucket"]) == 3
            and all(isinstance(v, int) and v >= 1 for v in e["bucket"])
            and isinstance(e["config"], dict)
            and all(isinstance(k, str) and isinstance(v, int) for k, v in e["config"].items())
            and all(isinstance(e[k], (int, float)) and e[k] > 0 for k in ("ms", "tflops"))
        )
    except (KeyError, TypeError):
        return False


def _usable(e: Mapping) -> bool:
    """Current schema, a known kernel whose template is unchanged, and a configuration it accepts."""
    if not _well_formed(e) or e["schema"] != SCHEMA:
        return False
    spec = REGISTRY.get(e["kernel"])
    if spec is None or spec.kind != "gemm" or e["template_hash"] != _template_hash(spec):
        return False
    try:
        spec.resolve(e["config"], e["cc"])
    except Exception:
        return False
    return True


_index: dict[tuple, list[dict]] = {}
_index_lock = threading.Lock()


def tuned_entries(gpu: str, cc: int, dtype: str = "float32") -> list[dict]:
    """Usable entries for this GPU, compute capability and dtype: shipped tables, then the user's (wins).

    Read once per process (per user-table path); :func:`clear_caches` forgets them.
    """
    upath = str(user_table_path())
    key = (upath, gpu, int(cc), dtype)
    hit = _index.get(key)
    if hit is None:
        with _index_lock:
            merged: dict[str, dict] = {}
            for t in shipped_tables():
                merged.update(read_table(t))
            merged.update(read_table(Path(upath)))
            hit = [e for e in merged.values()
                   if _usable(e) and e["gpu"] == gpu and e["cc"] == int(cc) and e["dtype"] == dtype]
            hit.sort(key=entry_key)
            _index[key] = hit
    return hit


def _log2_distance(a: Sequence[int], b: Sequence[int]) -> float:
    return math.sqrt(sum((math.log2(x) - math.log2(y)) ** 2 for x, y in zip(a, b, strict=True)))


def lookup(gpu: str, cc: int, dtype: str, M: int, N: int, K: int, max_distance: float = MAX_DISTANCE) -> dict | None:
    """The tuned entry nearest to the bucket of M x N x K (log2 distance), if within ``max_distance``.

    Among entries of the nearest bucket (several kernels), the one with the most TFLOP/s wins.
    """
    q = bucket(M, N, K)
    best, best_key = None, None
    for e in tuned_entries(gpu, cc, dtype):
        k = (_log2_distance(q, e["bucket"]), -e["tflops"], entry_key(e))
        if best_key is None or k < best_key:
            best, best_key = e, k
    if best is None or best_key[0] > max_distance:
        return None
    return best


def clear_caches() -> None:
    """Forget loaded tables and kernel="auto"'s memoized answers (after a table changed)."""
    with _index_lock:
        _index.clear()
    _auto.clear_cache()


_write_lock = threading.Lock()


@contextlib.contextmanager
def _locked(path: Path):
    with _write_lock:
        lock_path = path.with_name(path.name + ".lock")
        with open(lock_path, "a+") as lf:
            if fcntl is not None:
                fcntl.flock(lf.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                if fcntl is not None:
                    fcntl.flock(lf.fileno(), fcntl.LOCK_UN)


def save_entries(entries: Iterable[Mapping], path: str | os.PathLike | None = None,
                 drop_keys: Iterable[str] = ()) -> Path:
    """Merge ``entries`` into the table at ``path`` (default: the user's ``tuned.json``), atomically.

    Under an exclusive lock on ``<path>.lock``: read the current file, drop ``drop_keys``, add the
    entries (same key = replaced), write a temporary file in the same directory and ``os.replace`` it.
    A corrupt current file is kept aside as ``<path>.corrupt`` and replaced.
    """
    path = Path(path) if path is not None else user_table_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with _locked(path):
        current, ok = _read_raw(_read_path(path), str(path))
        if not ok:
            with contextlib.suppress(OSError):
                os.replace(path, path.with_name(path.name + ".corrupt"))
        for k in drop_keys:
            current.pop(k, None)
        for e in entries:
            current[entry_key(e)] = dict(e)
        doc = {"schema": SCHEMA, "entries": dict(sorted(current.items()))}
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(doc, f, indent=1)
                f.write("\n")
                f.flush()
                os.fsync(f.fileno())
            os.chmod(tmp, 0o644)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    clear_caches()
    return path


# ---------------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------------


def _dedupe(shapes: Iterable[Sequence[int]]) -> list[tuple[int, int, int]]:
    out: list[tuple[int, int, int]] = []
    for s in shapes:
        t = tuple(int(v) for v in s)
        if len(t) != 3:
            raise ValueError(f"a shape is M, N, K; got {s!r}")
        if t not in out:
            out.append(t)
    return out


def cli(kernel: str | None, shapes: list[tuple[int, int, int]], standard: bool, max_configs: int | None) -> int:
    """``cumm tune``: tune each shape (plus ``STANDARD_SHAPES`` with ``standard``), print, save.

    ``kernel=None`` tunes the top rungs (``top_rungs()``) and keeps the faster per shape (the
    other's entry for that bucket is dropped). The per-shape budget (``CUMM_TUNE_BUDGET_S``, default
    150 s) is split between the kernels. Results go to the user's ``tuned.json`` and, when the
    environment names one in ``CUMM_TUNE_OUT`` (e.g. ``cumm/tuned/h200.json``), to that file too.
    Returns 0 when every shape got a result, 1 otherwise, 2 on bad arguments.
    """
    try:
        todo = _dedupe(list(shapes or []) + (STANDARD_SHAPES if standard else []))
        if kernel:
            get_spec(kernel)
    except ValueError as e:
        print(f"cumm tune: {e}", file=sys.stderr)
        return 2
    if not todo:
        print("cumm tune: give shapes (M N K) or --standard", file=sys.stderr)
        return 2
    kernels = [kernel] if kernel else top_rungs()  # after the argument checks: this one needs the GPU
    out_path = os.environ.get("CUMM_TUNE_OUT") or None
    per_kernel = _budget(None) / len(kernels)
    results: list[tuple[tuple[int, int, int], TuneResult | None, list[TuneResult]]] = []
    failed = 0
    t_all = time.perf_counter()
    for shape in todo:
        got: list[TuneResult] = []
        for k in kernels:
            try:
                got.append(tune(k, *shape, max_configs=max_configs, save=False, budget_s=per_kernel,
                                progress=sys.stderr.isatty()))
            except Exception as e:
                print(f"  {k} {'x'.join(map(str, shape))}: {type(e).__name__}: {str(e)[:300]}", file=sys.stderr)
        win = max(got, key=lambda r: r.tflops) if got else None
        if win is None:
            failed += 1
        else:
            drop = [entry_key(r.entry) for r in got if r is not win]
            win.saved_to = str(save_entries([win.entry], drop_keys=drop))
            if out_path:
                save_entries([win.entry], out_path, drop_keys=drop)
            print(f"  {win.summary()}", flush=True)
        results.append((shape, win, got))
    _print_table(results, kernels)
    print(f"tuned {len(todo) - failed}/{len(todo)} shapes in {time.perf_counter() - t_all:.0f} s; "
          f"saved to {user_table_path()}" + (f" and {out_path}" if out_path else ""))
    return 0 if failed == 0 else 1


def _print_table(results, kernels: Sequence[str]) -> None:
    head = f"{'M x N x K':>20}  {'kernel':<14} {'ms':>10} {'TFLOP/s':>8}  " + "  ".join(
        f"{k[:13]:>13}" for k in kernels) + "  config"
    print(head)
    print("-" * len(head))
    for shape, win, got in results:
        per = {r.kernel: r.tflops for r in got}
        cols = "  ".join(f"{per[k]:>13.2f}" if k in per else f"{'-':>13}" for k in kernels)
        sh = "x".join(map(str, shape))
        if win is None:
            print(f"{sh:>20}  {'FAILED':<14} {'-':>10} {'-':>8}  {cols}")
        else:
            print(f"{sh:>20}  {win.kernel:<14} {win.ms:>10.4f} {win.tflops:>8.2f}  {cols}  {_compact(win.config)}")


def _parse_shape(s: str) -> tuple[int, int, int]:
    parts = s.lower().replace(",", "x").split("x")
    if len(parts) == 1:
        parts = parts * 3
    if len(parts) != 3 or not all(p.strip().isdigit() for p in parts):
        raise ValueError(f"a shape looks like 1024x1024x1024 (or 1024 for a cube), got {s!r}")
    return tuple(int(p) for p in parts)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m cumm._tune``: the tuning CLI without ``cumm._cli`` (also an offline ``--plan``)."""
    import argparse

    p = argparse.ArgumentParser(prog="python -m cumm._tune", description=main.__doc__)
    p.add_argument("shapes", nargs="*", help="MxNxK (or N for N^3)")
    p.add_argument("--kernel", default=None, help="kernel to tune (default: warptile and double_buffer)")
    p.add_argument("--standard", action="store_true", help="tune the standard shape set")
    p.add_argument("--max-configs", type=int, default=None)
    p.add_argument("--out", default=None, help="also merge the winners into this table (sets CUMM_TUNE_OUT)")
    p.add_argument("--budget", type=float, default=None, help="seconds per shape (sets CUMM_TUNE_BUDGET_S)")
    p.add_argument("--plan", action="store_true",
                   help="no GPU: print the candidates for an H200 (offline compiles unless --no-compile)")
    p.add_argument("--no-compile", action="store_true")
    a = p.parse_args(argv)
    try:
        shapes = [_parse_shape(s) for s in a.shapes]
    except ValueError as e:
        p.error(str(e))
    if a.out:
        os.environ["CUMM_TUNE_OUT"] = os.path.abspath(a.out)
    if a.budget is not None:
        os.environ["CUMM_TUNE_BUDGET_S"] = str(a.budget)
    if a.plan:
        for shape in _dedupe(shapes + (STANDARD_SHAPES if a.standard else [])):
            for k in [a.kernel] if a.kernel else top_rungs():
                t = time.perf_counter()
                c = candidates(k, *shape, max_configs=a.max_configs, compile=not a.no_compile, progress=True,
                               budget_s=_budget(None) / (1 if a.kernel else len(top_rungs())))
                cs = sum(r.get("compile_s") or 0 for r in c.rows)
                print(f"{k} {'x'.join(map(str, shape))}: {len(c.configs)} candidates, {c.counts} "
                      f"({time.perf_counter() - t:.1f} s wall, {cs:.0f} s of compiles)")
                for cfg in c.configs[:5]:
                    print(f"    {_compact(cfg)}")
        return 0
    return cli(a.kernel, shapes, a.standard, a.max_configs)


if __name__ == "__main__":
    raise SystemExit(main())
