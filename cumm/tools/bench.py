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

GPU-free pieces (parsing, rows, tables, JSON, plots) take plain data so that they can be tested on a CPU.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import statistics
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence

from ..core.dtypes import TOLERANCE as TOLERANCES
from ..plan.operands import real_scalar
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

Shape = tuple[int, int, int]
Row = dict[str, object]

CUBLAS = "cublas"  # the baseline's name in results
DEFAULT_SIZES = (1024, 2048, 4096)
L2_FALLBACK_BYTES = 60 * 2**20  # H200; used only if the device does not report its L2 size
TF32_VARS = ("CUPY_TF32", "NVIDIA_TF32_OVERRIDE")
HOST_OVERHEAD_SHAPE = (64, 64, 64)


class BenchError(RuntimeError):
    """The benchmark cannot produce honest numbers here (no GPU, TF32 forced, broken baseline)."""


# ---------------------------------------------------------------------------------------------------
# Pure helpers (no GPU)
# ---------------------------------------------------------------------------------------------------


def parse_shape(text: str) -> Shape:
    """``"4096x1024x512"`` -> ``(4096, 1024, 512)`` (M x N x K); ValueError saying what is wrong."""
    parts = text.strip().lower().split("x")
    if len(parts) != 3:
        raise ValueError(f"malformed shape {text!r}: expected MxNxK with three positive integers, e.g. 4096x4096x4096")
    try:
        dims = tuple(int(p) for p in parts)
    except ValueError:
        raise ValueError(f"malformed shape {text!r}: M, N and K must be integers, e.g. 4096x1024x512") from None
    if min(dims) <= 0:
        raise ValueError(f"malformed shape {text!r}: M, N and K must be positive")
    return dims  # type: ignore[return-value]


def shape_str(shape: Sequence[int]) -> str:
    return "x".join(str(d) for d in shape)


def check_tf32(environ: Mapping[str, str] | None = None) -> None:
    """Raise BenchError if the environment would let cuBLAS compute the FP32 baseline in TF32."""
    env = os.environ if environ is None else environ
    for var in TF32_VARS:
        val = env.get(var, "").strip()
        try:
            off = val == "" or int(val) == 0
        except ValueError:
            off = False  # a value we cannot read might mean "on": refuse rather than publish a TF32 baseline
        if not off:
            raise BenchError(
                f"{var}={val!r} is set: cuBLAS would compute the float32 baseline in TF32 (10-bit mantissa), "
                f"so the comparison would be unfair; unset {var} (or set it to 0) and run again"
            )


def check_beta(beta: object) -> float:
    """``beta`` as a float, or ValueError saying what is wrong: matmul's rule for alpha and beta (a finite real
    number that float32 can hold), every failure a ValueError (a bad option value)."""
    try:
        return real_scalar(beta, "beta")
    except TypeError as e:
        raise ValueError(str(e)) from None


def c0_scale(K: int, beta: float, dtype: str = "float32") -> float:
    """The standard deviation of the random C0 that :func:`verify` starts C from when beta != 0: beta * C0 as
    large as A @ B's elements (std sqrt(K) for normal inputs), so a call that ignores beta or C is off by about
    the whole result, never by less than the dtype's tolerance; for float16 the deviation is capped at 2^12, so C0
    stays far below float16's largest value (65504)."""
    scale = math.sqrt(max(K, 1)) / abs(beta)
    return min(scale, 2.0**12 if dtype == "float16" else 2.0**100)


def product_label(beta: float) -> str:
    """The product a run times, for titles: "C = A @ B", or e.g. "C = A @ B + 0.5 C", "C = A @ B - 1 C"."""
    if beta == 0.0:
        return "C = A @ B"
    return f"C = A @ B {'-' if beta < 0 else '+'} {abs(beta):g} C"


def tflops(M: int, N: int, K: int, ms: float) -> float:
    return 2.0 * M * N * K / (ms * 1e-3) / 1e12


