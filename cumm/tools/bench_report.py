"""The benchmark's report: the aligned text or markdown table, the JSON document, the markdown page and the plot.

Apart from the measurement (:mod:`.bench`) because it takes plain rows (:mod:`.bench_rows`) and never touches the
GPU: the table of a run's results, or of results read back from JSON, is drawn the same way, and tested on a CPU.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from .bench_rows import CUBLAS, UNFUSED, Shape, check_beta, product_label, shape_str

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
    """Aligned plain text (or a markdown table) of the results, in their order; FAIL reasons below. The ratio
    column names its baseline: cuBLAS, or for a glu= race the unfused gated MLP ("% of unfused")."""
    columns = COLUMNS
    if any(r["kernel"] == UNFUSED for r in results):
        columns = tuple("% of unfused" if c == "% of cuBLAS" else c for c in COLUMNS)
    out = aligned_table(columns, [_cells(r) for r in results], _LEFT, markdown=markdown)
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
    glu: str | None = None,
    out_dtype: str | None = None,
    scale_result: float | None = None,
) -> dict:
    """The JSON document: device, cc, cupy, cuda, dtype, beta, [glu], [out_dtype, scale_result], [settle_s],
    results, [host_overhead], command. ``beta`` is always recorded (0.0: the plain product C = A @ B); ``glu`` when
    the run raced it; ``out_dtype`` when the cumm kernels wrote an FP8 C."""
    doc = {k: device[k] for k in ("device", "cc", "cupy", "cuda")}
    doc["dtype"] = dtype
    doc["beta"] = check_beta(beta)
    if glu is not None:
        doc["glu"] = glu
    if out_dtype is not None:
        doc["out_dtype"], doc["scale_result"] = out_dtype, 1.0 if scale_result is None else float(scale_result)
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
    if doc.get("glu"):
        baseline = (
            f"the product timed is the gated MLP `{doc['glu']}(x @ w1) * (x @ w3)` (N: its output's columns), "
            f"the cumm kernels as `cumm.matmul(x, cumm.glu_weight(w1, w3), glu={doc['glu']!r})` (TFLOP/s of the "
            f"2N-column product), baseline `unfused`: torch's two products and elementwise on the same {dtype} arrays"
        )
    if doc.get("out_dtype"):
        baseline += (
            f"; the cumm kernels write an FP8 C, `{doc['out_dtype']}` of {doc['scale_result']:g} v (checked against "
            "float64 scaled and clamped, within 1.5x the format's own rounding), cuBLAS the plain product"
        )
    title = f"# cumm {dtype} GEMM benchmark" + (f", {product_label(beta)}" if beta != 0.0 else "")
    if doc.get("glu"):
        title = f"# cumm {dtype} gated-MLP (glu={doc['glu']}) benchmark"
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
