"""The wgmma_swap_ab rung: parameters, defaults, constraints and launch geometry.

Its own policy: the tile's rows are wgmma's N (8 to 128), its columns whole m64 blocks of the consumer warpgroups."""

from __future__ import annotations

from pathlib import Path

from cumm.core.spec import Constraint, KernelSpec, cdiv, positive
from cumm.ladder.common import WGMMA_CONSTRAINTS, hopper_half

C = Constraint

_HALF = hopper_half()
_HALF["headers"] += ("include/batch16.cuh",)  # the batched variant's arguments


def _smem(c) -> int:
    return c["STAGES"] * (c["BM"] + c["BN"]) * 128 + 1024 + 16 * c["STAGES"]


# Beside the half ladder, for products of few rows: C^T = B^T A^T on wgmma_cluster_split_k's warp specialization,
# the rows as wgmma's N.
SPEC = KernelSpec(
    name="wgmma_swap_ab",
    raced=True,  # the tuner races it
    # raced at products of at most 256 rows, whatever their tile count (a tile's rows are wgmma's N here, at most
    # 128; two tile rows that each read B still won 256 x 4096 x 14336 by 8-9 % on the H200, 1024 rows lost); auto
    # runs it where a tuned entry says it won (not a top rung)
    race_max_m=256,
    template=Path(__file__).with_name("kernel.cu"),
    **_HALF,
    summary="C^T = B^T A^T: the product's few rows as wgmma's N (8 to 128), 64 columns of B a warpgroup's M,"
    " whole K a block or split over a cluster (for few-token products)",
    defaults=dict(BM=16, BN=64, STAGES=16, WGS=1, GM=8, KS=1, NUM_THREADS=256),
    block=lambda c: (c["NUM_THREADS"], 1, 1),
    grid=lambda c, M, N, K: (c["KS"] * cdiv(M, c["BM"]) * cdiv(N, c["BN"]), 1, 1),
    smem=_smem,
    constraints=[
        *WGMMA_CONSTRAINTS,
        *positive("GM"),
        C("BM in (8, 16, 32, 64, 128)", "the tile's rows are wgmma's N here: BM is 8, 16, 32, 64 or 128"),
        C(
            "WGS in (1, 2)",
            "one or two consumer warpgroups: with more, their 232 registers a thread (setmaxnreg) and the producer's"
            " 40 exceed the 65536 registers of a multiprocessor",
        ),
        C("NUM_THREADS == 128 * (WGS + 1)", "NUM_THREADS is a producer and WGS consumer warpgroups"),
        C(
            "BN % (64 * WGS) == 0",
            "each consumer warpgroup owns whole 64-column blocks (wgmma's M): BN % (64 WGS) == 0",
        ),
        C(
            "BM * BN <= 128 * 128 * WGS",
            "each consumer thread holds BM * BN / (128 WGS) FP32 accumulators; more than 128 spill under its 232 "
            "registers: BM * BN <= 16384 WGS",
        ),
        C("KS in (1, 2, 4, 8)", "KS blocks of a cluster share a tile's K: 1 (whole K a block), 2, 4 or 8"),
        C(
            "KS == 1 or BM % (8 * KS) == 0",
            "each rank adds whole float4s of every thread's BM / 2 accumulators: BM % (8 KS) == 0 (or KS = 1)",
        ),
        C(
            "KS == 1 or BM * BN * 4 <= STAGES * (BM + BN) * 128",
            "the stage ring takes the tile's FP32 partial sums: BM * BN * 4 <= STAGES * (BM + BN) * 128 bytes",
        ),
        C(
            "STAGES * (BM + BN) * 128 + 1024 + 16 * STAGES <= 232448",
            "the stages fit in 227 KB of shared memory per block",
        ),
    ],
    # Deep rings only: a few-row product streams B (on the H200 the deepest ring that fits won every shape of
    # lab A/B at 16 to 128 rows); GM = 8 (a tile row is the whole M at these sizes: the order is moot).
    space=dict(
        BM=(8, 16, 32, 64, 128),
        BN=(64, 128, 256),
        STAGES=(6, 8, 12, 16),
        WGS=(1, 2),
        GM=(8,),
        KS=(1, 2, 4),
        NUM_THREADS=(256, 384),
    ),
)
