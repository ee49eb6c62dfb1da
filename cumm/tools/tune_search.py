"""Autotuning's search: one kernel's configuration space at one shape on one GPU, timed, the winner verified and
remembered (:func:`tune`, ``cumm.tune``).

:func:`tune` takes the candidates of ``candidates.candidates`` (enumerated, filtered, ranked and compiled
offline, no GPU needed), then:

5. **Device compile** the survivors (``device_kernel``, thread pool) and **time** each in rank order:
   CUDA events around every launch, queued behind a 2 ms spin kernel so that launch overhead is not
   timed (``_timing.back_to_back_ms``); two warm-up launches, ``SETTLE_S`` (0.1 s) of back-to-back
   launches (``_timing.hold``: a card at its power limit then runs at the clock this configuration
   sustains), then the median of ``10..50`` launches (about 100 ms of samples); operands are rotated over
   several input sets when they would fit in L2 (random normal data). A configuration whose warm-up is
   more than ``PRUNE_FACTOR`` times slower than the best median is pruned after its warm-up. Before a
   configuration becomes the best it is checked against a float64 reference (relative Frobenius error <
   ``TOLERANCE``).
6. **Split race** (a rung that splits K, where its best tiles leave multiprocessors idle): the three fastest
   configurations and the ``small`` one with K in ``SPLITS`` slices, timed the same way through matmul
   (:func:`split_candidates`); a faster verified split becomes the winner with its ``split_k``.
7. **Save** the winner in the user's tuned table (``_store``), which ``kernel="auto"`` reads.

Time budget (``budget_s``, default ``DEFAULT_BUDGET_S`` = 150 s, env ``CUMM_TUNE_BUDGET_S``): offline
compiles not started by ``OFFLINE_SHARE`` (40 %) of it are cancelled, device compiles likewise at
``COMPILE_SHARE`` (60 %), and timing starts no configuration that would end later than ``RESERVE_S``
before the budget once one configuration is verified (the first is timed whatever is left); so one shape stays
under 3 minutes on an H200 whatever the estimates say.
float16 and bfloat16 (``dtype=``, ``--dtype``): operands of that dtype, the half rungs raced (``KernelSpec.raced``),
launched through matmul's one-launch call, checked against ``TOLERANCES`` (``core.dtypes.TOLERANCE``). ``FP8_DTYPE``
("fp8"): the FP8 rungs through scaled_matmul (:mod:`.tune_fp8`), the entry stored without the formats.

Apart from the races over shapes and rungs (:mod:`.tune`, ``python -m cumm tune``), which call it per rung and shape
and decide what is saved.
"""

from __future__ import annotations

import math
import os
import statistics
import time
import warnings
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field

from ..core.dtypes import DTYPES, FP8_DTYPE
from ..core.spec import KernelSpec
from ..ladder import REGISTRY, get_spec
from ..plan.store import lookup, make_entry, save_entries
from ..runtime.timing import SETTLE_S, back_to_back_ms, gpu_unavailable, hold
from .candidates import candidates, compile_workers, progress_bar
from .space import (
    COMPILE_SHARE,
    DEFAULT_BUDGET_S,
    MAX_REPS,
    MIN_REPS,
    OFFLINE_SHARE,
    SAMPLE_MS,
    WARMUP,
    DeviceInfo,
    config_key,
)
from .tune_operands import operands_for, run_as

RESERVE_S = 5.0  # timing stops this long before the budget ends (verification, saving)
PRUNE_FACTOR = 1.5


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
    split_k: int = 1  # slices of K the winner runs with (a rung that splits K; 1: none)
    b_transposed: bool = False  # timed with B a transposed view (MatmulOperands)

    def summary(self) -> str:
        M, N, K = self.shape
        timed = sum(1 for r in self.table if r.get("ms") is not None)
        return (
            f"{self.kernel} {M}x{N}x{K} on {self.gpu}: {self.ms:.4f} ms, {self.tflops:.2f} TFLOP/s "
            f"(rel err {self.rel_err:.1e}; {timed} timed of {self.counts.get('ranked', '?')} ranked, "
            f"{self.elapsed_s:.0f} s) config {_compact(self.config)}"
            + (f" split_k={self.split_k}" if self.split_k > 1 else "")
        )


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


