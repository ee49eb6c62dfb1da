"""``cumm.check``: a kernel on the odd shapes where tiled kernels go wrong, against float64, with guard bands.

Each case runs ``cumm.matmul(a, b, kernel=..., config=..., out=C)`` where C is a view inside a larger buffer:
rows of a sentinel value above and below it and columns of it left and right (a padded leading dimension).
C itself is filled with NaN first, so an element the kernel never writes stays NaN; a sentinel that changed
is a write outside C. The result is compared with the float64 product of the same (rounded) inputs:
relative Frobenius error below the dtype's tolerance. Shapes: 1 x 1 x 1, primes, a dimension one past a tile
multiple (4097), K = 1, K = 7, M = 1, N = 1, operands that are unaligned strided views, alpha and beta, and a
2048 cube; for a kernel that runs batched products, a batch of three and a batch whose a is one matrix for every
product (each product with its own guard bands); for a kernel that reads transposed operands in place
(``reads_transposed``), column-major A and B (TRANSPOSED_CASES). ``python -m cumm check --kernel-file
my_kernel.py`` runs it from the shell (``--sanitize``: under compute-sanitizer's memcheck, which also sees writes
that land beyond the guard bands). ``glu=`` / ``--glu ACT`` checks the gated form: B = cumm.glu_weight(w1, w3) of 2N
columns, C of N, against float64 act(x @ w1) * (x @ w3).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ..core.dtypes import TOLERANCE as TOLERANCES
from ..core.spec import KernelSpec
from . import check_fp8 as _fp8
from .guard_bands import GUARD_COLS, as_f64, bits, guard_problems, guarded_out, span

# (TOLERANCES: relative Frobenius error against the float64 product of the (rounded) inputs; a half result is
# rounded to 11 (float16) or 8 (bfloat16) significant bits, the thresholds of the benchmark's verification.)
UNDER_SANITIZER = "CUMM_UNDER_SANITIZER"  # set by ``cumm check --sanitize`` in the process it re-runs


@dataclass(frozen=True)
class Case:
    """One product of the standard set: M x N x K, a layout, and alpha, beta."""

    name: str
    M: int
    N: int
    K: int
    layout: str = "contiguous"  # or "view": A and B unaligned strided views, C with an odd leading dimension;
    # with a batch, "broadcast": a is one matrix for every product (read in place, batch stride 0); "transposed":
    # A and B column-major (a.T, b.T of row-major arrays, as x @ w.T passes w), for kernels that read them in place
    alpha: float = 1.0
    beta: float = 0.0
    batch: int = 0  # > 0: a batch of this many products (kernels that run batches only)

    @property
    def shape(self) -> tuple[int, int, int]:
        return self.M, self.N, self.K


STANDARD_CASES: tuple[Case, ...] = (
    Case("1x1x1", 1, 1, 1),
    Case("primes", 127, 131, 137),
    Case("one past a tile", 4097, 33, 65),
    Case("K = 1", 257, 129, 1),
    Case("K = 7", 129, 257, 7),
    Case("M = 1", 1, 513, 259),
    Case("N = 1", 515, 1, 67),
    Case("unaligned views", 301, 203, 101, layout="view"),
    Case("alpha, beta", 127, 131, 137, alpha=-0.5, beta=2.0),
    Case("2048 cube", 2048, 2048, 2048),
    # fp16 / bf16 rows of 1000 and 264 elements start 16 bytes off 32 every other row (wgmma_ws: clusters of two,
    # with tiles enough to keep its two-warpgroup tiles; 72 of 128 x 256 leave a round half empty, so its
    # shape_config narrows them to 128 x 192 first: both spec hooks run)
    Case("rows off 32 bytes", 2200, 1000, 264),
    Case("batch of 3", 131, 137, 72, batch=3, alpha=-0.5, beta=2.0),
    Case("batch, a broadcast", 67, 264, 64, batch=4, layout="broadcast"),
)
# For kernels that read column-major operands in place (``reads_transposed``): columns on 16 bytes (read as they
# are), columns off 16 bytes (copied first), and a batch with one of each.
TRANSPOSED_CASES: tuple[Case, ...] = (
    Case("transposed a, b", 136, 131, 72, layout="transposed", alpha=-0.5, beta=2.0),
    Case("transposed, columns off 16 B", 127, 131, 137, layout="transposed"),
    Case("transposed, K = 7", 264, 129, 7, layout="transposed"),
    Case("batch, transposed", 67, 136, 72, batch=3, layout="transposed"),
)


def glu_case(case: Case) -> Case:
    """``case`` for a glu= check: N (C's columns; B has 2N) rounded up to a multiple of GLU_BLOCK, glu='s rule."""
    from ..plan.operands import GLU_BLOCK

    N = -(-case.N // GLU_BLOCK) * GLU_BLOCK
    if N == case.N:
        return case
    return Case(case.name, case.M, N, case.K, case.layout, case.alpha, case.beta, case.batch)


LARGE = 2**28  # cases of at least this many multiply-adds are left out under the sanitizer (memcheck is slow)


@dataclass
class CheckRow:
    """One case in one dtype: the error against float64 and what went wrong, if anything."""

    case: str
    shape: tuple[int, int, int]
    dtype: str
    rel_err: float | None
    verdict: str  # "ok", "FAIL" (wrong values, unwritten elements, writes outside C) or "ERROR" (did not run)
    problems: list[str] = field(default_factory=list)
    ran: str = ""  # which configuration the call ran, when known

    @property
    def ok(self) -> bool:
        return self.verdict == "ok"


@dataclass
class CheckReport:
    """What :func:`check` found: one row per case and dtype; ``ok`` when every row is."""

    kernel: str
    config: dict[str, int] | None
    device: str
    rows: list[CheckRow]

    @property
    def ok(self) -> bool:
        return bool(self.rows) and all(r.ok for r in self.rows)

    @property
    def failures(self) -> list[CheckRow]:
        return [r for r in self.rows if not r.ok]

    def __str__(self) -> str:
        cfg = "" if not self.config else " " + " ".join(f"{k}={v}" for k, v in self.config.items())
        head = f"cumm.check {self.kernel}{cfg} on {self.device}: "
        head += "ok" if self.ok else f"{len(self.failures)} of {len(self.rows)} FAILED"
        cells = [("case", "M x N x K", "dtype", "rel. error", "verdict", "ran")]
        for r in self.rows:
            err = "-" if r.rel_err is None else f"{r.rel_err:.1e}"
            cells.append((r.case, "x".join(map(str, r.shape)), r.dtype, err, r.verdict, r.ran or "-"))
        widths = [max(len(c[i]) for c in cells) for i in range(len(cells[0]))]
        lines = [head, ""]
        for c in cells:
            lines.append(
                "  ".join(
                    v.ljust(w) if i in (0, 2, 5) else v.rjust(w) for i, (v, w) in enumerate(zip(c, widths, strict=True))
                ).rstrip()
            )
        for r in self.failures:
            lines.append(f"{r.verdict} {r.case} {'x'.join(map(str, r.shape))} {r.dtype}: " + "; ".join(r.problems))
        return "\n".join(lines)


def standard_cases(
    shapes: Iterable[Sequence[int]] | None = None,
    *,
    large: bool = True,
    batches: bool = True,
    transposed: bool = False,
    glu: bool = False,
) -> list[Case]:
    """The standard set, or contiguous cases of ``shapes`` (M, N, K); ``large=False`` drops big ones,
    ``batches=False`` the batched ones; ``transposed=True`` adds the column-major operands (TRANSPOSED_CASES);
    ``glu=True``: the standard set's N rounded up to a multiple of 8 (:func:`glu_case`; given shapes are kept)."""
    if shapes is None:
        cases = [c for c in STANDARD_CASES + (TRANSPOSED_CASES if transposed else ()) if batches or not c.batch]
        if glu:
            cases = [glu_case(c) for c in cases]
    else:
        cases = []
        for s in shapes:
            t = tuple(s)
            if len(t) != 3 or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in t):
                raise ValueError(f"a shape is three positive ints (M, N, K), got {s!r}")
            cases.append(Case("x".join(map(str, t)), *t))
    return [c for c in cases if large or c.M * c.N * c.K < LARGE]


