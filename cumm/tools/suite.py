"""The shape suite (``python -m cumm bench --suite llm --dtype bf16``): the products a user runs, cumm beside
cuBLAS in the same run, the table ending with the geomean and the minimum of the ratios.

A suite is a JSON file: ``{"name", "description", "shapes": [{"name", "category", "M", "N", "K"[, "batch"]
[, "b_transposed"]}]}``. The shipped ones live in the package (``cumm/tools/suites/*.json``, package data), so
the command finds them from a clone and from an install; ``--suite FILE.json`` takes a file of your own.

Each shape is measured as ``python -m cumm bench`` measures one (:func:`cumm.tools.bench._measure_shape`):
every result checked against float64 first (output NaN-filled), then cuBLAS and the cumm kernels timed by CUDA
events in interleaved rounds, each call settled alone before its samples, operands rotated past the L2 cache,
the median. Batched shapes go through ``cumm.matmul``'s batched path (3-D arrays, one call), cuBLAS through the
same call on the same arrays (``torch.matmul`` for half dtypes, ``cupy.matmul`` for float32). A row is also a
FAIL when its error exceeds :data:`ERR_VS_CUBLAS` times cuBLAS's own on the same inputs (above a floor where
both are noise).

GPU-free pieces (loading, validation, the summary, the tables) take plain data so that they can be tested on a
CPU.
"""

from __future__ import annotations

import json
import math
import os
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..core.dtypes import TOLERANCE
from . import bench as _bench

SUITES_DIR = Path(__file__).resolve().parent / "suites"
DEFAULT_KERNELS = ("auto",)
# Timed seconds per call site and shape (split over bench.ROUNDS rounds): with the 0.1 s settle per call and round
# this keeps the 50 shapes of "llm" near two minutes per dtype on an H200 (compiles included).
BUDGET_S = 0.6
ERR_VS_CUBLAS = 2.0  # a cumm result may be at most this many times less accurate than cuBLAS's on the same inputs
ERR_FLOOR = 0.1  # ... unless its error is under this fraction of the dtype's tolerance (both are then noise)


class SuiteError(ValueError):
    """A suite that cannot be found or read: the message names the file, the shape and what is wrong."""


# What each category means, and the rule its shapes must keep (checked when a suite is loaded).
CATEGORIES = {
    "square": ("M = N = K", lambda s: s.M == s.N == s.K),
    "llm": ("a transformer layer at some number of tokens (M)", lambda s: True),
    "decode": ("M <= 64 (a few tokens at a time)", lambda s: s.M <= 64),
    "short_deep": ("M <= 1024 and K >= 4096", lambda s: s.M <= 1024 and s.K >= 4096),
    "attention": ("batch > 1 (heads times sequences)", lambda s: s.batch > 1),
    "odd": ("a size that is not a multiple of 128", lambda s: any(d % 128 for d in (s.M, s.N, s.K))),
}
_KEYS = {"name", "category", "M", "N", "K", "batch", "b_transposed"}


@dataclass(frozen=True)
class SuiteShape:
    name: str
    category: str
    M: int
    N: int
    K: int
    batch: int = 1
    b_transposed: bool = False  # B given as the transposed view of a (batch, N, K) array, as q @ k.transpose(-1, -2)

    @property
    def flop(self) -> int:
        return 2 * self.batch * self.M * self.N * self.K

    @property
    def label(self) -> str:
        """``"4096x6144x4096"``, ``"32 x 2048x2048x128 (B^T)"``."""
        mnk = _bench.shape_str((self.M, self.N, self.K))
        return (f"{self.batch} x {mnk}" if self.batch > 1 else mnk) + (" (B^T)" if self.b_transposed else "")


@dataclass(frozen=True)
class Suite:
    name: str
    description: str
    shapes: tuple[SuiteShape, ...]
    source: str  # the file it was read from


def available() -> list[str]:
    """The names of the shipped suites (``--suite NAME``)."""
    return sorted(p.stem for p in SUITES_DIR.glob("*.json"))


