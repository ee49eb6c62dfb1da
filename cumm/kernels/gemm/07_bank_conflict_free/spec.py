"""The bank_conflict_free rung: parameters, defaults, constraints and launch geometry."""

from __future__ import annotations

from pathlib import Path

from cumm.core.spec import Constraint, KernelSpec, at_most_1024_threads, positive
from cumm.ladder.common import FLOAT4_TILES, THREADS_2D, grid_nm, static_smem

C = Constraint


SPEC = KernelSpec(
    name="bank_conflict_free",
    stage_out=True,  # H200, 4096^3 into ldc = 4097 (docs/ladder.md): staging is faster
    template=Path(__file__).with_name("kernel.cu"),
    vector_loads=True,  # cumm_tile_fetch<..., VEC_A> and <..., VEC_B>
    summary="vectorized, with A's transposed shared-memory stores free of bank conflicts (swizzle or pad)",
    defaults=dict(BM=128, BN=128, BK=16, TM=8, TN=8, SWIZZLE=1, PAD=4),
    block=lambda c: ((c["BM"] // c["TM"]) * (c["BN"] // c["TN"]), 1, 1),
    grid=grid_nm("BM", "BN"),
    constraints=[
        *positive("BM", "BN", "BK", "TM", "TN"),
        C("BM % TM == 0 and BN % TN == 0", "the thread tile TM x TN divides the block tile BM x BN"),
        at_most_1024_threads(THREADS_2D),
        *FLOAT4_TILES,
        C(
            f"(BM * BK) % (4 * {THREADS_2D}) == 0 and (BK * BN) % (4 * {THREADS_2D}) == 0",
            "every thread fetches the same number of float4s of the A and B tiles",
        ),
        C("SWIZZLE in (0, 1)", "SWIZZLE is 1 (XOR swizzle) or 0 (padding by PAD floats)"),
        C("PAD % 4 == 0", "PAD keeps rows 16-byte aligned for LDS.128, so it is a multiple of 4"),
        C(
            "SWIZZLE == 0 or (BK in (4, 8, 16, 32) and BM % 32 == 0)",
            "the A swizzle needs BK in 4, 8, 16, 32 and BM a multiple of 32",
        ),
        static_smem("BK * (BM + PAD * (1 - SWIZZLE)) + BK * BN"),
    ],
    space=dict(BM=(64, 128), BN=(64, 128), BK=(8, 16), TM=(4, 8), TN=(4, 8), SWIZZLE=(0, 1)),
)