def make_row(
    kernel: str,
    shape: Shape,
    *,
    ms: float | None,
    rel_err: float | None,
    runs: int = 0,
    cublas_tflops: float | None = None,
    error: str | None = None,
    tolerance: float = TOLERANCES["float32"],
) -> Row:
    """One result. A row is "ok" only if it was verified (rel_err < its tolerance) and timed; otherwise it is
    "FAIL" and carries no time, so a wrong kernel can never show a speed."""
    M, N, K = shape
    if rel_err is not None and not math.isfinite(rel_err):
        rel_err, error = None, error or "result contains NaN or Inf"
    ok = error is None and rel_err is not None and rel_err < tolerance and ms is not None
    if not ok and error is None and rel_err is not None:
        error = f"relative error {rel_err:.2e} >= {tolerance:.0e}"
    tf = tflops(M, N, K, ms) if ok else None
    row: Row = {
        "kernel": kernel,
        "M": M,
        "N": N,
        "K": K,
        "ms": ms if ok else None,
        "tflops": tf,
        "cublas_tflops": cublas_tflops,
        "ratio": tf / cublas_tflops if tf is not None and cublas_tflops else None,
        "rel_err": rel_err,
        "runs": runs if ok else 0,
        "status": "ok" if ok else "FAIL",
    }
    if error is not None:
        row["error"] = error
    return row


# ---------------------------------------------------------------------------------------------------
# Text, JSON, plot
# ---------------------------------------------------------------------------------------------------

COLUMNS = ("kernel", "shape", "ms", "TFLOP/s", "% of cuBLAS", "rel. error", "runs", "ran")
_LEFT = {"kernel", "shape", "ran"}


def _cells(row: Mapping) -> list[str]:
    err = "-" if row.get("rel_err") is None else f"{row['rel_err']:.1e}"
    shape = shape_str((row["M"], row["N"], row["K"]))
    ran = row.get("ran") or "-"
    if row["status"] != "ok":
        return [row["kernel"], shape, "FAIL", "-", "-", err, "-", ran]
    pct = "-" if row.get("ratio") is None else f"{100 * row['ratio']:.1f}%"
    return [row["kernel"], shape, f"{row['ms']:.3f}", f"{row['tflops']:.2f}", pct, err, str(row["runs"]), ran]


def aligned_table(columns: Sequence[str], rows: Sequence[Sequence[str]], left, *, markdown: bool = False) -> list[str]:
    """The lines of a table of ``rows`` under ``columns``, padded to align (the columns in ``left`` to the left, the
    others to the right), as plain text or markdown (``---:`` right-aligns a markdown column)."""
    cells = [list(columns), *rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]

    def line(cs: Sequence[str]) -> str:
        padded = [c.ljust(w) if h in left else c.rjust(w) for c, w, h in zip(cs, widths, columns, strict=True)]
        return "| " + " | ".join(padded) + " |" if markdown else "  ".join(padded).rstrip()

    if markdown:
        ends = ["-" if h in left else ":" for h in columns]
        rule = "|" + "|".join("-" * (w + 1) + e for w, e in zip(widths, ends, strict=True)) + "|"
    else:
        rule = "  ".join("-" * w for w in widths)
    return [line(cells[0]), rule, *(line(c) for c in cells[1:])]


def format_table(results: Sequence[Mapping], *, markdown: bool = False) -> str:
    """Aligned plain text (or a markdown table) of the results, in their order; FAIL reasons below."""
    out = aligned_table(COLUMNS, [_cells(r) for r in results], _LEFT, markdown=markdown)
    fails = [r for r in results if r["status"] != "ok" and r.get("error")]
    if fails:
        out.append("")
        out += [f"FAIL {r['kernel']} {shape_str((r['M'], r['N'], r['K']))}: {r['error']}" for r in fails]
    return "\n".join(out)


def format_overhead(o: Mapping) -> str:
    torch = (
        f", torch.matmul {o['torch_us']:.1f} us (cumm.matmul on torch tensors {o['cumm_torch_us']:.1f} us)"
        if o.get("torch_us") is not None
        else ""
    )
    return (
        f"host overhead per call ({shape_str(o['shape'])} float32, {o['calls']} calls, cache hit): "
        f"cumm.matmul {o['cumm_us']:.1f} us, cupy.matmul {o['cupy_us']:.1f} us ({o['ratio']:.2f}x){torch}"
    )


