"""wgmma_cluster_split_k (16_wgmma_cluster_split_k.cu): each tile's K split over a cluster of KS blocks, the
partial sums added in distributed shared memory. On the GPU: every cluster size and tile shape against float64
and cuBLAS's own error on odd shapes (K ranges left empty when K has fewer slabs than KS), alpha and beta into
half and float32 results, the same bits from run to run; offline: the compiles and the spec's refusals."""

from __future__ import annotations

import math

import pytest

import cumm
from cumm.api.decision import decision

from .test_half import HALF, SHAPES, _cublas, _dtype, _err, _inputs, _ref

NAME = "wgmma_cluster_split_k"
CONFIGS = [
    dict(KS=2),  # the defaults: 128 x 128 tiles, two consumer warpgroups
    dict(KS=4, BN=256, STAGES=4),
    dict(KS=8, BM=64, BN=256, WGS=1, NUM_THREADS=256, STAGES=4),
    dict(KS=8, BM=64, BN=64, WGS=1, NUM_THREADS=256, STAGES=8),
    # the H200 tuned table's winners: 4096 x 128 x 4096 and 1024 x 1024 x 8192
    dict(KS=2, BM=64, BN=128, WGS=1, NUM_THREADS=256, STAGES=8),
    dict(KS=2, BM=128, BN=128, WGS=1, NUM_THREADS=256, STAGES=4, GM=4),
    dict(
        KS=2, BM=128, BN=64, WGS=1, NUM_THREADS=256, STAGES=8
    ),  # one_warpgroup_128x64: the down projection, 128 tokens
]


def _id(c) -> str:
    return "_".join(f"{k}{v}" for k, v in c.items() if k != "NUM_THREADS")


@pytest.mark.parametrize("config", CONFIGS, ids=_id)
def test_compiles_without_spills(config):
    k = cumm.compile(NAME, config, arch="sm_90a")
    assert k.spill_stores == 0 and k.spill_loads == 0, k


@pytest.mark.parametrize(
    "config, match",
    [
        (dict(KS=3), r"KS blocks of a cluster share a tile's K: 2, 4 or 8"),
        (dict(KS=1), r"KS blocks of a cluster share a tile's K"),
        (dict(WGS=1), r"NUM_THREADS is a producer and WGS consumer warpgroups"),
        (dict(WGS=3, NUM_THREADS=512, BM=192, BN=64), r"one or two consumer warpgroups"),
        (dict(BN=256, STAGES=2), r"the stage ring takes the tile's FP32 partial sums"),
        (dict(BM=256, BN=256), r"more than 128 spill"),
    ],
)
def test_refused_configurations(config, match):
    with pytest.raises(ValueError, match=match):
        cumm.compile(NAME, config, arch="sm_90a")


def test_a_branch_not_the_top_rung():
    """auto runs it only where a tuned entry says it won: the half ladder's top stays wgmma_ws."""
    from cumm.plan.auto import top

    spec = cumm.kernel_spec(NAME)
    assert spec.branch and NAME in cumm.kernels(dtype="bfloat16")
    assert top(90, dtype="bfloat16") == top(90, dtype="float16") == "wgmma_ws"


# Operands the copy engine reads (lda, ldb % 8 == 0): these run this kernel (of SHAPES, those with K % 8 != 0 run
# its fallback, mma_swizzled_pipeline). K = 8 and 64 (one slab) with KS = 8 leave seven of the eight K ranges empty,
# 448 (seven slabs) one; N = 129 and 1001 are odd (B read through a view with an aligned row pitch).
OWN_SHAPES = [
    (1, 8, 8),
    (4097, 72, 64),
    (64, 64, 64),
    (130, 136, 192),
    (257, 264, 448),
    (100, 129, 1000),
    (300, 1001, 4104),
    (1024, 1024, 8192),
    (128, 4096, 4096),
    (200, 3000, 3000),
]
GPU_SHAPES = [*OWN_SHAPES, *[s for s in SHAPES if s not in OWN_SHAPES]]


