"""The tuner's command (``python -m cumm tune``): races over shapes and rungs, each rung's best saved.

:func:`tune_shapes` tunes several shapes (``--standard``: ``STANDARD_SHAPES``), racing the top rungs of the dtype
(:func:`top_rungs`; a branch rung only where it can win, :func:`raced_at`) when no kernel is named: each rung's
best, raced again side by side (:mod:`.tune_race`), is saved with those times, the winner marked with what it
raced; :func:`print_plan` (``--plan``) lists what an H200 would time, without a GPU. One kernel's search at one
shape is :mod:`.tune_search` (:func:`tune`, re-exported here, as are its results and errors).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Collection, Iterable, Sequence

from ..core.dtypes import DTYPES, FP8_DTYPE
from ..core.dtypes import TOLERANCE as TOLERANCES  # noqa: F401 - re-exported: what tune() checks against
from ..core.spec import cdiv
from ..ladder import REGISTRY, get_spec
from ..plan.store import save_entries, user_table_path
from ..runtime.timing import gpu_unavailable
from .candidates import candidates
from .space import H200
from .tune_operands import operands_for, run_as
from .tune_race import race
from .tune_search import (
    TuneError,  # noqa: F401 - re-exported
    TuneResult,
    _budget,
    _compact,
    prior_configs,
    takes,
    tune,
)

STANDARD_SHAPES: list[tuple[int, int, int]] = [
    (512, 512, 512),
    (1024, 1024, 1024),
    (2048, 2048, 2048),
    (4096, 4096, 4096),
    (8192, 8192, 8192),
    (8192, 8192, 256),
    (256, 8192, 8192),
    (8192, 256, 8192),  # one short dimension
    (4096, 4096, 1024),
    (128, 4096, 4096),
    (4096, 128, 4096),
    (16384, 16384, 64),  # skinny
]


def top_rungs(cc: int | None = None, dtype: str = "float32") -> list[str]:
    """The rungs raced for ``dtype`` (those whose spec says ``raced``; a branch rung, ``KernelSpec.branch``, only
    where it applies: raced_at) that run on compute capability ``cc`` (default: the current device's). For
    ``FP8_DTYPE`` the FP8 rungs, each tuned on its own (each is scaled_matmul's rung for its scales: no race)."""
    if cc is None:
        import cupy

        cc = int(cupy.cuda.Device().compute_capability)
    return [k for k, s in REGISTRY.items() if (s.raced or dtype == FP8_DTYPE) and s.min_cc <= cc and takes(s, dtype)]


def _multiprocessors() -> int:
    import cupy

    return int(cupy.cuda.Device().attributes["MultiProcessorCount"])


def raced_at(kernels: Sequence[str], shape: Sequence[int], sms: int) -> list[str]:
    """The rungs of ``kernels`` raced at ``shape`` on a GPU of ``sms`` multiprocessors: a branch rung (for products
    with few tiles) only where the top rung's default tiles (the last of ``kernels`` that is a top rung, else the
    last that is neither a branch nor limited by ``race_max_m``) are fewer than the multiprocessors, a rung with
    ``race_max_m`` only at products of at most that many rows; elsewhere it would take a share of the budget it
    cannot win."""
    fits = [k for k in kernels if not REGISTRY[k].race_max_m or shape[0] <= REGISTRY[k].race_max_m]
    main = [k for k in kernels if not REGISTRY[k].branch and not REGISTRY[k].race_max_m]
    if not main:
        return fits
    tops = [k for k in main if REGISTRY[k].top]
    d = REGISTRY[(tops or main)[-1]].defaults
    few = "BM" in d and "BN" in d and cdiv(shape[0], d["BM"]) * cdiv(shape[1], d["BN"]) < sms
    return [k for k in fits if few or not REGISTRY[k].branch]


def _dedupe(shapes: Iterable[Sequence[int]]) -> list[tuple[int, int, int]]:
    out: list[tuple[int, int, int]] = []
    for s in shapes:
        t = tuple(int(v) for v in s)
        if len(t) != 3:
            raise ValueError(f"a shape is M, N, K; got {s!r}")
        if t not in out:
            out.append(t)
    return out


def tune_shapes(
    kernel: str | None,
    shapes: list[tuple[int, int, int]],
    standard: bool,
    max_configs: int | None,
    dtype: str = "float32",
    rungs: Sequence[str] | None = None,
    transposed_b: Collection[tuple[int, int, int]] = (),
) -> int:
    """``cumm tune``: tune each shape (plus ``STANDARD_SHAPES`` with ``standard``) for ``dtype``, print, save.

    ``kernel=None`` tunes the top rungs (``top_rungs(dtype=dtype)``) and saves every rung's best configuration
    for the shape; the fastest also gets ``"raced"`` (each rung's template hash), which ``kernel="auto"`` needs to
    trust a lower rung's win. The others' entries are what each rung runs when named: without them a named rung
    borrowed its own entry from a farther shape (H200, bf16 4096^3: ``wgmma`` took BN = 128 from its win at
    512 x 4096 x 4096 and ran 0.69x cuBLAS, 0.86-0.88x on its defaults). The per-shape budget
    (``CUMM_TUNE_BUDGET_S``, default 150 s) is split between the kernels. Results go to the user's ``tuned.json``
    and, when the environment names one in ``CUMM_TUNE_OUT`` (e.g. ``cumm/tuned/h200.json``), to that file too.
    ``rungs``: race these instead of every top rung (``--rungs``; each must take ``dtype``). ``transposed_b``: the
    shapes timed with B a transposed view (``--suite``'s q @ k^T, :meth:`.suite.Suite.transposed_b`).
    Returns 0 when every shape got a result, 1 otherwise, 2 on bad arguments.
    """
    try:
        todo = _check(kernel, shapes, standard, dtype, rungs)
    except ValueError as e:
        print(f"cumm tune: {e}", file=sys.stderr)
        return 2
    if not todo:
        print("cumm tune: give shapes (M N K) or --standard", file=sys.stderr)
        return 2
    reason = gpu_unavailable()
    if reason:
        print(
            f"cumm tune: {reason}; tuning times kernels on an NVIDIA GPU (nothing was saved). "
            "'cumm tune --plan' lists the candidates without one",
            file=sys.stderr,
        )
        return 1
    # after the argument checks: this one needs the GPU
    kernels = [kernel] if kernel else list(rungs) if rungs else top_rungs(dtype=dtype)
    out_path = os.environ.get("CUMM_TUNE_OUT") or None
    results: list[tuple[tuple[int, int, int], TuneResult | None, list[TuneResult]]] = []
    failed = 0
    t_all = time.perf_counter()
    sms = _multiprocessors() if any(REGISTRY[k].branch for k in kernels) else 0
    for shape in todo:
        got: list[TuneResult] = []
        raced = [kernel] if kernel else raced_at(kernels, shape, sms)
        per_kernel = _budget(None) / len(raced)
        for k in raced:
            try:
                got.append(
                    tune(
                        k,
                        *shape,
                        dtype=dtype,
                        max_configs=max_configs,
                        save=False,
                        budget_s=per_kernel,
                        progress=sys.stderr.isatty(),
                        b_transposed=tuple(shape) in transposed_b,
                    )
                )
            except Exception as e:
                print(f"  {k} {'x'.join(map(str, shape))}: {type(e).__name__}: {str(e)[:300]}", file=sys.stderr)
        if len(got) > 1 and dtype != FP8_DTYPE:  # the rungs' bests side by side (tune_race): that decides
            try:
                for r, ms in zip(got, race(got), strict=True):
                    r.ms, r.tflops = ms, 2.0 * shape[0] * shape[1] * shape[2] / (ms * 1e9)
                    r.entry.update(ms=r.ms, tflops=r.tflops)
            except Exception as e:  # the searches' own times stand
                print(f"  race {'x'.join(map(str, shape))}: {type(e).__name__}: {str(e)[:300]}", file=sys.stderr)
        win = max(got, key=lambda r: r.tflops) if got else None
        if win is None:
            failed += 1
        else:
            # the rungs this shape raced, with the templates they raced as: auto trusts a lower rung's win only
            # against the top rung as it is now. Only the winner carries it; every rung's best is kept (auto takes
            # the shape's fastest entry, a named rung its own). The FP8 rungs do not race: each has its scales.
            if dtype != FP8_DTYPE:
                win.entry["raced"] = {r.kernel: r.entry["template_hash"] for r in got}
            entries = [r.entry for r in got]
            win.saved_to = str(save_entries(entries))
            if out_path:
                save_entries(entries, out_path)
            print(f"  {win.summary()}", flush=True)
        results.append((shape, win, got))
    _print_table(results, kernels)
    where = (
        (f"saved to {user_table_path()}" + (f" and {out_path}" if out_path else ""))
        if failed < len(todo)
        else "nothing saved"
    )
    print(f"tuned {len(todo) - failed}/{len(todo)} shapes in {time.perf_counter() - t_all:.0f} s; {where}")
    return 0 if failed == 0 else 1


def _print_table(results, kernels: Sequence[str]) -> None:
    head = (
        f"{'M x N x K':>20}  {'kernel':<14} {'ms':>10} {'TFLOP/s':>8}  "
        + "  ".join(f"{k[:13]:>13}" for k in kernels)
        + "  config"
    )
    print(head)
    print("-" * len(head))
    for shape, win, got in results:
        per = {r.kernel: r.tflops for r in got}
        cols = "  ".join(f"{per[k]:>13.2f}" if k in per else f"{'-':>13}" for k in kernels)
        sh = "x".join(map(str, shape))
        if win is None:
            print(f"{sh:>20}  {'FAILED':<14} {'-':>10} {'-':>8}  {cols}")
        else:
            cfg = _compact(win.config) + (f" split_k={win.split_k}" if win.split_k > 1 else "")
            print(f"{sh:>20}  {win.kernel:<14} {win.ms:>10.4f} {win.tflops:>8.2f}  {cols}  {cfg}")


def _check(
    kernel: str | None, shapes: Iterable[Sequence[int]], standard: bool, dtype: str, rungs: Sequence[str] | None
) -> list[tuple[int, int, int]]:
    """The shapes to tune; ValueError for a dtype, kernel or rung that does not fit."""
    todo = _dedupe(list(shapes or []) + (STANDARD_SHAPES if standard else []))
    if dtype not in DTYPES and dtype != FP8_DTYPE:
        raise ValueError(f"dtype {dtype!r} is not supported; supported dtypes: {', '.join(DTYPES)}, {FP8_DTYPE}")
    for r in [kernel] if kernel else rungs or ():
        if not takes(get_spec(r), dtype):
            raise ValueError(f"rung {r!r} multiplies {' and '.join(get_spec(r).dtypes)}, not {dtype}")
    return todo


def print_plan(
    kernel: str | None,
    shapes: Iterable[Sequence[int]],
    standard: bool,
    max_configs: int | None,
    compile: bool = True,
    dtype: str = "float32",
    rungs: Sequence[str] | None = None,
    transposed_b: Collection[tuple[int, int, int]] = (),
) -> int:
    """``python -m cumm tune --plan``: no GPU; the candidates an H200 would time, per kernel and shape (with B
    transposed for the shapes in ``transposed_b``, as tune_shapes times them)."""
    try:
        todo = _check(kernel, shapes, standard, dtype, rungs)
    except ValueError as e:
        print(f"cumm tune: {e}", file=sys.stderr)
        return 2
    kernels = [kernel] if kernel else list(rungs) if rungs else top_rungs(90, dtype)
    Operands = operands_for(dtype)
    for shape in todo:
        tb = tuple(shape) in transposed_b
        raced = [kernel] if kernel else raced_at(kernels, shape, H200.sms)
        for k in raced:
            t = time.perf_counter()
            flags, pitches = run_as(get_spec(k), dtype, Operands.flags(dtype, *shape), *shape[1:], tb)  # (as tune())
            c = candidates(
                k,
                *shape,
                flags=flags,
                max_configs=max_configs,
                compile=compile,
                progress=sys.stderr.isatty(),
                budget_s=_budget(None) / len(raced),
                tflops=Operands.tflops,
                pitches=pitches,
                prior=prior_configs(H200, k, dtype, tuple(shape)),
            )
            cs = sum(r.get("compile_s") or 0 for r in c.rows)
            print(
                f"{k} {'x'.join(map(str, shape))}{' (B^T)' if tb else ''}: {len(c.configs)} candidates, {c.counts} "
                f"({time.perf_counter() - t:.1f} s wall, {cs:.0f} s of compiles)"
            )
            for cfg in c.configs[:5]:
                print(f"    {_compact(cfg)}")
    return 0
