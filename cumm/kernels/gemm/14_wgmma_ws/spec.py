"""The wgmma_ws rung: parameters, defaults, constraints and launch geometry.

Its own policy: its tile rule for rounds of tiles (``_tiles_for_waves``), clusters for B
rows off 32 bytes (``_multicast_rows_off_32``) and the stream-K workspace rule (``_stream_k_workspace``)."""

from __future__ import annotations

from pathlib import Path

from cumm.core.spec import Constraint, KernelSpec, cdiv, positive
from cumm.ladder.common import (
    SK_MIN_SLABS,
    WGMMA_CONSTRAINTS,
    WS_SHAPE,
    hopper_half,
    stream_k_bytes,
)

C = Constraint


# wgmma_ws also takes three consumer warpgroups (192-row tiles), at 152 registers a thread (14_wgmma_ws.cu)
_WS3_CONSTRAINTS = [
    C(
        "WGS in (1, 2, 3)",
        "one, two or three consumer warpgroups: with more, their registers (setmaxnreg: 232 a thread for one or "
        "two, 152 for three) and the producer's 40 exceed the 65536 registers of a multiprocessor",
    ),
    *WS_SHAPE,
    C(
        "BM * BN <= (128 * 128 if WGS < 3 else 96 * 128) * WGS",
        "each consumer thread holds BM * BN / (128 WGS) FP32 accumulators; more than 128 spill under 232 registers "
        "(one or two warpgroups); three warpgroups take at most 96 (192 x 192, 192 x 128, 192 x 64), which fit the "
        "128 registers a thread of 512 at launch: BM * BN <= 16384 WGS, or 12288 WGS for WGS = 3",
    ),
    C("WGS < 3 or CL == 1", "three consumer warpgroups load their own B: CL = 1"),
]


def _multicast_rows_off_32(cfg, pitch_a: int, pitch_b: int) -> dict[str, int]:
    """wgmma_ws's pitch_config: clusters of two blocks that share B by multicast (CL = 2, each block loads half of
    B's boxes) when B's rows start off 32 bytes (a pitch of 8 mod 16 halves: N = 3000, 4104, 5000, ...). The copy
    engine splits each such 128-byte box row into small requests (bf16 2048 x 3000 x 4096, H100: 8.6 M L2 requests
    from the SMs against 2.8 M at a pitch of 3072, 1.25x the time); multicast halves the requests each block makes
    (4.4 M). Measured on the H100 (bf16, bench x cuBLAS, 128 x 256 tiles, CL = 1 -> CL = 2, both whole tiles):
    2048 x 3000 x 4096 0.74 -> 0.86, 3000 x 5000 x 2000 0.86 -> 0.94, 8192 x 3000 x 4096 0.86 -> 0.98; on aligned
    pitches CL = 2 ran 0.89-0.92x where CL = 1 ran 0.92-0.95x, so it stays off there. With an odd count of B boxes
    (BN = 192, 64) the first block of the pair loads one more."""
    return {"CL": 2} if pitch_b % 32 and cfg["WGS"] == 2 else {}


# Tiles that _tiles_for_waves weighs against 128 x 256 (the first wins a tie): two of three quarters its area, one of
# nine eighths
_WAVE_TILES = (
    dict(BN=192),  # 128 x 192, two consumer warpgroups
    dict(BM=192, BN=128, WGS=3, NUM_THREADS=512, SK=0),  # 192 x 128, three consumer warpgroups
    # 192 x 192, three consumer warpgroups of 64 x 192 (96 accumulators a thread), three stages (cuBLAS's tile at
    # 1536 x 3072 x 4096 on the H100: nvjet_sm90_tst_192x192_64x3_2x1)
    dict(BM=192, BN=192, WGS=3, NUM_THREADS=512, SK=0, STAGES=3),
)


