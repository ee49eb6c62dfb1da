"""The wgmma_pingpong rung: parameters, defaults, constraints and launch geometry.

Its own policy: a tile is one consumer warpgroup's (at most 128 x 192 in its registers); two warpgroups take turns;
128 x 192 tiles where their rounds cost no more (``_wide_tiles``), and those shapes' fused epilogues at any K."""

from __future__ import annotations

from pathlib import Path

from cumm.core.spec import Constraint, KernelSpec, cdiv, positive
from cumm.ladder.common import hopper_half

C = Constraint


# 128 x 192 tiles (192 accumulators a consumer thread: setmaxnreg 240, the producer 24): 3/4 of 128 x 128's L2 bytes
# per FLOP. H200, bf16, x torch.matmul, 7 interleaved rounds (128 x 128 -> 128 x 192): plain 8192 x 14336 x 1024
# 1.036 -> 1.131, 8192 x 4096 x 4096 0.941 -> 0.992, 3000 x 5000 x 2000 0.687 -> 0.805, 512 x 5120 x 5120 0.677 ->
# 0.920; bias + gelu_tanh at 8192 x 14336 x 4096 1.5521 -> 1.4455 ms (wgmma_ws 1.5081). Where its rounds cost more
# it lost: 4096^3 0.2208 -> 0.2305 ms, 2048 x 4096 x 14336 0.925 -> 0.893, and at K = 128 (q @ k^T, the stores
# decide) 0.868 -> 0.832.
WIDE = dict(BN=192, STAGES=4)
WIDE_MIN_K = 512  # shorter, a tile's stores outlast its mainloop: the wider tile's larger epilogue is not hidden


def _wide_tiles(cfg, M: int, N: int, K: int, sms: int) -> dict[str, int]:
    """wgmma_pingpong's shape_config: 128 x 192 tiles (``WIDE``) instead of the default 128 x 128 where their whole
    rounds (rounds of tiles on ``sms`` blocks times the tile's area) cost at most 5 % more than 128 x 128's (the L2
    bytes they save, measured above) and K is at least ``WIDE_MIN_K``."""
    if cfg["BM"] != 128 or cfg["BN"] != 128 or K < WIDE_MIN_K:
        return {}

    def cost(bn: int) -> int:
        return cdiv(cdiv(M, 128) * cdiv(N, bn), sms) * 128 * bn

    return dict(WIDE) if 20 * cost(192) <= 21 * cost(128) else {}


def _deep_epilogue(M: int, N: int, K: int, sms: int) -> bool:
    """Deeper than epilogue_max_k, auto still runs a fused epilogue here where the 128 x 192 tiles fill the rounds
    (``_wide_tiles``): the top rung's epilogue runs between two mainloops (bias + gelu_tanh 1.058x its plain product
    at 8192 x 14336 x 4096 against 1.017x here). At 4096^3 they leave a round short and this rule keeps the top rung;
    the tuned table may still send the call here on its 128 x 128 tiles (cumm.plan.auto.epilogue_tie)."""
    return bool(_wide_tiles(SPEC.defaults, M, N, K, sms))


def _smem(c) -> int:
    return c["STAGES"] * (c["BM"] + c["BN"]) * 128 + 1024 + 16 * c["STAGES"] + 16 + c["EPI"] * 32768


# Beside the half ladder, for products whose epilogue is long beside their mainloop (short K, fused epilogues)
SPEC = KernelSpec(
    name="wgmma_pingpong",
    raced=True,  # the tuner races it
    # auto's rung for a fused epilogue at K <= 2048 (cumm/plan/routes.py). H200, bf16, bias + gelu_tanh, x torch's
    # plain product, wgmma_ws -> this rung: 8192 x 14336 x K, K = 512 0.597 -> 0.691, 1024 0.711 -> 0.861, 2048
    # 0.840 -> 0.932, 4096 0.936 -> 0.943; 4096 x 4096 x 1024 0.748 -> 0.864, 2048 x 8192 x 1024 0.740 -> 0.840,
    # 16384 x 4096 x 1024 0.747 -> 0.865; but 4096^3 0.941 -> 0.915 (deep K: 14's 128 x 256 tiles read less of L2).
    epilogue_max_k=2048,
    epilogue_shapes=_deep_epilogue,
    template=Path(__file__).with_name("kernel.cu"),
    **hopper_half(glu=True),  # its stores are cumm_store_tile / CummTmaEpilogue: glu= runs here
    persistent=True,  # one block per multiprocessor walks the tiles: grid = min(tiles, resident blocks)
    schedules_batch=True,  # and a batch's tiles as one run
    reads_transposed=True,  # x @ w.T: w.T read in place (CUMM_TA / CUMM_TB)
    summary="wgmma_ws with a tile per consumer warpgroup: the two take turns on the tensor cores, so one's"
    " epilogue runs under the other's mainloop (short K, fused epilogues)",
    defaults=dict(BM=128, BN=128, STAGES=6, GM=8, EPI=1, NUM_THREADS=384),
    block=lambda c: (c["NUM_THREADS"], 1, 1),
    grid=lambda c, M, N, K: (cdiv(M, c["BM"]) * cdiv(N, c["BN"]), 1, 1),
    smem=_smem,
    shape_config=_wide_tiles,
    constraints=[
        *positive("STAGES", "GM"),
        C("BM in (64, 128)", "a tile is one warpgroup's whole 64-row wgmma blocks: BM is 64 or 128"),
        C(
            "BN % 64 == 0 and BN <= 256",
            "B is copied in 64-column boxes and wgmma's N is at most 256: BN % 64 == 0, BN <= 256",
        ),
        C(
            "BM * BN <= 128 * 192",
            "a consumer thread holds its warpgroup's whole tile, BM * BN / 128 FP32 accumulators; more than 192 "
            "spill under its 240 registers (setmaxnreg, the producer's 24 beside): BM * BN <= 24576",
        ),
        C("STAGES >= 2", "the pipeline needs at least two stages"),
        C("NUM_THREADS == 384", "NUM_THREADS is 384: a producer and two consumer warpgroups"),
        C("EPI in (0, 1)", "EPI is 0 (direct stores) or 1 (TMA-store epilogue for half outputs)"),
        C(
            "STAGES * (BM + BN) * 128 + 1024 + 16 * STAGES + 16 + EPI * 32768 <= 232448",
            "the stages (and the two epilogue staging tiles) fit in 227 KB of shared memory per block",
        ),
    ],
    space=dict(
        BM=(64, 128),
        BN=(64, 128, 192, 256),
        STAGES=(4, 5, 6, 8),
        GM=(4, 8, 16),
        EPI=(1,),
        NUM_THREADS=(384,),
    ),
)
