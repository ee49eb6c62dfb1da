"""The tf32x3 rung: parameters, defaults, constraints and launch geometry."""

from __future__ import annotations

from pathlib import Path

from cumm.core.spec import KernelSpec
from cumm.ladder.common import TF32X3_CONSTRAINTS, grid_nm, tf32x3_smem

SPEC = KernelSpec(
    name="tf32x3",
    top=True,  # kernel="auto" runs it for its dtypes (the highest top rung the device runs)
    raced=True,  # the tuner races it
    stage_out=True,  # H200, 4096^3 into ldc = 4097 (docs/ladder.md): staging is faster
    epilogue=False,  # its stores are in tf32x3_tile.cuh's shared tile function, which takes alpha as a float
    template=Path(__file__).with_name("kernel.cu"),
    headers=("include/tf32x3_tile.cuh",),
    min_cc=80,  # mma.sync with TF32 operands
    split_k=True,  # CUMM_SPLIT_K(BK) at the top of the kernel
    vector_loads=True,  # cumm_cp_async_chunk<VEC_A> and <VEC_B>: 16-byte copies, never past K or N
    summary="tensor cores (mma.sync TF32) with each operand split in two: FP32 accuracy, 3 mma per product",
    # 64 x 64 tiles for grids that would not fill the GPU with the defaults (cumm/plan/auto.py)
    configs={"small": dict(BM=64, BN=64, BK=32, WM=32, WN=32, STAGES=4, NUM_THREADS=128, MINB=1)},
    block=lambda c: (c["NUM_THREADS"], 1, 1),
    grid=grid_nm("BM", "BN"),
    smem=tf32x3_smem,
    defaults=dict(BM=128, BN=128, BK=32, WM=64, WN=32, STAGES=4, NUM_THREADS=256, MINB=1),
    # H200 tuning (docs/ladder.md): 64 x 64 warp tiles, 60.4 TFLOP/s at 4096^3 against 56.2
    # for the defaults; 253 registers, no spills on sm_90 (sm_80's ptxas spills 96 bytes there).
    cc_defaults={90: dict(BN=256, BK=16, WN=64, STAGES=3)},
    constraints=TF32X3_CONSTRAINTS,
    space=dict(
        # BM = 32: products of 16-32 rows (decode) waste half of 64-row tiles; with K split, their tiles fill the GPU
        BM=(32, 64, 128, 256),
        BN=(64, 128, 256),
        BK=(16, 32),
        WM=(32, 64),
        WN=(32, 64),
        STAGES=(2, 3, 4),
        NUM_THREADS=(128, 256),
        MINB=(1, 2),
    ),
)
