"""The tuner's search space: which configurations of a kernel are worth timing for one shape, in which order.

Steps 1-4 of :func:`cumm.tune` (no GPU needed; :func:`.candidates.candidates` runs them):

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
   diversity: the default configuration and the spec's named configurations (its small tiles among them) first, then a
   round-robin over tile shapes (grids), best tile shape first, each tile shape's configurations best
   first. The order is deterministic.
4. **Offline compile** (``compile_offline`` for ``sm_<cc>``, thread pool: NVRTC releases the GIL) in that
   order, in batches, until ``n`` configurations survive: spills (> 0 bytes), shared memory above the
   opt-in limit and registers x threads above the per-block register file are rejected. ``n`` is
   ``max_configs`` when given, else ``min(DEFAULT_MAX_CONFIGS, what the time budget pays for)``
   (:func:`default_count`; ``cumm/tuned/README.md`` repeats the math).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..core.spec import KernelSpec, cdiv
from ..plan import auto as _auto
from ..runtime.timing import SETTLE_S

DEFAULT_BUDGET_S = 150.0  # per tune() call; 30 s of headroom under the 3 minutes
OFFLINE_SHARE = 0.4  # offline compiles not started by this share of the budget are cancelled
COMPILE_SHARE = 0.6  # device compiles likewise; timing has the rest
DEFAULT_MAX_CONFIGS = 64
COMPILE_EXTRA = 1.2  # compile this many candidates per wanted survivor (batches refill if more fail)
SCORE_FLOOR = 1 / 3
LIKELY_SPILL_PENALTY = 0.5
# How a configuration is timed (cumm.tune), which sizes the count the budget pays for (default_count).
MIN_REPS, MAX_REPS, SAMPLE_MS = 10, 50, 100.0
WARMUP = 2
ASSUMED_TFLOPS = 30.0  # planning estimate (H200: the top rungs reach 40-42 at 4096^3-8192^3); sizes the default count
ASSUMED_FP8_TFLOPS = 800.0  # ... for the FP8 rungs (H200: 1074-1324 from 4096^3 on, 376-762 at 2048^3 and 128 rows)


# ---- Device facts ---------------------------------------------------------------------------------------------------


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
        name, cc = _auto.device_key(device_id)
        optin = a.get("MaxSharedMemoryPerBlockOptin", 48 * 1024)
        return cls(
            name=name,
            cc=cc,
            sms=a["MultiProcessorCount"],
            smem_optin=optin,
            smem_per_sm=a.get("MaxSharedMemoryPerMultiprocessor", optin),
            l2_bytes=a.get("L2CacheSize", 0),
            regs_per_sm=a.get("MaxRegistersPerMultiprocessor", 65536),
            regs_per_block=a.get("MaxRegistersPerBlock", 65536),
            max_threads_per_sm=a.get("MaxThreadsPerMultiProcessor", 2048),
        )


# For planning without a GPU (``candidates(..., device=H200)``, tests): the H200's published limits.
H200 = DeviceInfo(name="NVIDIA H200", cc=90, sms=132, smem_optin=232448, smem_per_sm=233472, l2_bytes=50 * 1024 * 1024)


# ---- Enumeration, static filter, ranking ----------------------------------------------------------------------------


def config_key(spec: KernelSpec, cfg: Mapping[str, int]) -> tuple[int, ...]:
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


def spec_seeds(spec: KernelSpec, cc: int) -> list[dict[str, int]]:
    """Known-good starting points timed first: the defaults, and the spec's named configurations (the heuristic's
    small tiles among them). In a large space the budget may end before the ranking reaches them (H200, bf16
    512 x 4096 x 4096: wgmma_ws's one-warpgroup 128 x 128 tiles won at 543 TFLOP/s in one tuning run and were not
    reached in the next, whose best was 461)."""
    base = spec.default_config(cc)
    # (not a named configuration outside the space: fp8_wgmma's "fast_accum" sets PROMO = 0, which is not searched)
    named = [o for o in spec.configs.values() if all(v in spec.space.get(k, ()) for k, v in o.items())]
    seeds = [base, *({**base, **over} for over in named)]
    return [s for s in seeds if not spec.violations(s)]


def as_run(
    spec: KernelSpec,
    cfg: dict[str, int],
    cc: int,
    shape: tuple[int, int, int],
    sms: int,
    pitches: tuple[int, int] | None,
) -> dict[str, int]:
    """``cfg`` as matmul runs it at ``shape`` when it comes from the tuned table: through the spec's shape rule and,
    given the operands' row ``pitches`` in bytes (A's, B's), its pitch rule (plan/decide.py applies both)."""
    if spec.shape_config is not None:
        cfg = spec.adjusted(cfg, cc, spec.shape_config, *shape, sms) or cfg
    if spec.pitch_config is not None and pitches is not None:
        cfg = spec.adjusted(cfg, cc, spec.pitch_config, *pitches) or cfg
    return dict(cfg)


