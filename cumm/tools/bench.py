"""Honest GPU timing of the ladder against cuBLAS (``python -m cumm bench``).

What makes the numbers honest:

* CUDA events time the device, warm-up is excluded, the median of the runs is reported;
* operands rotate over enough input sets that their total size exceeds twice the L2 cache, so no timed call
  finds its operands L2-resident; inputs are fresh random normals, never zeros;
* every kernel is verified against a float64 product before it is timed (output pre-filled with NaN, so a
  kernel that skips elements cannot pass); a wrong kernel gets FAIL and no time;
* the cuBLAS baseline (``cupy.matmul``, true FP32) is measured in the same run, shape by shape, and the
  benchmark refuses to run where an environment variable would switch it to TF32.

``beta`` != 0 times the in-place accumulate ``C = A @ B + beta * C`` (alpha 1) instead: cumm kernels through
``cumm.matmul(..., out=C, beta=beta)``, the baseline through ``cupy.cublas.gemm`` (float32) or
``torch.Tensor.addmm_`` (half dtypes) with the same beta, and verification starts C from random values instead
of NaN (see :func:`verify`).

This module holds the timing rounds and the entry points (:func:`run`, :func:`bench`). The GPU-free pieces take
plain data so that they can be tested on a CPU: the rows and shapes are :mod:`.bench_rows`, the tables, JSON,
markdown and plots :mod:`.bench_report`; the operand sets, the calls and their verification are :mod:`.bench_calls`;
the device's description, the TF32 checks and :func:`host_overhead` are :mod:`.bench_env`. This module re-exports
them: ``cumm.tools.bench`` is the benchmark's one import.
"""

from __future__ import annotations

import itertools
import statistics
import sys
from collections.abc import Iterable, Mapping, Sequence

from ..core.dtypes import TOLERANCE as TOLERANCES
from ..runtime.timing import (  # noqa: F401 - re-exported: the benchmark's timing is runtime.timing's
    BUDGET_S,
    DEFAULT_REPEAT,
    DEFAULT_WARMUP,
    MIN_RUNS,
    SETTLE_S,
    gpu_unavailable,
    hold,
    host_us,
    n_input_sets,
    planned_runs,
    sample_ms,
    time_ms,
)
from .bench_calls import (  # noqa: F401 - re-exported
    L2_FALLBACK_BYTES,
    UNFUSED,
    BenchError,
    beside_fp8,
    c0_scale,
    fp8_args,
    fp8_out_call,
    fp8_sets,
    glu_call,
    glu_input_sets,
    glu_product_reference,
    input_sets,
    kernel_call,
    np_dtype,
    product_reference,
    verify,
    verify_fp8,
)
from .bench_env import (  # noqa: F401 - re-exported
    HOST_OVERHEAD_SHAPE,
    TF32_VARS,
    check_cupy_compute_type,
    check_tf32,
    device_info,
    host_overhead,
)
from .bench_report import (  # noqa: F401 - re-exported
    COLUMNS,
    aligned_table,
    baseline_label,
    build_report,
    format_markdown,
    format_overhead,
    format_table,
    plot,
    require_matplotlib,
    write_json,
)
from .bench_rows import (  # noqa: F401 - re-exported
    CUBLAS,
    Row,
    Shape,
    check_beta,
    make_row,
    parse_shape,
    product_label,
    shape_str,
    tflops,
)

DEFAULT_SIZES = (1024, 2048, 4096)


reference = product_reference  # (bench's and run's `reference` argument is the epilogue's float64 reference)

ROUNDS = 3  # each (kernel, shape) is timed in this many rounds, interleaved with the others of its shape


