"""A benchmark's result rows and the shapes they name: parsing ``MxNxK``, the one rule for ``beta``, TFLOP/s, and
:func:`make_row`, which refuses a time to an unverified result.

Plain data, no GPU: apart from the measurement (:mod:`.bench`) so that the report (:mod:`.bench_report`), the
operand sets and calls (:mod:`.bench_calls`) and the command line's argument parsing build on it without the timing
rounds, and tests run it on a CPU.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..core.dtypes import TOLERANCE as TOLERANCES
from ..plan.operands import real_scalar

Shape = tuple[int, int, int]
Row = dict[str, object]

CUBLAS = "cublas"  # the baseline's name in results
UNFUSED = "unfused"  # glu='s baseline in results: torch's two products and elementwise, act(x @ w1) * (x @ w3)


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


def check_beta(beta: object) -> float:
    """``beta`` as a float, or ValueError saying what is wrong: matmul's rule for alpha and beta (a finite real
    number that float32 can hold), every failure a ValueError (a bad option value)."""
    try:
        return real_scalar(beta, "beta")
    except TypeError as e:
        raise ValueError(str(e)) from None


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
    columns: int | None = None,
) -> Row:
    """One result. A row is "ok" only if it was verified (rel_err < its tolerance) and timed; otherwise it is
    "FAIL" and carries no time, so a wrong kernel can never show a speed. ``columns``: the product's columns when
    they are not C's N (glu=: 2N), for the TFLOP/s."""
    M, N, K = shape
    if rel_err is not None and not math.isfinite(rel_err):
        rel_err, error = None, error or "result contains NaN or Inf"
    ok = error is None and rel_err is not None and rel_err < tolerance and ms is not None
    if not ok and error is None and rel_err is not None:
        error = f"relative error {rel_err:.2e} >= {tolerance:.0e}"
    tf = tflops(M, N if columns is None else columns, K, ms) if ok else None
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
