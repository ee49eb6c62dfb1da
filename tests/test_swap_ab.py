"""wgmma_swap_ab (21_wgmma_swap_ab): a few-row product computed transposed, C^T = B^T A^T, the rows as wgmma's N.
On the GPU: every tile height (wgmma's N of 8 to 128), whole K and K split over clusters of 2 and 4, against float64
and cuBLAS's own error on odd shapes (rows past M and columns past N, K ranges left empty when K has fewer slabs
than KS), alpha and beta into half and float32 results, a batch, the same bits from run to run; offline: the
compiles and the spec's refusals."""

from __future__ import annotations

import math

import pytest

import cumm

from .test_cluster_split_k import check_against_float64_and_cublas, check_beta_with_a_half_result_and_a_guard_band
from .test_half import HALF, _cublas, _err, _inputs, _ref

NAME = "wgmma_swap_ab"
CONFIGS = [
    None,  # the defaults: 16 x 64 tiles, whole K, 16 stages
    dict(BM=8, BN=64, STAGES=16),
    dict(BM=32, BN=128, KS=2, STAGES=10),
    dict(BM=16, BN=64, KS=2, STAGES=16),
    dict(BM=32, BN=64, KS=4, STAGES=12),
    dict(BM=64, BN=256, WGS=2, NUM_THREADS=384, STAGES=4),
    dict(BM=128, BN=128, WGS=2, NUM_THREADS=384, STAGES=6, GM=4),
]


def _id(c) -> str:
    return "defaults" if c is None else "_".join(f"{k}{v}" for k, v in c.items() if k != "NUM_THREADS")


@pytest.mark.parametrize("config", CONFIGS, ids=_id)
def test_compiles_without_spills(config):
    k = cumm.compile(NAME, config, arch="sm_90a")
    assert k.spill_stores == 0 and k.spill_loads == 0, k


@pytest.mark.parametrize(
    "config, match",
    [
        (dict(BM=24), r"BM is 8, 16, 32, 64 or 128"),
        (dict(KS=3), r"1 \(whole K a block\), 2, 4 or 8"),
        (dict(BM=16, KS=4), r"BM % \(8 KS\) == 0"),
        (dict(WGS=2), r"NUM_THREADS is a producer and WGS consumer warpgroups"),
        (dict(BN=64, WGS=2, NUM_THREADS=384), r"whole 64-column blocks"),
        (dict(BM=128, BN=256), r"more than 128 spill"),
        (
            dict(BM=128, BN=256, WGS=2, NUM_THREADS=384, KS=2, STAGES=2),
            r"the stage ring takes the tile's FP32 partial sums",
        ),
        (dict(BN=256, STAGES=16), r"227 KB"),
    ],
)
def test_refused_configurations(config, match):
    with pytest.raises(ValueError, match=match):
        cumm.compile(NAME, config, arch="sm_90a")


def test_raced_at_few_rows_not_the_top_rung():
    """auto runs it only where a tuned entry says it won; the tuner races it at products of at most 256 rows."""
    from cumm.plan.auto import top
    from cumm.tools import tune as _tune

    spec = cumm.kernel_spec(NAME)
    assert spec.raced and spec.race_max_m == 256 and not spec.top and not spec.branch
    rungs = _tune.top_rungs(90, "bfloat16")
    assert NAME in _tune.raced_at(rungs, (128, 128256, 4096), 132)  # 501 tiles, but 128 rows
    assert NAME not in _tune.raced_at(rungs, (257, 64, 4096), 132)
    assert top(90, dtype="bfloat16") == top(90, dtype="float16") == "wgmma_ws"


# b padded to a multiple of 8 columns; K % 8 == 0 for the copy engine (K = 1 checks the fallback): M of 1, primes
# and 4097 (rows past M in the tile), N off the 64-column blocks, K of one slab and fewer slabs than KS, and the
# few-token shapes it is for.
GPU_SHAPES = [
    (1, 8, 8),
    (3, 72, 64),
    (7, 129, 1000),
    (16, 200, 448),
    (17, 264, 4104),
    (31, 1001, 520),
    (64, 64, 64),
    (100, 1000, 2000),
    (128, 4096, 4096),
    (16, 6144, 4096),
    (33, 333, 8),
    (200, 130, 256),
    (4097, 72, 64),  # 257 tile rows (4096 + 1)
    (5, 77, 1),  # K = 1: a's rows are off 16 bytes, so its fallback runs (the helper checks which)
]


@pytest.mark.gpu
@pytest.mark.parametrize("dt", HALF)
@pytest.mark.parametrize("config", CONFIGS, ids=_id)
@pytest.mark.parametrize("shape", GPU_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_against_float64_and_cublas(shape, config, dt, rng, sm90):
    check_against_float64_and_cublas(NAME, shape, config, dt, rng)


@pytest.mark.gpu
@pytest.mark.parametrize("dt", HALF)
def test_beta_with_a_half_result_and_a_guard_band(dt, rng, sm90):
    check_beta_with_a_half_result_and_a_guard_band(NAME, 30, 1000, 2000, dt, rng)


@pytest.mark.gpu
@pytest.mark.parametrize("dt", HALF)
@pytest.mark.parametrize("config", [None, dict(BM=32, BN=64, KS=4, STAGES=12)], ids=_id)
def test_a_batch_and_a_broadcast_weight(config, dt, rng, sm90):
    """grid z over the batch (batch16.cuh): 5 products of 12 x 264 x 1000, the weight shared by all of them."""
    import cupy

    a = cupy.stack([_inputs(rng, 12, 264, 1000, dt)[0] for _ in range(5)])
    b = _inputs(rng, 12, 264, 1000, dt)[1]
    out = cupy.full((5, 12, 264), math.nan, dtype=a.dtype)
    cumm.matmul(a, b, kernel=NAME, config=config, out=out)
    for z in range(5):
        ref = _ref(a[z], b)
        assert _err(out[z], ref) <= 1.5 * _err(_cublas(a[z], b), ref) + 1e-7
