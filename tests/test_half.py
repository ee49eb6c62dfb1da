"""The half-precision tensor-core rungs on the GPU: float16 and bfloat16 inputs against a float64 product of the
(already rounded) inputs, each error compared with cuBLAS's own on the same inputs, on every kind of shape."""

from __future__ import annotations

import math

import pytest

import cumm

pytestmark = pytest.mark.gpu
HALF = ("float16", "bfloat16")
KERNELS = cumm.kernels(dtype="float16")
SHAPES = [  # (M, N, K): ones, M = 1, K = 1, K = 7, primes, past the tile grid, deep and thin
    (1, 1, 1),
    (1, 300, 77),
    (129, 1, 300),
    (64, 64, 1),
    (100, 50, 7),
    (127, 131, 137),
    (257, 263, 1031),
    (4097, 72, 64),
    (300, 4097, 40),
    (1024, 1024, 1024),
]


def _dtype(name):
    import cupy

    if name == "bfloat16":
        import ml_dtypes

        return ml_dtypes.bfloat16
    return cupy.dtype(name)


def _inputs(rng, M, N, K, dt):
    a = rng.standard_normal((M, K), dtype="float32").astype(_dtype(dt))
    b = rng.standard_normal((K, N), dtype="float32").astype(_dtype(dt))
    return a, b


def _ref(a, b):
    import cupy

    return a.astype(cupy.float32).astype(cupy.float64) @ b.astype(cupy.float32).astype(cupy.float64)


def _err(c, ref) -> float:
    import cupy

    d = c.astype(cupy.float32).astype(cupy.float64)
    den = float(cupy.linalg.norm(ref))
    return float(cupy.linalg.norm(d - ref)) / den if den else float(cupy.linalg.norm(d))


def _cublas(a, b):
    """cuBLAS on the same inputs: torch.matmul when torch is importable, else cupy.matmul."""
    try:
        import torch
    except ImportError:
        return _cublas_cupy(a, b)
    ta, tb = torch.from_dlpack(a), torch.from_dlpack(b)
    import cupy

    return cupy.from_dlpack(torch.matmul(ta, tb))


def _cublas_cupy(a, b):
    import cupy

    try:
        return cupy.matmul(a, b)
    except Exception as e:  # a CuPy without bfloat16 products
        pytest.skip(f"no cuBLAS baseline for {a.dtype} here (torch missing, cupy: {type(e).__name__})")


