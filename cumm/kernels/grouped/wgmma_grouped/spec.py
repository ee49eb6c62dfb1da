"""The wgmma_grouped kernel: grouped products (mixture-of-experts) in one persistent launch on the Hopper skeleton.

Not a rung of the matmul ladder (kind ``grouped``: ``cumm.grouped_matmul`` runs it, ``cumm.matmul`` never does).
Its host side (maps, grid, the checks of offsets and operands) is in cumm/plan/grouped.py."""

from __future__ import annotations

from pathlib import Path

from cumm.core.dtypes import HALF
from cumm.core.spec import Constraint, KernelSpec, cdiv
from cumm.ladder.common import SK_MIN_SLABS, WGMMA_CONSTRAINTS, WS_SHAPE, stream_k_bytes

C = Constraint

GMAX = 1024  # the most groups grouped_matmul takes (the table below grows with G; 3 stages hold this many)
SMEM_LIMIT = 232448  # shared memory of a block on sm_90 (227 KB)


def smem(c) -> int:
    """Dynamic shared memory but the group table: the stages (1024-aligned), the epilogue's staging tile
    (EPI = 1: 64 x 128 halves per consumer warpgroup), the ring's barriers."""
    return c["STAGES"] * (c["BM"] + c["BN"]) * 128 + 1024 + c["EPI"] * c["WGS"] * 16384 + 16 * c["STAGES"]


def workspace(c, blocks: int) -> int:
    """Bytes of the stream-K workspace (kernel.cu's ``skw``, ``SK_FLAGS`` flags as 14_wgmma_ws's) for ``blocks``
    blocks; 0 (a null pointer, whole tiles) with SK = 0. The kernel itself decides from the device's tile count
    whether to split (the rule of 14_wgmma_ws's spec, SKMIN defaulting to its SK_MIN_SLABS)."""
    return stream_k_bytes(c, blocks) if c["SK"] else 0


def table_bytes(G: int) -> int:
    """The group table after the barriers (kernel.cu): a row end and a tile end per group, the tile count."""
    return 8 * G + 16


def groups_fit(c) -> int:
    """The most groups whose table fits beside configuration c's stages and staging (at most GMAX)."""
    return max(0, min(GMAX, (SMEM_LIMIT - smem(c) - 16) // 8))


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
    defaults=dict(BM=128, BN=256, STAGES=4, WGS=2, GM=8, MASKED=0, EPI=1, SK=4, SKMIN=SK_MIN_SLABS, NUM_THREADS=384),
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
        C("EPI in (0, 1)", "EPI is 0 (direct stores) or 1 (TMA-store epilogue)"),
        C("SK >= 0", "SK is 0 (whole tiles) or the stream-K tail's most ranges per tile (a positive int)"),
        C("SK == 0 or WGS == 2", "stream-K (SK > 0) runs two consumer warpgroups (WGS = 2); set SK = 0 for WGS = 1"),
        C("SKMIN >= 1", "SKMIN, the fewest 64-deep k-slabs a tile needs for a stream-K tail, must be at least 1"),
        C(
            "STAGES * (BM + BN) * 128 + 1024 + EPI * WGS * 16384 + 16 * STAGES + 8 * 64 + 16 <= 232448",
            "the stages, the epilogue's staging (EPI = 1) and a table of at least 64 groups fit in 227 KB of shared"
            " memory per block",
        ),
    ],
    space=dict(
        BM=(128,), BN=(128, 256), STAGES=(3, 4, 5, 6), WGS=(2,), GM=(4, 8, 16), MASKED=(0, 1), EPI=(0, 1), SK=(0, 4)
    ),
)
