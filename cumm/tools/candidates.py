"""The tuner's candidates for one kernel and shape (:func:`candidates`, steps 1-4 of :func:`cumm.tune`, no GPU
needed): the configurations :mod:`.space` enumerates, filters and ranks, compiled offline in that order until enough
survive (step 4, described in :mod:`.space`)."""

from __future__ import annotations

import math
import os
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field

from ..core.spec import KernelSpec
from ..ladder import get_spec
from ..runtime.compile import compile_offline
from ..runtime.render import template_hash
from .space import (
    ASSUMED_TFLOPS,
    COMPILE_EXTRA,
    DEFAULT_BUDGET_S,
    H200,
    DeviceInfo,
    as_run,
    config_key,
    default_count,
    enumerate_configs,
    rank,
    spec_seeds,
    static_reject,
)

# ---- Offline compile filter -----------------------------------------------------------------------------------------

_offline: dict[tuple, dict] = {}  # (kernel, template hash, arch, flags, cfg) -> compile report
_offline_lock = threading.Lock()


def _offline_report(spec: KernelSpec, cfg: dict[str, int], arch: str, flags: tuple[int, int, int]) -> dict:
    key = (spec.name, template_hash(spec), arch, flags, config_key(spec, cfg))
    with _offline_lock:
        hit = _offline.get(key)
    if hit is not None:
        return hit
    t0 = time.perf_counter()
    try:
        k = compile_offline(spec, cfg, arch=arch, flags=flags)
        rep = dict(
            registers=k.registers,
            spill_bytes=k.spill_bytes,
            stack_bytes=k.stack_bytes,
            shared_bytes=k.shared_bytes,
            threads=k.threads,
            error=None,
        )
    except Exception as e:  # CompileError and anything NVRTC raises: a reason, not a crash
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        rep = dict(
            registers=None,
            spill_bytes=None,
            stack_bytes=None,
            shared_bytes=None,
            threads=spec.threads(cfg),
            error=f"{type(e).__name__}: {first[:200]}",
        )
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
    # config_key of a seed as matmul runs it at the shape -> the seed as written (what an entry keeps: spec_seeds)
    given: dict = field(default_factory=dict)


def compile_workers() -> int:
    return max(2, min(32, os.cpu_count() or 4))


def progress_bar(total: int, desc: str, enabled: bool):
    if not enabled:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    return tqdm(total=total, desc=desc, leave=False, file=sys.stderr)


def _prior_configs(spec: KernelSpec, prior: Sequence[Mapping[str, int]], cc: int) -> list[dict[str, int]]:
    """``prior``'s configurations over the spec's defaults, those it accepts."""
    full = [{**spec.default_config(cc), **p} for p in prior]
    return [c for c in full if set(c) == set(spec.default_config(cc)) and not spec.violations(c)]


def candidates(
    kernel: str,
    M: int,
    N: int,
    K: int,
    *,
    device: DeviceInfo = H200,
    flags: tuple[int, int, int] = (1, 1, 1),
    max_configs: int | None = None,
    budget_s: float = DEFAULT_BUDGET_S,
    compile: bool = True,
    deadline: float | None = None,
    progress: bool = False,
    tflops: float = ASSUMED_TFLOPS,
    pitches: tuple[int, int] | None = None,
    prior: Sequence[Mapping[str, int]] = (),
) -> Candidates:
    """Steps 1-4 of the pipeline (no GPU needed): the configurations worth timing, in order.

    With ``compile=False`` the offline compile filter is skipped (a plan, for inspection). ``deadline``
    (``time.perf_counter()`` value) cancels compiles not yet started when it passes. ``tflops``: the rate that
    sizes the default count (:func:`default_count`). ``pitches``: the operands' row pitches in bytes (A's, B's),
    for the seeds as matmul would run them (:func:`spec_seeds`). ``prior``: configurations timed before the seeds
    (the tuner's: what the tables give the rung at the shape now); one the spec refuses is left out.
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
            seen.add(config_key(spec, cfg))
        else:
            rule = why.split(":")[0]
            counts["static_rejects"][rule] = counts["static_rejects"].get(rule, 0) + 1
    # The seeds as matmul runs them at this shape first (so no entry is slower than no entry: docs/auto.md, section
    # 5, bf16 512 x 5120 x 5120), then as written. An entry keeps a seed as written (``given``): matmul's rules make
    # it the configuration timed here, and apply only where they may (the pitch rule's clusters of two run neither
    # batches nor a transposed B).
    given: dict = {}
    written = [*_prior_configs(spec, prior, device.cc), *spec_seeds(spec, device.cc)]
    ran = [as_run(spec, s, device.cc, (M, N, K), device.sms, pitches) for s in written]
    for run, seed in zip(ran, written, strict=True):
        if run != seed:
            given.setdefault(config_key(spec, run), seed)
    seeds: dict[tuple, dict[str, int]] = {}  # (first occurrence kept: rank puts the seeds first, in this order)
    for s in (*ran, *written):
        if static_reject(spec, s, M, N, K, device) is None:
            seeds.setdefault(config_key(spec, s), s)
    order, floored = rank(spec, keep, M, N, K, device, list(seeds.values()))
    counts["score_floor"] = floored
    counts["ranked"] = len(order)
    n = max_configs if max_configs is not None else default_count(M, N, K, budget_s, tflops)
    counts["wanted"] = n
    if not compile:
        return Candidates(kernel, order[:n], [], counts, given)

    arch = f"sm_{device.cc}"
    rows: list[dict] = []
    survivors: list[dict[str, int]] = []
    pos = 0
    bar = progress_bar(0, f"compile {kernel}", progress)
    compiled = 0
    with ThreadPoolExecutor(compile_workers()) as ex:
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
    return Candidates(kernel, survivors, rows, counts, given)
