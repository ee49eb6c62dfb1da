"""Batched and broadcast products (numpy's matmul rules) on the GPU: one launch over the batch, every rung."""

from __future__ import annotations

import math

import pytest

import cumm
from cumm._render import supports_batch

from .conftest import rel_err

pytestmark = pytest.mark.gpu
TOL = 1e-5
# (a's shape, b's shape): 3-D and 4-D batches, broadcasting of either side, odd sizes, 1-D operands
CASES = [
    ((3, 37, 29), (3, 29, 41)),
    ((2, 3, 17, 1), (2, 3, 1, 5)),  # K = 1
    ((4, 1, 33, 65), (1, 5, 65, 7)),  # both broadcast: materialized
    ((1, 31, 13), (6, 13, 19)),  # a broadcast over the batch (stride 0)
    ((5, 7, 9), (9, 11)),  # b one matrix for every product: one product of 35 rows
    ((5, 7, 9), (1, 9, 11)),  # the same as a batch, b read in place for every product
    ((2, 1, 3), (2, 3, 1)),
    ((97,), (4, 97, 3)),  # a vector times a batch of matrices
    ((6, 5, 8), (8,)),  # a batch of matrices times a vector
    ((2, 4097, 3), (3, 2)),
]
# every float32 rung that runs batches (all of them; wgmma_tf32x3 through 3-D tensor maps where it can read the
# operands, else its fallback: tests/test_wgmma_tf32x3.py checks which ran)
KERNELS = [k for k in cumm.kernels(dtype="float32") if supports_batch(cumm.kernel_spec(k))] + ["auto"]


def _ref(a, b):
    import cupy

    return cupy.matmul(a.astype(cupy.float64), b.astype(cupy.float64))


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("shapes", CASES, ids=lambda s: "@".join("x".join(map(str, x)) for x in s))
def test_batched_against_float64(kernel, shapes, rng):
    import cupy

    sa, sb = shapes
    a = rng.standard_normal(sa, dtype=cupy.float32)
    b = rng.standard_normal(sb, dtype=cupy.float32)
    ref = _ref(a, b)
    out = cupy.full(ref.shape, math.nan, dtype=cupy.float32)
    got = cumm.matmul(a, b, kernel=kernel, out=out)
    assert got is out and got.shape == cupy.matmul(a, b).shape
    assert rel_err(got, ref) < TOL, (kernel, shapes)
    fresh = cumm.matmul(a, b, kernel=kernel)  # allocated result, and the cached call's second run
    fresh = cumm.matmul(a, b, kernel=kernel)
    assert fresh.shape == ref.shape and rel_err(fresh, ref) < TOL


@pytest.mark.parametrize("kernel", ["warptile", "tf32x3", "naive"])
def test_batched_views_and_alpha_beta(kernel, rng):
    """Strided batch views (every other matrix, transposed matrices: copied), alpha and beta into out."""
    import cupy

    big = rng.standard_normal((8, 40, 30), dtype=cupy.float32)
    a = big[::2, 3:38, 1:29]  # 4 x 35 x 28, strided
    b = rng.standard_normal((4, 17, 28), dtype=cupy.float32).transpose(0, 2, 1)  # 4 x 28 x 17, column-major
    c0 = rng.standard_normal((4, 35, 17), dtype=cupy.float32)
    out = c0.copy()
    cumm.matmul(a, b, kernel=kernel, out=out, alpha=-0.5, beta=2.0)
    ref = -0.5 * _ref(a, b) + 2.0 * c0.astype(cupy.float64)
    assert rel_err(out, ref) < TOL


def test_a_rung_without_batches_says_so(rng):
    import cupy

    a = rng.standard_normal((2, 8, 8), dtype=cupy.float32).astype(cupy.float16)
    # no half rung runs batches in one launch: the message says what does instead of listing none
    with pytest.raises(
        ValueError,
        match=r"kernel 'mma' does not run batched products .*; no rung runs batched float16 products in one "
        r"launch: kernel='auto' runs them one at a time",
    ):
        cumm.matmul(a, a, kernel="mma")


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_half_batches_run_one_product_at_a_time(dt, rng):
    """kernel="auto" on batched half products: one launch a product, operands broadcast, out= and beta, torch."""
    import cupy

    from .test_half import _cublas, _dtype, _err

    a = rng.standard_normal((2, 3, 129, 70), dtype=cupy.float32).astype(_dtype(dt))
    b = rng.standard_normal((3, 70, 200), dtype=cupy.float32).astype(_dtype(dt))  # broadcast over the first axis
    got = cumm.matmul(a, b)
    assert got.shape == (2, 3, 129, 200) and got.dtype == a.dtype
    for i in range(2):
        for j in range(3):
            ref = a[i, j].astype(cupy.float64) @ b[j].astype(cupy.float64)
            assert _err(got[i, j], ref) <= 1.5 * _err(_cublas(a[i, j], b[j]), ref) + 1e-7, (i, j)
    c0 = rng.standard_normal((2, 3, 129, 200), dtype=cupy.float32)
    out = c0.copy()
    cumm.matmul(a, b[0], out=out, alpha=0.5, beta=-1.0)  # a 2-D b broadcast to every product; FP32 result
    ref = 0.5 * (a.astype(cupy.float64) @ b[0].astype(cupy.float64)) - c0.astype(cupy.float64)
    assert _err(out, ref) < 1e-5
    # both operands broadcast, (2, 1) @ (1, 3); a 1-D b (a column); a half out with beta
    a21, b13 = a[:, :1], b[None]
    both = cumm.matmul(a21, b13)
    assert both.shape == (2, 3, 129, 200)
    ref = a21.astype(cupy.float64) @ b13.astype(cupy.float64)
    assert _err(both, ref) <= 1.5 * _err(_cublas(a21, b13), ref) + 1e-7  # cuBLAS broadcasts the same way
    v = b[0, :, 5]  # 70
    col = cumm.matmul(a, v)
    assert col.shape == (2, 3, 129)
    refv = a.astype(cupy.float64) @ v.astype(cupy.float64)
    assert _err(col, refv) <= 1.5 * _err(_cublas(a, v), refv) + 1e-7
    c0h = rng.standard_normal((2, 3, 129, 200), dtype=cupy.float32).astype(a.dtype)
    outh = c0h.copy()
    cumm.matmul(a, b, out=outh, alpha=2.0, beta=0.5)
    refh = 2.0 * (a.astype(cupy.float64) @ b.astype(cupy.float64)) + 0.5 * c0h.astype(cupy.float64)
    assert _err(outh, refh) <= 1.5 * _err(refh.astype(cupy.float32).astype(a.dtype), refh) + 1e-7
    torch = pytest.importorskip("torch")
    ta, tb = torch.from_dlpack(a), torch.from_dlpack(b)
    tc = cumm.matmul(ta, tb)
    assert isinstance(tc, torch.Tensor) and tc.shape == (2, 3, 129, 200)
    assert bool((cupy.from_dlpack(tc) == got).all())  # the same kernels on the same data