def _prepare(
    kernel: str,
    sets: list[tuple],
    ref,
    ref_norm: float,
    shape: Shape,
    dtype: str,
    beta: float = 0.0,
    fused=None,
    glu: str | None = None,
    fp8=None,
):
    """(call, relative error, tolerance) once verified, or (None, the FAIL row, tolerance): a wrong kernel is never
    timed. ``fused``: (matmul's epilogue arguments, the float64 transform) for the cumm kernels. ``glu``: the sets are
    glu_input_sets, ``ref`` the pair's result, the baseline :data:`UNFUSED`. ``fp8``: (out_dtype, scale_result): the
    sets are fp8_sets, the cumm kernels write their C8 (the baseline its 16-bit C)."""
    base = UNFUSED if glu is not None else CUBLAS
    if fused is not None and kernel != base and fused[1] is not None:
        from .epiref import apply

        ref = apply(fused[1], ref)
        ref_norm = float((ref * ref).sum() ** 0.5)
    epi = None if fused is None or kernel == base else fused[0]
    tol = TOLERANCES[dtype]
    try:
        if fp8 is not None and kernel != CUBLAS:
            call = fp8_out_call(kernel, *fp8, epi)
            err, tol = verify_fp8(call, sets[0], ref, *fp8)  # (verifying also compiles, out of the warm-up)
        else:
            if glu is not None:
                call = glu_call(kernel, glu, epi)
            else:
                call = kernel_call(kernel, dtype, beta, epi)
                if fp8 is not None:  # the baseline in an FP8 C race: its 16-bit C, C8 left alone
                    call = beside_fp8(call)
            err = verify(call, sets[0], ref, ref_norm, beta=beta)
    except Exception as e:  # a configuration the device rejects, a compile error: report it, keep going
        first = str(e).splitlines()[0] if str(e) else ""
        row = make_row(kernel, shape, ms=None, rel_err=None, error=f"{type(e).__name__}: {first}", tolerance=tol)
        return None, row, tol
    if not err < tol:  # also true for NaN
        return None, make_row(kernel, shape, ms=None, rel_err=err, tolerance=tol), tol
    return call, err, tol


