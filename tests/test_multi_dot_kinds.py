"""multi_dot takes what matmul takes (torch tensors, CUDA-array-interface and DLPack objects; the result of the
inputs' kind) and float16 / bfloat16 (pairwise through matmul: no chain rung runs half), with matmul's errors."""

from __future__ import annotations

import math

import pytest

import cumm

from .test_half import _cublas, _dtype, _err

pytestmark = pytest.mark.gpu


class _CAI:
    """Only __cuda_array_interface__ (what numba or other libraries hand over)."""

    def __init__(self, x):
        self.x = x
        self.__cuda_array_interface__ = x.__cuda_array_interface__


def _chain_ref(arrays):
    import cupy

    r = arrays[0].astype(cupy.float64)
    for x in arrays[1:]:
        r = r @ x.astype(cupy.float64)
    return r


SHAPES = [[(33, 17), (17, 65), (65, 9)], [(5, 300), (300, 7), (7, 2), (2, 41)], [(128, 64), (64, 1)]]


@pytest.mark.parametrize("dt", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("dims", SHAPES, ids=lambda s: "-".join("x".join(map(str, d)) for d in s))
def test_half_and_float_chains_against_float64(dims, dt, rng):
    import cupy

    h = _dtype(dt)
    arrays = [rng.standard_normal(d, dtype=cupy.float32).astype(h) for d in dims]
    ref = _chain_ref(arrays)
    got = cumm.multi_dot(arrays)
    assert got.dtype == h and got.shape == ref.shape
    if dt == "float32":
        assert _err(got, ref) < 1e-5
    else:  # pairwise in half, as cuBLAS would in the same order: a few roundings of the intermediate products
        theirs = arrays[0]
        for x in arrays[1:]:
            theirs = _cublas(theirs, x)
        assert _err(got, ref) <= 2.0 * _err(theirs, ref) + 1e-3
        out = cupy.full(ref.shape, math.nan, cupy.float32)  # a float32 out: the last product written in FP32
        assert cumm.multi_dot(arrays, out=out) is out
        assert _err(out, ref) <= 2.0 * _err(theirs, ref) + 1e-3
        with pytest.raises(TypeError, match="multiplies float32 arrays, got"):
            cumm.multi_dot([arrays[0], arrays[0].T, arrays[0]], kernel="fused3")


def test_torch_chains_return_torch(rng):
    torch = pytest.importorskip("torch")
    import cupy

    for dt in (torch.float32, torch.float16, torch.bfloat16):
        ts = [torch.randn(d, device="cuda", dtype=dt) for d in SHAPES[0]]
        got = cumm.multi_dot(ts)
        assert isinstance(got, torch.Tensor) and got.dtype == dt and tuple(got.shape) == (33, 9)
        ref = _chain_ref([cupy.from_dlpack(t.float()) for t in ts])
        tol = 1e-5 if dt == torch.float32 else 3e-2
        assert _err(cupy.from_dlpack(got.float()), ref) < tol
        out = torch.empty(9, 33, device="cuda", dtype=dt).T  # a transposed out: staged
        assert cumm.multi_dot(ts, out=out) is out
        assert _err(cupy.from_dlpack(out.float().contiguous()), ref) < tol
    with pytest.raises(TypeError, match=r"arrays\[0\] is a torch.* but arrays\[1\] is a cupy"):
        cumm.multi_dot([ts[0], cupy.asarray(rng.standard_normal((17, 65)), cupy.float32)])


def test_cai_and_dlpack_objects(rng):
    import cupy

    arrays = [rng.standard_normal(d, dtype=cupy.float32) for d in SHAPES[0]]
    got = cumm.multi_dot([_CAI(x) for x in arrays])
    assert isinstance(got, cupy.ndarray)
    assert _err(got, _chain_ref(arrays)) < 1e-5


def test_mixed_dtypes_and_bad_out(rng):
    import cupy

    a = rng.standard_normal((8, 8), dtype=cupy.float32)
    with pytest.raises(TypeError, match=r"arrays\[0\] has dtype float32 and arrays\[1\] float16"):
        cumm.multi_dot([a, a.astype(cupy.float16), a])
    with pytest.raises(TypeError, match="out has dtype float64"):
        cumm.multi_dot([a, a, a], out=cupy.empty((8, 8), cupy.float64))
    with pytest.raises(ValueError, match="out overlaps"):
        cumm.multi_dot([a, a, a], out=a)
