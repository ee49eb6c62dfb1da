"""The wgmma_cluster_split_k rung: parameters, defaults, constraints and launch geometry.

Its own policy: its warp-specialized shape constraints."""

from __future__ import annotations

from pathlib import Path

from cumm.core.spec import Constraint, KernelSpec, cdiv, positive
from cumm.ladder.common import WGMMA_CONSTRAINTS, WS_SHAPE, hopper_half

C = Constraint


_WS_CONSTRAINTS = [
    C(
        "WGS in (1, 2)",
        "one or two consumer warpgroups: with more, their 232 registers a thread (setmaxnreg) and the producer's 40 "
        "exceed the 65536 registers of a multiprocessor",
    ),
    *WS_SHAPE,
    C(
        "BM * BN <= 128 * 128 * WGS",
        "each consumer thread holds BM * BN / (128 WGS) FP32 accumulators; more than 128 spill under its 232 "
        "registers: BM * BN <= 16384 WGS",
    ),
]


_HALF = hopper_half()
_HALF["headers"] += ("include/batch16.cuh",)  # the batched variant's arguments


# Beside the half ladder, for products with few tiles and a deep K: wgmma_ws's producer and consumers with
# each tile's K split over a cluster, the partial sums added in distributed shared memory.
SPEC = KernelSpec(
    name="wgmma_cluster_split_k",
    raced=True,  # the tuner races it
    template=Path(__file__).with_name("kernel.cu"),
    **_HALF,
    branch=True,  # auto runs it where the tuned table says it won (few tiles, deep K), never as the top rung
    summary="wgmma_ws's warp specialization with each tile's K split over a cluster of KS blocks, the partial"
    " sums added in distributed shared memory (for few tiles and a deep K)",
    # Clusters of two: on the H200 66 clusters of two blocks of ~200 KB fit at once, but only 30 of four (ncu's
    # Max Active Clusters), so 32 tiles of 128 x 256 with KS = 4 ran in two waves (1024 x 1024 x 8192: 54.5
    # against 33.1 us for 64 tiles of 128 x 128 with KS = 2, graph-timed). The tuner times these first.
    defaults=dict(BM=128, BN=128, STAGES=6, WGS=2, GM=8, KS=2, NUM_THREADS=384),
    # one_warpgroup_128x64: a few-token product's whole M in one tile row, so B is read once (H200, bf16, 128 x
    # 4096 x 14336: 413 TFLOP/s, 1.01x torch.matmul, interleaved, against 374 for 64 x 64 whole tiles, 342 for two
    # warpgroups' 128 x 128 with KS = 2)
    configs={
        "one_warpgroup": dict(BM=64, BN=128, STAGES=8, WGS=1, NUM_THREADS=256),
        "one_warpgroup_128x64": dict(BM=128, BN=64, STAGES=8, WGS=1, KS=2, NUM_THREADS=256),
    },
    block=lambda c: (c["NUM_THREADS"], 1, 1),
    grid=lambda c, M, N, K: (c["KS"] * cdiv(M, c["BM"]) * cdiv(N, c["BN"]), 1, 1),
    smem=lambda c: c["STAGES"] * (c["BM"] + c["BN"]) * 128 + 1024 + 16 * c["STAGES"],
    constraints=[
        *WGMMA_CONSTRAINTS,
        *positive("GM"),
        *_WS_CONSTRAINTS,
        C("KS in (2, 4, 8)", "KS blocks of a cluster share a tile's K: 2, 4 or 8 (8 is the portable cluster size)"),
        C(
            "BM * BN * 4 <= STAGES * (BM + BN) * 128",
            "the stage ring takes the tile's FP32 partial sums: BM * BN * 4 <= STAGES * (BM + BN) * 128 bytes",
        ),
        C(
            "STAGES * (BM + BN) * 128 + 1024 + 16 * STAGES <= 232448",
            "the stages fit in 227 KB of shared memory per block",
        ),
    ],
    space=dict(
        BM=(64, 128),
        BN=(64, 128, 256),
        STAGES=(3, 4, 5, 6, 8),
        WGS=(1, 2),
        GM=(4, 8),
        KS=(2, 4, 8),
        NUM_THREADS=(256, 384),
    ),
)
