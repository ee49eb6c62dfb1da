"""Batched and broadcast products (numpy's matmul rules) on the GPU: one launch over the batch, every rung."""

from __future__ import annotations

import math

import numpy as np
import pytest

import cumm
from cumm.runtime.render import supports_batch

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
    """Every rung of the ladder runs batches; a kernel that does not (here mma's template registered without
    CUMM_BATCH()) says so and lists the rungs that do, of that dtype."""
    import dataclasses

    import cupy

    spec = cumm.kernel_spec("mma")
    text = cumm.kernel_source("mma")
    assert "CUMM_BATCH();" in text
    cumm.register(
        dataclasses.replace(
            spec, name="mma_unbatched", template="mma_unbatched.cu", source=text.replace("CUMM_BATCH();", "")
        ),
        replace=True,
    )
    try:
        a = rng.standard_normal((2, 8, 8), dtype=cupy.float32).astype(cupy.float16)
        with pytest.raises(
            ValueError,
            match=r"kernel 'mma_unbatched' does not run batched products .*; the rungs that do: "
            r"\[.*'mma', 'mma_swizzled_pipeline'.*'wgmma_ws'.*'wgmma_cluster_split_k', 'skinny16', 'wgmma_swap_ab', "
            r"'wgmma_pingpong'\]",
        ):
            cumm.matmul(a, a, kernel="mma_unbatched")
    finally:
        cumm.unregister("mma_unbatched")


