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
            "WGS in (1, 2)",
            "one or two consumer warpgroups (setmaxnreg: 232 registers a thread beside the producer's 40)",
        ),
        C(
            "128 % BN == 0",
            "a tile sees one scale of B per block of K: BN divides 128 (B's scale blocks are 128 x 128): BN = 64, 128",
        ),
        C(
            "BM * BN * (1 + PROMO) <= 128 * 128 * WGS + (PROMO == 2) * 64 * 128 * WGS",
            "each consumer thread holds BM * BN / (128 WGS) FP32 accumulators, twice that with promotion (PROMO = 1),"
            " three times with PROMO = 2 (two partial sets); more than 128 (192 with PROMO = 2) spill under 232 "
            "registers",
        ),
        C("EPI in (0, 1)", "EPI is 0 (direct stores) or 1 (TMA-store epilogue for 16-bit outputs)"),
        C(
            "STAGES * (BM + BN) * 128 + 4 * STAGES * BM + 1024 + 16 * STAGES + 32 + EPI * WGS * 16384 <= 232448",
            "the stages with their scales (and the epilogue's staging tile) fit in 227 KB of shared memory per block",
        ),
    ],
    # PROMO is not searched: the tuner keeps the default's two partial sets (1 is the slower step below it, 0 the
    # error study's)
    space=dict(
        BM=(64, 128),
        BN=(64, 128),
        STAGES=(4, 5, 6, 8),
        WGS=(1, 2),
        GM=(4, 8, 16),
        EPI=(0, 1),
        NUM_THREADS=(256, 384),
    ),
)
