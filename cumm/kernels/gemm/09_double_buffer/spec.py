"""The double_buffer rung: parameters, defaults, constraints and launch geometry."""

from __future__ import annotations

from pathlib import Path

from cumm.core.spec import KernelSpec
from cumm.ladder.common import (
    WARPTILE_CONSTRAINTS,
    WARPTILE_DEFAULTS,
    WARPTILE_SPACE,
    grid_nm,
    warptile_block,
    warptile_derived,
)

SPEC = KernelSpec(
    name="double_buffer",
    raced=True,  # the tuner races it
    stage_out=True,  # H200, 4096^3 into ldc = 4097 (docs/ladder.md): staging is faster
    template=Path(__file__).with_name("kernel.cu"),
    split_k=True,  # CUMM_SPLIT_K(BK) at the top of the kernel
    vector_loads=True,  # cumm_tile_fetch<..., VEC_A> and <..., VEC_B>
    summary="warptiling with two shared-memory stages: next slab's loads overlap this slab's FMAs",
    # 64 x 64 tiles for grids that would not fill the GPU with the defaults (cumm/plan/auto.py)
    configs={"small": dict(BM=64, BN=64, BK=16, WM=32, WN=32, WNITER=2, TM=4, TN=4, NUM_THREADS=128, MINB=2)},
    block=warptile_block,
    grid=grid_nm("BM", "BN"),
    smem=lambda c: 2 * c["BK"] * (c["BM"] + c["BN"]) * 4,
    defaults=dict(WARPTILE_DEFAULTS, BN=256, BK=8, WN=64, TM=8, MINB=1),
    constraints=WARPTILE_CONSTRAINTS,
    derived=warptile_derived,
    space=WARPTILE_SPACE,
)
