"""Guard bands for ``cumm check``: C as a view inside a larger buffer of sentinel values, so that a write outside C
changes a sentinel (above, below, left or right of it), and the exact comparisons that find one."""

from __future__ import annotations

SENTINEL = -31337.0  # the guard bands' value (exact in float32; float16 and bfloat16 keep its rounding)
GUARD_ROWS = 3  # rows of sentinels above and below C
GUARD_COLS = 4  # columns of sentinels left of C (keeps C 16-byte aligned) and at least this many right of it


def guarded_out(M: int, N: int, dtype, odd: bool, batch: int = 0):
    """(buffer, C): C an M x N view of the buffer, GUARD_ROWS rows of sentinels above and below, GUARD_COLS
    columns left and at least GUARD_COLS right (a leading dimension that keeps rows 16-byte aligned, or
    ``odd``: one that does not); with ``batch``, that many such matrices one after another (C a batch x M x N
    view)."""
    import cupy

    right = GUARD_COLS + (-(GUARD_COLS + N + GUARD_COLS) % 4) + (1 if odd else 0)
    lead = (batch,) if batch else ()
    buf = cupy.full((*lead, GUARD_ROWS + M + GUARD_ROWS, GUARD_COLS + N + right), SENTINEL, dtype=cupy.float32)
    buf = buf.astype(dtype)
    return buf, buf[..., GUARD_ROWS : GUARD_ROWS + M, GUARD_COLS : GUARD_COLS + N]


def bits(x):
    """``x`` viewed as unsigned integers of its width: exact comparisons, NaN included, for every dtype."""
    import cupy

    return x.view({1: cupy.uint8, 2: cupy.uint16, 4: cupy.uint32, 8: cupy.uint64}[x.dtype.itemsize])


def as_f64(x):
    import cupy

    return x.astype(cupy.float32).astype(cupy.float64) if x.dtype.itemsize < 4 else x.astype(cupy.float64)


def guard_problems(buf, M: int, N: int, sentinel, left: int = GUARD_COLS) -> list[str]:
    """Where sentinels changed: above, below, left or right of C (of each product's C in a batch); ``left``: the
    guard columns left of C."""
    import cupy

    changed = bits(buf) != bits(sentinel)  # bit patterns: a NaN written there counts
    r0, r1, c0, c1 = GUARD_ROWS, GUARD_ROWS + M, left, left + N
    regions = (
        ("above C (rows before row 0)", changed[..., :r0, :]),
        ("below C (rows past row M - 1)", changed[..., r1:, :]),
        ("left of C (columns before column 0)", changed[..., r0:r1, :c0]),
        ("right of C (columns past column N - 1, inside the leading dimension)", changed[..., r0:r1, c1:]),
    )
    out = []
    for where, mask in regions:
        n = int(cupy.count_nonzero(mask))
        if n:
            out.append(f"out-of-bounds write: {n} guard value(s) overwritten {where}")
    return out


def span(idx) -> str:
    lo, hi = int(idx.min()), int(idx.max())
    return str(lo) if lo == hi else f"{lo}..{hi}"