def check(
    kernel: str | KernelSpec,
    config: Mapping[str, int] | None = None,
    *,
    dtypes: Sequence[str] | None = None,
    shapes: Iterable[Sequence[int]] | None = None,
    large: bool | None = None,
    epilogue: str | None = None,
    activation: str | None = None,
    reference=None,
    glu: str | None = None,
    out_dtype: str | None = None,
    scale_result: float | None = None,
) -> CheckReport:
    """Run ``kernel`` (a registered name, or its spec) through ``cumm.matmul(..., kernel=kernel, config=config)``
    on the standard odd shapes (or ``shapes``, each M, N, K) in each of ``dtypes`` (default: the spec's), and
    report every case: error against float64 with C NaN-poisoned, guard bands around C for writes outside it.

    ``config=None`` runs what ``cumm.matmul`` picks for a named kernel (a tuned entry, or the spec's "small"
    tiles for a small product, else the defaults): the "ran" column says which. ``large=False`` leaves out
    the 2048 cube (default: left out only under compute-sanitizer). Needs a GPU.

    ``epilogue`` (a snippet) and ``activation`` run fused (``cumm.matmul(..., epilogue=, activation=)``); the
    expected result is ``reference`` (a callable (v, row, col) or an expression, see cumm/tools/epiref.py) over
    alpha * A @ B, after the activation, before beta * C.

    ``glu`` (an activation's name): each case runs ``cumm.matmul(a, cumm.glu_weight(w1, w3), glu=glu)``, N being C's
    columns (B has 2N; the standard set's N rounded up to a multiple of 8), against the float64
    act(alpha * a @ w1) * (alpha * a @ w3), then ``activation`` and ``reference`` over it at C's (row, col), as
    matmul applies them; a rung without ``KernelSpec.glu``, a float32 dtype or a shape whose N is not a multiple of 8
    is a ValueError before the GPU is touched.

    ``out_dtype`` ("float8_e4m3fn" or "float8_e5m2"; needs torch): C is FP8, fp8(scale_result * v) after the
    epilogue (``scale_result`` a number, default 1), against the float64 result scaled and clamped to the format's
    range, within 1.5 times the error of the format's own rounding of it (cumm/tools/check_fp8.py); bfloat16 and
    float16 inputs only (default: the spec's), the cases with beta left out (an FP8 C takes none).
    """
    from . import epiref as _epiref

    _epiref.check_args(epilogue, activation, reference)
    epi = {k: v for k, v in (("epilogue", epilogue), ("activation", activation), ("glu", glu)) if v is not None}
    from ..ladder import get_spec
    from ..runtime.timing import gpu_unavailable

    name = kernel.name if isinstance(kernel, KernelSpec) else kernel
    spec = get_spec(name)
    if isinstance(kernel, KernelSpec) and spec is not kernel:
        raise ValueError(
            f"this spec of {name!r} is not the registered one: cumm.register(spec) it first "
            "(replace=True to replace the registered one)"
        )
    if spec.kind != "gemm":
        raise ValueError(f"kernel {name!r} is a {spec.kind} kernel; cumm.check runs matrix-product (gemm) kernels")
    dtypes = _fp8.default_dtypes(spec.dtypes, out_dtype) if dtypes is None else dtypes
    dtypes = tuple((dtypes,) if isinstance(dtypes, str) else dtypes)
    _fp8.check_args(out_dtype, dtypes, scale_result)
    if out_dtype is not None:
        epi = {**epi, "out_dtype": out_dtype, "scale_result": scale_result}
    for d in dtypes:
        if d not in TOLERANCES:
            raise ValueError(f"dtype {d!r} is not one cumm.check knows; choose from {', '.join(TOLERANCES)}")
    if config is not None:
        spec.resolve(config)  # a bad configuration is reported before the GPU is touched
    if large is None:
        large = not os.environ.get(UNDER_SANITIZER)
    from ..runtime.render import supports_batch

    cases = standard_cases(
        shapes, large=large, batches=supports_batch(spec), transposed=spec.reads_transposed, glu=glu is not None
    )
    cases = [c for c in cases if out_dtype is None or c.beta == 0.0]
    _epiref.check_glu(glu, dtypes, [spec.name], [c.shape for c in cases])  # matmul's rules, before the GPU
    reason = gpu_unavailable()
    if reason:
        raise RuntimeError(
            f"{reason}; cumm.check runs the kernel on an NVIDIA GPU "
            "(cumm.compile(name, arch='sm_90') compiles it without one)"
        )
    import cupy

    fused = _epiref.transform(activation, reference)
    device = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["name"]
    device = device.decode() if isinstance(device, bytes) else str(device)
    rows: list[CheckRow] = []
    broken = ""
    rng = cupy.random.default_rng(12345)
    for dtype in dtypes:
        for case in cases:
            if broken:  # a sticky CUDA error: the context can run nothing more
                rows.append(CheckRow(case.name, case.shape, dtype, None, "ERROR", [f"not run: {broken}"]))
                continue
            row = _run_case(spec.name, config, case, dtype, rng, epi, fused)
            rows.append(row)
            if row.verdict == "ERROR" and _sticky(row.problems[0]):
                broken = "an earlier case left a CUDA error that poisons the process (illegal address?)"
    return CheckReport(spec.name, None if config is None else dict(config), device, rows)


