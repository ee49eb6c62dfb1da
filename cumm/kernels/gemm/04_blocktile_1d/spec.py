"""The blocktile_1d rung: parameters, defaults, constraints and launch geometry."""

from __future__ import annotations

from pathlib import Path

from cumm.core.spec import Constraint, KernelSpec, at_most_1024_threads, positive
from cumm.ladder.common import grid_nm, static_smem

C = Constraint


SPEC = KernelSpec(
    name="blocktile_1d",
    template=Path(__file__).with_name("kernel.cu"),
    summary="each thread computes TM results down a column of C",
    defaults=dict(BM=64, BN=64, BK=8, TM=8),
    block=lambda c: (c["BM"] * c["BN"] // c["TM"], 1, 1),
    grid=grid_nm("BM", "BN"),
    constraints=[
        *positive("BM", "BN", "BK", "TM"),
        C("BM % TM == 0", "TM divides BM: each thread owns TM whole rows"),
        at_most_1024_threads("BM * BN // TM"),
        static_smem("BM * BK + BK * BN"),
    ],
    space=dict(BM=(32, 64, 128), BN=(32, 64, 128), BK=(4, 8, 16), TM=(4, 8, 16)),
)
