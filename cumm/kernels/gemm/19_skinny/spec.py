"""The skinny rung: parameters, defaults, constraints and launch geometry.

A rung beside the ladder for products with few rows (decode): it streams B once with FP32 FMAs instead of tiling
(kernel.cu says why). ``kernel="auto"`` runs it where a tuned entry says it won the race (it is raced at products
of at most ``race_max_m`` rows)."""

from __future__ import annotations

from pathlib import Path

from cumm.core.spec import Constraint, KernelSpec, positive
from cumm.ladder.common import grid_nm

C = Constraint

SPEC = KernelSpec(
    name="skinny",
    raced=True,  # the tuner races it ...
    race_max_m=64,  # ... at products of at most 64 rows (more: the tiled rungs win)
    template=Path(__file__).with_name("kernel.cu"),
    vector_loads=True,  # cumm_load4<VEC_A> and <VEC_B>: 16-byte loads where aligned
    summary="few rows: B streamed once in 16-byte pieces by threads that split N and K, FP32 FMA, one reduction",
    configs={"one_row": dict(BM=1, BN=16, U=1, NUM_THREADS=1024)},  # M = 1 (GEMV): 256 blocks at N = 4096
    block=lambda c: (c["NUM_THREADS"], 1, 1),
    grid=grid_nm("BM", "BN"),
    smem=lambda c: 0 if c["NUM_THREADS"] * 4 == c["BN"] else c["NUM_THREADS"] * c["BM"] * 16,
    defaults=dict(BM=4, BN=64, U=2, NUM_THREADS=256),
    constraints=[
        *positive("BM", "BN", "U", "NUM_THREADS"),
        C("BM <= 16", "each thread holds BM x 4 sums in registers: BM <= 16"),
        C(
            "2 * U * (16 + 4 * BM) + 4 * BM + 16 <= min(255, 65536 // NUM_THREADS)",
            "two sets of U x (16 + 4 BM) loaded values and BM x 4 sums fit in a thread's registers (255, and 65536"
            " over the threads): 2 U (16 + 4 BM) + 4 BM + 16 <= min(255, 65536 / NUM_THREADS)",
        ),
        C("BN % 4 == 0", "a thread takes four columns: BN a multiple of 4"),
        C("NUM_THREADS % 32 == 0 and NUM_THREADS <= 1024", "whole warps, at most 1024 threads: NUM_THREADS"),
        C("NUM_THREADS % (BN // 4) == 0", "the threads split into k-groups of BN / 4: NUM_THREADS % (BN / 4) == 0"),
        C(
            "NUM_THREADS * 4 == BN or NUM_THREADS * BM * 16 <= 232448",
            "the k-groups' partial sums (NUM_THREADS x BM x 16 bytes) fit in 227 KB of shared memory",
        ),
    ],
    space=dict(BM=(1, 2, 4, 8, 16), BN=(16, 32, 64, 128), U=(1, 2, 4), NUM_THREADS=(128, 256, 512, 1024)),
)