def prior_configs(dev: DeviceInfo, kernel: str, dtype: str, shape: tuple[int, int, int]) -> list[dict[str, int]]:
    """The configuration the tables give ``kernel`` at ``shape`` now (its nearest entry), a seed timed first: a
    search whose ranking did not reach it replaced it with a slower one (H200, bf16 1024 x 1024 x 8192: wgmma_ws's
    one-warpgroup 128 x 64 tiles ran 0.98x cuBLAS; the re-tune's best of 24 others, 0.85x)."""
    entry = lookup(dev.name, dev.cc, dtype, *shape, kernel=kernel)
    return [dict(entry["config"])] if entry is not None else []


def takes(spec: KernelSpec, dtype: str) -> bool:
    """Whether ``spec``'s rung is tuned for ``dtype``: FP8_DTYPE for the scaled FP8 rungs, else one of its dtypes."""
    return bool(spec.scales) if dtype == FP8_DTYPE else dtype in spec.dtypes


def tune(
    kernel: str,
    M: int,
    N: int,
    K: int,
    *,
    dtype: str = "float32",
    max_configs: int | None = None,
    save: bool = True,
    progress: bool = True,
    device_id: int | None = None,
    budget_s: float | None = None,
    seed: int = 0,
    b_transposed: bool = False,
) -> TuneResult:
    """Find the fastest verified configuration of ``kernel`` for an ``M x N x K`` product on a GPU.

    See the module docstring for the pipeline and the time budget (``budget_s``, default 150 s). ``b_transposed``:
    time it with B the transposed view of an N x K array (q @ k^T), as matmul runs that (float32 and half dtypes).
    With ``save`` the winner goes to the user's ``tuned.json``, where ``kernel="auto"`` finds it.
    Raises :class:`TuneError` if no configuration survives.
    """
    if b_transposed and dtype == FP8_DTYPE:
        raise ValueError("b_transposed is for float32 and the half dtypes; scaled_matmul's FP8 B is K-major already")
    reason = gpu_unavailable()
    if reason:
        raise TuneError(
            f"{reason}; cumm.tune times kernels on an NVIDIA GPU (nothing was saved). "
            "cumm.tools.candidates.candidates lists what it would time, without one",
            [],
        )
    import cupy

    from ..runtime.compile import device_kernel

    t0 = time.perf_counter()
    if dtype not in DTYPES and dtype != FP8_DTYPE:
        raise ValueError(f"dtype {dtype!r} is not supported; supported dtypes: {', '.join(DTYPES)}, {FP8_DTYPE}")
    for name, v in (("M", M), ("N", N), ("K", K)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")
    spec = get_spec(kernel)
    if not takes(spec, dtype):
        rungs = [k for k, s in REGISTRY.items() if s.kind == "gemm" and takes(s, dtype)]
        raise ValueError(
            f"kernel {kernel!r} multiplies {' and '.join(spec.dtypes)}, not {dtype}; the rungs for {dtype}: {rungs}"
        )
    budget = _budget(budget_s)
    dev_id = cupy.cuda.runtime.getDevice() if device_id is None else int(device_id)
    Operands = operands_for(dtype)
    with cupy.cuda.Device(dev_id):
        dev = DeviceInfo.from_device(dev_id)
        flags, pitches = run_as(spec, dtype, Operands.flags(dtype, M, N, K), N, K, b_transposed)
        cand = candidates(
            kernel,
            M,
            N,
            K,
            device=dev,
            flags=flags,
            max_configs=max_configs,
            budget_s=budget,
            deadline=t0 + OFFLINE_SHARE * budget,
            progress=progress,
            tflops=Operands.tflops,
            pitches=pitches,
            prior=prior_configs(dev, kernel, dtype, (M, N, K)),
        )
        rows = cand.rows
        by_key = {config_key(spec, r["config"]): r for r in rows}

        # Device compiles (CuPy), in parallel; their failures are reasons too.
        ready: list[dict[str, int]] = []
        bar = progress_bar(len(cand.configs), f"load {kernel}", progress)
        compile_deadline = t0 + COMPILE_SHARE * budget
        errors: dict[tuple, str] = {}
        with ThreadPoolExecutor(compile_workers()) as ex:
            futs = {ex.submit(device_kernel, spec, cfg, flags, dev_id): cfg for cfg in cand.configs}
            for f in as_completed(futs):
                key = config_key(spec, futs[f])
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
            err = errors.get(config_key(spec, cfg))
            if err is None:
                ready.append(cfg)
            elif err.startswith("skipped: "):
                by_key[config_key(spec, cfg)].update(status="skipped", reason=err[len("skipped: ") :])
            else:
                by_key[config_key(spec, cfg)].update(status="failed", reason=err)

        tb = {"b_transposed": True} if b_transposed else {}  # (MatmulOperands' only: FP8 refuses it above)
        ops = Operands(kernel, spec, M, N, K, dtype, flags, dev, seed, **tb)
        nsets, flops, tolerance = ops.nsets, 2.0 * M * N * K, ops.tolerance
        best: dict | None = None

        def measure(launch, row: dict) -> bool:
            """Times launch(operand set) into row; False when pruned after its warm-up (behind the best)."""
            warm = back_to_back_ms(lambda i: launch(i % nsets), WARMUP)[-1]
            if best is not None and warm > PRUNE_FACTOR * best["ms"]:
                row.update(status="pruned", reason=f"warm-up {warm:.4f} ms > {PRUNE_FACTOR} x best", ms=None)
                row["warmup_ms"] = warm
                return False
            reps = int(min(MAX_REPS, max(MIN_REPS, math.ceil(SAMPLE_MS / max(warm, 1e-3)))))
            # Alone for SETTLE_S first, as in the bench: at the power limit (the H200's half-precision products
            # from 2048^3) a configuration timed right after the host compiled borrows clock, and the race would
            # go to what runs fastest cool, not to what sustains the most.
            hold(lambda i: launch(i % nsets), SETTLE_S)
            times = back_to_back_ms(lambda i: launch(i % nsets), reps)
            ms = statistics.median(times)
            row.update(status="timed", reason=None, ms=ms, tflops=flops / (ms * 1e9), reps=reps, min_ms=min(times))
            row["warmup_ms"] = warm
            return True

        deadline = t0 + budget - RESERVE_S
        failures_in_row = 0
        last_cost = 0.0
        bar = progress_bar(len(ready), f"time {kernel} {M}x{N}x{K}", progress)
        for i, cfg in enumerate(ready):
            row = by_key[config_key(spec, cfg)]
            now = time.perf_counter()
            # (until one configuration is verified the budget does not stop the timing: with a small budget the
            # compiles of a cold cache took it all, and the rung left the race untimed: H200, --budget 30 over three
            # rungs, skinny16 at fp16 1 x 4096 x 4096, 21 configurations compiled, none timed)
            if (best is not None and now + last_cost > deadline) or failures_in_row >= 3:
                reason = "time budget spent" if failures_in_row < 3 else "stopped after 3 failures in a row"
                for c in ready[i:]:
                    by_key[config_key(spec, c)].update(status="skipped", reason=reason)
                break
            try:
                launch = ops.launcher(cfg)
                if measure(launch, row) and (best is None or row["ms"] < best["ms"]):
                    err = ops.rel_err(launch)
                    row["rel_err"] = err
                    if err < tolerance:  # NaN fails too: a wrong configuration is never the best
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

        # Split-K, for a rung that splits K where the best tiles leave multiprocessors idle: the three fastest
        # verified-or-timed configurations and the spec's "small" one with K in slices (a split is two launches
        # through matmul: the slices into a workspace, then their sum into C), timed the same way (launches queued,
        # so a split call's host time is not in the race); a faster verified split goes with the entry.
        for cfg, splits in split_candidates(spec, rows, M, N, K, dev.sms) if best is not None else ():
            if time.perf_counter() + last_cost > deadline:
                break
            now = time.perf_counter()
            row = dict(config=dict(cfg), split_k=splits, status="ranked", reason=None)
            rows.append(row)
            try:
                launch = ops.launcher(cfg, splits)
                launch(0)  # (compiles the split's variant and its sum outside the timing)
                if measure(launch, row) and row["ms"] < best["ms"]:
                    row["rel_err"] = err = ops.rel_err(launch)
                    if err < tolerance:
                        best = row
                    else:
                        row.update(status="failed", reason=f"wrong result: relative error {err:.2e}")
            except Exception as e:
                row.update(status="failed", reason=f"{type(e).__name__}: {str(e).splitlines()[0][:200]}")
            last_cost = time.perf_counter() - now

    if best is None:
        raise TuneError(
            f"no configuration of {kernel!r} compiled, ran and verified for {M}x{N}x{K} on "
            f"{dev.name}: {_failure_summary(rows)}",
            rows,
        )
    best["status"] = "best"
    res = TuneResult(
        kernel=kernel,
        shape=(M, N, K),
        dtype=dtype,
        gpu=dev.name,
        cc=dev.cc,
        config={k: v for k, v in best["config"].items() if k not in ops.fixed},
        ms=best["ms"],
        tflops=best["tflops"],
        rel_err=best["rel_err"],
        table=rows,
        counts=cand.counts,
    )
    res.counts["timed"] = sum(1 for r in rows if r.get("ms") is not None)
    res.split_k, res.b_transposed = best.get("split_k", 1), b_transposed
    extra = {"split_k": res.split_k} if res.split_k > 1 else {}  # (read by auto: cumm/plan/auto.py)
    if b_transposed:  # (how it was timed: the table's key is the shape's either way)
        extra["b_transposed"] = True
    # the entry keeps a seed as written: matmul's rules make it the configuration timed here (candidates.candidates)
    kept = cand.given.get(config_key(spec, best["config"]), best["config"])
    kept = {k: v for k, v in kept.items() if k not in ops.fixed}
    res.entry = make_entry(
        dev.name, dev.cc, kernel, dtype, (M, N, K), kept, res.ms, res.tflops, timed=res.counts["timed"], **extra
    )
    if save:
        res.saved_to = str(save_entries([res.entry]))
    res.elapsed_s = time.perf_counter() - t0
    return res


# slices of K the split race tries; the deep ones for products of a tile or two (64 x 64 x 4096: one 64 x 64 tile
# walks 4096 deep on one multiprocessor unless K is cut into tens of slices)
SPLITS = (2, 3, 4, 6, 8, 16, 32, 64)


def split_candidates(spec, rows: list[dict], M: int, N: int, K: int, sms: int) -> list[tuple[dict, int]]:
    """(configuration, slices) the split race times for ``spec`` (a rung that splits K, else none): the three fastest
    of the timed ``rows`` and its "small" configuration, where their tiles fill fewer than ``sms`` blocks, each with
    the slices of SPLITS that give at most 4 ``sms`` blocks and every slice at least two of its K steps (BK). H200,
    FP32, tf32x3's 64 x 128 tiles with 4 slices against the best whole-K rung: 64 x 4096 x 14336 161 against 297 us
    (cuBLAS 168), 16 x 4096 x 14336 151 against 170 (124)."""
    if not spec.split_k:
        return []
    out: list[tuple[dict, int]] = []
    # (whole-K rows that were timed and not found wrong)
    timed = sorted((r for r in rows if r.get("status") == "timed" and "split_k" not in r), key=lambda r: r["ms"])
    configs = [dict(r["config"]) for r in timed[:3]]
    small = spec.configs.get("small")
    if small is not None and configs:
        configs.append(spec.resolve({**configs[0], **small}))
    for cfg in configs:
        tiles = math.prod(spec.grid(cfg, M, N, K))
        if tiles >= sms or any(cfg == c for c, _ in out):
            continue
        out += [(cfg, s) for s in SPLITS if s * tiles <= 4 * sms and K >= 2 * s * cfg["BK"]]
    return out


def _failure_summary(rows: list[dict]) -> str:
    reasons: dict[str, int] = {}
    for r in rows:
        if r["status"] in ("rejected", "failed", "skipped", "pruned"):
            key = (r["reason"] or r["status"])[:80]
            reasons[key] = reasons.get(key, 0) + 1
    return "; ".join(f"{n} x {k}" for k, n in sorted(reasons.items(), key=lambda t: -t[1])) or "no candidates"
