"""The fused3 rung: parameters, defaults, constraints and launch geometry."""

from __future__ import annotations

from pathlib import Path

from cumm.core.spec import Constraint, KernelSpec, at_most_1024_threads, cdiv, positive

C = Constraint


# Chain kernel (cumm.multi_dot): E = A @ B @ C for A m x k, B k x p, C p x n. Its grid, block and
# smem callables take (cfg, M, N, K) = (cfg, m, n, p): E is M x N and K = p is the inner dimension
# of the second product; the grid depends on m alone (CL blocks, one cluster, per BM-row panel).
SPEC = KernelSpec(
    name="fused3",
    template=Path(__file__).with_name("kernel.cu"),
    headers=("include/cluster.cuh",),
    summary="A @ B @ C in one kernel: a cluster of CL blocks per BM-row panel, T = A @ B kept on chip",
    kind="chain",
    # From device-time sweeps on an H200 (bench/chain.py --configs; docs/chain.md):
    # bm32: a 32-row panel per cluster of 4 blocks; 128-wide slices of T and panels of E; 8 x 8 thread
    #   tiles (64 FFMA per 4 LDS.128) and 32-deep slabs split over 4 k-slices: 256 threads, 113 KB of
    #   shared memory (a 512-column chunk of T, then stages or partial tiles). 43 us at n = 512 (bm16: 50).
    # bm16: a 16-row panel per cluster of 8; 32-wide slices; 4 x 4 thread tiles over 4 k-slices: 128
    #   threads, 33 KB, several blocks per multiprocessor. Small chains, which are latency-bound: 9.5 us at
    #   n = 128 and 16 us at n = 256 (bm32: 17 and 26).
    configs={
        "bm32": dict(BM=32, BN=128, BK=32, CL=4, PCH=1, TM=8, TN=8, KS=4, MINB=1),
        "bm16": dict(BM=16, BN=32, BK=32, CL=8, PCH=1, TM=4, TN=4, KS=4, MINB=2),
    },
    defaults=dict(BM=32, BN=128, BK=32, CL=1, PCH=4, TM=8, TN=8, KS=4, MINB=1),
    cc_defaults={90: dict(CL=4, PCH=1), 100: dict(CL=4, PCH=1), 120: dict(CL=4, PCH=1)},
    block=lambda c: (c["KS"] * (c["BM"] // c["TM"]) * (c["BN"] // c["TN"]), 1, 1),
    grid=lambda c, M, N, K: (c["CL"] * cdiv(M, c["BM"]), 1, 1),
    smem=lambda c: (
        4
        * (
            c["CL"] * c["PCH"] * c["BN"] * (c["BM"] + 4)
            + max(2 * c["BK"] * (c["BM"] + 4 + c["BN"]), c["KS"] // 2 * c["BM"] * c["BN"])
        )
    ),
    derived=lambda c: {"NT": c["KS"] * (c["BM"] // c["TM"]) * (c["BN"] // c["TN"])},
    constraints=[
        *positive("BM", "BN", "BK", "CL", "PCH", "TM", "TN", "KS", "MINB"),
        C("TM % 4 == 0 and TN % 4 == 0", "a thread's tile is read as float4s, so TM and TN are multiples of 4"),
        C("BM % TM == 0 and BN % TN == 0", "the thread tile TM x TN divides the block tile BM x BN"),
        C("((BM // TM) * (BN // TN)) % 32 == 0", "each k-slice of threads is a whole number of warps"),
        at_most_1024_threads("NT"),
        C("BK % KS == 0", "each slab is split evenly over the KS k-slices"),
        C("BN % BK == 0", "T's column slices (BN wide) end on slab boundaries (BK deep) of the second product"),
        C(
            "(BM * BK) % NT == 0 and (BK * BN) % (4 * NT) == 0",
            "every thread copies as many elements of A's slab and 16-byte chunks of B's or C's as the others",
        ),
        C("KS & (KS - 1) == 0", "the KS slices' tiles are summed as a tree, so KS is a power of two"),
        C("CL in (1, 2, 4, 8)", "a cluster has 1, 2, 4 or 8 blocks (8 is the portable maximum)"),
        C(
            "4 * (CL * PCH * BN * (BM + 4) + max(2 * BK * (BM + 4 + BN), KS // 2 * BM * BN)) <= 232448",
            "shared memory (a chunk of T, then two stages or KS / 2 partial tiles) is at most 227 KB per block",
        ),
    ],
    space=dict(
        BM=(16, 32, 64),
        BN=(32, 64, 128),
        BK=(16, 32, 64),
        CL=(1, 2, 4, 8),
        PCH=(1, 2, 4, 8),
        TM=(4, 8),
        TN=(4, 8),
        KS=(1, 2, 4, 8),
        MINB=(1, 2),
    ),
)
