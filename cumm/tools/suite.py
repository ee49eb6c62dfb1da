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

GPU-free pieces (loading, validation; the summary, the runs' median and the tables in :mod:`.suite_report`) take
plain data so that they can be tested on a CPU.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
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
    def tuned_key(self) -> tuple[int, int, int]:
        """The shape the tuned table is read at for it: a batch as one product ``batch`` times as tall."""
        return self.batch * self.M, self.N, self.K

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

    def tuned_shapes(self) -> list[tuple[int, int, int]]:
        """The shapes whose tuned entries auto looks up for this suite (``cumm tune --suite``), each once: a batch
        of ``batch`` products as one product ``batch`` times as tall (as the table is read for half batches; a
        transposed B under the same key: :meth:`transposed_b`)."""
        return list(dict.fromkeys(s.tuned_key for s in self.shapes))

    def transposed_b(self) -> set[tuple[int, int, int]]:
        """The :meth:`tuned_shapes` that every product of this suite at them gives with B transposed (q @ k^T): the
        tuner times those so, since a configuration's speed depends on B's layout (H200, fp16 q @ k^T at S = 2048:
        the tiles tuned with B row-major ran 0.87x cuBLAS, 0.93x on the defaults)."""
        keys: dict[tuple[int, int, int], bool] = {}
        for s in self.shapes:
            keys[s.tuned_key] = keys.get(s.tuned_key, True) and s.b_transposed
        return {k for k, t in keys.items() if t}


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
    _bench.check_cupy_compute_type()
    timing = dict(warmup=_bench.DEFAULT_WARMUP, repeat=repeat, budget_s=budget_s, settle_s=settle_s)
    rng = cupy.random.default_rng()
    bar = _bench._progress(len(suite.shapes), progress if progress is not None else len(suite.shapes) > 3)
    results: list[dict] = []
    try:
        for i, s in enumerate(suite.shapes):
            bar.set_postfix_str(s.name)
            sets = input_sets(rng, s, dtype)
            ref, ref_norm = _bench.product_reference(*sets[0][:2])
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