def _sticky(message: str) -> bool:
    return any(
        w in message
        for w in ("illegal", "ILLEGAL", "misaligned", "MISALIGNED", "launch failure", "LAUNCH_FAILED", "unspecified")
    )


def _dtype(name: str):
    import cupy

    if name == "bfloat16":
        from ..runtime.arrays import bfloat16  # ml_dtypes' type: CuPy >= 14 takes it as a dtype

        return cupy.dtype(bfloat16())
    return cupy.dtype(name)


def _operands(case: Case, dtype, rng):
    """A (M x K) and B (K x N), random normal in ``dtype``: contiguous, or views one element into a buffer
    with an odd row length (a misaligned pointer and leading dimension)."""
    import cupy

    M, N, K = case.shape

    def normal(rows, cols):
        return rng.standard_normal((rows, cols), dtype=cupy.float32).astype(dtype)  # (float32 -> half: rounded)

    if case.layout == "transposed":  # column-major views: the transposes of row-major K x M and N x K arrays
        lead = (case.batch,) if case.batch else ()
        return (
            rng.standard_normal((*lead, K, M), dtype=cupy.float32).astype(dtype).swapaxes(-1, -2),
            rng.standard_normal((*lead, N, K), dtype=cupy.float32).astype(dtype).swapaxes(-1, -2),
        )
    if case.batch:
        nb = case.batch
        na = 1 if case.layout == "broadcast" else nb
        a = rng.standard_normal((na, M, K), dtype=cupy.float32).astype(dtype)
        return a, rng.standard_normal((nb, K, N), dtype=cupy.float32).astype(dtype)
    if case.layout == "view":
        return normal(M + 1, K + 3)[1:, 1 : K + 1], normal(K + 2, N + 5)[1:-1, 3 : N + 3]
    return normal(M, K), normal(K, N)