def load(suite: str) -> Suite:
    """A shipped suite by name (``"llm"``) or a suite file (a path ending in .json); SuiteError saying what is
    wrong (an unknown name lists the shipped ones)."""
    if not isinstance(suite, str) or not suite.strip():
        raise SuiteError(f"a suite is a name ({', '.join(available())}) or a .json file, got {suite!r}")
    is_file = suite.endswith(".json") or os.sep in suite or "/" in suite
    path = Path(suite) if is_file else SUITES_DIR / f"{suite}.json"
    if not path.is_file():
        if is_file:
            raise SuiteError(f"suite file {suite} does not exist")
        raise SuiteError(f"unknown suite {suite!r}; choose from {', '.join(available())} or give a .json file")
    try:
        doc = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise SuiteError(f"suite file {path} is not valid JSON: {e}") from None
    return parse(doc, str(path))


def parse(doc: object, source: str = "<suite>") -> Suite:
    """A Suite from its JSON document, every field checked; SuiteError naming the shape and the field."""
    if not isinstance(doc, dict):
        raise SuiteError(f"{source}: a suite is a JSON object with name, description and shapes")
    shapes = doc.get("shapes")
    if not isinstance(shapes, list) or not shapes:
        raise SuiteError(f"{source}: 'shapes' must be a non-empty list of {{name, category, M, N, K}} objects")
    out: list[SuiteShape] = []
    for i, item in enumerate(shapes):
        out.append(_shape(item, f"{source}: shape {i}"))
    names = [s.name for s in out]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise SuiteError(f"{source}: shape names must be unique; repeated: {', '.join(dup)}")
    name = doc.get("name", Path(source).stem)
    description = doc.get("description", "")
    if not isinstance(name, str) or not isinstance(description, str):
        raise SuiteError(f"{source}: 'name' and 'description' must be strings")
    return Suite(name, description, tuple(out), source)


def _shape(item: object, where: str) -> SuiteShape:
    if not isinstance(item, dict):
        raise SuiteError(f"{where}: expected an object {{name, category, M, N, K}}, got {item!r}")
    extra = sorted(set(item) - _KEYS)
    if extra:
        raise SuiteError(f"{where}: unknown field(s) {', '.join(extra)}; the fields are {', '.join(sorted(_KEYS))}")
    name = item.get("name")
    if not isinstance(name, str) or not name.strip():
        raise SuiteError(f"{where}: 'name' must be a non-empty string, got {name!r}")
    where = f"{where} ({name!r})"
    cat = item.get("category")
    if cat not in CATEGORIES:
        raise SuiteError(f"{where}: unknown category {cat!r}; choose from {', '.join(CATEGORIES)}")
    dims = {}
    for k, default in (("M", None), ("N", None), ("K", None), ("batch", 1)):
        v = item.get(k, default)
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise SuiteError(f"{where}: {k} must be a positive integer, got {v!r}")
        dims[k] = v
    bt = item.get("b_transposed", False)
    if not isinstance(bt, bool):
        raise SuiteError(f"{where}: b_transposed must be true or false, got {bt!r}")
    s = SuiteShape(name, cat, dims["M"], dims["N"], dims["K"], dims["batch"], bt)
    rule, holds = CATEGORIES[cat]
    if not holds(s):
        raise SuiteError(f"{where}: {s.label} is not a {cat!r} shape ({rule})")
    return s


# ---------------------------------------------------------------------------------------------------
# Summary and tables (no GPU)
# ---------------------------------------------------------------------------------------------------


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


def check_error(row: dict, cublas_err: float | None, dtype: str) -> dict:
    """``row`` as a FAIL (no time) when its error exceeds ERR_VS_CUBLAS times cuBLAS's on the same inputs and is
    above ERR_FLOOR of the dtype's tolerance; otherwise unchanged."""
    err = row.get("rel_err")
    if row["status"] != "ok" or err is None or cublas_err is None:
        return row
    if err > ERR_VS_CUBLAS * cublas_err and err > ERR_FLOOR * TOLERANCE[dtype]:
        row = dict(row, status="FAIL", ms=None, tflops=None, ratio=None, runs=0)
        row["error"] = f"relative error {err:.2e} > {ERR_VS_CUBLAS:g}x cuBLAS's {cublas_err:.2e} on the same inputs"
    return row


# ---------------------------------------------------------------------------------------------------
# GPU side
# ---------------------------------------------------------------------------------------------------


