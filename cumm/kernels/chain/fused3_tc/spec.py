"""The fused3_tc rung: parameters, defaults, constraints and launch geometry."""

from __future__ import annotations

from pathlib import Path

from cumm.core.spec import Constraint, KernelSpec, at_most_1024_threads, cdiv, positive
from cumm.ladder.common import TF32X3_CONSTRAINTS, tf32x3_smem

C = Constraint


SPEC = KernelSpec(
    name="fused3_tc",
    template=Path(__file__).with_name("kernel.cu"),
    headers=("include/tf32x3_tile.cuh", "include/grid_barrier.cuh"),
    min_cc=80,
    summary="A @ B @ C in one persistent tensor-core launch (tf32x3 tiles): T = A @ B via L2, a grid barrier",
    kind="chain",
    persistent=True,
    # Tile shapes by chain size (cumm/_chain/rules.py), from device-time sweeps on an H200: small tiles
    # while the chain is small (more tiles than multiprocessors), larger ones as it grows.
    configs={
        "tc32x32": dict(BM=32, BN=32, BK=64, WM=16, WN=16, STAGES=4, NUM_THREADS=128, MINB=1),
        "tc32x64": dict(BM=32, BN=64, BK=64, WM=16, WN=32, STAGES=4, NUM_THREADS=128, MINB=1),
        "tc64x64": dict(BM=64, BN=64, BK=32, WM=32, WN=32, STAGES=4, NUM_THREADS=128, MINB=1),
        "tc128x128": dict(BM=128, BN=128, BK=32, WM=64, WN=32, STAGES=3, NUM_THREADS=256, MINB=1),
    },
    block=lambda c: (c["NUM_THREADS"] * c["KS"], 1, 1),
    # tiles of the larger phase; cumm.multi_dot caps it at the blocks the GPU holds at once
    grid=lambda c, M, N, K: (cdiv(M, c["BM"]) * cdiv(max(N, K), c["BN"]), 1, 1),
    smem=lambda c: max(tf32x3_smem(c), 4 * (c["KS"] - 1) * c["BM"] * c["BN"]),
    defaults=dict(BM=32, BN=64, BK=32, WM=16, WN=32, STAGES=4, NUM_THREADS=128, MINB=1, KS=1),
    constraints=[
        *TF32X3_CONSTRAINTS,
        *positive("KS"),
        C("BK % (8 * KS) == 0", "each of the KS slices takes whole k = 8 steps of every slab"),
        at_most_1024_threads("NUM_THREADS * KS"),
        C("4 * (KS - 1) * BM * BN <= 232448", "the slices' partial tiles fit in 227 KB of shared memory"),
    ],
    space=dict(
        BM=(32, 64, 128),
        BN=(32, 64, 128),
        BK=(16, 32),
        WM=(16, 32, 64),
        WN=(16, 32, 64),
        STAGES=(2, 3, 4),
        NUM_THREADS=(64, 128, 256),
        MINB=(1, 2),
        KS=(1, 2, 4),
    ),
)
