"""An ``out`` the kernels cannot write in place (negative, zero or non-unit column strides, a transposed view,
matrices that are not rows one after another): the product goes into a row-major staging array, copied back
into ``out`` after it (as cupy.matmul does). With beta != 0 the staging array starts as a copy of out."""

from __future__ import annotations

import cupy

from .operands import shares


def writable_in_place(out, batch: tuple[int, ...], M: int, N: int) -> bool:
    """Whether the kernels write ``out`` (the result's shape) as it is: C-contiguous, or every matrix row-major
    with unit column stride and positive row stride at least N, the matrices at positive strides, and the
    (batch, M, N) view of out a view, not a copy."""
    if out.flags.c_contiguous:
        return True
    item = out.dtype.itemsize
    if any(s <= 0 or s % item for d, s in zip(out.shape, out.strides, strict=True) if d > 1):
        return False
    o = out.reshape(batch + (M, N))
    if not shares(o, out):
        return False
    s_row, s_col = o.strides[-2:]
    return (N <= 1 or s_col == item) and (M <= 1 or s_row // item >= N)


def staging(out, beta: float):
    """A C-contiguous array of out's shape and dtype on its device: out's values when beta != 0 (C is read)."""
    with cupy.cuda.Device(out.data.device_id):
        return cupy.ascontiguousarray(out) if beta != 0.0 else cupy.empty(out.shape, out.dtype)