@pytest.mark.parametrize("dt", HALF)
@pytest.mark.parametrize("kernel", [*KERNELS, "auto"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_half_against_float64_and_cublas(kernel, shape, dt, rng):
    import cupy

    M, N, K = shape
    a, b = _inputs(rng, M, N, K, dt)
    ref = _ref(a, b)
    out = cupy.full((M, N), math.nan, dtype=a.dtype)
    got = cumm.matmul(a, b, kernel=kernel, out=out)
    assert got is out and got.dtype == a.dtype
    ours, theirs = _err(got, ref), _err(_cublas(a, b), ref)
    assert ours <= 1.5 * theirs + 1e-7, f"{kernel} {dt} {shape}: {ours:.3e} against cuBLAS {theirs:.3e}"
    fresh = cumm.matmul(a, b, kernel=kernel)  # a new result in the inputs' dtype
    assert fresh.dtype == a.dtype and _err(fresh, ref) <= 1.5 * theirs + 1e-7


# wgmma_ws with one consumer warpgroup (whole tiles: for products with few tiles), with direct and TMA-store
# epilogues: every named configuration (the ones auto takes for few tiles) and two more 64-row tiles
ONE_WG = [
    *(dict(c) for c in cumm.kernel_spec("wgmma_ws").configs.values() if c.get("WGS") == 1),
    dict(WGS=1, NUM_THREADS=256, BM=64, BN=128, EPI=1, STAGES=6, SK=0),
    dict(WGS=1, NUM_THREADS=256, BM=64, BN=256, EPI=1, STAGES=4, SK=0),
    dict(WGS=1, NUM_THREADS=256, BM=128, BN=64, EPI=1, STAGES=8, SK=0),
    dict(WGS=1, NUM_THREADS=256, BM=64, BN=64, EPI=0, STAGES=8, SK=0),
]


@pytest.mark.parametrize("dt", HALF)
@pytest.mark.parametrize(
    "config",
    ONE_WG,
    ids=lambda c: f"{c['BM']}x{c['BN']}_EPI{c['EPI']}_S{c['STAGES']}",
)
@pytest.mark.parametrize("shape", [*SHAPES, (128, 4096, 4096), (2112, 4000, 776)], ids=lambda s: "x".join(map(str, s)))
def test_one_consumer_warpgroup(shape, config, dt, rng, sm90):
    import cupy

    M, N, K = shape
    a, b = _inputs(rng, M, N, K, dt)
    ref = _ref(a, b)
    theirs = _err(_cublas(a, b), ref)
    for _ in range(2):
        out = cupy.full((M, N), math.nan, dtype=a.dtype)
        cumm.matmul(a, b, kernel="wgmma_ws", config=config, out=out)
        assert _err(out, ref) <= 1.5 * theirs + 1e-7, (
            f"{config} {dt} {shape}: {_err(out, ref):.3e} against {theirs:.3e}"
        )
    wide = cupy.full((M, N), math.nan, dtype=cupy.float32)  # the FP32 accumulator itself, alpha and beta
    wide[...] = 1.0
    cumm.matmul(a, b, kernel="wgmma_ws", config=config, out=wide, alpha=2.0, beta=-1.0)
    # against the exact 2 ab - 1: adding the 1 back in FP32 first cancelled (1 x 1 x 1 with a b = -0.0011: the
    # FP32 result -1.0021865 is right to its last bit, but (wide + 1) / 2ab was off by 2.5e-5)
    assert _err(wide, 2.0 * ref - 1.0) < 1e-5


@pytest.mark.parametrize("dt", HALF)
@pytest.mark.parametrize("layout", ["row", "A^T", "B^T", "both"])
@pytest.mark.parametrize(
    "config",
    [dict(), dict(SK=0), dict(WGS=1, NUM_THREADS=256, BM=128, BN=64, EPI=1, STAGES=8, SK=0)],
    ids=["default", "whole_tiles", "128x64"],
)
@pytest.mark.parametrize("shape", [(1, 1, 1), (127, 131, 137), (300, 1001, 4104), (2112, 4096, 512)], ids=str)
def test_stepped_descriptors_in_every_layout(shape, config, layout, dt, rng, sm90):
    """wgmma_ws's stepped descriptors (each wgmma's a constant step from one a stage) and unsigned slab count,
    A and B row-major or transposed views read in place (M-major A: TA, K-major B: TB), against float64 and cuBLAS's
    own error; stream-K pieces (2112 x 4096 x 512: a last wave a sixth full) and whole tiles."""
    import cupy

    M, N, K = shape
    a, b = _inputs(rng, M, N, K, dt)
    if layout in ("A^T", "both"):
        a = cupy.ascontiguousarray(a.T).T
    if layout in ("B^T", "both"):
        b = cupy.ascontiguousarray(b.T).T
    ref = _ref(a, b)
    out = cupy.full((M, N), math.nan, dtype=a.dtype)
    cumm.matmul(a, b, kernel="wgmma_ws", config=config, out=out)
    theirs = _err(_cublas(cupy.ascontiguousarray(a), cupy.ascontiguousarray(b)), ref)
    assert _err(out, ref) <= 1.5 * theirs + 1e-7, f"{config} {layout} {dt} {shape}: {_err(out, ref):.3e} / {theirs:.3e}"


@pytest.mark.parametrize("dt", HALF)
@pytest.mark.parametrize("kernel", KERNELS)
def test_float32_out_alpha_beta_and_unaligned_views(kernel, dt, rng):
    """out= float32 keeps the FP32 accumulation; alpha and beta; views whose rows are not 16-byte aligned (the
    TMA rungs fall back to mma_swizzled_pipeline)."""
    import cupy

    M, N, K = 131, 97, 75
    big_a, big_b = _inputs(rng, M + 1, N + 3, K + 5, dt)
    a, b = big_a[1:, 2 : K + 2], big_b[:K, 1 : N + 1]  # odd offsets and leading dimensions
    c0 = rng.standard_normal((M, N), dtype=cupy.float32)
    out = c0.copy()
    cumm.matmul(a, b, kernel=kernel, out=out, alpha=0.5, beta=-1.5)
    ref = 0.5 * _ref(a, b) - 1.5 * c0.astype(cupy.float64)
    assert _err(out, ref) < 1e-5  # FP32 accumulation of exact products, written in FP32


# wgmma_ws with beta != 0 and a half result: interior tiles read C through the TMA epilogue (chunk 0 loaded with
# the mainloop, the rest through the staging buffer in turn), edge tiles through direct loads.
BETA_CASES = [  # (M, N, K), overrides
    ((1000, 1000, 100), None),  # interior and edge tiles
    ((2048, 4096, 136), {"SK": 0}),  # 256 interior tiles on 132 blocks: blocks reuse the buffer and barrier
    ((2112, 4000, 776), None),  # a stream-K tail: pieces that end their tile store it
    ((1024, 2048, 64), {"BM": 256, "BN": 128, "STAGES": 3}),  # two chunks per warpgroup down the rows
    ((127, 131, 137), None),  # edge tiles only
]


@pytest.mark.parametrize("dt", HALF)
@pytest.mark.parametrize(
    "case",
    BETA_CASES,
    ids=lambda c: "x".join(map(str, c[0])) + ("-" + "-".join(f"{k}{v}" for k, v in c[1].items()) if c[1] else ""),
)
def test_beta_with_a_half_result(case, dt, rng, sm90):
    import cupy

    (M, N, K), config = case
    a, b = _inputs(rng, M, N, K, dt)
    c0 = rng.standard_normal((M, N), dtype="float32").astype(_dtype(dt))
    ldc = N + 8  # a guard band past column N, which must stay as it is
    big = cupy.full((M, ldc), 7.0, dtype=a.dtype)
    out = big[:, :N]
    out[...] = c0
    prod = 0.5 * _ref(a, b)
    for call in range(2):  # the second call reads the first's result as C
        c_in = out.astype(cupy.float32).astype(cupy.float64)
        cumm.matmul(a, b, kernel="wgmma_ws", config=config, out=out, alpha=0.5, beta=-1.5)
        ref = prod - 1.5 * c_in
        rounded = _err(
            ref.astype(cupy.float32).astype(a.dtype), ref
        )  # the error of rounding the exact result to the half dtype
        ours = _err(out, ref)
        assert ours <= 1.5 * rounded + 1e-7, f"{dt} {case} call {call}: {ours:.3e} against rounding alone {rounded:.3e}"
    assert bool((big[:, N:] == 7.0).all()), "columns past N were written"


@pytest.mark.parametrize("kernel", KERNELS)
def test_nan_and_inf_propagate(kernel, rng):
    import cupy

    a, b = _inputs(rng, 70, 90, 80, "float16")
    a[3, 5] = math.nan
    b[7, 11] = math.inf
    c = cumm.matmul(a, b, kernel=kernel)
    assert bool(cupy.isnan(c[3]).all()), "a NaN in row 3 of a poisons row 3 of C"
    col = c[:, 11].astype(cupy.float32)
    assert bool((cupy.isinf(col) | cupy.isnan(col)).all()), "an inf in B's column 11 reaches every row"


@pytest.mark.parametrize("kernel", KERNELS)
def test_deep_k_in_float16_does_not_overflow(kernel, rng):
    """K = 65536 of values near 1: partial sums far past float16's maximum (65504) stay in FP32 accumulators."""
    import cupy

    K = 65536
    a = (rng.random((64, K), dtype=cupy.float32) * 0.5 + 0.75).astype(cupy.float16)
    b = (rng.random((K, 64), dtype=cupy.float32) * 0.5 + 0.75).astype(cupy.float16)
    c = cumm.matmul(a, b, kernel=kernel, out=cupy.empty((64, 64), cupy.float32))
    ref = _ref(a, b)
    assert bool(cupy.isfinite(c).all()) and _err(c, ref) < 1e-3


def test_half_errors(rng):
    import cupy

    a, b = _inputs(rng, 8, 8, 8, "float16")
    with pytest.raises(TypeError, match=r"a has dtype float16 and b bfloat16"):
        cumm.matmul(a, b.astype(_dtype("bfloat16")))
    with pytest.raises(
        TypeError,
        match=r"kernel 'warptile' multiplies float32 arrays, not float16; the rungs for"
        r" float16: \['mma'",
    ):
        cumm.matmul(a, b, kernel="warptile")
    with pytest.raises(TypeError, match=r"kernel 'mma' multiplies float16 and bfloat16 arrays, not float32"):
        cumm.matmul(a.astype(cupy.float32), b.astype(cupy.float32), kernel="mma")
    with pytest.raises(TypeError, match=r"out has dtype float64; it must be float16 or float32"):
        cumm.matmul(a, b, out=cupy.empty((8, 8), cupy.float64))
    with pytest.raises(ValueError, match=r"split_k=2 is for float32 products"):
        cumm.matmul(a, b, split_k=2)