def input_sets(rng, s: SuiteShape, dtype: str) -> list[tuple]:
    """Rotating (A, B, C) sets for one suite shape: 2-D when batch is 1, else (batch, ...) arrays; B the
    transposed view of a (batch, N, K) array when ``b_transposed``; C uninitialized (every call writes it)."""
    import cupy

    item = 4 if dtype == "float32" else 2
    dev = cupy.cuda.Device()
    l2 = dev.attributes.get("L2CacheSize") or _bench.L2_FALLBACK_BYTES
    pool = cupy.get_default_memory_pool()
    free = cupy.cuda.runtime.memGetInfo()[0] + pool.free_bytes()
    operands = item * s.batch * (s.M * s.K + s.K * s.N)
    n_sets = _bench.n_input_sets(operands, operands + item * s.batch * s.M * s.N, l2, free)
    lead = (s.batch,) if s.batch > 1 else ()
    f32, dt = cupy.float32, _bench.np_dtype(dtype)

    def b():
        if s.b_transposed:
            return rng.standard_normal((*lead, s.N, s.K), dtype=f32).astype(dt).swapaxes(-1, -2)
        return rng.standard_normal((*lead, s.K, s.N), dtype=f32).astype(dt)

    return [
        (rng.standard_normal((*lead, s.M, s.K), dtype=f32).astype(dt), b(), cupy.empty((*lead, s.M, s.N), dtype=dt))
        for _ in range(n_sets)
    ]


def run(
    suite: Suite,
    kernels: Sequence[str] | None = None,
    *,
    dtype: str = "float32",
    repeat: int = _bench.DEFAULT_REPEAT,
    settle_s: float = _bench.SETTLE_S,
    budget_s: float = BUDGET_S,
    progress: bool | None = None,
) -> list[dict]:
    """cuBLAS and ``kernels`` (default: auto) on every shape of ``suite``; rows shape by shape, cuBLAS first,
    each with the shape's name, category, batch and label, TFLOP/s counting the batch, and cuBLAS's error."""
    import cupy

    from ..ladder import kernels as _kernels

    kernels = list(DEFAULT_KERNELS if kernels is None else kernels)
    if dtype not in TOLERANCE:
        raise ValueError(f"dtype must be one of {', '.join(TOLERANCE)}, got {dtype!r}")
    valid = [*_kernels(dtype=dtype), "auto"]
    bad = [k for k in kernels if k not in valid]
    if bad:
        raise ValueError(f"unknown kernel {bad[0]!r} for {dtype}; choose from {', '.join(valid)}")
    _bench.check_tf32()
    reason = _bench.gpu_unavailable()
    if reason:
        raise _bench.BenchError(f"{reason}; the suite needs an NVIDIA GPU")
    _bench._check_cupy_compute_type()
    timing = dict(warmup=_bench.DEFAULT_WARMUP, repeat=repeat, budget_s=budget_s, settle_s=settle_s)
    rng = cupy.random.default_rng()
    bar = _bench._progress(len(suite.shapes), progress if progress is not None else len(suite.shapes) > 3)
    results: list[dict] = []
    try:
        for i, s in enumerate(suite.shapes):
            bar.set_postfix_str(s.name)
            sets = input_sets(rng, s, dtype)
            ref, ref_norm = _bench._reference(*sets[0][:2])
            rows = _bench._measure_shape(
                [_bench.CUBLAS, *kernels], sets, ref, ref_norm, (s.M, s.N, s.K), timing, dtype, 0.5 * (i == 0)
            )
            base = rows[0]
            if base["status"] != "ok":
                raise _bench.BenchError(
                    f"the cuBLAS baseline failed verification at {s.name} ({s.label}): {base.get('error')}"
                )
            cublas_tflops = base["tflops"] * s.batch  # (before the loop scales base, rows[0], itself)
            for row in rows:
                if row.get("tflops") is not None:
                    row["tflops"] *= s.batch  # make_row counts one product
                row["cublas_tflops"] = cublas_tflops
                row["cublas_rel_err"] = base["rel_err"]
                row = check_error(row, base["rel_err"], dtype) if row["kernel"] != _bench.CUBLAS else row
                row["ratio"] = row["tflops"] / row["cublas_tflops"] if row.get("tflops") else None
                row.update(shape=s.name, category=s.category, batch=s.batch, b_transposed=s.b_transposed)
                row["label"] = s.label
                results.append(row)
            bar.update(1)
            del sets, ref
            cupy.get_default_memory_pool().free_all_blocks()  # the next shape's sets need the room
    finally:
        bar.close()
    return results