def _measure_shape(
    names: Sequence[str],
    sets: list[tuple],
    ref,
    ref_norm: float,
    shape: Shape,
    timing: Mapping,
    dtype: str,
    warm_s: float = 0.0,
    beta: float = 0.0,
    fused=None,
    glu: str | None = None,
    fp8=None,
) -> list[Row]:
    """Rows for ``names`` (cuBLAS first) on one shape. The verified calls are timed in ROUNDS interleaved rounds,
    the order rotating every round and reversed every other round (so neither a call's place nor the call before
    it is always the same), each call loaded alone for SETTLE_S before its samples; each row takes the median
    of all its samples: the card's clocks drift under seconds of sustained load and follow the power of what ran
    just before."""
    prepared = {n: _prepare(n, sets, ref, ref_norm, shape, dtype, beta, fused, glu, fp8) for n in names}
    live = [n for n in names if prepared[n][0] is not None]
    samples: dict[str, list[float]] = {n: [] for n in live}
    if warm_s > 0 and live:  # an idle card starts at lower clocks: load it before the first samples
        warm = prepared[live[0]][0]
        hold(lambda _i: warm(*sets[0]), warm_s)
    per_round = dict(
        warmup=timing.get("warmup", DEFAULT_WARMUP),
        repeat=max(1, -(-timing.get("repeat", DEFAULT_REPEAT) // ROUNDS)),
        budget_s=timing.get("budget_s", BUDGET_S) / ROUNDS,
        min_runs=max(1, -(-MIN_RUNS // ROUNDS)),
    )
    for r in range(ROUNDS):
        k = r % len(live) if live else 0
        order = live[k:] + live[:k]
        for n in order[::-1] if r % 2 else order:
            nxt = itertools.cycle(sets).__next__

            def fn(call=prepared[n][0], nxt=nxt):
                call(*nxt())

            hold(lambda _i: fn(), timing.get("settle_s", SETTLE_S))
            samples[n] += sample_ms(fn, **(per_round if r == 0 else dict(per_round, warmup=1)))
    rows = []
    for n in names:
        call, got, tol = prepared[n]
        if call is None:
            rows.append(got)
            continue
        row = make_row(
            n,
            shape,
            ms=statistics.median(samples[n]),
            rel_err=got,
            runs=len(samples[n]),
            tolerance=tol,
            columns=None if glu is None else 2 * shape[1],  # glu=: the work of the 2N-column product
        )
        # which kernel and configuration the call ran (auto's choice, tiles; a fused call's when it was kept)
        if n != CUBLAS and glu is None and fp8 is None:
            from ..api.decision import decision

            row["ran"] = decision(*sets[0], kernel=n, beta=beta, **(fused[0] if fused is not None else {}))
        rows.append(row)
    return rows


class _NoBar:
    def update(self, n: int = 1) -> None: ...
    def set_postfix_str(self, s: str) -> None: ...
    def close(self) -> None: ...


def _progress(total: int, enabled: bool):
    if not enabled:
        return _NoBar()
    try:
        from tqdm import tqdm
    except ImportError:  # tqdm is optional
        return _NoBar()
    # stderr keeps stdout for the table; disable=None turns the bar off when stderr is not a terminal.
    return tqdm(total=total, file=sys.stderr, unit="run", leave=False, disable=None)


def square(sizes: Iterable[int]) -> list[Shape]:
    return [(s, s, s) for s in sizes]


def run(
    kernels: Sequence[str] | None = None,
    shapes: Iterable[Shape] | None = None,
    *,
    warmup: int = DEFAULT_WARMUP,
    repeat: int = DEFAULT_REPEAT,
    budget_s: float = BUDGET_S,
    progress: bool | None = None,
    dtype: str = "float32",
    settle_s: float = SETTLE_S,
    beta: float = 0.0,
    epilogue: str | None = None,
    activation: str | None = None,
    reference=None,
    glu: str | None = None,
    out_dtype: str | None = None,
    scale_result: float | None = None,
) -> list[Row]:
    """Benchmark ``kernels`` (default: the whole ladder; "auto" allowed) and cuBLAS on ``shapes``
    (default: squares of DEFAULT_SIZES). Rows come shape by shape, cuBLAS first. ``settle_s``: how long each
    call runs alone before its samples in a round (0: not at all).

    ``beta`` != 0: every call computes C = A @ B + beta * C in place (alpha 1), cuBLAS through
    ``cupy.cublas.gemm`` (float32) or ``torch.Tensor.addmm_`` (half dtypes) with the same beta. C then
    accumulates across the timed calls (C_n = A @ B + beta * C_(n-1)); a kernel's work depends only on whether
    beta is 0, not on its value, so the times hold for any nonzero beta. With |beta| >= 1 the values grow and
    float16 may reach inf while timed, which costs the same work. TFLOP/s count 2 M N K as for beta = 0.

    ``epilogue`` / ``activation``: the cumm kernels run with this fused epilogue (cuBLAS: the plain product, so the
    ratio is the epilogue's cost plus the kernel's), verified against ``reference`` (cumm/tools/epiref.py).

    ``glu`` (an activation's name): the gated MLP act(x @ w1) * (x @ w3), each shape's N being C's (the output's)
    columns, so B = cumm.glu_weight(w1, w3) has 2N: the cumm kernels run ``glu=`` (default: the rungs that can, and
    auto), beside the baseline :data:`UNFUSED` (torch's two products and elementwise, what a user writes unfused) in
    the same rounds; ratios are against it, TFLOP/s count the 2N-column product. ``epilogue`` / ``activation`` then
    apply after the pair in the cumm kernels only. Its errors (dtype, rung, N) come before the GPU is touched.

    ``out_dtype`` ("float8_e4m3fn", "float8_e5m2"; bfloat16 / float16 inputs, needs torch): the cumm kernels write
    an FP8 C, fp8(``scale_result`` * v) after the epilogue, checked as ``cumm check --out-dtype`` checks it; cuBLAS
    runs the plain product in the inputs' dtype beside."""
    from . import epiref as _epiref

    _epiref.check_args(epilogue, activation, reference)
    if not (isinstance(settle_s, (int, float)) and 0 <= settle_s <= 60):
        raise ValueError(f"settle_s must be a number of seconds from 0 to 60, got {settle_s!r}")
    beta = check_beta(beta)  # before the GPU is touched: a bad value fails at once, anywhere
    fp8 = fp8_args(out_dtype, scale_result, dtype, beta, glu)
    shapes = None if shapes is None else list(shapes)
    if glu is not None:
        from .epiref import check_glu

        check_glu(glu, [dtype], kernels, shapes)
        if beta != 0.0:
            raise ValueError(f"beta={beta} with glu=: the unfused baseline has no beta; race glu= with beta 0")
    import cupy

    from ..ladder import kernels as _kernels

    check_tf32()
    reason = gpu_unavailable()
    if reason:
        raise BenchError(f"{reason}; the benchmark needs an NVIDIA GPU")
    check_cupy_compute_type()
    if dtype not in TOLERANCES:
        raise ValueError(f"dtype must be one of {', '.join(TOLERANCES)}, got {dtype!r}")
    valid = [*_kernels(dtype=dtype), "auto"]
    if kernels is None and glu is not None:
        from ..plan.routes import glu_rungs

        kernels = [n for n in glu_rungs() if n in valid] + ["auto"]
    kernels = list(_kernels(dtype=dtype)) if kernels is None else list(kernels)
    for k in kernels:
        if k not in valid:
            raise ValueError(f"unknown kernel {k!r} for {dtype}; choose from {', '.join(valid)}")
    shapes = square(DEFAULT_SIZES) if shapes is None else list(shapes)
    timing = dict(warmup=warmup, repeat=repeat, budget_s=budget_s, settle_s=settle_s)

    fn = _epiref.transform(activation, reference)
    epi = {k: v for k, v in (("epilogue", epilogue), ("activation", activation)) if v is not None}
    fused = (epi, fn) if fn is not None or glu is not None else None
    base_name = CUBLAS if glu is None else UNFUSED
    rng = cupy.random.default_rng()
    total = len(shapes) * (len(kernels) + 1)
    bar = _progress(total, total > 3 if progress is None else progress)
    results: list[Row] = []
    try:
        for shape in shapes:
            if glu is None:
                sets = input_sets(rng, *shape, dtype=dtype, beta=beta)
                ref, ref_norm = product_reference(*sets[0][:2])
                sets = sets if fp8 is None else fp8_sets(sets)
            else:
                sets = glu_input_sets(rng, *shape, dtype=dtype)
                ref, ref_norm = glu_product_reference(glu, sets[0])
            bar.set_postfix_str(f"{shape_str(shape)}")
            first = not results
            rows = _measure_shape(
                [base_name, *kernels],
                sets,
                ref,
                ref_norm,
                shape,
                timing,
                dtype,
                0.5 * first,
                beta=beta,
                fused=fused,
                glu=glu,
                fp8=fp8,
            )
            base = rows[0]
            if base["status"] != "ok" and glu is not None:
                raise BenchError(f"the unfused baseline failed at {shape_str(shape)}: {base.get('error')}")
            if base["status"] != "ok":
                raise BenchError(
                    f"the cuBLAS baseline failed verification at {shape_str(shape)} ({base.get('error')}); "
                    "FP32 cuBLAS should be near 1e-6: is TF32 or another reduced precision mode enabled?"
                )
            for row in rows:  # ratios against the baseline timed in the same rounds
                row["cublas_tflops"] = base["tflops"]
                row["ratio"] = row["tflops"] / base["tflops"] if row.get("tflops") else None
            results += rows
            bar.update(len(rows))
            del sets, ref
            cupy.get_default_memory_pool().free_all_blocks()  # the next shape's sets need the room
    finally:
        bar.close()
    return results


_draw = plot  # (bench's plot= argument shadows the function)


def bench(
    kernels: Sequence[str] | None = None,
    sizes: Iterable[int] | None = None,
    shapes: Iterable[Sequence[int]] | None = None,
    dtype: str = "float32",
    plot: str | None = None,
    *,
    repeat: int = DEFAULT_REPEAT,
    progress: bool | None = None,
    settle_s: float = SETTLE_S,
    beta: float = 0.0,
    epilogue: str | None = None,
    activation: str | None = None,
    reference=None,
    glu: str | None = None,
    out_dtype: str | None = None,
    scale_result: float | None = None,
) -> list[Row]:
    """Time ``kernels`` (names: rungs, registered kernels, "auto"; default all GEMM kernels) beside cuBLAS, as
    ``python -m cumm bench`` does: each result checked against float64 first (a wrong one is a FAIL row with no
    time), operands rotated past the L2, the median of CUDA-event timed runs.

    ``sizes``: squares M = N = K; ``shapes``: (M, N, K) products; neither: 1024, 2048, 4096. Returns one dict per
    kernel and shape (cuBLAS first for each shape): kernel, M, N, K, ms, tflops, cublas_tflops, ratio, rel_err,
    runs, status ("ok" or "FAIL"), error, ran. ``plot``: also draw TFLOP/s against size into this file
    (needs matplotlib). ``settle_s``: seconds each call runs alone before its samples in a round.

    ``beta``: 0 (default) times C = A @ B; any other finite value times the in-place accumulate
    C = A @ B + beta * C, cuBLAS with the same beta beside (``cupy.cublas.gemm`` for float32,
    ``torch.Tensor.addmm_`` for float16 and bfloat16). C accumulates across the timed calls; the work does not
    depend on beta's value (see :func:`run`). ValueError for a beta that is not finite, before any GPU work.

    ``epilogue`` (a CUDA snippet over v, row, col) / ``activation``: race a fused epilogue: the cumm kernels run
    with it, checked against ``reference`` (a callable (v, row, col) or an expression, cumm/tools/epiref.py; a named
    activation needs none), cuBLAS runs the plain product beside.

    ``glu`` ("silu", "gelu", "gelu_tanh", "relu"): race the gated MLP act(x @ w1) * (x @ w3) fused,
    ``cumm.matmul(x, cumm.glu_weight(w1, w3), glu=glu)``, beside torch's unfused two products and elementwise (the
    "unfused" row, the ratios' baseline); N is the output's columns (B has 2N). See :func:`run`.

    ``out_dtype`` ("float8_e4m3fn" or "float8_e5m2", bfloat16 / float16 inputs, torch installed) and ``scale_result``
    (a positive float, default 1): race an FP8 C, fp8(scale_result * v) after the epilogue (see :func:`run`).
    """
    beta = check_beta(beta)
    if isinstance(kernels, str):
        kernels = [k.strip() for k in kernels.split(",") if k.strip()]
    todo: list[Shape] = [] if sizes is None else square(sizes)
    for s in shapes or []:
        t = tuple(s)
        if len(t) != 3 or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in t):
            raise ValueError(f"a shape is three positive ints (M, N, K), got {s!r}")
        todo.append(t)  # type: ignore[arg-type]
    if plot:
        require_matplotlib()  # before the GPU time is spent
    rows = run(
        kernels,
        list(dict.fromkeys(todo)) or None,
        repeat=repeat,
        progress=progress,
        dtype=dtype,
        settle_s=settle_s,
        beta=beta,
        epilogue=epilogue,
        activation=activation,
        reference=reference,
        glu=glu,
        out_dtype=out_dtype,
        scale_result=scale_result,
    )
    if plot:
        _draw(rows, plot, baseline=baseline_label(dtype, beta))
    return rows
