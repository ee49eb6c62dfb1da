"""The skinny rung (gemm/19_skinny): its configurations across the split of N and K between threads (one k-group,
no reduction, up to 128 k-groups), rows past a block's BM, K not a multiple of 4 and primes, unaligned views and
batches, against float64 with the output NaN-poisoned first. It multiplies in plain FP32, so it is held to
FP32's accuracy (test_matmul covers it among all rungs)."""

from __future__ import annotations

import math

import pytest

import cumm

from .conftest import rel_err

pytestmark = pytest.mark.gpu
KERNEL = "skinny"
TOL = 1e-5
CONFIGS = [
    None,  # the defaults
    "one_row",
    dict(BM=4, BN=16, U=1, NUM_THREADS=512),  # 128 k-groups
    dict(BM=2, BN=128, U=4, NUM_THREADS=128),  # 4 k-groups
    dict(BM=8, BN=128, U=2, NUM_THREADS=32),  # one k-group: no reduction
]
SHAPES = [(1, 1, 1), (1, 4097, 1), (3, 5, 4099), (17, 129, 257), (64, 4096, 1000), (65, 33, 7), (1, 300, 8191)]


def _config(c):
    return dict(cumm.kernel_spec(KERNEL).configs[c]) if isinstance(c, str) else c


@pytest.mark.parametrize("config", CONFIGS, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_configurations_against_float64(shape, config, rng):
    import cupy

    M, N, K = shape
    a = rng.standard_normal((M, K), dtype=cupy.float32)
    b = rng.standard_normal((K, N), dtype=cupy.float32)
    out = cupy.full((M, N), math.nan, dtype=cupy.float32)
    cumm.matmul(a, b, kernel=KERNEL, config=_config(config), out=out)
    err = rel_err(out, a.astype(cupy.float64) @ b.astype(cupy.float64))
    assert err < TOL, f"{shape} {config}: relative error {err:.3e}"


@pytest.mark.parametrize("config", CONFIGS, ids=str)
def test_unaligned_views_and_beta(config, rng):
    import cupy

    M, N, K = 5, 131, 259
    a = rng.standard_normal((M, K + 3), dtype=cupy.float32)[:, 1 : K + 1]  # off 16 bytes: the scalar path
    b = rng.standard_normal((K, N + 2), dtype=cupy.float32)[:, 1 : N + 1]
    c0 = rng.standard_normal((M, N), dtype=cupy.float32)
    out = c0.copy()
    cumm.matmul(a, b, kernel=KERNEL, config=_config(config), out=out, alpha=0.5, beta=-2.0)
    want = 0.5 * (a.astype(cupy.float64) @ b.astype(cupy.float64)) - 2.0 * c0.astype(cupy.float64)
    assert rel_err(out, want) < TOL


def test_batches_and_broadcast(rng):
    import cupy

    a = rng.standard_normal((6, 3, 1000), dtype=cupy.float32)
    b = rng.standard_normal((1000, 77), dtype=cupy.float32)  # broadcast over the batch
    out = cupy.full((6, 3, 77), math.nan, dtype=cupy.float32)
    cumm.matmul(a, b, kernel=KERNEL, out=out)
    assert rel_err(out, a.astype(cupy.float64) @ b.astype(cupy.float64)) < TOL
