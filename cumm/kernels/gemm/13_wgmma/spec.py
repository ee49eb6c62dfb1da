"""The wgmma rung: parameters, defaults, constraints and launch geometry."""

from __future__ import annotations

from pathlib import Path

from cumm.core.spec import Constraint, KernelSpec
from cumm.ladder.common import WGMMA_CONSTRAINTS, grid_nm, hopper_half

C = Constraint


SPEC = KernelSpec(
    name="wgmma",
    raced=True,  # the tuner races it
    template=Path(__file__).with_name("kernel.cu"),
    **hopper_half(glu=True),  # its stores are cumm_store_tile / CummTmaEpilogue: glu= runs here
    summary="Hopper: TMA into 128-byte-swizzled shared memory, mbarrier stages, wgmma m64nNk16 by WGS warpgroups",
    defaults=dict(BM=128, BN=256, STAGES=4, WGS=2, NUM_THREADS=256),
    block=lambda c: (c["NUM_THREADS"], 1, 1),
    grid=grid_nm("BM", "BN"),
    smem=lambda c: c["STAGES"] * (c["BM"] + c["BN"]) * 128 + 1024 + 16 * c["STAGES"],
    constraints=[
        *WGMMA_CONSTRAINTS,
        C("NUM_THREADS == 128 * WGS", "NUM_THREADS is the WGS consumer warpgroups: 128 * WGS"),
        C("BM % (64 * WGS) == 0", "each consumer warpgroup owns whole 64-row wgmma tiles"),
        C(
            "STAGES * (BM + BN) * 128 + 1024 + 16 * STAGES <= 232448",
            "the stages fit in 227 KB of shared memory per block",
        ),
    ],
    space=dict(BM=(128, 256), BN=(128, 256), STAGES=(3, 4, 5), WGS=(1, 2), NUM_THREADS=(128, 256)),
)