def _glu_operands(case: Case, dtype, rng):
    """(a, b, w1, w3) for a glu= case: w1 and w3 as :func:`_operands` makes B (C's N columns), b =
    cumm.glu_weight(w1, w3) (2N columns) in the case's layout: contiguous, a view into a buffer with an odd row
    length, or column-major (nn.Linear's (2N, K) weight interleaved along dim 0, transposed)."""
    from ..api.glu import glu_weight

    a, w1 = _operands(case, dtype, rng)
    _, w3 = _operands(case, dtype, rng)
    if case.layout == "transposed":  # w1, w3 are transposed views: interleave their (N, K) rows, read b in place
        b = glu_weight(w1.swapaxes(-1, -2), w3.swapaxes(-1, -2), dim=-2).swapaxes(-1, -2)
    else:
        b = glu_weight(w1, w3)
    if case.layout == "view":
        K, n2 = b.shape
        buf = rng.standard_normal((K + 2, n2 + 5), dtype="float32").astype(dtype)
        buf[1:-1, 3 : n2 + 3] = b
        b = buf[1:-1, 3 : n2 + 3]
    return a, b, w1, w3


def _run_case(kernel: str, config, case: Case, dtype_name: str, rng, epi=None, fused=None) -> CheckRow:
    import cupy

    from ..api import matmul as _api
    from ..api.decision import decision

    M, N, K = case.shape
    epi = dict(epi or {})
    out_dtype, scale = epi.pop("out_dtype", None), epi.pop("scale_result", None)  # an FP8 C (check_fp8.py)
    row = CheckRow(case.name, case.shape, dtype_name + (f" -> {out_dtype}" if out_dtype else ""), None, "ok")
    left = GUARD_COLS if out_dtype is None else _fp8.LEFT
    try:
        dtype = _dtype(dtype_name)
        glu = epi.get("glu")
        if glu is None:
            a, b = _operands(case, dtype, rng)
        else:  # b has 2N columns, C and the reference N
            a, b, w1, w3 = _glu_operands(case, dtype, rng)
        if out_dtype is None:
            buf, c = guarded_out(M, N, dtype, odd=case.layout == "view", batch=case.batch)
        else:
            buf, c, tc = _fp8.guarded_out(M, N, out_dtype, odd=case.layout == "view", batch=case.batch)
        sentinel = buf[(0,) * buf.ndim].copy()
        if glu is None:
            ref = as_f64(a) @ as_f64(b)
            ref *= case.alpha
        else:
            from .epiref import glu_pair

            ref = glu_pair(glu, case.alpha * (as_f64(a) @ as_f64(w1)), case.alpha * (as_f64(a) @ as_f64(w3)))
        if fused is not None:  # the epilogue: after alpha, before beta * C
            from .epiref import apply

            ref = apply(fused, ref)
        if case.beta != 0.0:
            c[...] = rng.standard_normal(c.shape, dtype=cupy.float32).astype(dtype)
            ref += case.beta * as_f64(c)
        elif out_dtype is None:
            bits(c)[...] = bits(cupy.full((1, 1), math.nan, dtype=cupy.float32).astype(dtype))  # NaN everywhere
        if out_dtype is None:
            _api.matmul(a, b, kernel=kernel, config=config, out=c, alpha=case.alpha, beta=case.beta, **epi)
            cupy.cuda.get_current_stream().synchronize()
        else:  # torch views of the operands (an FP8 C is a torch tensor), C poisoned by guarded_out
            import torch

            ta, tb, ts = _fp8.as_torch(a), _fp8.as_torch(b), _fp8.scale_tensor(scale)
            _api.matmul(ta, tb, kernel=kernel, config=config, out=tc, alpha=case.alpha, scale_result=ts, **epi)
            torch.cuda.synchronize()
    except Exception as e:
        msg = f"{type(e).__name__}: {e}".strip()
        row.verdict, row.problems = "ERROR", [msg if len(msg) < 2000 else msg[:2000] + " ..."]
        return row
    if config is None and case.alpha == 1.0 and case.beta == 0.0 and out_dtype is None:
        row.ran = decision(a, b, c, kernel=kernel, **epi)  # what the call ran ("" when not known)
    problems = guard_problems(buf, M, N, sentinel, left)
    if out_dtype is None:
        c64, tol = as_f64(c), TOLERANCES[dtype_name]
    else:
        c64, ref, tol = _fp8.compare(tc, ref, out_dtype, scale)
    c64, ref = c64.reshape(-1, N), ref.reshape(-1, N)  # a batch as its products' rows one after another
    of = f" (rows of the {case.batch} products one after another, {M} each)" if case.batch else ""
    bad = ~cupy.isfinite(c64)
    nbad = int(cupy.count_nonzero(bad))
    if nbad:
        rows_, cols_ = cupy.nonzero(bad)
        problems.append(
            f"{nbad} of {c64.size} elements NaN or Inf (never written?) in rows {span(rows_)}, columns "
            f"{span(cols_)}{of}"
        )
    else:
        den = float(cupy.linalg.norm(ref))
        diff = c64 - ref
        err = float(cupy.linalg.norm(diff))
        row.rel_err = err / den if den else err
        if not row.rel_err < tol:
            worst = int(cupy.argmax(cupy.abs(diff)))
            wm, wn = divmod(worst, N)
            wrong = cupy.abs(diff) > tol * max(den / math.sqrt(M * N), 1e-30) * 10
            nw = int(cupy.count_nonzero(wrong))
            where = ""
            if nw:
                rr, cc = cupy.nonzero(wrong)
                where = f"; {nw} element(s) far off in rows {span(rr)}, columns {span(cc)}{of}"
            problems.append(
                f"relative error {row.rel_err:.2e} >= {tol:.0e} (largest at row {wm}, column {wn}: "
                f"{float(c64[wm, wn]):.6g} instead of {float(ref[wm, wn]):.6g}){where}"
            )
    if problems:
        row.verdict, row.problems = "FAIL", problems
    return row


def sanitizer_command(argv: Sequence[str]) -> list[str] | None:
    """compute-sanitizer memcheck running ``python -m cumm <argv>``, or None when it is not on PATH."""
    import shutil
    import sys

    exe = shutil.which("compute-sanitizer")
    if exe is None:
        return None
    return [
        exe,
        "--tool",
        "memcheck",
        "--error-exitcode",
        "1",
        "--print-limit",
        "20",
        sys.executable,
        "-m",
        "cumm",
        *argv,
    ]
