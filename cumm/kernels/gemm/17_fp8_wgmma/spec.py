"""The fp8_wgmma rung: FP8 (e4m3 / e5m2) wgmma on the Hopper skeleton, per-tensor / per-row / per-column scales
applied in the epilogue (cumm.scaled_matmul). Its maps are :func:`cumm.ladder.common.fp8_maps`."""

from __future__ import annotations

from pathlib import Path

from cumm.core.spec import Constraint, KernelSpec, cdiv, positive
from cumm.ladder.common import FP8_CONSTRAINTS, WGMMA_CONSTRAINTS, WS_SHAPE, hopper_fp8

C = Constraint

SPEC = KernelSpec(
    name="fp8_wgmma",
    top=True,  # cumm.scaled_matmul's kernel="auto" for per-tensor, per-row and per-column scales
    template=Path(__file__).with_name("kernel.cu"),
    **hopper_fp8(scales="tensor"),
    persistent=True,  # one block per multiprocessor walks the tiles: grid = min(tiles, multiprocessors)
    summary="FP8 wgmma m64nNk32 (e4m3 / e5m2), warp-specialized persistent, per-tensor / row / column scales in the"
    " epilogue, promotion of each 128-deep slab into FP32 registers (PROMO)",
    # PROMO = 2 (use_fast_accum=False): three accumulator sets (totals, two partial sets taking turns), 128 x 128
    # tiles; PROMO = 1 one partial set (the step below, kept for the table); PROMO = 0 128 x 256 (fast_accum)
    defaults=dict(BM=128, BN=128, STAGES=6, WGS=2, GM=8, EPI=1, PROMO=2, FA=0, FB=0, OUT=0, NUM_THREADS=384),
    configs={
        "fast_accum": dict(BN=256, STAGES=4, PROMO=0),  # torch._scaled_mm's use_fast_accum=True
        "one_warpgroup_64x128": dict(BM=64, WGS=1, NUM_THREADS=256, STAGES=8),  # few tiles
        "three_warpgroups_192x128": dict(BM=192, WGS=3, NUM_THREADS=512, PROMO=1, STAGES=4),  # many tiles
    },
    block=lambda c: (c["NUM_THREADS"], 1, 1),
    grid=lambda c, M, N, K: (cdiv(M, c["BM"]) * cdiv(N, c["BN"]), 1, 1),
    smem=lambda c: c["STAGES"] * (c["BM"] + c["BN"]) * 128 + 1024 + 16 * c["STAGES"] + 32 + c["EPI"] * c["WGS"] * 16384,
    constraints=[
        *WGMMA_CONSTRAINTS,
        *positive("GM"),
        *WS_SHAPE,
        *FP8_CONSTRAINTS,
        C(
            "STAGES * (BM + BN) * 128 + 1024 + 16 * STAGES + 32 + EPI * WGS * 16384 <= 232448",
            "the stages (and the epilogue's staging tile) fit in 227 KB of shared memory per block",
        ),
    ],
    # PROMO is searched among the promoted forms only (1, 2: the same sums in the same order; 0 is use_fast_accum=True,
    # which runs the "fast_accum" configuration, never a tuned entry); BN 192 and 256 exceed the accumulator bound
    # with promotion
    space=dict(
        BM=(64, 128, 192),
        BN=(64, 128, 192, 256),
        STAGES=(4, 5, 6, 8),
        WGS=(1, 2, 3),
        GM=(4, 8, 16),
        EPI=(0, 1),
        PROMO=(1, 2),
        NUM_THREADS=(256, 384, 512),
    ),
)