# the half rungs that run batches with grid z over the batch (wgmma_ws walks the batch's tiles: tested below)
GRID_Z_HALF = ["mma", "mma_swizzled_pipeline", "wgmma_cluster_split_k", "skinny16", "wgmma_swap_ab"]


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
@pytest.mark.parametrize("kernel", GRID_Z_HALF)
def test_half_grid_z_rungs_run_batches(kernel, dt, rng):
    """mma, mma_swizzled_pipeline, wgmma_cluster_split_k, skinny16 and wgmma_swap_ab on batched and broadcast
    products (HALF_CASES, below): each product against float64 and cuBLAS's error on the same inputs, out
    NaN-poisoned; a float32 out with alpha and beta; one launch (the decision names the rung itself unless its
    operands sent it to its fallback)."""
    import cupy

    from .test_half import _cublas, _dtype, _err

    spec = cumm.kernel_spec(kernel)
    cc = int(cupy.cuda.Device().compute_capability)
    if not spec.supports(cc):
        pytest.skip(f"{kernel} needs compute capability {spec.min_cc}")
    for sa, sb in HALF_CASES:
        a = rng.standard_normal(sa, dtype=cupy.float32).astype(_dtype(dt))
        b = rng.standard_normal(sb, dtype=cupy.float32).astype(_dtype(dt))
        ref = a.astype(cupy.float64) @ b.astype(cupy.float64)
        out = cupy.full(ref.shape, math.nan, dtype=a.dtype)
        got = cumm.matmul(a, b, kernel=kernel, out=out)
        assert got is out
        theirs = _cublas(a, b)
        for idx in np.ndindex(*ref.shape[:-2]):
            bound = 1.5 * _err(theirs[idx], ref[idx]) + 1e-7
            assert _err(got[idx], ref[idx]) <= bound, (kernel, sa, sb, idx, _err(got[idx], ref[idx]), bound)
        c0 = rng.standard_normal(ref.shape, dtype=cupy.float32)
        o32 = c0.copy()
        cumm.matmul(a, b, kernel=kernel, out=o32, alpha=0.5, beta=-1.0)
        assert _err(o32, 0.5 * ref - c0.astype(cupy.float64)) < 1e-5, (kernel, sa, sb)


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
@pytest.mark.parametrize("kernel", GRID_Z_HALF)
def test_half_grid_z_rungs_views_broadcast_and_configs(kernel, dt, rng):
    """Strided and unaligned batch views, a 4-D broadcast, a half out with beta, a named configuration, torch."""
    import cupy

    from cumm.api.decision import decision

    from .test_half import _cublas, _dtype, _err

    spec = cumm.kernel_spec(kernel)
    if not spec.supports(int(cupy.cuda.Device().compute_capability)):
        pytest.skip(f"{kernel} needs compute capability {spec.min_cc}")
    h = _dtype(dt)
    a = rng.standard_normal((2, 3, 200, 136), dtype=cupy.float32).astype(h)
    b = rng.standard_normal((3, 136, 264), dtype=cupy.float32).astype(h)  # broadcast over a's first axis
    got = cumm.matmul(a, b, kernel=kernel)
    ref = a.astype(cupy.float64) @ b.astype(cupy.float64)
    assert got.shape == (2, 3, 200, 264) and got.dtype == h
    theirs = _cublas(a, b)
    for idx in np.ndindex(2, 3):
        assert _err(got[idx], ref[idx]) <= 1.5 * _err(theirs[idx], ref[idx]) + 1e-7, idx
    a3, o3 = a[1], cupy.empty((3, 200, 264), dtype=h)  # read in place: one launch of the rung itself
    cumm.matmul(a3, b, kernel=kernel, out=o3)
    assert decision(a3, b, o3, kernel=kernel).startswith(kernel), decision(a3, b, o3, kernel=kernel)
    big = rng.standard_normal((6, 70, 131), dtype=cupy.float32).astype(h)
    x = big[::2, 1:68, 1:]  # every other matrix, rows of 130 halves, pointer + 2 bytes: not 16-byte aligned
    y = rng.standard_normal((3, 130, 72), dtype=cupy.float32).astype(h)
    c0 = rng.standard_normal((3, 67, 72), dtype=cupy.float32).astype(h)
    out = c0.copy()
    cumm.matmul(x, y, kernel=kernel, out=out, alpha=2.0, beta=0.5)
    refh = 2.0 * (x.astype(cupy.float64) @ y.astype(cupy.float64)) + 0.5 * c0.astype(cupy.float64)
    assert _err(out, refh) <= 1.5 * _err(refh.astype(cupy.float32).astype(h), refh) + 1e-7
    for name, cfg in spec.configs.items():  # the spec's named configurations
        o = cupy.full((3, 200, 264), math.nan, dtype=h)
        cumm.matmul(a3, b, kernel=kernel, config=cfg, out=o)
        ref3 = a3.astype(cupy.float64) @ b.astype(cupy.float64)
        assert _err(o, ref3) <= 1.5 * _err(_cublas(a3, b), ref3) + 1e-7, name
    torch = pytest.importorskip("torch")
    t = cumm.matmul(torch.from_dlpack(a), torch.from_dlpack(b), kernel=kernel)
    assert isinstance(t, torch.Tensor) and bool((cupy.from_dlpack(t) == got).all())


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_half_batches_under_auto(dt, rng, sm90):
    """kernel="auto" on batched half products: one launch of wgmma_ws over the batch's tiles; operands broadcast,
    out= and beta, torch."""
    import cupy

    from cumm.api.decision import decision

    from .test_half import _cublas, _dtype, _err

    a = rng.standard_normal((2, 3, 129, 72), dtype=cupy.float32).astype(_dtype(dt))
    b = rng.standard_normal((3, 72, 200), dtype=cupy.float32).astype(_dtype(dt))  # broadcast over the first axis
    got = cumm.matmul(a, b)
    assert got.shape == (2, 3, 129, 200) and got.dtype == a.dtype
    a3, o3 = a[1], cupy.empty((3, 129, 200), dtype=a.dtype)  # operands read in place: a cached call
    cumm.matmul(a3, b, out=o3)
    assert decision(a3, b, o3).startswith("wgmma_ws"), decision(a3, b, o3)  # one launch over the batch
    ref3 = a3.astype(cupy.float64) @ b.astype(cupy.float64)
    assert _err(o3, ref3) <= 1.5 * _err(_cublas(a3, b), ref3) + 1e-7
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
    v = b[0, :, 5]  # 72
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


