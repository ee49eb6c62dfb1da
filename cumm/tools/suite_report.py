"""A shape suite's results as a report (no GPU): per kernel the geomean and the minimum of its ratios to cuBLAS,
several runs of the suite combined into each shape's median (``--runs``), the table, and the JSON and markdown
documents ``python -m cumm bench --suite`` writes. Rows are :func:`cumm.tools.suite.run`'s."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence

from . import bench as _bench
from .suite import BUDGET_S, Suite


def geomean(values: Sequence[float]) -> float | None:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def summarize(results: Sequence[Mapping]) -> list[dict]:
    """Per cumm kernel: the geomean and the minimum of its ratios to cuBLAS (with the shape of the minimum), the
    shapes measured and FAILed, and the geomean per category."""
    out = []
    for kernel in dict.fromkeys(r["kernel"] for r in results if r["kernel"] != _bench.CUBLAS):
        rows = [r for r in results if r["kernel"] == kernel]
        ok = [r for r in rows if r["status"] == "ok" and r.get("ratio")]
        worst = min(ok, key=lambda r: r["ratio"]) if ok else None
        cats = {}
        for cat in dict.fromkeys(r["category"] for r in rows):
            ratios = [r["ratio"] for r in ok if r["category"] == cat]
            cats[cat] = geomean(ratios)
        out.append(
            {
                "kernel": kernel,
                "shapes": len(rows),
                "failed": len(rows) - len(ok),
                "geomean": geomean([r["ratio"] for r in ok]),
                "min": worst["ratio"] if worst else None,
                "min_shape": worst["shape"] if worst else None,
                "max": max(r["ratio"] for r in ok) if ok else None,
                "categories": cats,
            }
        )
    return out


def combine(runs: Sequence[Sequence[Mapping]]) -> list[dict]:
    """The rows of several runs of one suite as one: per (shape, kernel) the median ratio to cuBLAS over the runs
    (a criterion within the clock's noise is met or not by the median of runs), the median TFLOP/s of both, the
    worst errors, and each run's ratio under ``ratios``. A shape that FAILed in any run FAILs."""
    if not runs:
        raise ValueError("combine needs at least one run")
    if len(runs) == 1:
        return [dict(r) for r in runs[0]]
    keyed = [{(r["shape"], r["kernel"]): r for r in run} for run in runs]
    out = []
    for r0 in runs[0]:
        key = (r0["shape"], r0["kernel"])
        rows = [k[key] for k in keyed if key in k]
        row = dict(r0)
        if len(rows) < len(runs):
            row.update(status="FAIL", tflops=None, ratio=None, error=f"missing from {len(runs) - len(rows)} run(s)")
            out.append(row)
            continue
        errs = [r.get("rel_err") for r in rows if r.get("rel_err") is not None]
        row["rel_err"] = max(errs) if errs else None
        cerrs = [r.get("cublas_rel_err") for r in rows if r.get("cublas_rel_err") is not None]
        row["cublas_rel_err"] = max(cerrs) if cerrs else None
        row["cublas_tflops"] = statistics.median(r["cublas_tflops"] for r in rows)
        failed = [r for r in rows if r["status"] != "ok"]
        if failed:
            row.update(status="FAIL", tflops=None, ratio=None, ms=None, error=failed[0].get("error"))
        else:
            row.update(
                tflops=statistics.median(r["tflops"] for r in rows),
                ratio=statistics.median(r["ratio"] for r in rows),
                ratios=[r["ratio"] for r in rows],
            )
        ran = list(dict.fromkeys(r.get("ran") or "-" for r in rows))
        row["ran"] = " / ".join(ran)
        out.append(row)
    return out


COLUMNS = (
    "shape",
    "category",
    "M x N x K",
    "kernel",
    "cuBLAS TFLOP/s",
    "TFLOP/s",
    "x cuBLAS",
    "rel. error",
    "cuBLAS error",
    "ran",
)
_LEFT = {"shape", "category", "M x N x K", "kernel", "ran"}


def _fmt(v: float | None, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def _cells(r: Mapping, runs: int = 1) -> list[str]:
    ok = r["status"] == "ok"
    per_run = [" / ".join(format(x, ".3f") for x in r["ratios"]) if ok and r.get("ratios") else "-"] * (runs > 1)
    return [
        r["shape"],
        r["category"],
        r["label"],
        r["kernel"],
        _fmt(r.get("cublas_tflops"), ".1f"),
        _fmt(r.get("tflops"), ".1f") if ok else "FAIL",
        _fmt(r.get("ratio"), ".3f") if ok else "-",
        *per_run,
        _fmt(r.get("rel_err"), ".1e"),
        _fmt(r.get("cublas_rel_err"), ".1e"),
        r.get("ran") or "-",
    ]


def format_summary(summary: Sequence[Mapping], dtype: str) -> list[str]:
    lines = []
    for s in summary:
        head = f"{s['kernel']} {dtype} vs cuBLAS over {s['shapes'] - s['failed']} shapes"
        if s["geomean"] is None:
            lines.append(f"{head}: no shape ran ({s['failed']} FAIL)")
            continue
        fails = f", {s['failed']} FAIL" if s["failed"] else ""
        lines.append(
            f"{head}{fails}: geomean {s['geomean']:.3f}x, minimum {s['min']:.3f}x ({s['min_shape']}), "
            f"maximum {s['max']:.3f}x"
        )
        cats = ", ".join(f"{c} {g:.3f}x" for c, g in s["categories"].items() if g is not None)
        lines.append(f"  geomean per category: {cats}")
    return lines


def format_table(results: Sequence[Mapping], dtype: str, *, markdown: bool = False, runs: int = 1) -> str:
    """The rows (cuBLAS's folded into each cumm row), FAIL reasons, then the geomean and minimum per kernel; with
    ``runs`` > 1 (rows from ``combine``) the ratio is the median of the runs', each run's beside it."""
    rows = [r for r in results if r["kernel"] != _bench.CUBLAS]
    cols = COLUMNS if runs == 1 else (*COLUMNS[:7], "per run", *COLUMNS[7:])
    out = _bench.aligned_table(cols, [_cells(r, runs) for r in rows], _LEFT, markdown=markdown)
    fails = [r for r in results if r["status"] != "ok" and r.get("error")]
    if fails:
        out.append("")
        out += [f"FAIL {r['kernel']} {r['shape']} ({r['label']}): {r['error']}" for r in fails]
    out.append("")
    summary = format_summary(summarize(results), dtype)
    out += [f"**{s}**" if markdown and not s.startswith(" ") else s for s in summary]
    return "\n".join(out)


def build_report(
    results: Sequence[Mapping],
    suite: Suite,
    *,
    device: Mapping[str, str],
    dtype: str,
    settle_s: float,
    repeat: int,
    budget_s: float = BUDGET_S,
    seconds: float | None = None,
    command: str | None = None,
    runs: int = 1,
) -> dict:
    """The JSON document: device, cc, cupy, cuda, dtype, suite, timing, runs, results (``combine``d when there
    were several runs), summary, command."""
    doc = {k: device[k] for k in ("device", "cc", "cupy", "cuda")}
    doc.update(
        dtype=dtype,
        suite={"name": suite.name, "description": suite.description, "shapes": len(suite.shapes)},
        settle_s=settle_s,
        repeat=repeat,
        budget_s=budget_s,
        runs=runs,
        seconds=seconds,
        results=[dict(r) for r in results],
        summary=summarize(results),
        command=command,
    )
    return doc


def format_markdown(doc: Mapping) -> str:
    dtype = doc["dtype"]
    baseline = (
        "cuBLAS via `cupy.matmul`, FP32 (no TF32)"
        if dtype == "float32"
        else f"cuBLAS via `torch.matmul` on the same {dtype} arrays (FP32 accumulation)"
    )
    runs = doc.get("runs", 1)
    took = f" The {'runs' if runs > 1 else 'run'} took {doc['seconds']:.0f} s." if doc.get("seconds") else ""
    many = (
        f" The whole suite ran {runs} times, one after another: each ratio is the median of the {runs} runs' "
        "ratios (each run's beside it), TFLOP/s the median of the runs'; a shape FAILs if it failed in any run."
        if runs > 1
        else ""
    )
    out = [
        f"# cumm {dtype} shape suite `{doc['suite']['name']}`: {doc['device']}",
        "",
        doc["suite"]["description"],
        "",
        f"Compute capability {doc['cc']}, CUDA runtime {doc['cuda']}, CuPy {doc['cupy']}; baseline {baseline}, "
        f"timed in the same run. Median of CUDA-event timed runs in {_bench.ROUNDS} interleaved rounds per shape "
        f"(each call run alone for {doc['settle_s']:g} s before its samples in a round, at most {doc['repeat']} "
        f"runs or about {doc['budget_s']:g} s per call), warm-up excluded, operands rotated past the L2 cache, "
        "every result checked against float64 first (and against cuBLAS's own error on the same inputs). "
        f"TFLOP/s count 2 x batch x M x N x K.{many}{took}",
        "",
    ]
    if doc.get("command"):
        out += [f"Command: `{doc['command']}`", ""]
    out.append(format_table(doc["results"], dtype, markdown=True, runs=runs))
    return "\n".join(out) + "\n"
