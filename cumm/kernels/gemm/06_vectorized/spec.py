"""The vectorized rung: parameters, defaults, constraints and launch geometry."""

from __future__ import annotations

from pathlib import Path

from cumm.core.spec import Constraint, KernelSpec, at_most_1024_threads, positive
from cumm.ladder.common import FLOAT4_TILES, THREADS_2D, grid_nm, static_smem

C = Constraint


SPEC = KernelSpec(
    name="vectorized",
    # No stage_out: its scalar-store variant runs faster than its 16-byte one (H200, 4096^3: 3.43 against
    # 3.61 ms, the codegen of the main loop differs), so an unaligned C is best written in place.
    template=Path(__file__).with_name("kernel.cu"),
    vector_loads=True,  # cumm_tile_fetch<..., VEC_A> and <..., VEC_B>
    summary="16-byte global loads/stores; A transposed in shared memory, read as float4",
    defaults=dict(BM=128, BN=128, BK=16, TM=8, TN=8),
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
        static_smem("BK * BM + BK * BN"),
    ],
    space=dict(BM=(64, 128), BN=(64, 128), BK=(8, 16), TM=(4, 8), TN=(4, 8)),
)
