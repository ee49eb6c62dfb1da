"""The fp8_block_scaled rung: 17_fp8_wgmma with DeepSeek-V3's block scales (A: 1 x 128, B: 128 x 128, float32),
applied when each 128-deep block's partial sums are promoted into FP32 registers (PROMO = 1; PROMO = 0 only for the
error study: uniform scales)."""

from __future__ import annotations

from pathlib import Path

from cumm.core.spec import Constraint, KernelSpec, cdiv, positive
from cumm.ladder.common import FP8_CONSTRAINTS, WGMMA_CONSTRAINTS, WS_SHAPE, fp8_block_maps, hopper_fp8

C = Constraint

SPEC = KernelSpec(
    name="fp8_block_scaled",
    top=True,  # cumm.scaled_matmul's kernel="auto" for block scales
    template=Path(__file__).with_name("kernel.cu"),
    **hopper_fp8(scales="block", tensor_maps=fp8_block_maps),
    persistent=True,
    summary="FP8 wgmma with 1 x 128 (A) and 128 x 128 (B) block scales applied at each 128-deep block's promotion"
    " into FP32 registers (DeepSeek-V3)",
    # (5 stages: a sixth and its scales leave no room for the epilogue's staging tile)
    defaults=dict(BM=128, BN=128, STAGES=5, WGS=2, GM=8, EPI=1, PROMO=2, FA=0, FB=0, OUT=0, NUM_THREADS=384),
    configs={
        "no_promotion": dict(PROMO=0),  # the error study: the whole K in the tensor core (uniform scales only)
        "one_warpgroup_64x128": dict(BM=64, WGS=1, NUM_THREADS=256, STAGES=8),  # few tiles
        "three_warpgroups_192x128": dict(BM=192, WGS=3, NUM_THREADS=512, PROMO=1, STAGES=4),  # many tiles
    },
    block=lambda c: (c["NUM_THREADS"], 1, 1),
    grid=lambda c, M, N, K: (cdiv(M, c["BM"]) * cdiv(N, c["BN"]), 1, 1),
    # (each stage also holds its BM scales of A: 4 BM bytes)
    smem=lambda c: (
        c["STAGES"] * (c["BM"] + c["BN"]) * 128
        + 4 * c["STAGES"] * c["BM"]
        + 1024
        + 16 * c["STAGES"]
        + 32
        + c["EPI"] * c["WGS"] * 16384
    ),
    constraints=[
        *WGMMA_CONSTRAINTS,
        *positive("GM"),
        *WS_SHAPE,
        *FP8_CONSTRAINTS,
        C(
            "128 % BN == 0",
            "a tile sees one scale of B per block of K: BN divides 128 (B's scale blocks are 128 x 128): BN = 64, 128",
        ),
        C(
            "STAGES * (BM + BN) * 128 + 4 * STAGES * BM + 1024 + 16 * STAGES + 32 + EPI * WGS * 16384 <= 232448",
            "the stages with their scales (and the epilogue's staging tile) fit in 227 KB of shared memory per block",
        ),
    ],
    # PROMO is searched among the promoted forms only (1, 2: the same sums in the same order; 0 is the error study's)
    space=dict(
        BM=(64, 128, 192),
        BN=(64, 128),
        STAGES=(4, 5, 6, 8),
        WGS=(1, 2, 3),
        GM=(4, 8, 16),
        EPI=(0, 1),
        PROMO=(1, 2),
        NUM_THREADS=(256, 384, 512),
    ),
)
