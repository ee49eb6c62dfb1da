"""The skinny16 rung (gemm/20_skinny16): 19_skinny's stream of B on 16-bit inputs. On the GPU: its configurations
across the split of N and K between threads (one k-group, no reduction, up to 64 k-groups), rows past a block's
BM, K not a multiple of 8 and primes, unaligned views (the element-wise path), alpha and beta into half and
float32 results, batches with a broadcast operand, against float64 (output NaN-poisoned first) and cuBLAS's own
error on the same inputs; offline: every configuration compiles without spills, and the spec's refusals."""

from __future__ import annotations

import math

import pytest

import cumm

from .test_half import HALF, _cublas, _dtype, _err, _inputs, _ref

NAME = "skinny16"
CONFIGS = [
    None,  # the defaults
    "one_row",
    dict(BM=4, BN=16, U=1, NUM_THREADS=128),  # 64 k-groups
    dict(BM=2, BN=128, U=2, NUM_THREADS=128),  # 8 k-groups, two chunks in flight
    dict(BM=8, BN=256, U=1, NUM_THREADS=32),  # one k-group: no reduction
    dict(BM=1, BN=48, U=1, NUM_THREADS=384),  # six column threads, 64 k-groups
]
SHAPES = [
    (1, 1, 1),
    (1, 4097, 1),
    (3, 5, 4099),
    (17, 129, 257),
    (16, 4096, 1000),
    (9, 33, 7),
    (1, 300, 8191),
    (2, 1000, 4096),
]


def _config(c):
    return dict(cumm.kernel_spec(NAME).configs[c]) if isinstance(c, str) else c


@pytest.mark.parametrize("config", CONFIGS, ids=str)
def test_compiles_without_spills(config):
    k = cumm.compile(NAME, _config(config), arch="sm_90")
    assert k.spill_stores == 0 and k.spill_loads == 0, k


@pytest.mark.parametrize(
    "config, match",
    [
        (dict(BM=16), r"each thread holds BM x 8 sums in registers: BM <= 8"),
        (dict(BN=12), r"a thread takes eight columns: BN a multiple of 8"),
        (dict(BM=8, U=2), r"fit in a thread's registers"),
        (dict(BN=64, NUM_THREADS=100), r"whole warps, at most 1024 threads"),
        (dict(BN=256, NUM_THREADS=16), r"whole warps"),
        (dict(BM=8, BN=16, NUM_THREADS=1024, U=1), r"fit in a thread's registers"),
    ],
)
def test_refused_configurations(config, match):
    with pytest.raises(ValueError, match=match):
        cumm.compile(NAME, config, arch="sm_90")


def test_raced_at_few_rows_only():
    spec = cumm.kernel_spec(NAME)
    assert spec.raced and spec.race_max_m == 1 and spec.dtypes == HALF
    assert NAME in cumm.kernels(dtype="float16") and NAME not in cumm.kernels(dtype="float32")


@pytest.mark.gpu
@pytest.mark.parametrize("dt", HALF)
@pytest.mark.parametrize("config", CONFIGS, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_against_float64_and_cublas(shape, config, dt, rng):
    import cupy

    M, N, K = shape
    a, b = _inputs(rng, M, N, K, dt)
    ref = _ref(a, b)
    theirs = _err(_cublas(a, b), ref)
    out = cupy.full((M, N), math.nan, dtype=a.dtype)
    cumm.matmul(a, b, kernel=NAME, config=_config(config), out=out)
    ours = _err(out, ref)
    assert ours <= 1.5 * theirs + 1e-7, f"{config} {dt} {shape}: {ours:.3e} against cuBLAS {theirs:.3e}"
    wide = cupy.full((M, N), math.nan, dtype=cupy.float32)  # the FP32 sums themselves
    cumm.matmul(a, b, kernel=NAME, config=_config(config), out=wide)
    assert _err(wide, ref) < 1e-5


@pytest.mark.gpu
@pytest.mark.parametrize("dt", HALF)
@pytest.mark.parametrize("config", CONFIGS, ids=str)
def test_unaligned_views_and_beta(config, dt, rng):
    import cupy

    M, N, K = 5, 131, 259
    a = _inputs(rng, M, 1, K + 3, dt)[0][:, 1 : K + 1]  # views off 16 bytes: the element-wise path
    b = _inputs(rng, 1, N + 2, K, dt)[1][:, 1 : N + 1]
    c0 = rng.standard_normal((M, N), dtype="float32").astype(_dtype(dt))
    out = c0.copy()
    cumm.matmul(a, b, kernel=NAME, config=_config(config), out=out, alpha=0.5, beta=-2.0)
    want = 0.5 * _ref(a, b) - 2.0 * c0.astype(cupy.float32).astype(cupy.float64)
    theirs = _err((0.5 * _cublas(a, b).astype(cupy.float32) - 2.0 * c0.astype(cupy.float32)).astype(a.dtype), want)
    assert _err(out, want) <= 1.5 * theirs + 1e-7
    wide = c0.astype(cupy.float32)
    cumm.matmul(a, b, kernel=NAME, config=_config(config), out=wide, alpha=0.5, beta=-2.0)
    assert _err(wide, want) < 1e-5


@pytest.mark.gpu
@pytest.mark.parametrize("dt", HALF)
def test_batches_and_broadcast(dt, rng):
    import cupy

    a = rng.standard_normal((6, 3, 1000), dtype="float32").astype(_dtype(dt))
    b = rng.standard_normal((1000, 77), dtype="float32").astype(_dtype(dt))  # broadcast over the batch
    out = cupy.full((6, 3, 77), math.nan, dtype=cupy.float32)
    cumm.matmul(a, b, kernel=NAME, out=out)
    ref = a.astype(cupy.float32).astype(cupy.float64) @ b.astype(cupy.float32).astype(cupy.float64)
    assert _err(out, ref) < 1e-5
