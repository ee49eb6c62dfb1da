"""The mma_swizzled_pipeline rung: parameters, defaults, constraints and launch geometry."""

from __future__ import annotations

from pathlib import Path

from cumm.core.spec import Constraint, KernelSpec
from cumm.ladder.common import HALF, MMA_CONSTRAINTS, grid_nm

C = Constraint


SPEC = KernelSpec(
    name="mma_swizzled_pipeline",
    top=True,  # kernel="auto" runs it for its dtypes (the highest top rung the device runs)
    raced=True,  # the tuner races it
    template=Path(__file__).with_name("kernel.cu"),
    headers=("include/tc16.cuh", "include/batch16.cuh"),
    dtypes=HALF,
    min_cc=80,
    summary="mma with XOR-swizzled shared memory (no ldmatrix bank conflicts) and a cp.async multistage pipeline",
    defaults=dict(BM=128, BN=128, BK=64, WM=64, WN=32, STAGES=3, NUM_THREADS=256),
    block=lambda c: (c["NUM_THREADS"], 1, 1),
    grid=grid_nm("BM", "BN"),
    smem=lambda c: c["STAGES"] * 2 * (c["BM"] * c["BK"] + c["BK"] * c["BN"]),
    constraints=[
        *MMA_CONSTRAINTS,
        C(
            "BK == 32 or BK % 64 == 0",
            "a swizzled row is 4 or a multiple of 8 16-byte chunks: BK is 32 or a multiple of 64",
        ),
        C("BN % 64 == 0", "a swizzled row of B is a multiple of 8 16-byte chunks: BN is a multiple of 64"),
        C("STAGES >= 2", "the pipeline needs at least two stages"),
        C("STAGES * 2 * (BM * BK + BK * BN) <= 232448", "the stages fit in 227 KB of shared memory per block"),
    ],
    space=dict(
        BM=(64, 128, 256),
        BN=(64, 128),
        BK=(32, 64),
        WM=(32, 64),
        WN=(32, 64),
        STAGES=(2, 3, 4),
        NUM_THREADS=(128, 256),
    ),
)