# (a's shape, b's shape) of batched half products: odd sizes in every dimension, broadcast operands, more products
# than multiprocessors, a product smaller than one tile
HALF_CASES = [
    ((1, 1, 8), (1, 8, 8)),  # a batch of one
    ((3, 1, 1), (3, 1, 1)),  # 1 x 1 x 1 products (rows of 2 bytes: copied into rows on 16 bytes first)
    ((5, 127, 136), (5, 136, 144)),  # prime M
    ((3, 131, 264), (3, 264, 1000)),
    ((2, 4097, 72), (2, 72, 64)),
    ((4, 33, 8), (4, 8, 4104)),  # K = 8, N past a tile by 8
    ((6, 1, 304), (6, 304, 136)),  # M = 1
    ((1, 31, 64), (6, 64, 136)),  # a broadcast over the batch (read in place, batch stride 0)
    ((6, 31, 64), (1, 64, 136)),  # b broadcast
    ((2, 3, 70, 64), (3, 64, 96)),  # 4-D, b broadcast over the first axis
    ((96, 64, 128), (96, 128, 256)),  # 96 products of one tile: one run of 96 tiles
    ((200, 24, 16), (200, 16, 8)),  # more products than multiprocessors
    ((7, 129, 7), (7, 7, 200)),  # K = 7 (rows of 14 bytes: copied into rows on 16 bytes first)
]
HALF_CONFIGS = [
    None,  # auto
    {},  # wgmma_ws's defaults (128 x 256 tiles, TMA-store epilogue)
    {"SK": 0, "BN": 128, "GM": 4},
    {"EPI": 0},  # direct stores
    dict(cumm.kernel_spec("wgmma_ws").configs["one_warpgroup_64x64"]),
    dict(cumm.kernel_spec("wgmma_ws").configs["one_warpgroup_128x64"]),
    dict(cumm.kernel_spec("wgmma_ws").configs["one_warpgroup_192x64"]),
    dict(cumm.kernel_spec("wgmma_ws").configs["one_warpgroup_128x128"]),
    dict(BM=192, BN=128, WGS=3, NUM_THREADS=512, SK=0),  # three consumer warpgroups (the tiles the rounds pick)
    dict(BM=192, BN=192, WGS=3, NUM_THREADS=512, SK=0, STAGES=3),
]


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
@pytest.mark.parametrize("config", HALF_CONFIGS, ids=lambda c: "auto" if c is None else str(c) or "defaults")
@pytest.mark.parametrize("shapes", HALF_CASES, ids=lambda s: "@".join("x".join(map(str, x)) for x in s))
def test_half_batches_against_float64_and_cublas(shapes, config, dt, rng, sm90):
    """Each product of the batch against float64 and cuBLAS's error on the same inputs; out NaN-poisoned first;
    a half out (TMA-store epilogue through 3-D maps) and a float32 out with alpha and beta."""
    import cupy

    from .test_half import _cublas, _dtype, _err

    sa, sb = shapes
    kernel, cfg = ("auto", None) if config is None else ("wgmma_ws", config)
    a = rng.standard_normal(sa, dtype=cupy.float32).astype(_dtype(dt))
    b = rng.standard_normal(sb, dtype=cupy.float32).astype(_dtype(dt))
    ref = a.astype(cupy.float64) @ b.astype(cupy.float64)
    out = cupy.full(ref.shape, math.nan, dtype=a.dtype)
    got = cumm.matmul(a, b, kernel=kernel, config=cfg, out=out)
    assert got is out
    theirs = _cublas(a, b)
    for idx in np.ndindex(*ref.shape[:-2]):
        bound = 1.5 * _err(theirs[idx], ref[idx]) + 1e-7
        assert _err(got[idx], ref[idx]) <= bound, (idx, _err(got[idx], ref[idx]), bound)
    c0 = rng.standard_normal(ref.shape, dtype=cupy.float32)
    o32 = c0.copy()
    cumm.matmul(a, b, kernel=kernel, config=cfg, out=o32, alpha=0.5, beta=-1.0)
    assert _err(o32, 0.5 * ref - c0.astype(cupy.float64)) < 1e-5  # FP32 accumulation, written in FP32


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
@pytest.mark.parametrize("config", [{}, {"EPI": 0}, HALF_CONFIGS[-1]], ids=str)
@pytest.mark.parametrize(
    "mnk", [(130, 1000, 200), (300, 264, 520), (64, 1003, 136)], ids=lambda s: "x".join(map(str, s))
)
def test_half_batches_keep_out_of_the_guard_bands(mnk, config, dt, rng, sm90):
    """out a view into padded matrices (rows and columns past each product's M x N, which must stay as they are;
    the batch stride is not M * ldc): the 3-D map clips each product's stores; beta != 0 reads C the same way.
    N = 1003 (columns off the 16-byte grid): edge column tiles take the direct stores."""
    import cupy

    from .test_half import _dtype, _err

    M, N, K = mnk
    nb = 3
    a = rng.standard_normal((nb, M, K), dtype=cupy.float32).astype(_dtype(dt))
    b = rng.standard_normal((nb, K, N), dtype=cupy.float32).astype(_dtype(dt))
    pad = 8 + (-N) % 8  # rows of C on 16-byte boundaries
    big = cupy.full((nb, M + 5, N + pad), 7.0, dtype=a.dtype)
    out = big[:, :M, :N]
    c0 = rng.standard_normal((nb, M, N), dtype=cupy.float32).astype(a.dtype)
    out[...] = c0
    cumm.matmul(a, b, kernel="wgmma_ws", config=config, out=out, alpha=0.5, beta=-1.5)
    ref = 0.5 * (a.astype(cupy.float64) @ b.astype(cupy.float64)) - 1.5 * c0.astype(cupy.float64)
    rounded = _err(ref.astype(cupy.float32).astype(a.dtype), ref)
    assert _err(out, ref) <= 1.5 * rounded + 1e-7
    assert bool((big[:, M:, :] == 7.0).all()), "rows past M were written"
    assert bool((big[:, :, N:] == 7.0).all()), "columns past N were written"
    out.fill(math.nan)
    cumm.matmul(a, b, kernel="wgmma_ws", config=config, out=out)
    ref = a.astype(cupy.float64) @ b.astype(cupy.float64)
    assert _err(out, ref) <= 1.5 * _err(ref.astype(cupy.float32).astype(a.dtype), ref) + 1e-7
    assert bool((big[:, M:, :] == 7.0).all()) and bool((big[:, :, N:] == 7.0).all())


