"""The mma rung: parameters, defaults, constraints and launch geometry."""

from __future__ import annotations

from pathlib import Path

from cumm.core.spec import Constraint, KernelSpec
from cumm.ladder.common import HALF, MMA_CONSTRAINTS, grid_nm

C = Constraint


# Half-precision tensor-core rungs (float16 / bfloat16 inputs, FP32 accumulation; C in the inputs' dtype
# or float32). Their primitives: include/tc16.cuh (mma.sync) and include/sm90.cuh (TMA, wgmma).
SPEC = KernelSpec(
    name="mma",
    template=Path(__file__).with_name("kernel.cu"),
    headers=("include/tc16.cuh", "include/batch16.cuh"),
    dtypes=HALF,
    min_cc=80,  # mma.sync m16n8k16 with bfloat16, ldmatrix
    summary="tensor cores: mma.sync m16n8k16 on fp16/bf16 from shared memory read with ldmatrix",
    defaults=dict(BM=128, BN=128, BK=32, WM=64, WN=32, NUM_THREADS=256),
    block=lambda c: (c["NUM_THREADS"], 1, 1),
    grid=grid_nm("BM", "BN"),
    constraints=[
        *MMA_CONSTRAINTS,
        C("(BM * BK + BK * BN) * 2 <= 48 * 1024", "static shared memory is limited to 48 KB per block"),
    ],
    space=dict(BM=(64, 128), BN=(64, 128), BK=(32, 64), WM=(32, 64), WN=(32, 64), NUM_THREADS=(128, 256)),
)