def _tiles_for_waves(cfg, M: int, N: int, K: int, sms: int) -> dict[str, int]:
    """wgmma_ws's shape_config: other tiles instead of 128 x 256 ones when their whole rounds cost at least a fifth
    less (rounds of tiles on `sms` blocks times the tile's area), and the wide tiles give at least half the
    multiprocessors a block (fewer tiles are shared out by stream-K, or run one warpgroup's tiles): of 3/4 the area,
    128 x 192 (narrower), else 192 x 128 (taller: three consumer warpgroups); of 9/8, 192 x 192 (three warpgroups of
    64 x 192, three stages). At 1024 x 3072 x 4096 the 96 wide tiles leave 36 of 132 multiprocessors idle; 128
    narrow ones fill 128 in the same single round, each 3/4 of the work; at 3072 x 1024 x 4096, 128 tall ones; at
    1536 x 3072 x 4096, 128 square ones do in one round what 144 wide ones need two for. Measured on the H100 (bf16,
    bench x cuBLAS, 128 x 256 -> 128 x 192): 1024 x 3072 x 4096 0.89 -> 1.01, 768 x 4096 x 4096 0.85 -> 0.96, 1536 x
    2048 x 4096 0.87 -> 0.97, 2048 x 3072 x 4096 (192 -> 256 tiles: two rounds either way) 0.92 -> 0.97; where the
    rounds do not drop the wide tiles win (2048 x 2048 x 4096 0.96 against 0.83, 4096^3 0.97 against 0.92). 128 x
    256 -> 192 x 128: 3072 x 1024 x 4096 0.85 -> 0.97, 6144 x 1024 x 4096 0.88 -> 0.98, 3072 x 1024 x 1024 0.96 ->
    1.07; where both kinds cut the rounds alike, 128 x 192 mostly won (1536 x 2048 x 4096 0.96 against 0.94, 3072 x
    2048 x 4096 0.98 / 0.96, 1536 x 4096 x 4096 0.98 / 0.96; 3072 x 3072 x 4096 0.97 / 0.99). 128 x 192 -> 192 x
    192, bf16 / fp16: 1536 x 3072 x 4096 0.84 -> 0.96 / 0.84 -> 0.93, 1152 x 4096 x 4096 0.84 -> 0.95 / 0.87 ->
    0.96, 768 x 6144 x 4096 0.88 -> 0.95 / 0.86 -> 0.97, 2048 x 2304 x 4096 0.87 -> 0.97 / 0.85 -> 0.95, 1536 x 3072
    x 1024 0.80 -> 0.93 / 0.87 -> 1.05, 1536 x 3072 x 8192 0.86 -> 0.94 / 0.85 -> 0.96; where its two rounds cost
    what three of 128 x 192 do they ran alike (1536 x 6144 x 4096, 0.97 each), and where 128 x 256 tiles take as
    many rounds it lost (2304 x 3072 x 4096 0.87 against 0.97, 4096^3 0.88 against 0.99). A batch is weighed as one
    product nb M rows tall (its tiles are one run): 4 x 768 x 3072 x 4096 0.78 -> 0.99. Applied before pitch_config,
    which then gives B's rows off 32 bytes clusters of two on the narrow tiles (CL = 2 with 128 x 256 -> 128 x 192,
    bf16: 1024 x 3000 x 4096 0.86 -> 0.97, 2000 x 3000 x 4000 0.94 -> 1.02, 2048 x 3000 x 4096 0.88 -> 0.96)."""
    if cfg["BM"] != 128 or cfg["BN"] != 256 or cfg["WGS"] != 2 or cfg["CL"] != 1:
        return {}

    def cost(bm: int, bn: int) -> int:  # rounds of tiles times the tile's area
        return cdiv(cdiv(M, bm) * cdiv(N, bn), sms) * bm * bn

    if 2 * cdiv(M, 128) * cdiv(N, 256) < sms:
        return {}
    wide = cost(128, 256)
    best = min(_WAVE_TILES, key=lambda o: cost(o.get("BM", 128), o["BN"]))
    return dict(best) if 5 * cost(best.get("BM", 128), best["BN"]) <= 4 * wide else {}


def _stream_k_workspace(cfg, M: int, N: int, K: int, blocks: int) -> int:
    """wgmma_ws's stream-K scratch (14_wgmma_ws.cu, `skw`): SK_FLAGS int flags, then a BM x BN float32 partial per
    block, when SK > 0, the last wave of `blocks` is at most 60 % full and there are at most SK_FLAGS blocks; 0 (a
    null pointer: whole tiles only) otherwise. Measured on the H200 (bf16, 128 x 256 tiles, 132 blocks), stream-K
    against whole tiles: last wave 6 % full (2112 x 4096 x 4096) 1.19-1.37x, 42 % (2560 x 4096 x 4096) 1.09x, 52 %
    (8192^3) 1.01-1.02x, 88 % (4096^3) 0.94-0.95x: a nearly full last wave idles less than the partial sums cost.
    A tail behind whole waves is split only when a tile has at least SK_MIN_SLABS k-slabs of 64: each piece's partial
    (128 KB out and back for 128 x 256 tiles) costs a few slabs' loads, too much beside short tiles (bf16, 8192 x 8192
    x K, graph-timed, x cuBLAS, stream-K against whole tiles: K = 512 0.921 / 0.985, 768 0.943 / 0.986, 1024 0.991 /
    1.027, 2048 1.037 / 1.026, 4096 1.037 / 1.021). Fewer tiles than blocks always share their slabs out."""
    cl = cfg.get("CL", 1)  # clusters of CL blocks walk tiles of CL tile rows (tile pairs), one item per cluster
    tiles, slots = cdiv(M, cl * cfg["BM"]) * cdiv(N, cfg["BN"]), blocks // cl
    rem = tiles % slots
    if not cfg.get("SK") or rem == 0 or 5 * rem > 3 * slots:
        return 0
    if tiles > slots and cdiv(K, 64) < SK_MIN_SLABS:
        return 0
    return stream_k_bytes(cfg, blocks)