def build_report(
    results: Sequence[Mapping],
    *,
    device: Mapping[str, str],
    overhead: Mapping | None = None,
    command: str | None = None,
    dtype: str = "float32",
    settle_s: float | None = None,
    beta: float = 0.0,
) -> dict:
    """The JSON document: device, cc, cupy, cuda, dtype, beta, [settle_s], results, [host_overhead], command.
    ``beta`` is always recorded (0.0: the plain product C = A @ B)."""
    doc = {k: device[k] for k in ("device", "cc", "cupy", "cuda")}
    doc["dtype"] = dtype
    doc["beta"] = check_beta(beta)
    if settle_s is not None:
        doc["settle_s"] = settle_s
    doc["results"] = [dict(r) for r in results]
    if overhead is not None:
        doc["host_overhead"] = dict(overhead)
    doc["command"] = command
    return doc


def write_json(path: str, doc: Mapping) -> None:
    with open(path, "w") as f:
        json.dump(doc, f, indent=2, allow_nan=False)  # strict JSON: NaN never leaks (make_row stores None)
        f.write("\n")


def format_markdown(doc: Mapping) -> str:
    """A markdown report to commit next to the JSON."""
    dtype = doc.get("dtype", "float32")
    beta = doc.get("beta") or 0.0  # JSON written before beta was recorded: the plain product
    if beta == 0.0:
        baseline = (
            "baseline cuBLAS via `cupy.matmul`, FP32 (no TF32)"
            if dtype == "float32"
            else f"baseline cuBLAS via `torch.matmul` on the same {dtype} arrays (FP32 accumulation)"
        )
    else:
        baseline = (
            f"the product timed is `C = A @ B + beta C` in place with beta = {beta:g} (C accumulating across "
            "calls), baseline cuBLAS via "
            + (
                "`cupy.cublas.gemm` with the same beta, FP32 (no TF32)"
                if dtype == "float32"
                else f"`torch.Tensor.addmm_` with the same beta on the same {dtype} arrays (FP32 accumulation)"
            )
        )
    title = f"# cumm {dtype} GEMM benchmark" + (f", {product_label(beta)}" if beta != 0.0 else "")
    out = [
        f"{title}: {doc['device']}",
        "",
        f"compute capability {doc['cc']}, CUDA runtime {doc['cuda']}, CuPy {doc['cupy']}; {baseline}. Median of "
        "CUDA-event timed runs in three interleaved rounds (the order rotating"
        + (
            f" and reversed every other round, each call run alone for {doc['settle_s']:g} s before its samples in "
            "a round)"
            if doc.get("settle_s")
            else ")"
        )
        + ", warm-up excluded, operands rotated past the L2 cache, every result checked against float64 (of the "
        + ("rounded inputs, C from random values) before timing." if beta != 0.0 else "rounded inputs) before timing."),
        "",
    ]
    if doc.get("command"):
        out += [f"Command: `{doc['command']}`", ""]
    out.append(format_table(doc["results"], markdown=True))
    if doc.get("host_overhead"):
        out += ["", format_overhead(doc["host_overhead"])]
    return "\n".join(out) + "\n"


def require_matplotlib() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise ImportError("plotting needs matplotlib: pip install 'cumm[plot]'") from None


def _x(shape: Shape) -> float:
    M, N, K = shape
    return M if M == N == K else (M * N * K) ** (1 / 3)  # non-square: the cube with the same work


def baseline_label(dtype: str, beta: float = 0.0) -> str:
    """The legend's name for the cuBLAS line: what the baseline is at ``dtype`` (and ``beta``, when not 0)."""
    if beta == 0.0:
        return "cuBLAS (FP32)" if dtype == "float32" else f"cuBLAS ({dtype}, torch.matmul)"
    return f"cuBLAS (FP32, beta {beta:g})" if dtype == "float32" else f"cuBLAS ({dtype}, addmm_, beta {beta:g})"