def register_cap(threads: int, minb: int, dev: DeviceInfo) -> int:
    """Registers per thread that ``__launch_bounds__(threads, minb)`` leaves (allocation unit 8)."""
    return min(255, dev.regs_per_sm // max(1, threads * minb) // 8 * 8)


def _accumulators(spec: KernelSpec, cfg: Mapping[str, int]) -> int | None:
    """Outputs a thread holds; None without a tile, or when the block has fewer outputs than threads (the threads
    split K too, as the skinny rungs' do: no register tile whose reuse the score could weigh)."""
    if "BM" in cfg and "BN" in cfg:
        return cfg["BM"] * cfg["BN"] // max(1, spec.threads(cfg)) or None
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
    resident = max(
        1,
        min(
            dev.max_threads_per_sm // threads,
            dev.regs_per_sm // (est_regs * threads),
            dev.smem_per_sm // (smem + 1024),
            32,
        ),
    )
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


def rank(
    spec: KernelSpec,
    cfgs: Sequence[Mapping[str, int]],
    M: int,
    N: int,
    K: int,
    dev: DeviceInfo,
    seeds: Sequence[Mapping[str, int]] = (),
) -> tuple[list[dict[str, int]], int]:
    """(diverse, deterministic order of ``cfgs``, number dropped by the score floor); seeds first."""
    scored = sorted(
        ((score(spec, c, M, N, K, dev), config_key(spec, c), dict(c)) for c in cfgs), key=lambda t: (-t[0], t[1])
    )
    groups: dict[tuple, list] = {}
    for t in scored:  # insertion order = order of each group's best
        groups.setdefault(_group(spec, t[2], M, N, K), []).append(t)
    best = scored[0][0] if scored else 0.0
    kept = [g for g in groups.values() if g[0][0] >= SCORE_FLOOR * best]
    dropped = sum(len(g) for g in groups.values()) - sum(len(g) for g in kept)
    seen = {config_key(spec, s) for s in seeds}
    order = [dict(s) for s in seeds]
    for layer in itertools.zip_longest(*kept):
        for t in layer:
            if t is not None and t[1] not in seen:
                order.append(t[2])
    return order, dropped


def default_count(M: int, N: int, K: int, budget_s: float, tflops: float = ASSUMED_TFLOPS) -> int:
    """How many configurations to time when ``max_configs`` is not given.

    Timing one configuration costs about ``(WARMUP + MIN_REPS) * t + 0.05 s`` (spin, events, the check) plus
    SETTLE_S (it runs alone first), with ``t = 2MNK / tflops`` (ASSUMED_TFLOPS, or ASSUMED_FP8_TFLOPS); 40 % of
    the budget (after compiling) pays for timing. 8192^3, default 150 s: t ~ 37 ms, ~0.6 s a configuration, 60 s /
    0.6 s ~ 100 -> capped at DEFAULT_MAX_CONFIGS (64); with 75 s (both top rungs): 30 s / 0.6 s ~ 50.
    Measured on the H200 (16 cores): 48 configurations of double_buffer at 4096^3 took 11 s in all
    (60 offline compiles, 48 device compiles, timing), warptile + double_buffer at 8192^3 30 s.
    """
    t = 2.0 * M * N * K / (tflops * 1e12) + 10e-6
    per_config = (WARMUP + MIN_REPS) * t + 0.05 + SETTLE_S
    return max(1, min(DEFAULT_MAX_CONFIGS, int((1 - COMPILE_SHARE) * budget_s / per_config)))
