"""The wgmma_grouped kernel: grouped products (mixture-of-experts) in one persistent launch on the Hopper skeleton.

Not a rung of the matmul ladder (kind ``grouped``: ``cumm.grouped_matmul`` runs it, ``cumm.matmul`` never does).
Its host side (maps, grid, the checks of offsets and operands) is in cumm/plan/grouped.py."""

from __future__ import annotations

from pathlib import Path

from cumm.core.dtypes import HALF
from cumm.core.spec import Constraint, KernelSpec, cdiv
from cumm.ladder.common import WGMMA_CONSTRAINTS, WS_SHAPE

C = Constraint

GMAX = 1024  # kernel.cu's CUMM_GMAX: the groups its shared table holds
TABLE_BYTES = 2 * 4 * GMAX + 16  # that table (static shared memory: row ends and tile ends of each group)


def smem(c) -> int:
    """Dynamic shared memory: the stages (1024-aligned), the ring's barriers."""
    return c["STAGES"] * (c["BM"] + c["BN"]) * 128 + 1024 + 16 * c["STAGES"]


SPEC = KernelSpec(
    name="wgmma_grouped",
    kind="grouped",
    template=Path(__file__).with_name("kernel.cu"),
    headers=("include/tc16.cuh", "include/sm90.cuh"),
    dtypes=HALF,
    min_cc=90,
    arch_specific=True,  # wgmma, setmaxnreg: sm_90a only
    persistent=True,  # one block per multiprocessor walks the tiles of every group
    summary="grouped products (mixture-of-experts) in one persistent warp-specialized wgmma launch: the tile walk"
    " covers every group's tiles, read from device offsets",
    defaults=dict(BM=128, BN=256, STAGES=4, WGS=2, GM=8, MASKED=0, NUM_THREADS=384),
    configs={"narrow": dict(BN=128, STAGES=6)},
    block=lambda c: (c["NUM_THREADS"], 1, 1),
    # (for the registry's probe: M rows of one group; the host launches one block per multiprocessor)
    grid=lambda c, M, N, K: (cdiv(M, c["BM"]) * cdiv(N, c["BN"]), 1, 1),
    smem=smem,
    constraints=[
        *WGMMA_CONSTRAINTS,
        C("GM >= 1", "GM must be at least 1"),
        C(
            "WGS in (1, 2)",
            "one or two consumer warpgroups (setmaxnreg: 232 registers a thread beside the 40 of the producer)",
        ),
        *WS_SHAPE,
        C(
            "BM * BN <= 128 * 128 * WGS",
            "each consumer thread holds BM * BN / (128 WGS) FP32 accumulators; more than 128 spill",
        ),
        C("MASKED in (0, 1)", "MASKED is 0 (contiguous A, cumulative row offsets) or 1 (A of G x max_m x K, counts)"),
        C(
            f"STAGES * (BM + BN) * 128 + 1024 + 16 * STAGES + {TABLE_BYTES} <= 232448",
            "the stages and the group table fit in 227 KB of shared memory per block",
        ),
    ],
    space=dict(BM=(128,), BN=(128, 256), STAGES=(3, 4, 5, 6), WGS=(2,), GM=(4, 8, 16), MASKED=(0, 1)),
)