def plot(results: Sequence[Mapping], path: str, *, title: str | None = None, baseline: str = "cuBLAS (FP32)") -> None:
    """TFLOP/s against size, one line per kernel, cuBLAS dashed (labelled ``baseline``), log2 x axis; saved to
    ``path``."""
    require_matplotlib()
    from matplotlib.figure import Figure  # the object API: no pyplot, no GUI backend needed

    # Lines join the power-of-two squares; every other shape (4095^3, skinny ones) is a hollow marker at the
    # cube root of M*N*K, so neighbouring off-grid sizes do not draw spikes through the line.
    def on_grid(shape: Shape) -> bool:
        return len(set(shape)) == 1 and shape[0] & (shape[0] - 1) == 0

    series: dict[str, list[tuple[float, float]]] = {}
    extra: dict[str, list[tuple[float, float]]] = {}
    ticks: set[int] = set()
    for r in results:
        shape = (r["M"], r["N"], r["K"])
        if on_grid(shape):
            ticks.add(shape[0])
        if r["status"] == "ok":
            (series if on_grid(shape) else extra).setdefault(r["kernel"], []).append((_x(shape), r["tflops"]))

    fig = Figure(figsize=(9, 5.5), layout="constrained")
    ax = fig.add_subplot()
    for kernel in [k for k in series if k != CUBLAS] + ([CUBLAS] if CUBLAS in series else []):
        pts = sorted(series[kernel])
        style = (
            dict(color="k", linestyle="--", marker="s", label=baseline)
            if kernel == CUBLAS
            else dict(marker="o", label=kernel)
        )
        (line,) = ax.plot([p[0] for p in pts], [p[1] for p in pts], **style)
        if extra.get(kernel):
            ax.plot(
                [p[0] for p in extra[kernel]],
                [p[1] for p in extra[kernel]],
                linestyle="none",
                marker=style["marker"],
                markerfacecolor="none",
                color=line.get_color(),
            )
    ax.set_xscale("log", base=2)
    xs = sorted(ticks)
    ax.set_xticks(xs, [str(x) for x in xs])
    ax.minorticks_off()
    off = sorted({shape_str((r["M"], r["N"], r["K"])) for r in results if not on_grid((r["M"], r["N"], r["K"]))})
    ax.set_xlabel("M = N = K" + (f"   (hollow: {', '.join(off)}, at the cube root of M*N*K)" if off else ""))
    ax.set_ylabel("TFLOP/s")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    ax.set_title(title or "cumm SGEMM ladder vs cuBLAS (FP32)")
    fig.savefig(path, dpi=150)


# ---------------------------------------------------------------------------------------------------
# GPU side
# ---------------------------------------------------------------------------------------------------


def device_info() -> dict[str, str]:
    import cupy

    dev = cupy.cuda.Device()
    props = cupy.cuda.runtime.getDeviceProperties(dev.id)
    name = props["name"]
    cc = dev.compute_capability  # "90"
    rt = cupy.cuda.runtime.runtimeGetVersion()  # 13000
    return {
        "device": name.decode() if isinstance(name, bytes) else str(name),
        "cc": f"{cc[:-1]}.{cc[-1]}",
        "cupy": cupy.__version__,
        "cuda": f"{rt // 1000}.{rt % 1000 // 10}",
    }


# Verification threshold per dtype: relative Frobenius error against float64 of the (rounded) inputs. A half
# result is rounded to 11 (float16) or 8 (bfloat16) significant bits, so its error is ~2^-12 or ~2^-9.


def np_dtype(dtype: str):
    if dtype == "bfloat16":
        from ..runtime.arrays import bfloat16

        return bfloat16()
    import numpy as np

    return np.dtype(dtype)