def _operands(rng, M, N, K, dt):
    """a and b as _inputs makes them, with b a view of rows padded to a multiple of 8 elements when N is not."""
    a, b = _inputs(rng, M, N, K, dt)
    if N % 8:
        import cupy

        wide = cupy.full((K, -(-N // 8) * 8), math.nan, dtype=b.dtype)
        wide[:, :N] = b
        b = wide[:, :N]
    return a, b


def check_against_float64_and_cublas(kernel, shape, config, dt, rng, fallback="mma_swizzled_pipeline"):
    """kernel (or, where a's rows are off 16 bytes, its fallback) against float64 and cuBLAS's own error, the output
    NaN-poisoned; the same bits on a second run; the FP32 sums with alpha and beta (shared with test_swap_ab)."""
    import cupy

    M, N, K = shape
    a, b = _operands(rng, M, N, K, dt)
    ref = _ref(a, b)
    theirs = _err(_cublas(a, b), ref)
    first = None
    for _ in range(2):
        out = cupy.full((M, N), math.nan, dtype=a.dtype)
        cumm.matmul(a, b, kernel=kernel, config=config, out=out)
        ran = decision(a, b, out, kernel=kernel, config=config)
        # a's rows are 16-byte aligned when K % 8 == 0 (b's always are: _operands pads them)
        assert ran.startswith(kernel if K % 8 == 0 else fallback), ran
        ours = _err(out, ref)
        assert ours <= 1.5 * theirs + 1e-7, f"{config} {dt} {shape}: {ours:.3e} against cuBLAS {theirs:.3e}"
        if first is None:
            first = out
        else:  # whole K, or the partials added in rank order: the same bits every run
            assert bool((first.view(cupy.uint16) == out.view(cupy.uint16)).all()), "results differ between runs"
    wide = cupy.full((M, N), 1.0, dtype=cupy.float32)  # the FP32 sums themselves, alpha and beta
    cumm.matmul(a, b, kernel=kernel, config=config, out=wide, alpha=2.0, beta=-1.0)
    # against the exact 2 ab - 1: adding the 1 back in FP32 first cancelled (1 x 1 x 1 with a b = -0.0011: the
    # FP32 result -1.0021865 is right to its last bit, but (wide + 1) / 2ab was off by 2.5e-5)
    assert _err(wide, 2.0 * ref - 1.0) < 1e-5


def check_beta_with_a_half_result_and_a_guard_band(kernel, M, N, K, dt, rng):
    """C = 0.5 ab - 1.5 C into a half view whose rows are padded: the padding keeps its 7s."""
    import cupy

    a, b = _inputs(rng, M, N, K, dt)
    c0 = rng.standard_normal((M, N), dtype="float32").astype(_dtype(dt))
    big = cupy.full((M, N + 8), 7.0, dtype=a.dtype)
    out = big[:, :N]
    out[...] = c0
    ref = 0.5 * _ref(a, b) - 1.5 * c0.astype(cupy.float32).astype(cupy.float64)
    cumm.matmul(a, b, kernel=kernel, out=out, alpha=0.5, beta=-1.5)
    rounded = _err(ref.astype(cupy.float32).astype(a.dtype), ref)
    assert _err(out, ref) <= 1.5 * rounded + 1e-7
    assert bool((big[:, N:] == 7.0).all()), "columns past N were written"


@pytest.mark.gpu
@pytest.mark.parametrize("dt", HALF)
@pytest.mark.parametrize("config", CONFIGS, ids=_id)
@pytest.mark.parametrize("shape", GPU_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_against_float64_and_cublas(shape, config, dt, rng, sm90):
    check_against_float64_and_cublas(NAME, shape, config, dt, rng)


@pytest.mark.gpu
@pytest.mark.parametrize("dt", HALF)
def test_beta_with_a_half_result_and_a_guard_band(dt, rng, sm90):
    check_beta_with_a_half_result_and_a_guard_band(NAME, 300, 1000, 2000, dt, rng)