@pytest.mark.parametrize("dt", ["float16", "bfloat16", "float32"])
def test_a_batch_times_one_matrix_runs_as_one_product(dt, rng):
    """(..., M, K) @ (K, N) with a's matrices stacked: one product of batch * M rows, through any rung that runs
    2-D products; a's matrices not stacked (every other one): the batched path."""
    import cupy

    from cumm.api.decision import decision

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
    assert decision(s, b, out, kernel=kernel).startswith(kernel)  # the batched call itself is cached
    again = cumm.matmul(s, b, kernel=kernel)  # the cached call, allocating its batched result
    assert again.shape == (3, 3, 129, 200) and bool((again == got).all())
    ref = s.astype(cupy.float64) @ b.astype(cupy.float64)
    bound = 1.5 * _err(_cublas(s, b), ref) + 1e-7 if half else TOL
    assert _err(got, ref) <= bound
    c0 = rng.standard_normal((3, 3, 129, 200), dtype=cupy.float32)
    o32 = c0.copy()
    cumm.matmul(s, b, kernel=kernel, out=o32, alpha=0.5, beta=-1.0)
    assert _err(o32, 0.5 * ref - c0.astype(cupy.float64)) < TOL  # FP32 accumulation, written in FP32
    ref_a = a.astype(cupy.float64) @ b.astype(cupy.float64)
    # not stacked: the batched variant (wgmma_ws walks the batch's tiles; warptile's grid z)
    bound_a = 1.5 * _err(_cublas(a, b), ref_a) + 1e-7 if half else TOL
    assert _err(cumm.matmul(a, b, kernel=kernel), ref_a) <= bound_a
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