def input_sets(
    rng, M: int, N: int, K: int, n_sets: int | None = None, dtype: str = "float32", beta: float = 0.0
) -> list[tuple]:
    """Rotating (A, B, C) sets of ``dtype``; A and B random normal, C uninitialized (every call writes it) or, with
    ``beta`` != 0, random normal too (every call reads it)."""
    import cupy

    item = 4 if dtype == "float32" else 2
    if n_sets is None:
        dev = cupy.cuda.Device()
        l2 = dev.attributes.get("L2CacheSize") or L2_FALLBACK_BYTES
        pool = cupy.get_default_memory_pool()
        free = cupy.cuda.runtime.memGetInfo()[0] + pool.free_bytes()
        n_sets = n_input_sets(item * (M * K + K * N), item * (M * K + K * N + M * N), l2, free)
    f32, dt = cupy.float32, np_dtype(dtype)
    return [
        (
            rng.standard_normal((M, K), dtype=f32).astype(dt),
            rng.standard_normal((K, N), dtype=f32).astype(dt),
            cupy.empty((M, N), dtype=dt) if beta == 0.0 else rng.standard_normal((M, N), dtype=f32).astype(dt),
        )
        for _ in range(n_sets)
    ]


def _reference(a, b):
    """The float64 product and its Frobenius norm."""
    import cupy

    ref = a.astype(cupy.float32).astype(cupy.float64) @ b.astype(cupy.float32).astype(cupy.float64)
    return ref, float(cupy.linalg.norm(ref))


def kernel_call(kernel: str, dtype: str = "float32", beta: float = 0.0, epi: Mapping | None = None) -> Callable:
    """``call(a, b, c)`` writing a @ b into c: cuBLAS (cupy.matmul for float32; torch.matmul, the cuBLAS
    fp16/bf16 products with FP32 accumulation that users call, on the same memory for half dtypes), or a cumm
    kernel ("auto" too). With ``beta`` != 0 the call computes c = a @ b + beta * c in place: cuBLAS through
    ``cupy.cublas.gemm`` (float32; cupy.matmul has no beta) or ``torch.Tensor.addmm_`` (half dtypes), a cumm
    kernel through ``cumm.matmul(..., beta=beta)``."""
    import cupy

    from ..api import matmul as _api

    beta = check_beta(beta)
    if kernel == CUBLAS and dtype == "float32":
        if beta == 0.0:
            return lambda a, b, c: cupy.matmul(a, b, out=c)
        from cupy import cublas  # needs the cuBLAS library: imported only here

        return lambda a, b, c: cublas.gemm("N", "N", a, b, out=c, alpha=1.0, beta=beta)
    if kernel == CUBLAS:
        try:
            import torch
        except ImportError:
            what = "torch.matmul" if beta == 0.0 else "torch.Tensor.addmm_"
            raise BenchError(f"the {dtype} cuBLAS baseline is {what}: install torch") from None
        views: dict = {}

        def views_of(a, b, c) -> tuple:
            key = (a.data.ptr, b.data.ptr, c.data.ptr)
            t = views.get(key)
            if t is None:
                t = views[key] = (torch.from_dlpack(a), torch.from_dlpack(b), torch.from_dlpack(c))
            return t

        if beta == 0.0:

            def call(a, b, c):
                t = views_of(a, b, c)
                torch.matmul(t[0], t[1], out=t[2])

        else:

            def call(a, b, c):
                t = views_of(a, b, c)
                t[2].addmm_(t[0], t[1], beta=beta)  # cuBLAS's gemm with beta, on C's memory

        return call
    epi = dict(epi or {})  # a fused epilogue (cumm kernels only; cuBLAS runs the plain product beside)
    if beta == 0.0:
        return lambda a, b, c: _api.matmul(a, b, kernel=kernel, out=c, **epi)
    return lambda a, b, c: _api.matmul(a, b, kernel=kernel, out=c, beta=beta, **epi)