SPEC = KernelSpec(
    name="wgmma_ws",
    top=True,  # kernel="auto" runs it for its dtypes (the highest top rung the device runs)
    raced=True,  # the tuner races it
    template=Path(__file__).with_name("kernel.cu"),
    **hopper_half(glu=True),  # its stores are cumm_store_tile / CummTmaEpilogue: glu= runs here
    persistent=True,  # one block per multiprocessor walks the tiles: grid = min(tiles, resident blocks)
    schedules_batch=True,  # and a batch's tiles as one run
    reads_transposed=True,  # x @ w.T: w.T read in place (CUMM_TA / CUMM_TB)
    summary="warp-specialized persistent wgmma: a TMA producer warpgroup, consumers with setmaxnreg, grouped"
    " tile order, TMA-store epilogue",
    defaults=dict(BM=128, BN=256, STAGES=4, WGS=2, GM=8, CL=1, EPI=1, SK=4, NUM_THREADS=384),
    # one consumer warpgroup, for products with few tiles (the tuner times these first; H200 winners: 64 x 64
    # at bf16 128 x 4096 x 4096 and 4096 x 128 x 4096, 128 x 128 at 512 x 4096 x 4096 and 8192 x 256 x 8192).
    # Six and eight stages: on the H100 (bf16, bench x cuBLAS) 128 x 128 with 6 stages against 4 ran 0.95 /
    # 0.84 at 8192 x 256 x 8192, 1.00 / 0.94 at 256 x 8192 x 8192; 128 x 64 (as many tiles as cuBLAS's 64 x 128
    # there) 0.93 at 1024 x 1024 x 4096 and 1.22 at 768 x 1024 x 4096, where 64 x 64 ran 0.69 and 0.87; 192 x 64
    # (three m64 blocks a thread) 0.88 at 3072 x 512 x 4096 and 0.85 at 768 x 1536 x 4096, where 128 x 128 ran
    # 0.81, 0.75.
    configs={
        "one_warpgroup_64x64": dict(BM=64, BN=64, STAGES=8, WGS=1, GM=4, EPI=0, SK=0, NUM_THREADS=256),
        "one_warpgroup_128x64": dict(BM=128, BN=64, STAGES=8, WGS=1, GM=4, EPI=1, SK=0, NUM_THREADS=256),
        "one_warpgroup_192x64": dict(BM=192, BN=64, STAGES=6, WGS=1, GM=4, EPI=1, SK=0, NUM_THREADS=256),
        "one_warpgroup_128x128": dict(BM=128, BN=128, STAGES=6, WGS=1, GM=4, EPI=1, SK=0, NUM_THREADS=256),
    },
    block=lambda c: (c["NUM_THREADS"], 1, 1),
    grid=lambda c, M, N, K: (c["CL"] * cdiv(M, c["CL"] * c["BM"]) * cdiv(N, c["BN"]), 1, 1),
    workspace=_stream_k_workspace,
    shape_config=_tiles_for_waves,
    pitch_config=_multicast_rows_off_32,
    smem=lambda c: (
        c["STAGES"] * (c["BM"] + c["BN"]) * 128
        + 1024
        + 16 * c["STAGES"]
        + 32
        + 8 * (c["WGS"] // 3)
        + c["EPI"] * c["WGS"] * 16384
    ),
    constraints=[
        *WGMMA_CONSTRAINTS,
        *positive("GM"),
        *_WS3_CONSTRAINTS,
        C("CL in (1, 2)", "CL is 1, or 2: clusters of two blocks (two tile rows) that share B by multicast"),
        C("EPI in (0, 1)", "EPI is 0 (direct stores) or 1 (TMA-store epilogue for half outputs)"),
        C(
            "SK == 0 or WGS == 2",
            "one consumer warpgroup (WGS = 1) runs whole tiles: with stream-K (SK > 0) its producer spills under "
            "its 40 registers; three (WGS = 3) run whole tiles too, SK = 0 (warpgroup 2 owns stream-K's named "
            "barrier)",
        ),
        C(
            "STAGES * (BM + BN) * 128 + 1024 + 16 * STAGES + 32 + 8 * (WGS // 3) + EPI * WGS * 16384 <= 232448",
            "the stages (and the epilogue's staging tile) fit in 227 KB of shared memory per block",
        ),
    ],
    space=dict(
        # WGS = 1 (one consumer warpgroup, 64-row tiles): twice the tiles for products with few of them (H200,
        # bf16, graph-timed: 256 x 8192 x 8192 60.6 against 68.4 us, 128 x 4096 x 4096 15.2 against 16.4);
        # WGS = 3 (three, 192-row tiles of at most 192 columns: _tiles_for_waves)
        BM=(64, 128, 192, 256),
        BN=(64, 128, 192, 256),
        STAGES=(3, 4, 5, 6, 8),
        WGS=(1, 2, 3),
        GM=(4, 8, 16),
        CL=(1,),
        EPI=(0, 1),
        SK=(0, 4),
        NUM_THREADS=(256, 384, 512),
    ),
)
