"""The skinny16 rung: parameters, defaults, constraints and launch geometry.

A rung beside the half ladder for products with few rows (decode): 19_skinny's stream of B on 16-bit inputs, FP32
sums (kernel.cu says why). ``kernel="auto"`` runs it where a tuned entry says it won the race (it is raced at
products of at most ``race_max_m`` rows)."""

from __future__ import annotations

from pathlib import Path

from cumm.core.dtypes import HALF
from cumm.core.spec import Constraint, KernelSpec, positive
from cumm.ladder.common import grid_nm

C = Constraint

SPEC = KernelSpec(
    name="skinny16",
    raced=True,  # the tuner races it ...
    race_max_m=1,  # ... at products of one row: at M = 4 to 16 it measured 0.25-0.65x torch.matmul (kernel.cu)
    template=Path(__file__).with_name("kernel.cu"),
    headers=("include/tc16.cuh", "include/batch16.cuh"),
    dtypes=HALF,
    min_cc=80,  # (tc16.cuh's conversions)
    vector_loads=True,  # cumm_load8h<VEC_A> and <VEC_B>: 16-byte loads where aligned
    summary="few rows of 16-bit inputs: B streamed once in 16-byte pieces of 8 halves, converted, FP32 FMA",
    configs={"one_row": dict(BM=1, BN=32, U=1, NUM_THREADS=512)},  # M = 1 (GEMV): 64-byte row pieces of B
    block=lambda c: (c["NUM_THREADS"], 1, 1),
    grid=grid_nm("BM", "BN"),
    smem=lambda c: 0 if c["NUM_THREADS"] * 8 == c["BN"] else c["NUM_THREADS"] * c["BM"] * 32,
    defaults=dict(BM=1, BN=64, U=1, NUM_THREADS=256),
    constraints=[
        *positive("BM", "BN", "U", "NUM_THREADS"),
        C("BM <= 8", "each thread holds BM x 8 sums in registers: BM <= 8"),
        C(
            "2 * U * (32 + 4 * BM) + 8 * BM + 24 <= min(255, 65536 // NUM_THREADS)",
            "two sets of U x (32 + 4 BM) words of loaded pieces and BM x 8 sums fit in a thread's registers (255, and"
            " 65536 over the threads): 2 U (32 + 4 BM) + 8 BM + 24 <= min(255, 65536 / NUM_THREADS)",
        ),
        C("BN % 8 == 0", "a thread takes eight columns: BN a multiple of 8"),
        C("NUM_THREADS % 32 == 0 and NUM_THREADS <= 1024", "whole warps, at most 1024 threads: NUM_THREADS"),
        C("NUM_THREADS % (BN // 8) == 0", "the threads split into k-groups of BN / 8: NUM_THREADS % (BN / 8) == 0"),
        C(
            "NUM_THREADS * 8 == BN or NUM_THREADS * BM * 32 <= 232448",
            "the k-groups' partial sums (NUM_THREADS x BM x 32 bytes) fit in 227 KB of shared memory",
        ),
    ],
    # BN of 24, 48, 96 and 192 (with 384 threads, which their 3, 6, 12 and 24 column threads divide): one block a
    # multiprocessor for widths that are not a power of two times 132 (6144 = 128 x 48 columns: one wave, where BN =
    # 32 gave 192 blocks of 512 threads, one resident a multiprocessor, two waves)
    space=dict(
        BM=(1, 2, 4, 8),
        BN=(16, 24, 32, 48, 64, 96, 128, 192, 256),
        U=(1, 2),
        NUM_THREADS=(128, 256, 384, 512),
    ),
)