def verify(call: Callable, abc: tuple, ref, ref_norm: float, *, beta: float = 0.0, rng=None) -> float:
    """||C - ref|| / ||ref|| with C first filled with NaN (elements a kernel never writes stay NaN).

    With ``beta`` != 0 (``call`` computing C = A @ B + beta * C) NaN would poison every element, so C starts from
    fresh random normals C0 of C's dtype instead (standard deviation :func:`c0_scale`: beta * C0 about as large
    as A @ B, so ignoring beta or C costs about the whole result), and the reference is ``ref + beta * C0`` in
    float64 (C0 as rounded to the dtype); ``ref_norm`` is then not used. ``rng``: a cupy Generator (default: a
    fresh one)."""
    import cupy

    a, b, c = abc
    if beta == 0.0:
        c.fill(math.nan)
        call(a, b, c)
        return float(cupy.linalg.norm(c.astype(cupy.float32).astype(cupy.float64) - ref)) / ref_norm
    rng = cupy.random.default_rng() if rng is None else rng
    scale = c0_scale(a.shape[-1], beta, c.dtype.name)
    c[...] = (rng.standard_normal(c.shape, dtype=cupy.float32) * cupy.float32(scale)).astype(c.dtype)
    want = ref + beta * c.astype(cupy.float32).astype(cupy.float64)  # C0 as rounded, before the call overwrites it
    call(a, b, c)
    got = c.astype(cupy.float32).astype(cupy.float64)
    return float(cupy.linalg.norm(got - want)) / float(cupy.linalg.norm(want))


reference = _reference  # (bench's and run's `reference` argument is the epilogue's float64 reference)


ROUNDS = 3  # each (kernel, shape) is timed in this many rounds, interleaved with the others of its shape


def _prepare(
    kernel: str, sets: list[tuple], ref, ref_norm: float, shape: Shape, dtype: str, beta: float = 0.0, fused=None
):
    """(call, relative error) once verified, or (None, the FAIL row): a wrong kernel is never timed. ``fused``:
    (matmul's epilogue arguments, the float64 transform) for the cumm kernels."""
    if fused is not None and kernel != CUBLAS:
        from .epiref import apply

        ref = apply(fused[1], ref)
        ref_norm = float((ref * ref).sum() ** 0.5)
    if fused is None or kernel == CUBLAS:
        call = kernel_call(kernel, dtype, beta)
    else:
        call = kernel_call(kernel, dtype, beta, fused[0])
    tol = TOLERANCES[dtype]
    try:
        err = verify(call, sets[0], ref, ref_norm, beta=beta)  # also compiles: keeps compile time out of the warm-up
    except Exception as e:  # a configuration the device rejects, a compile error: report it, keep going
        first = str(e).splitlines()[0] if str(e) else ""
        return None, make_row(kernel, shape, ms=None, rel_err=None, error=f"{type(e).__name__}: {first}", tolerance=tol)
    if not err < tol:  # also true for NaN
        return None, make_row(kernel, shape, ms=None, rel_err=err, tolerance=tol)
    return call, err


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
) -> list[Row]:
    """Rows for ``names`` (cuBLAS first) on one shape. The verified calls are timed in ROUNDS interleaved rounds,
    the order rotating every round and reversed every other round (so neither a call's place nor the call before
    it is always the same), each call loaded alone for SETTLE_S before its samples; each row takes the median
    of all its samples: the card's clocks drift under seconds of sustained load and follow the power of what ran
    just before."""
    prepared = {n: _prepare(n, sets, ref, ref_norm, shape, dtype, beta, fused) for n in names}
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
        call, got = prepared[n]
        if call is None:
            rows.append(got)
            continue
        row = make_row(
            n, shape, ms=statistics.median(samples[n]), rel_err=got, runs=len(samples[n]), tolerance=TOLERANCES[dtype]
        )
        if n != CUBLAS and fused is None:  # which kernel and configuration the call ran (auto's choice, tiles)
            from ..api.matmul import decision

            row["ran"] = decision(*sets[0], kernel=n, beta=beta)
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
    ratio is the epilogue's cost plus the kernel's), verified against ``reference`` (cumm/tools/epiref.py)."""
    from . import epiref as _epiref

    _epiref.check_args(epilogue, activation, reference)
    if not (isinstance(settle_s, (int, float)) and 0 <= settle_s <= 60):
        raise ValueError(f"settle_s must be a number of seconds from 0 to 60, got {settle_s!r}")
    beta = check_beta(beta)  # before the GPU is touched: a bad value fails at once, anywhere
    import cupy

    from ..ladder import kernels as _kernels

    check_tf32()
    reason = gpu_unavailable()
    if reason:
        raise BenchError(f"{reason}; the benchmark needs an NVIDIA GPU")
    _check_cupy_compute_type()
    if dtype not in TOLERANCES:
        raise ValueError(f"dtype must be one of {', '.join(TOLERANCES)}, got {dtype!r}")
    valid = [*_kernels(dtype=dtype), "auto"]
    kernels = list(_kernels(dtype=dtype)) if kernels is None else list(kernels)
    for k in kernels:
        if k not in valid:
            raise ValueError(f"unknown kernel {k!r} for {dtype}; choose from {', '.join(valid)}")
    shapes = square(DEFAULT_SIZES) if shapes is None else list(shapes)
    timing = dict(warmup=warmup, repeat=repeat, budget_s=budget_s, settle_s=settle_s)

    fn = _epiref.transform(activation, reference)
    epi = {k: v for k, v in (("epilogue", epilogue), ("activation", activation)) if v is not None}
    fused = (epi, fn) if fn is not None else None
    rng = cupy.random.default_rng()
    total = len(shapes) * (len(kernels) + 1)
    bar = _progress(total, total > 3 if progress is None else progress)
    results: list[Row] = []
    try:
        for shape in shapes:
            sets = input_sets(rng, *shape, dtype=dtype, beta=beta)
            ref, ref_norm = _reference(*sets[0][:2])
            bar.set_postfix_str(f"{shape_str(shape)}")
            first = not results
            rows = _measure_shape(
                [CUBLAS, *kernels], sets, ref, ref_norm, shape, timing, dtype, 0.5 * first, beta=beta, fused=fused
            )
            base = rows[0]
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


def _check_cupy_compute_type() -> None:
    """Refuse if this process already switched CuPy's float32 products to TF32 (cupy._core.set_compute_type)."""
    try:
        import numpy as np
        from cupy._core import _routines_linalg as rl

        tf32 = rl.get_compute_type(np.dtype(np.float32)) == rl.COMPUTE_TYPE_TF32
    except (ImportError, AttributeError):  # private API moved: the environment check still holds
        return
    if tf32:
        raise BenchError("CuPy's float32 compute type is TF32 in this process; the cuBLAS baseline would not be FP32")


