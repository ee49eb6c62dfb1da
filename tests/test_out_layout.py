"""An ``out`` that is not row-major (negative, zero-free non-unit strides, transposed, batches reversed) is
written through a row-major staging array and copied back, as cupy.matmul does (CuPy's TestMatmulOut); numpy's
semantics for out with broadcasting, 1-D operands and 0-size products, for every dtype cumm takes."""

from __future__ import annotations

import math

import pytest

import cumm

from .test_half import _cublas, _dtype, _err

pytestmark = pytest.mark.gpu
DTYPES = ["float32", "float16", "bfloat16"]


def _outs(shape, dt):
    """Views of ``shape`` the kernels cannot write in place, each with the array it lives in."""
    import cupy

    views = []
    if len(shape) >= 1:
        big = cupy.zeros(shape, dt)
        views.append((big[::-1], big))  # CuPy's TestMatmulOut case: cupy.zeros((2, 4))[::-1]
    if len(shape) >= 2:
        big = cupy.zeros((*shape[:-2], shape[-1], shape[-2]), dt)
        views.append((big.swapaxes(-1, -2), big))  # out.T
        big = cupy.zeros((*shape[:-1], 2 * shape[-1]), dt)
        views.append((big[..., ::2], big))  # every other column
        big = cupy.zeros((*shape[:-1], shape[-1] + 3), dt)
        views.append((big[..., ::-1][..., 3:], big))  # columns reversed
    if len(shape) >= 3:
        big = cupy.zeros(shape, dt)
        views.append((big[::-1].swapaxes(-1, -2).copy().swapaxes(-1, -2)[::-1], big))  # column-major matrices
    return views


CASES = [
    ((2, 3), (3, 4)),
    ((33, 17), (17, 65)),
    ((3, 31, 20), (3, 20, 9)),
    ((2, 1, 7, 16), (3, 16, 5)),  # broadcast
    ((5, 16), (16,)),  # matrix @ vector: a 1-D out
    ((4, 8, 16), (16, 24)),  # a batch times one matrix
]


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shapes", CASES, ids=lambda s: "@".join("x".join(map(str, x)) for x in s))
def test_out_views_are_written(shapes, dt, rng):
    """Each view gets the product (NaN-poisoned first); alpha/beta read the view's old values; nothing outside the
    view is written; the result is out itself."""
    import cupy

    h = _dtype(dt)
    a = rng.standard_normal(shapes[0], dtype=cupy.float32).astype(h)
    b = rng.standard_normal(shapes[1], dtype=cupy.float32).astype(h)
    ref = a.astype(cupy.float64) @ b.astype(cupy.float64)
    theirs = _cublas(a, b)
    bound = 1.5 * _err(theirs, ref) + 1e-6
    for out, big in _outs(ref.shape, h):
        big[...] = 7
        out[...] = math.nan
        got = cumm.matmul(a, b, out=out)
        assert got is out
        assert _err(out, ref) <= bound, (out.strides, _err(out, ref), bound)
        c0 = rng.standard_normal(ref.shape, dtype=cupy.float32).astype(h)
        out[...] = c0
        cumm.matmul(a, b, out=out, alpha=0.5, beta=-2.0)
        want = 0.5 * ref - 2.0 * c0.astype(cupy.float64)
        assert _err(out, want) <= 1.5 * _err(want.astype(cupy.float32).astype(h), want) + 1e-6, out.strides
        if big.size != out.size:  # the elements out does not cover are untouched
            n_seven = int((big == 7).sum())
            assert n_seven >= big.size - out.size, "elements outside out were written"


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_float32_out_view_for_half_inputs(dt, rng):
    import cupy

    h = _dtype(dt)
    a = rng.standard_normal((3, 40, 24), dtype=cupy.float32).astype(h)
    b = rng.standard_normal((3, 24, 56), dtype=cupy.float32).astype(h)
    ref = a.astype(cupy.float64) @ b.astype(cupy.float64)
    out = cupy.full((3, 56, 40), math.nan, cupy.float32).swapaxes(1, 2)[::-1]
    cumm.matmul(a, b, out=out)
    assert _err(out, ref) < 1e-5


def test_out_view_matches_cupy_matmul(rng):
    """The same call into the same kind of view as cupy.matmul: the same values (FP32, K small: exact sums)."""
    import cupy

    a = cupy.arange(6, dtype=cupy.float32).reshape(2, 3)
    b = cupy.arange(12, dtype=cupy.float32).reshape(3, 4)
    mine, theirs = cupy.zeros((2, 4), cupy.float32)[::-1], cupy.zeros((2, 4), cupy.float32)[::-1]
    cumm.matmul(a, b, out=mine)
    cupy.matmul(a, b, out=theirs)
    assert bool((mine == theirs).all())


def test_zero_size_and_repeated_calls(rng):
    """0-size products into views return out untouched; a second call with the same view (not cached: staged
    again) gives the same result."""
    import cupy

    a = rng.standard_normal((0, 5), dtype=cupy.float32)
    b = rng.standard_normal((5, 3), dtype=cupy.float32)
    out = cupy.zeros((3, 0), cupy.float32).T
    assert cumm.matmul(a, b, out=out) is out
    a = rng.standard_normal((9, 5), dtype=cupy.float32)
    out = cupy.zeros((3, 9), cupy.float32).T
    first = cumm.matmul(a, b, out=out).copy()
    out[...] = math.nan
    cumm.matmul(a, b, out=out)
    assert bool((out == first).all())
    assert _err(out, a.astype(cupy.float64) @ b.astype(cupy.float64)) < 1e-6


def test_torch_out_transposed(rng):
    torch = pytest.importorskip("torch")
    import cupy

    a = torch.randn(37, 19, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(19, 23, device="cuda", dtype=torch.bfloat16)
    out = torch.full((23, 37), float("nan"), device="cuda", dtype=torch.bfloat16).T
    assert cumm.matmul(a, b, out=out) is out
    ref = cupy.from_dlpack(a.double()) @ cupy.from_dlpack(b.double())
    assert _err(cupy.from_dlpack(out.float()), ref) <= 1.5 * _err(cupy.from_dlpack((a @ b).float()), ref) + 1e-6
