"""wgmma_tf32x3 (gemm/15_wgmma_tf32x3/kernel.cu) on its copy-engine path: odd shapes through padded leading dimensions,
accuracy against cuBLAS FP32 and float64, wide dynamic range, what runs when the copy engine cannot read an
operand, and what auto picks on sm_90. (test_matmul covers it among all rungs on contiguous operands.)"""

from __future__ import annotations

import math

import pytest

import cumm
from cumm.api.decision import decision

from .conftest import check_alpha_beta, rel_err

pytestmark = pytest.mark.gpu
KERNEL = "wgmma_tf32x3"
# (M, N, K): ones, primes, 4097, K = 1 and 7, M = 1, N = 1, partial and whole tiles, deep K
SHAPES = [
    (1, 1, 1),
    (1, 300, 1000),
    (300, 1, 1000),
    (7, 1, 7),
    (127, 131, 137),
    (128, 128, 32),
    (4097, 37, 65),
    (64, 4097, 33),
    (1000, 1000, 1),
    (2048, 2048, 7),
    (521, 523, 4099),
]
# The split (x = big + small, 22 of FP32's 24 bits) and the tensor cores' truncating accumulator over one stage
# (12 wgmma) leave a floor of about 2.5e-7 on random normal data (measured on sm_90); cuBLAS FP32 errs less
# for short K and more past K ~ 1000 (1.2e-6 at 4096^3 against 3.2e-7 here).
FLOOR = 4e-7


@pytest.fixture(autouse=True)
def _hopper(sm90):
    """Every test here runs wgmma_tf32x3: sm_90a only."""