@pytest.mark.parametrize("dt", ["float16", "bfloat16", "float32"])
def test_a_batch_times_one_matrix_runs_as_one_product(dt, rng):
    """(..., M, K) @ (K, N) with a's matrices stacked: one product of batch * M rows, through any rung that runs
    2-D products (a named half rung too, which has no batched variant); a's matrices not stacked (every other
    one): the batched path."""
    import cupy

    from cumm._matmul import decision

    from .test_half import _cublas, _dtype, _err

    half = dt != "float32"
    kernel = "wgmma_ws" if half else "warptile"
    if half and int(cupy.cuda.Device().compute_capability) < 90:
        pytest.skip("wgmma_ws needs sm_90")
    big = rng.standard_normal((6, 3, 129, 72), dtype=cupy.float32).astype(_dtype(dt))
    a = big[::2]  # 3 x 3 x 129 x 72: not stacked
    s = big[:3]  # stacked
    b = rng.standard_normal((72, 200), dtype=cupy.float32).astype(_dtype(dt))
    out = cupy.full((3, 3, 129, 200), math.nan, dtype=a.dtype)
    got = cumm.matmul(s, b, kernel=kernel, out=out)
    assert got is out
    assert decision(s.reshape(-1, 72), b, out.reshape(-1, 200), kernel=kernel).startswith(kernel)
    ref = s.astype(cupy.float64) @ b.astype(cupy.float64)
    bound = 1.5 * _err(_cublas(s, b), ref) + 1e-7 if half else TOL
    assert _err(got, ref) <= bound
    c0 = rng.standard_normal((3, 3, 129, 200), dtype=cupy.float32)
    o32 = c0.copy()
    cumm.matmul(s, b, kernel=kernel, out=o32, alpha=0.5, beta=-1.0)
    assert _err(o32, 0.5 * ref - c0.astype(cupy.float64)) < TOL  # FP32 accumulation, written in FP32
    ref_a = a.astype(cupy.float64) @ b.astype(cupy.float64)
    if half:  # not stacked: the half rungs have no batched variant; auto runs one product at a time
        with pytest.raises(ValueError, match="does not run batched products"):
            cumm.matmul(a, b, kernel=kernel)
        assert _err(cumm.matmul(a, b), ref_a) <= 1.5 * _err(_cublas(a, b), ref_a) + 1e-7
    else:
        assert _err(cumm.matmul(a, b, kernel=kernel), ref_a) < TOL
    torch = pytest.importorskip("torch")
    ts, tb = torch.from_dlpack(s), torch.from_dlpack(b)
    tc = cumm.matmul(ts, tb, kernel=kernel)
    assert isinstance(tc, torch.Tensor) and tc.shape == (3, 3, 129, 200)
    assert bool((cupy.from_dlpack(tc) == got).all())


def test_batch_shapes_that_do_not_broadcast(rng):
    import cupy

    a = rng.standard_normal((3, 4, 5), dtype=cupy.float32)
    b = rng.standard_normal((2, 5, 6), dtype=cupy.float32)
    with pytest.raises(ValueError, match=r"batch dimensions do not broadcast.*\(3,\).*\(2,\).*3 against 2"):
        cumm.matmul(a, b)
    b3 = rng.standard_normal((3, 5, 6), dtype=cupy.float32)
    with pytest.raises(ValueError, match=r"out has shape \(2, 3, 4, 6\).*needs \(3, 4, 6\)"):
        cumm.matmul(a, b3, out=cupy.empty((2, 3, 4, 6), cupy.float32))


def test_empty_batch_and_zero_k(rng):
    import cupy

    a = cupy.empty((0, 4, 5), dtype=cupy.float32)
    b = rng.standard_normal((5, 6), dtype=cupy.float32)
    assert cumm.matmul(a, b).shape == (0, 4, 6)
    z = cumm.matmul(cupy.ones((2, 3, 0), cupy.float32), cupy.ones((2, 0, 4), cupy.float32))
    assert z.shape == (2, 3, 4) and float(abs(z).max()) == 0.0
