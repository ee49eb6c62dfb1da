"""Operand layouts (cumm/plan/operands.py: operand_layouts): what a rung reads for each operand, known before
anything is copied. On the CPU over stand-in arrays (numpy strides, a made-up device pointer); on the GPU, the
copies cumm.plan.repack.lay_out makes have the leading dimension, batch stride and readability decide() read."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from cumm.plan import operands as _operands
from cumm.plan import repack as _repack
from cumm.plan.operands import Layout, operand_layouts

BASE = 1 << 20  # the stand-in arrays' device address of their buffer's first byte (on 16 bytes)
_FRESH = [1 << 30]


class _Array:
    """Enough of a cupy.ndarray for operand_layouts: a numpy view of a buffer, its pointer BASE + its offset."""

    def __init__(self, x: np.ndarray, buf: np.ndarray, base: int):
        self.x, self.buf, self.base = x, buf, base
        self.shape, self.strides, self.dtype, self.ndim, self.size = x.shape, x.strides, x.dtype, x.ndim, x.size
        offset = x.__array_interface__["data"][0] - buf.__array_interface__["data"][0]
        self.data = SimpleNamespace(ptr=base + offset, mem=id(buf))
        self.flags = SimpleNamespace(c_contiguous=x.flags.c_contiguous)

    def reshape(self, *shape):
        y = self.x.reshape(*shape)
        return _Array(y, self.buf, self.base) if np.shares_memory(y, self.buf) else _fresh(y)

    def __getitem__(self, idx):
        return _Array(self.x[idx], self.buf, self.base)

    @property
    def T(self):
        return _Array(self.x.T, self.buf, self.base)


def _fresh(y: np.ndarray) -> _Array:
    """A copy in a new buffer (on 256 bytes, as CuPy's pool gives)."""
    y = np.ascontiguousarray(y).copy()
    _FRESH[0] += 1 << 24
    return _Array(y, y, _FRESH[0])


def array(shape, dtype="float32", offset: int = 0) -> _Array:
    """A C-contiguous stand-in array, ``offset`` bytes past a 16-byte boundary."""
    n = math.prod(shape) * np.dtype(dtype).itemsize
    buf = np.zeros(n + offset, np.uint8)
    x = buf[offset:].view(dtype).reshape(shape)
    return _Array(x, buf, BASE)


@pytest.fixture(autouse=True)
def stand_in_cupy(monkeypatch):
    shim = SimpleNamespace(
        broadcast_to=lambda x, shape: _Array(np.broadcast_to(x.x, shape), x.buf, x.base),
        ascontiguousarray=lambda x: x if x.flags.c_contiguous else _fresh(x.x),
    )
    monkeypatch.setattr(_operands, "cupy", shim)


def facts(layout: Layout) -> tuple:
    return layout.copy, layout.ld, layout.bs, layout.transposed, layout.readable


def test_a_row_major_matrix_is_read_as_it_is():
    rows, in_place = operand_layouts(array((64, 48)), ())
    assert facts(rows) == facts(in_place) == ("", 48, 0, 0, 1)
    padded = array((64, 51))[:, :48]  # rows 204 bytes apart: not on 16 bytes
    assert facts(operand_layouts(padded, ()).rows) == ("", 51, 0, 0, 0)
    shifted = array((64, 48), offset=4)[:, :]
    assert facts(operand_layouts(shifted, ()).rows) == ("", 48, 0, 0, 0)


def test_a_transposed_view_is_read_in_place_or_copied():
    w = array((48, 64), "float16")
    rows, in_place = operand_layouts(w.T, ())
    assert facts(in_place) == ("", 64, 0, 1, 1)  # its column stride is its ld
    assert facts(rows) == ("transposed", _repack.padded_ld(48, 2), 0, 0, 1)  # a tiled copy, rows on 16 bytes
    assert rows.src.shape == (64, 48)
    odd = array((48, 63), "float16")[:, :60].T  # columns 126 bytes apart: the copy engine cannot read them
    rows, in_place = operand_layouts(odd, ())
    assert in_place == rows and facts(rows) == ("transposed", 48, 0, 0, 1)


def test_a_layout_neither_reads_is_copied_by_cupy_first():
    x = array((16, 16))[::2, ::2]  # every other element
    rows, in_place = operand_layouts(x, ())
    assert in_place == rows and facts(rows) == ("", 8, 0, 0, 1)
    assert rows.src.data.ptr != x.data.ptr and rows.src.flags.c_contiguous


def test_a_batch_of_row_major_matrices():
    x = array((3, 40, 24))
    assert facts(operand_layouts(x, (3,)).rows) == ("", 24, 40 * 24, 0, 1)
    odd = array((3, 40, 25))[:, :, :24]  # rows 100 bytes apart
    assert facts(operand_layouts(odd, (3,)).in_place) == ("", 25, 40 * 25, 0, 0)


def test_a_batch_of_transposed_views():
    x = array((3, 48, 64), "float16")
    t = _Array(x.x.transpose(0, 2, 1), x.buf, x.base)  # (3, 64, 48), each matrix column-major
    rows, in_place = operand_layouts(t, (3,))
    assert facts(in_place) == ("", 64, 48 * 64, 1, 1)
    assert facts(rows) == ("transposed", 48, 64 * 48, 0, 1)
    flat = array((3 * 64 * 48 + 2,), "float16")  # matrices 6146 bytes apart: not on 16
    odd = _Array(np.lib.stride_tricks.as_strided(flat.x, (3, 64, 48), (2 * (64 * 48 + 1), 2, 128)), flat.buf, BASE)
    rows, in_place = operand_layouts(odd, (3,))
    assert in_place == rows and facts(rows) == ("transposed", 48, 64 * 48, 0, 1)


def test_a_batch_of_another_layout_is_copied_by_cupy():
    x = array((3, 16, 16))[:, ::2, ::2]
    rows, in_place = operand_layouts(x, (3,))
    assert in_place == rows and facts(rows) == ("", 8, 64, 0, 1)


def test_one_matrix_for_every_product_has_no_batch_stride():
    b = array((1, 48, 64))
    assert facts(operand_layouts(b, (5,)).rows) == ("", 64, 0, 0, 1)
    assert operand_layouts(b, (5,)).rows.src.shape == (48, 64)


def test_an_operand_broadcast_over_part_of_the_batch():
    a = array((1, 3, 8, 8))
    rows, _ = operand_layouts(a, (2, 3))
    assert facts(rows) == ("", 8, 64, 0, 1)  # broadcast, then reshaped: CuPy copies (no view merges the batch)
    assert rows.src.shape == (6, 8, 8)


# --------------------------------------------------------------------------------------------------
# The copies agree with the facts (GPU)
# --------------------------------------------------------------------------------------------------


def _gpu_cases():
    import cupy

    def data(shape, dtype):
        return (cupy.arange(math.prod(shape)) % 251).astype(dtype).reshape(shape)

    yield "transposed view", data((48, 64), cupy.float16).T, ()
    yield "odd transposed view", data((48, 63), cupy.float16)[:, :60].T, ()
    yield "batch of transposed views", data((3, 48, 64), cupy.float16).transpose(0, 2, 1), (3,)
    flat = data((3 * 64 * 48 + 2,), cupy.float16)
    odd = cupy.lib.stride_tricks.as_strided(flat, (3, 64, 48), (2 * (64 * 48 + 1), 2, 128))
    yield "batch of transposed views, matrices off 16 bytes", odd, (3,)
    yield "every other element", data((16, 16), cupy.float32)[::2, ::2], ()
    yield "batch, every other element", data((3, 16, 16), cupy.float32)[:, ::2, ::2], (3,)
    yield "rows off 16 bytes", data((64, 51), cupy.float32)[:, :48], ()
    yield "one matrix for a batch", data((1, 48, 64), cupy.float32), (5,)
    yield "broadcast over part of the batch", data((1, 3, 8, 8), cupy.float32), (2, 3)


@pytest.mark.gpu
def test_laid_out_operands_are_what_decide_read(monkeypatch):
    import cupy

    monkeypatch.setattr(_operands, "cupy", cupy)
    for name, x, batch in _gpu_cases():
        rows, cols = x.shape[-2:]
        one = math.prod(x.shape[:-2]) == 1
        want = x.reshape(1, rows, cols) if one else cupy.broadcast_to(x, batch + (rows, cols)).reshape(-1, rows, cols)
        for layout in operand_layouts(x, batch):
            x3 = _repack.lay_out(layout, bool(batch))
            item = x3.dtype.itemsize
            assert x3.shape == want.shape and cupy.array_equal(x3, want), name
            if layout.transposed:
                assert x3.strides[1:] == (item, layout.ld * item), name
            else:
                assert x3.strides[1:] == (layout.ld * item, item) or rows == 1, name
            assert x3.shape[0] == 1 or x3.strides[0] == layout.bs * item, name
            readable = int(x3.data.ptr % 16 == 0 and layout.ld * item % 16 == 0 and layout.bs * item % 16 == 0)
            assert readable == layout.readable, name
            if not layout.transposed:  # rows the copy engine reads
                y = _repack.pad_rows(x3, bool(batch))
                assert y.shape == x3.shape and cupy.array_equal(y, want), name
                assert y.strides[1] == _repack.copy_engine_ld(cols, item) * item, name