def _padded(rng, rows: int, cols: int):
    """A rows x cols view whose leading dimension is a multiple of 4 (16-byte rows): the copy engine's path."""
    import cupy

    return rng.standard_normal((rows, (cols + 3) // 4 * 4 + 4), dtype=cupy.float32)[:, :cols]


@pytest.mark.parametrize("config", [None, "small"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_odd_shapes_on_the_copy_engine_path(shape, config, rng):
    import cupy

    M, N, K = shape
    a, b = _padded(rng, M, K), _padded(rng, K, N)
    ref = a.astype(cupy.float64) @ b.astype(cupy.float64)
    out = cupy.full((M, N), math.nan, dtype=cupy.float32)
    cfg = None if config is None else dict(cumm.kernel_spec(KERNEL).configs[config])
    cumm.matmul(a, b, kernel=KERNEL, config=cfg, out=out)
    if cfg is None:
        assert decision(a, b, out, kernel=KERNEL).startswith(KERNEL)  # not the fallback
    err = rel_err(out, ref)
    cublas = rel_err(a @ b, ref)
    assert err < max(FLOOR, cublas), f"{shape}: {err:.2e} (cuBLAS FP32 {cublas:.2e})"


# (a's shape, b's shape) of batched products: the batch is the tensor maps' third dimension
BATCHES = [
    ((3, 37, 29), (3, 29, 41)),
    ((4, 1, 1), (4, 1, 1)),
    ((2, 4097, 33), (2, 33, 65)),
    ((1, 31, 13), (6, 13, 19)),  # a broadcast over the batch: matrix 0 for every product
    ((5, 7, 9), (9, 11)),  # b one matrix: one product of 35 rows (a's matrices are stacked)
    ((5, 7, 9), (1, 9, 11)),  # the same as a batch of one: matrix 0 for every product
    ((2, 3, 40, 64), (2, 3, 64, 72)),  # a 4-D batch
    ((64, 128, 96), (64, 96, 128)),  # many products, whole tiles
    ((3, 300, 1000), (3, 1000, 1)),
]


def _padded_batch(rng, shape):
    """An array of ``shape`` whose matrices have rows of a multiple of 4 floats (and so 16-byte batch strides)."""
    import cupy

    *lead, rows, cols = shape
    return rng.standard_normal((*lead, rows, (cols + 3) // 4 * 4 + 4), dtype=cupy.float32)[..., :cols]


@pytest.mark.parametrize("shapes", BATCHES, ids=lambda s: "@".join("x".join(map(str, x)) for x in s))
def test_batched_on_the_copy_engine_path(shapes, rng):
    import cupy

    a, b = (_padded_batch(rng, s) for s in shapes)
    ref = cupy.matmul(a.astype(cupy.float64), b.astype(cupy.float64))
    cublas = rel_err(cupy.matmul(a, b), ref)
    out = cupy.full(ref.shape, math.nan, dtype=cupy.float32)

    def ran(kernel="auto"):  # (a batch times one matrix runs as one product of the stacked rows, cached as called)
        return decision(a, b, out, kernel=kernel)

    cumm.matmul(a, b, kernel=KERNEL, out=out)
    assert ran(KERNEL).startswith(KERNEL)  # not the fallback
    assert rel_err(out, ref) < max(FLOOR, cublas), shapes
    out[...] = math.nan
    cumm.matmul(a, b, out=out)  # auto: the same rung on sm_90
    assert ran().startswith(KERNEL)
    assert rel_err(out, ref) < max(FLOOR, cublas), shapes


def test_batched_alpha_beta_and_an_unreadable_batch_stride(rng):
    import cupy

    a, b = _padded_batch(rng, (3, 50, 70)), _padded_batch(rng, (3, 70, 30))
    c0 = rng.standard_normal((3, 50, 30), dtype=cupy.float32)
    ref = -0.5 * cupy.matmul(a.astype(cupy.float64), b.astype(cupy.float64)) + 2.0 * c0
    out = c0.copy()
    cumm.matmul(a, b, kernel=KERNEL, out=out, alpha=-0.5, beta=2.0)
    assert rel_err(out, ref) < FLOOR
    # matrices 41 floats apart: rows aligned, batch stride not a multiple of 16 bytes -> the fallback (tf32x3)
    flat = rng.standard_normal(3 * 41, dtype=cupy.float32)
    x = cupy.lib.stride_tricks.as_strided(flat, (3, 5, 8), (41 * 4, 8 * 4, 4))
    y = _padded_batch(rng, (3, 8, 12))
    out = cupy.full((3, 5, 12), math.nan, dtype=cupy.float32)
    cumm.matmul(x, y, kernel=KERNEL, out=out)
    assert decision(x, y, out, kernel=KERNEL).startswith("tf32x3")
    assert rel_err(out, cupy.matmul(x.astype(cupy.float64), y.astype(cupy.float64))) < FLOOR


def test_at_most_cublas_error_on_deep_products(rng):
    import cupy

    M, N, K = 1024, 1024, 4096
    a = rng.standard_normal((M, K), dtype=cupy.float32)
    b = rng.standard_normal((K, N), dtype=cupy.float32)
    ref = a.astype(cupy.float64) @ b.astype(cupy.float64)
    assert rel_err(cumm.matmul(a, b, kernel=KERNEL), ref) <= rel_err(a @ b, ref)


def test_wide_dynamic_range(rng):
    """Every element of A and B scaled by its own 2^e, e in -60 .. 60: big and small keep each value's scale."""
    import cupy

    M, N, K = 256, 192, 512
    a = rng.standard_normal((M, K), dtype=cupy.float32) * cupy.exp2(rng.integers(-60, 61, size=(M, K))).astype(
        cupy.float32
    )
    b = rng.standard_normal((K, N), dtype=cupy.float32) * cupy.exp2(rng.integers(-60, 61, size=(K, N))).astype(
        cupy.float32
    )
    ref = a.astype(cupy.float64) @ b.astype(cupy.float64)
    got = cumm.matmul(a, b, kernel=KERNEL)
    assert cupy.isfinite(got).all()
    assert rel_err(got, ref) < max(FLOOR, rel_err(a @ b, ref))


def test_alpha_beta(rng):
    check_alpha_beta(rng, 256, 128, 64, 1e-5, kernel=KERNEL)


def test_nan_and_inf_propagate(rng):
    import cupy

    a = _padded(rng, 64, 64)
    b = _padded(rng, 64, 64)
    a[3, 5] = math.nan
    out = cumm.matmul(a, b, kernel=KERNEL)
    assert cupy.isnan(out[3]).all() and not cupy.isnan(out[4]).any()


def test_operands_the_copy_engine_cannot_read_run_tf32x3(rng):
    """A leading dimension that is not a multiple of 4 floats (or an unaligned pointer): the spec's fallback."""
    import cupy

    a = rng.standard_normal((130, 67), dtype=cupy.float32)  # lda = 67
    b = rng.standard_normal((67, 90), dtype=cupy.float32)
    out = cupy.full((130, 90), math.nan, dtype=cupy.float32)
    cumm.matmul(a, b, kernel=KERNEL, out=out)
    assert decision(a, b, out, kernel=KERNEL).startswith("tf32x3")
    assert rel_err(out, a.astype(cupy.float64) @ b.astype(cupy.float64)) < 1e-5


def test_auto_runs_it_on_aligned_float32_below_wgmma_f16x3(rng):
    """Without a tuned entry for this GPU near the shape, auto's heuristic runs wgmma_tf32x3 on sm_90 where
    wgmma_f16x3's spec does not take the product (its pieces would cost more than they save: 1024^3)."""
    import cupy

    from cumm.plan import auto as _auto
    from cumm.plan import store as _store

    a = rng.standard_normal((1024, 1024), dtype=cupy.float32)
    out = cupy.empty((1024, 1024), dtype=cupy.float32)
    cumm.matmul(a, a, out=out)
    gpu, cc = _auto.device_key(0)
    entry = _store.lookup(gpu, cc, "float32", 1024, 1024, 1024)
    assert decision(a, a, out).split()[0] == (KERNEL if entry is None else entry["kernel"])
