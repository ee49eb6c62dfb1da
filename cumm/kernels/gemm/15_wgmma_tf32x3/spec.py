"""The wgmma_tf32x3 rung: parameters, defaults, constraints and launch geometry.

Its own policy: its tensor maps (``_tf32_maps``)."""

from __future__ import annotations

from pathlib import Path

from cumm.core.spec import Constraint, KernelSpec, cdiv, positive

C = Constraint


def _tf32_maps(cfg, M: int, N: int, K: int, lda: int, ldb: int, ldc: int, c_map: bool):
    """The tensor maps of wgmma_tf32x3 (15_wgmma_tf32x3.cu): A (dims K x M, boxes 32 x BM) and B (N x K, 32 x 32),
    FP32, 128-byte swizzle."""
    from cumm.runtime.tmaps import MapSpec

    return MapSpec(0, K, M, lda, 32, cfg["BM"], 3), MapSpec(1, N, K, ldb, 32, 32, 3)


# FP32 accuracy on Hopper's warpgroup tensor cores: tf32x3's split with wgmma_ws's machinery.
SPEC = KernelSpec(
    name="wgmma_tf32x3",
    top=True,  # kernel="auto" runs it for its dtypes (the highest top rung the device runs)
    raced=True,  # the tuner races it
    template=Path(__file__).with_name("kernel.cu"),
    headers=("include/sm90.cuh",),
    min_cc=90,
    arch_specific=True,  # wgmma, setmaxnreg: sm_90a only
    persistent=True,  # one block per multiprocessor walks the tiles: grid = min(tiles, resident blocks)
    fallback="tf32x3",  # operands the copy engine cannot read (unaligned, ld % 4 != 0)
    tensor_maps=_tf32_maps,
    summary="tf32x3 on wgmma: B split once per stage by splitter warps into shared B^T halves, A split in"
    " registers, TMA stages, warp-specialized persistent",
    defaults=dict(BM=128, BN=128, STAGES=5, SB=2, GM=8, NUM_THREADS=384),
    configs={"small": dict(BN=64, STAGES=8)},  # twice the tiles for grids that would not fill the GPU
    block=lambda c: (c["NUM_THREADS"], 1, 1),
    grid=lambda c, M, N, K: (cdiv(M, c["BM"]) * cdiv(N, c["BN"]), 1, 1),
    smem=lambda c: (
        (c["STAGES"] * (c["BM"] + c["BN"]) + 2 * c["SB"] * c["BN"]) * 128 + 1024 + 16 * (c["STAGES"] + c["SB"])
    ),
    constraints=[
        *positive("BM", "BN", "STAGES", "SB", "GM"),
        C("BM == 128", "two consumer warpgroups of 64 rows each: BM = 128"),
        C("NUM_THREADS == 384", "a producer warpgroup and two consumer warpgroups: NUM_THREADS = 384"),
        C("BN in (32, 64, 128)", "B is copied in 32-column boxes and the two accumulators fit: BN in 32, 64, 128"),
        C("STAGES >= 2 and SB >= 2", "the copies and the split buffers need at least two stages each"),
        C(
            "(STAGES * (BM + BN) + 2 * SB * BN) * 128 + 1024 + 16 * (STAGES + SB) <= 232448",
            "the raw stages (A and B) and the split buffers (B^T big and small) fit in 227 KB of shared memory",
        ),
    ],
    space=dict(BM=(128,), BN=(64, 128), STAGES=(3, 4, 5, 6, 8), SB=(2, 3), GM=(4, 8, 16), NUM_THREADS=(384,)),
)
