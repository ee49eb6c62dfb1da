"""The blocktile_2d rung: parameters, defaults, constraints and launch geometry."""

from __future__ import annotations

from pathlib import Path

from cumm.core.spec import Constraint, KernelSpec, at_most_1024_threads, positive
from cumm.ladder.common import THREADS_2D, grid_nm, static_smem

C = Constraint


SPEC = KernelSpec(
    name="blocktile_2d",
    template=Path(__file__).with_name("kernel.cu"),
    summary="each thread computes a TM x TN tile as outer products from shared memory",
    defaults=dict(BM=128, BN=128, BK=32, TM=8, TN=8),
    block=lambda c: ((c["BM"] // c["TM"]) * (c["BN"] // c["TN"]), 1, 1),
    grid=grid_nm("BM", "BN"),
    constraints=[
        *positive("BM", "BN", "BK", "TM", "TN"),
        C("BM % TM == 0 and BN % TN == 0", "the thread tile TM x TN divides the block tile BM x BN"),
        at_most_1024_threads(THREADS_2D),
        static_smem("BM * (BK + 1) + BK * BN"),
    ],
    space=dict(BM=(64, 128), BN=(64, 128), BK=(8, 16), TM=(4, 8), TN=(4, 8)),
)