def test_more_products_than_grid_z_takes(rng, sm90):
    """wgmma_ws walks the batch's tiles itself: 70000 products (more than the 65535 blocks of grid z) in one launch;
    a rung with grid z over the batch says to split it."""
    import cupy

    from .test_half import _err

    a = rng.standard_normal((70000, 8, 8), dtype=cupy.float32)
    b = rng.standard_normal((70000, 8, 8), dtype=cupy.float32)
    with pytest.raises(ValueError, match=r"a batch of 70000 products is more than CUDA's 65535 blocks in z"):
        cumm.matmul(a, b, kernel="warptile")
    ah, bh = a.astype(cupy.float16), b.astype(cupy.float16)
    out = cupy.full((70000, 8, 8), math.nan, dtype=cupy.float16)
    cumm.matmul(ah, bh, kernel="wgmma_ws", out=out)
    ref = ah.astype(cupy.float64) @ bh.astype(cupy.float64)
    assert _err(out, ref) <= 1.5 * _err(ref.astype(cupy.float32).astype(cupy.float16), ref) + 1e-7


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_half_batches_the_copy_engine_cannot_read(dt, rng, sm90):
    """Views one element past 16 bytes, a broadcast a with an odd row length, out with an odd leading dimension:
    the operands are copied into rows on 16 bytes and the batch still runs (named and auto), alpha and beta."""
    import cupy

    from .test_half import _cublas, _dtype, _err

    h = _dtype(dt)
    a = rng.standard_normal((5, 67, 131), dtype=cupy.float32).astype(h)[..., 1:]  # 5 x 67 x 130, pointer + 2 B
    b = rng.standard_normal((5, 130, 201), dtype=cupy.float32).astype(h)[..., 1:]  # 5 x 130 x 200
    a1 = rng.standard_normal((1, 67, 131), dtype=cupy.float32).astype(h)[..., :130]  # rows of 262 bytes
    big = cupy.full((5, 70, 203), 7.0, dtype=h)
    out = big[:, 1:68, 1:201]  # ldc 203, pointer + 2 B: direct stores
    for x in (a, a1):
        ref = x.astype(cupy.float64) @ b.astype(cupy.float64)
        for kernel in ("wgmma_ws", "auto"):
            out[...] = math.nan
            cumm.matmul(x, b, kernel=kernel, out=out)
            assert _err(out, ref) <= 1.5 * _err(_cublas(x, b), ref) + 1e-7, (kernel, x.shape)
    c0 = rng.standard_normal((5, 67, 200), dtype=cupy.float32).astype(h)
    out[...] = c0
    cumm.matmul(a, b, kernel="wgmma_ws", out=out, alpha=0.5, beta=-1.5)
    ref = 0.5 * (a.astype(cupy.float64) @ b.astype(cupy.float64)) - 1.5 * c0.astype(cupy.float64)
    assert _err(out, ref) <= 1.5 * _err(ref.astype(cupy.float32).astype(h), ref) + 1e-7
    assert bool((big[:, 0] == 7.0).all() and (big[:, 68:] == 7.0).all()), "rows outside out were written"
    assert bool((big[:, :, 0] == 7.0).all() and (big[:, :, 201:] == 7.0).all()), "columns outside out were written"