def host_overhead(calls: int = 2000, warmup: int = 200) -> dict:
    """Wall-clock host time per call of cumm.matmul (a cached call) beside cupy.matmul and, when torch is
    importable, torch.matmul, on a tiny product, where the kernels take a few microseconds and the
    Python/launch path dominates. Each allocates its result, as a user's call does."""
    import cupy

    from ..api import matmul as _api

    M, N, K = HOST_OVERHEAD_SHAPE
    rng = cupy.random.default_rng()
    a = rng.standard_normal((M, K), dtype=cupy.float32)
    b = rng.standard_normal((K, N), dtype=cupy.float32)
    cumm_us = host_us(lambda: _api.matmul(a, b), calls, warmup)
    cupy_us = host_us(lambda: cupy.matmul(a, b), calls, warmup)
    doc = {"shape": [M, N, K], "calls": calls, "cumm_us": cumm_us, "cupy_us": cupy_us, "ratio": cumm_us / cupy_us}
    try:
        import torch
    except ImportError:
        return doc
    ta, tb = torch.as_tensor(a, device="cuda"), torch.as_tensor(b, device="cuda")
    doc["torch_us"] = host_us(lambda: torch.matmul(ta, tb), calls, warmup)
    doc["cumm_torch_us"] = host_us(lambda: _api.matmul(ta, tb), calls, warmup)  # torch tensors in and out
    return doc


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
    )
    if plot:
        _draw(rows, plot, baseline=baseline_label(dtype, beta))
    return rows
