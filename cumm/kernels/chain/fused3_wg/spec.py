"""The fused3_wg rung: parameters, defaults, constraints and launch geometry.

Its own policy: its shared-memory formula (``_WG_SMEM``)."""

from __future__ import annotations

from pathlib import Path

from cumm.core.spec import Constraint, KernelSpec, cdiv, positive

C = Constraint


# fused3_wg's shared memory in bytes (include/fused3_wg.cuh, namespace wg): per K group (KW) its raw stages and
# split buffers of Y^T, and a partial tile; with TMA = 1 dense stages on 1024-byte boundaries, three split
# buffers, an mbarrier per stage (PC = 1: and one for C's chunks) and the alignment slack. The constraint below is
# the same formula.
_WG_SMEM = (
    "KW * (4 * (STAGES * ((BM * BK + BK * BN + 255) // 256 * 256) + 6 * BN * BK + BM * (BN + 8))"
    " + 8 * (STAGES + PC)) + 1024 if TMA else"
    " 4 * KW * (STAGES * (BM * (BK + 4) + BK * (BN + 4)) + 4 * BN * BK + BM * (BN + 8))"
)


_WG_SMEM_CODE = compile(_WG_SMEM, "<fused3_wg shared memory>", "eval")


def _wg_smem(c):
    return eval(_WG_SMEM_CODE, {"__builtins__": {}}, dict(c))  # as a Constraint evaluates its expression


SPEC = KernelSpec(
    name="fused3_wg",
    template=Path(__file__).with_name("kernel.cu"),
    headers=("include/cluster.cuh", "include/grid_barrier.cuh", "include/sm90.cuh", "include/fused3_wg.cuh"),
    min_cc=90,
    arch_specific=True,  # wgmma: sm_90a only
    summary="A @ B @ C in one persistent launch on wgmma: big tiles, K split over a cluster of blocks"
    " or over warpgroups of one block",
    kind="chain",
    persistent=True,
    # BM x BN tiles, each tile's K split over a cluster of CL blocks or (KW = 2) over two warpgroups of
    # one block; TMA = 1: chunks by the copy engine for 16-byte aligned operands (others run the
    # cp.async form of the same tiles, cumm/plan/chain_plans.py). Each is the fastest measured at some chain
    # size on the H200 (cumm/plan/chain_rules.py, docs/chain.md).
    configs={
        "kw64x32": dict(BM=64, BN=32, BK=64, CL=1, STAGES=2, TMA=1, KW=2, PC=1),
        "wg64x32": dict(BM=64, BN=32, BK=64, CL=2, STAGES=2, TMA=1, RF=1),
        "wg128x64": dict(BM=128, BN=64, BK=32, CL=2, STAGES=4, TMA=1, MN=1),
    },
    block=lambda c: (2 * c["BM"] * c["KW"], 1, 1),  # a warpgroup (128 threads) per 64 rows, per K group
    # CL blocks (a cluster) per tile of the larger phase; cumm.multi_dot caps it at the clusters the
    # GPU holds at once
    grid=lambda c, M, N, K: (c["CL"] * cdiv(M, c["BM"]) * cdiv(max(N, K), c["BN"]), 1, 1),
    smem=_wg_smem,
    # kw64x32's cp.async form (what cumm/_chain/plans.py's cp_async_config runs for an unaligned
    # operand: K over a cluster of 2, chunks of 32), which takes operands of any alignment
    defaults=dict(BM=64, BN=32, BK=32, CL=2, STAGES=4, TMA=0, KW=1, RF=0, PC=0, MN=0),
    constraints=[
        *positive("BM", "BN", "BK", "CL", "STAGES"),
        C("BM in (64, 128, 256)", "BM is 64 rows (wgmma's M) per warpgroup: 64, 128 or 256"),
        C("BN in (32, 64, 128)", "BN is the N of the wgmma instruction: 32, 64 or 128 (the template's shapes)"),
        C("BK % 8 == 0", "a chunk is a whole number of k = 8 wgmma steps"),
        C("CL in (1, 2, 4, 8)", "a cluster has 1, 2, 4 or 8 blocks (8 is the portable maximum)"),
        C("BM % CL == 0", "each of the CL ranks sums and stores BM / CL rows of a tile"),
        C("STAGES >= 2", "the pipeline needs at least two stages"),
        C("TMA in (0, 1)", "TMA is 0 (every thread copies with cp.async) or 1 (the copy engine, sm_90)"),
        C(
            "TMA == 0 or BK in (8, 16, 32, 64)",
            "with TMA=1 a row of X's chunk is one 32-, 64- or 128-byte swizzle span, or two 128-byte ones:"
            " BK is 8, 16, 32 or 64",
        ),
        C("KW in (1, 2, 4)", "KW is 1, 2 or 4: the K groups of warpgroups within a block"),
        C(
            "RF in (0, 1)",
            "RF is 0 (the last chunk's wgmma waited for after the barrier) or 1 (before the proxy fence)",
        ),
        C(
            "PC in (0, 1)",
            "PC is 0 (phase 2 splits C chunk by chunk) or 1 (the first phase-2 tile's C split"
            " in the grid barrier's wait)",
        ),
        C("PC == 0 or TMA == 1", "PC=1 copies C with the copy engine: use TMA=1 with PC=1"),
        C(
            "MN in (0, 1)",
            "MN is 0 (three wgmma of N = BN per k-step) or 1 (x_big's two products as one of N = 2 BN)",
        ),
        C(
            "MN == 0 or BN <= 64",
            "MN=1 puts Y's big and small halves into one wgmma of N = 2 BN (at most 128 here): use BN <= 64 with MN=1",
        ),
        C("BM * KW <= 512", "a block has at most 1024 threads: BM / 64 * KW warpgroups of 128"),
        C(
            f"({_WG_SMEM}) <= 232448",
            "shared memory (per K group its raw stages and split buffers, and a partial tile) is at most"
            " 227 KB per block",
        ),
    ],
    space=dict(
        BM=(64, 128),
        BN=(32, 64, 128),
        BK=(16, 32, 64),
        CL=(1, 2, 4, 8),
        STAGES=(2, 3, 4, 8),
        TMA=(0, 1),
        KW=(1, 2),
        RF=(0, 1),
        PC=(0, 1),
        MN=(0, 1),
    ),
)
