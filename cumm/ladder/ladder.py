"""The registry: every kernel's declarative spec, in ladder order.

Adding a kernel = one ``kernels/<name>.cu`` template + one ``KernelSpec`` here. Tests, benchmarks,
the tuner and the CLI iterate over ``REGISTRY``; nothing else names kernels.
"""

from __future__ import annotations

from ..core.spec import Constraint, KernelSpec, at_most_1024_threads, cdiv, positive
from .registry import REGISTRY, add

C = Constraint
SMEM_STATIC_LIMIT = 48 * 1024  # static __shared__ arrays cannot opt in past 48 KB


def _grid_nm(bm: str, bn: str):
    """Blocks tile C: x along N (BN columns each), y along M (BM rows each)."""
    return lambda c, M, N, K: (cdiv(N, c[bn]), cdiv(M, c[bm]), 1)


def _static_smem(expr: str) -> Constraint:
    return C(f"({expr}) * 4 <= {SMEM_STATIC_LIMIT}", "static shared memory is limited to 48 KB per block")


_THREADS_2D = "(BM // TM) * (BN // TN)"

# Constraints of the register-tiled, float4 rungs (vectorized and up).
_FLOAT4_TILES = [
    C("TM % 4 == 0 and TN % 4 == 0", "a thread's tile is read as float4s, so TM and TN are multiples of 4"),
    C("BK % 4 == 0 and BN % 4 == 0", "tiles are fetched as float4s along K (A) and N (B)"),
]
_SWIZZLE = [
    C("BK in (4, 8, 16, 32)", "the A swizzle XORs by (k/4) * 128/BK, which needs BK in 4, 8, 16, 32"),
    C("BM % 32 == 0", "the A swizzle permutes 32-column bands, so BM is a multiple of 32"),
]


def _warptile_derived(c):
    wmiter = (c["WM"] * c["WN"]) // (32 * c["TM"] * c["TN"] * c["WNITER"])
    return {
        "WMITER": wmiter,
        "WSUBM": c["WM"] // wmiter if wmiter else 0,
        "WSUBN": c["WN"] // c["WNITER"],
    }


_WARPTILE_CONSTRAINTS = [
    *positive("BM", "BN", "BK", "WM", "WN", "WNITER", "TM", "TN", "NUM_THREADS", "MINB"),
    C("NUM_THREADS % 32 == 0", "NUM_THREADS is a whole number of warps"),
    at_most_1024_threads("NUM_THREADS"),
    C("BM % WM == 0 and BN % WN == 0", "the warp tile WM x WN divides the block tile BM x BN"),
    C("(BM // WM) * (BN // WN) * 32 == NUM_THREADS", "one warp per warp tile: NUM_THREADS = 32 * (BM/WM) * (BN/WN)"),
    C(
        "(WM * WN) % (32 * TM * TN * WNITER) == 0 and WMITER >= 1",
        "WMITER = WM*WN / (32*TM*TN*WNITER) must be a positive integer",
    ),
    C("WM % WMITER == 0 and WN % WNITER == 0", "WMITER and WNITER split the warp tile into equal sub-tiles"),
    C(
        "WSUBM % TM == 0 and WSUBN % TN == 0",
        "the warp sub-tile (WSUBM x WSUBN) must divide by the thread tile TM x TN",
    ),
    C("(WSUBM // TM) * (WSUBN // TN) == 32", "the 32 lanes of a warp exactly cover a warp sub-tile"),
    *_FLOAT4_TILES,
    *_SWIZZLE,
    C(
        "(BM * BK) % (4 * NUM_THREADS) == 0 and (BK * BN) % (4 * NUM_THREADS) == 0",
        "every thread fetches the same number of float4s of the A and B tiles",
    ),
]

_WARPTILE_DEFAULTS = dict(BM=128, BN=128, BK=16, WM=64, WN=32, WNITER=2, TM=4, TN=4, NUM_THREADS=256, MINB=2)
_WARPTILE_SPACE = dict(
    BM=(64, 128, 256),
    BN=(64, 128, 256),
    BK=(8, 16, 32),
    WM=(32, 64, 128),
    WN=(32, 64, 128),
    WNITER=(1, 2, 4),
    TM=(4, 8),
    TN=(4, 8),
    NUM_THREADS=(128, 256),
    MINB=(1, 2),
)


_TF32X3_CONSTRAINTS = [
    *positive("BM", "BN", "BK", "WM", "WN", "STAGES", "NUM_THREADS", "MINB"),
    C("WM % 16 == 0 and WN % 8 == 0", "a warp tile is made of whole 16 x 8 mma tiles"),
    C("BM % WM == 0 and BN % WN == 0", "the warp tile WM x WN divides the block tile BM x BN"),
    C("(BM // WM) * (BN // WN) * 32 == NUM_THREADS", "one warp per warp tile: NUM_THREADS = 32 * (BM/WM) * (BN/WN)"),
    at_most_1024_threads("NUM_THREADS"),
    C("BK % 8 == 0", "a slab is a whole number of k = 8 mma steps"),
    C("BN % 4 == 0", "B's rows are copied as 16-byte chunks"),
    C(
        "(BM * BK) % (4 * NUM_THREADS) == 0 and (BK * BN) % (4 * NUM_THREADS) == 0",
        "every thread copies the same number of 16-byte chunks of the A and B tiles",
    ),
    C("STAGES >= 2", "the pipeline needs at least two stages"),
    C(
        "STAGES * (BM * (BK + 4) + BK * (BN + 8)) * 4 <= 232448",
        "the pipeline stages fit in 227 KB of shared memory per block",
    ),
]


def _tf32x3_smem(c):
    return c["STAGES"] * (c["BM"] * (c["BK"] + 4) + c["BK"] * (c["BN"] + 8)) * 4


# fused3_wg's shared memory in bytes (see fused3_wg.cu): per K group (KW) its raw stages and split buffers of
# Y^T, and a partial tile; with TMA = 1 dense stages on 1024-byte boundaries, three split buffers, an mbarrier
# per stage (PC = 1: and one for C's chunks) and the alignment slack. The constraint below is the same formula.
_WG_SMEM = (
    "KW * (4 * (STAGES * ((BM * BK + BK * BN + 255) // 256 * 256) + 6 * BN * BK + BM * (BN + 8))"
    " + 8 * (STAGES + PC)) + 1024 if TMA else"
    " 4 * KW * (STAGES * (BM * (BK + 4) + BK * (BN + 4)) + 4 * BN * BK + BM * (BN + 8))"
)


_WG_SMEM_CODE = compile(_WG_SMEM, "<fused3_wg shared memory>", "eval")


def _wg_smem(c):
    return eval(_WG_SMEM_CODE, {"__builtins__": {}}, dict(c))  # as a Constraint evaluates its expression


HALF = ("float16", "bfloat16")
_MMA_CONSTRAINTS = [
    *positive("BM", "BN", "BK", "WM", "WN", "NUM_THREADS"),
    C("BK % 16 == 0 and WM % 16 == 0 and WN % 16 == 0", "mma.sync m16n8k16: BK, WM and WN are multiples of 16"),
    C("BM % WM == 0 and BN % WN == 0", "the warp tile WM x WN divides the block tile BM x BN"),
    C("NUM_THREADS == 32 * (BM // WM) * (BN // WN)", "one warp per warp tile: NUM_THREADS = 32 * (BM/WM) * (BN/WN)"),
    at_most_1024_threads("NUM_THREADS"),
]
_WGMMA_CONSTRAINTS = [
    *positive("BM", "BN", "STAGES", "WGS"),
    C(
        "BN % 64 == 0 and BN <= 256",
        "B is copied in 64-column boxes and wgmma's N is at most 256: BN % 64 == 0, BN <= 256",
    ),
    C("STAGES >= 2", "the pipeline needs at least two stages"),
]


# The warp-specialized half rungs (14_wgmma_ws.cu, 16_wgmma_cluster_split_k.cu): a producer warpgroup and WGS
# consumer warpgroups whose accumulators fit under setmaxnreg's 232 registers.
_WS_SHAPE = [
    C("NUM_THREADS == 128 * (WGS + 1)", "NUM_THREADS is a producer and WGS consumer warpgroups"),
    C("BM % (64 * WGS) == 0", "each consumer warpgroup owns whole 64-row wgmma tiles"),
]
_WS_CONSTRAINTS = [
    C(
        "WGS in (1, 2)",
        "one or two consumer warpgroups: with more, their 232 registers a thread (setmaxnreg) and the producer's 40 "
        "exceed the 65536 registers of a multiprocessor",
    ),
    *_WS_SHAPE,
    C(
        "BM * BN <= 128 * 128 * WGS",
        "each consumer thread holds BM * BN / (128 WGS) FP32 accumulators; more than 128 spill under its 232 "
        "registers: BM * BN <= 16384 WGS",
    ),
]
# wgmma_ws also takes three consumer warpgroups (192-row tiles), at 152 registers a thread (14_wgmma_ws.cu)
_WS3_CONSTRAINTS = [
    C(
        "WGS in (1, 2, 3)",
        "one, two or three consumer warpgroups: with more, their registers (setmaxnreg: 232 a thread for one or "
        "two, 152 for three) and the producer's 40 exceed the 65536 registers of a multiprocessor",
    ),
    *_WS_SHAPE,
    C(
        "BM * BN <= (128 * 128 if WGS < 3 else 96 * 128) * WGS",
        "each consumer thread holds BM * BN / (128 WGS) FP32 accumulators; more than 128 spill under 232 registers "
        "(one or two warpgroups); three warpgroups take at most 96 (192 x 192, 192 x 128, 192 x 64), which fit the "
        "128 registers a thread of 512 at launch: BM * BN <= 16384 WGS, or 12288 WGS for WGS = 3",
    ),
    C("WGS < 3 or CL == 1", "three consumer warpgroups load their own B: CL = 1"),
]


def _half_maps(cfg, M: int, N: int, K: int, lda: int, ldb: int, ldc: int, c_map: bool, layout: int = 0):
    """The tensor maps of the TMA rungs (13_wgmma.cu, 14_wgmma_ws.cu): A (dims K x M, boxes 64 x BM), B (N x K,
    64 x 64), 16-bit elements moved as bits, 128-byte swizzle; and for wgmma_ws C (N x M, 64 x 64) when its TMA
    store can run (``c_map``: EPI = 1, C 16-byte aligned with ldc % 8 == 0, a half output), else None: a zeroed
    map it never reads. ``layout`` (wgmma_ws): a column-major A (bit 1) has dims M x K and boxes 64 x 64, a
    column-major B (bit 2) dims K x N and boxes 64 x 64; lda, ldb are then their column strides."""
    from ..runtime.render import TRANSPOSED_A, TRANSPOSED_B
    from ..runtime.tmaps import MapSpec

    if layout & TRANSPOSED_A:
        a = MapSpec(0, M, K, lda, 64, 64, 3, 2, 1)
    else:
        a = MapSpec(0, K, M, lda, 64, cfg["BM"], 3, 2, 1)
    if layout & TRANSPOSED_B:
        b = MapSpec(1, K, N, ldb, 64, 64, 3, 2, 1)
    else:
        b = MapSpec(1, N, K, ldb, 64, 64, 3, 2, 1)
    if "EPI" not in cfg:
        return a, b
    return a, b, (MapSpec(2, N, M, ldc, 64, 64, 3, 2, 1) if c_map and cfg["EPI"] else None)


def _hopper_half(**fields):
    """The fields every TMA + wgmma half rung shares (13_wgmma.cu and up): the headers, the dtypes, sm_90a only,
    mma_swizzled_pipeline for operands the copy engine cannot read (unaligned, ld % 8 != 0), the maps."""
    return dict(
        headers=("include/tc16.cuh", "include/sm90.cuh"),
        dtypes=HALF,
        min_cc=90,
        arch_specific=True,  # wgmma (and setmaxnreg, clusters): sm_90a only
        fallback="mma_swizzled_pipeline",
        tensor_maps=_half_maps,
        **fields,
    )


def _tf32_maps(cfg, M: int, N: int, K: int, lda: int, ldb: int, ldc: int, c_map: bool):
    """The tensor maps of wgmma_tf32x3 (15_wgmma_tf32x3.cu): A (dims K x M, boxes 32 x BM) and B (N x K, 32 x 32),
    FP32, 128-byte swizzle."""
    from ..runtime.tmaps import MapSpec

    return MapSpec(0, K, M, lda, 32, cfg["BM"], 3), MapSpec(1, N, K, ldb, 32, 32, 3)


SK_FLAGS = 4096  # 14_wgmma_ws.cu's CUMM_SK_FLAGS: the flags at the workspace's start, one per block
SK_MIN_SLABS = 32  # a stream-K tail behind whole waves needs tiles this many 64-deep k-slabs deep (_stream_k_workspace)


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
    if not cfg.get("SK") or rem == 0 or 5 * rem > 3 * slots or blocks > SK_FLAGS:
        return 0
    if tiles > slots and cdiv(K, 64) < SK_MIN_SLABS:
        return 0
    return SK_FLAGS * 4 + blocks * cfg["BM"] * cfg["BN"] * 4


def _warptile_block(c):
    return (c["NUM_THREADS"], 1, 1)


# Every rung goes through the same registration (and its checks) as a user's kernel: cumm/_register.py.
for _spec in [
    KernelSpec(
        name="naive",
        template="gemm/01_naive/kernel.cu",
        summary="one thread per element of C; threads run down columns (uncoalesced)",
        defaults=dict(BS=32),
        block=lambda c: (c["BS"], c["BS"], 1),
        grid=lambda c, M, N, K: (cdiv(M, c["BS"]), cdiv(N, c["BS"]), 1),
        constraints=[*positive("BS"), at_most_1024_threads("BS * BS")],
        space=dict(BS=(8, 16, 32)),
    ),
    KernelSpec(
        name="coalesced",
        template="gemm/02_coalesced/kernel.cu",
        summary="consecutive threads along a row of C: B loads and C stores coalesce",
        defaults=dict(BS=32),
        block=lambda c: (c["BS"] * c["BS"], 1, 1),
        grid=_grid_nm("BS", "BS"),
        constraints=[*positive("BS"), at_most_1024_threads("BS * BS")],
        space=dict(BS=(8, 16, 32)),
    ),
    KernelSpec(
        name="smem",
        template="gemm/03_smem/kernel.cu",
        summary="shared-memory cache blocking with BS x BS tiles",
        defaults=dict(BS=32),
        block=lambda c: (c["BS"] * c["BS"], 1, 1),
        grid=_grid_nm("BS", "BS"),
        constraints=[*positive("BS"), at_most_1024_threads("BS * BS"), _static_smem("2 * BS * BS")],
        space=dict(BS=(8, 16, 32)),
    ),
    KernelSpec(
        name="blocktile_1d",
        template="gemm/04_blocktile_1d/kernel.cu",
        summary="each thread computes TM results down a column of C",
        defaults=dict(BM=64, BN=64, BK=8, TM=8),
        block=lambda c: (c["BM"] * c["BN"] // c["TM"], 1, 1),
        grid=_grid_nm("BM", "BN"),
        constraints=[
            *positive("BM", "BN", "BK", "TM"),
            C("BM % TM == 0", "TM divides BM: each thread owns TM whole rows"),
            at_most_1024_threads("BM * BN // TM"),
            _static_smem("BM * BK + BK * BN"),
        ],
        space=dict(BM=(32, 64, 128), BN=(32, 64, 128), BK=(4, 8, 16), TM=(4, 8, 16)),
    ),
    KernelSpec(
        name="blocktile_2d",
        template="gemm/05_blocktile_2d/kernel.cu",
        summary="each thread computes a TM x TN tile as outer products from shared memory",
        defaults=dict(BM=128, BN=128, BK=32, TM=8, TN=8),
        block=lambda c: ((c["BM"] // c["TM"]) * (c["BN"] // c["TN"]), 1, 1),
        grid=_grid_nm("BM", "BN"),
        constraints=[
            *positive("BM", "BN", "BK", "TM", "TN"),
            C("BM % TM == 0 and BN % TN == 0", "the thread tile TM x TN divides the block tile BM x BN"),
            at_most_1024_threads(_THREADS_2D),
            _static_smem("BM * (BK + 1) + BK * BN"),
        ],
        space=dict(BM=(64, 128), BN=(64, 128), BK=(8, 16), TM=(4, 8), TN=(4, 8)),
    ),
    KernelSpec(
        name="vectorized",
        # No stage_out: its scalar-store variant runs faster than its 16-byte one (H200, 4096^3: 3.43 against
        # 3.61 ms, the codegen of the main loop differs), so an unaligned C is best written in place.
        template="gemm/06_vectorized/kernel.cu",
        vector_loads=True,  # cumm_tile_fetch<..., VEC_A> and <..., VEC_B>
        summary="16-byte global loads/stores; A transposed in shared memory, read as float4",
        defaults=dict(BM=128, BN=128, BK=16, TM=8, TN=8),
        block=lambda c: ((c["BM"] // c["TM"]) * (c["BN"] // c["TN"]), 1, 1),
        grid=_grid_nm("BM", "BN"),
        constraints=[
            *positive("BM", "BN", "BK", "TM", "TN"),
            C("BM % TM == 0 and BN % TN == 0", "the thread tile TM x TN divides the block tile BM x BN"),
            at_most_1024_threads(_THREADS_2D),
            *_FLOAT4_TILES,
            C(
                f"(BM * BK) % (4 * {_THREADS_2D}) == 0 and (BK * BN) % (4 * {_THREADS_2D}) == 0",
                "every thread fetches the same number of float4s of the A and B tiles",
            ),
            _static_smem("BK * BM + BK * BN"),
        ],
        space=dict(BM=(64, 128), BN=(64, 128), BK=(8, 16), TM=(4, 8), TN=(4, 8)),
    ),
    KernelSpec(
        name="bank_conflict_free",
        stage_out=True,  # H200, 4096^3 into ldc = 4097 (docs/performance.md): staging is faster
        template="gemm/07_bank_conflict_free/kernel.cu",
        vector_loads=True,  # cumm_tile_fetch<..., VEC_A> and <..., VEC_B>
        summary="vectorized, with A's transposed shared-memory stores free of bank conflicts (swizzle or pad)",
        defaults=dict(BM=128, BN=128, BK=16, TM=8, TN=8, SWIZZLE=1, PAD=4),
        block=lambda c: ((c["BM"] // c["TM"]) * (c["BN"] // c["TN"]), 1, 1),
        grid=_grid_nm("BM", "BN"),
        constraints=[
            *positive("BM", "BN", "BK", "TM", "TN"),
            C("BM % TM == 0 and BN % TN == 0", "the thread tile TM x TN divides the block tile BM x BN"),
            at_most_1024_threads(_THREADS_2D),
            *_FLOAT4_TILES,
            C(
                f"(BM * BK) % (4 * {_THREADS_2D}) == 0 and (BK * BN) % (4 * {_THREADS_2D}) == 0",
                "every thread fetches the same number of float4s of the A and B tiles",
            ),
            C("SWIZZLE in (0, 1)", "SWIZZLE is 1 (XOR swizzle) or 0 (padding by PAD floats)"),
            C("PAD % 4 == 0", "PAD keeps rows 16-byte aligned for LDS.128, so it is a multiple of 4"),
            C(
                "SWIZZLE == 0 or (BK in (4, 8, 16, 32) and BM % 32 == 0)",
                "the A swizzle needs BK in 4, 8, 16, 32 and BM a multiple of 32",
            ),
            _static_smem("BK * (BM + PAD * (1 - SWIZZLE)) + BK * BN"),
        ],
        space=dict(BM=(64, 128), BN=(64, 128), BK=(8, 16), TM=(4, 8), TN=(4, 8), SWIZZLE=(0, 1)),
    ),
    KernelSpec(
        name="warptile",
        stage_out=True,  # H200, 4096^3 into ldc = 4097 (docs/performance.md): staging is faster
        template="gemm/08_warptile/kernel.cu",
        split_k=True,  # CUMM_SPLIT_K(BK) at the top of the kernel
        vector_loads=True,  # cumm_tile_fetch<..., VEC_A> and <..., VEC_B>
        summary="block -> warp -> thread tiling; conflict-free LDS.128 per warp sub-tile",
        # 64 x 64 tiles for grids that would not fill the GPU with the defaults (cumm/_auto.py)
        configs={"small": dict(BM=64, BN=64, BK=16, WM=32, WN=32, WNITER=2, TM=4, TN=4, NUM_THREADS=128, MINB=2)},
        defaults=_WARPTILE_DEFAULTS,
        block=_warptile_block,
        grid=_grid_nm("BM", "BN"),
        smem=lambda c: c["BK"] * (c["BM"] + c["BN"]) * 4,
        constraints=_WARPTILE_CONSTRAINTS,
        derived=_warptile_derived,
        space=_WARPTILE_SPACE,
    ),
    KernelSpec(
        name="double_buffer",
        stage_out=True,  # H200, 4096^3 into ldc = 4097 (docs/performance.md): staging is faster
        template="gemm/09_double_buffer/kernel.cu",
        split_k=True,  # CUMM_SPLIT_K(BK) at the top of the kernel
        vector_loads=True,  # cumm_tile_fetch<..., VEC_A> and <..., VEC_B>
        summary="warptiling with two shared-memory stages: next slab's loads overlap this slab's FMAs",
        # 64 x 64 tiles for grids that would not fill the GPU with the defaults (cumm/_auto.py)
        configs={"small": dict(BM=64, BN=64, BK=16, WM=32, WN=32, WNITER=2, TM=4, TN=4, NUM_THREADS=128, MINB=2)},
        block=_warptile_block,
        grid=_grid_nm("BM", "BN"),
        smem=lambda c: 2 * c["BK"] * (c["BM"] + c["BN"]) * 4,
        defaults=dict(_WARPTILE_DEFAULTS, BN=256, BK=8, WN=64, TM=8, MINB=1),
        constraints=_WARPTILE_CONSTRAINTS,
        derived=_warptile_derived,
        space=_WARPTILE_SPACE,
    ),
    KernelSpec(
        name="tf32x3",
        stage_out=True,  # H200, 4096^3 into ldc = 4097 (docs/performance.md): staging is faster
        template="gemm/10_tf32x3/kernel.cu",
        headers=("include/tf32x3_tile.cuh",),
        min_cc=80,  # mma.sync with TF32 operands
        split_k=True,  # CUMM_SPLIT_K(BK) at the top of the kernel
        vector_loads=True,  # cumm_cp_async_chunk<VEC_A> and <VEC_B>: 16-byte copies, never past K or N
        summary="tensor cores (mma.sync TF32) with each operand split in two: FP32 accuracy, 3 mma per product",
        # 64 x 64 tiles for grids that would not fill the GPU with the defaults (cumm/_auto.py)
        configs={"small": dict(BM=64, BN=64, BK=32, WM=32, WN=32, STAGES=4, NUM_THREADS=128, MINB=1)},
        block=lambda c: (c["NUM_THREADS"], 1, 1),
        grid=_grid_nm("BM", "BN"),
        smem=_tf32x3_smem,
        defaults=dict(BM=128, BN=128, BK=32, WM=64, WN=32, STAGES=4, NUM_THREADS=256, MINB=1),
        # H200 tuning (docs/performance.md): 64 x 64 warp tiles, 60.4 TFLOP/s at 4096^3 against 56.2
        # for the defaults; 253 registers, no spills on sm_90 (sm_80's ptxas spills 96 bytes there).
        cc_defaults={90: dict(BN=256, BK=16, WN=64, STAGES=3)},
        constraints=_TF32X3_CONSTRAINTS,
        space=dict(
            BM=(64, 128, 256),
            BN=(64, 128, 256),
            BK=(16, 32),
            WM=(32, 64),
            WN=(32, 64),
            STAGES=(2, 3, 4),
            NUM_THREADS=(128, 256),
            MINB=(1, 2),
        ),
    ),
    # Half-precision tensor-core rungs (float16 / bfloat16 inputs, FP32 accumulation; C in the inputs' dtype
    # or float32). Their primitives: include/tc16.cuh (mma.sync) and include/sm90.cuh (TMA, wgmma).
    KernelSpec(
        name="mma",
        template="gemm/11_mma/kernel.cu",
        headers=("include/tc16.cuh",),
        dtypes=HALF,
        min_cc=80,  # mma.sync m16n8k16 with bfloat16, ldmatrix
        summary="tensor cores: mma.sync m16n8k16 on fp16/bf16 from shared memory read with ldmatrix",
        defaults=dict(BM=128, BN=128, BK=32, WM=64, WN=32, NUM_THREADS=256),
        block=lambda c: (c["NUM_THREADS"], 1, 1),
        grid=_grid_nm("BM", "BN"),
        constraints=[
            *_MMA_CONSTRAINTS,
            C("(BM * BK + BK * BN) * 2 <= 48 * 1024", "static shared memory is limited to 48 KB per block"),
        ],
        space=dict(BM=(64, 128), BN=(64, 128), BK=(32, 64), WM=(32, 64), WN=(32, 64), NUM_THREADS=(128, 256)),
    ),
    KernelSpec(
        name="mma_swizzled_pipeline",
        template="gemm/12_mma_swizzled_pipeline/kernel.cu",
        headers=("include/tc16.cuh",),
        dtypes=HALF,
        min_cc=80,
        summary="mma with XOR-swizzled shared memory (no ldmatrix bank conflicts) and a cp.async multistage pipeline",
        defaults=dict(BM=128, BN=128, BK=64, WM=64, WN=32, STAGES=3, NUM_THREADS=256),
        block=lambda c: (c["NUM_THREADS"], 1, 1),
        grid=_grid_nm("BM", "BN"),
        smem=lambda c: c["STAGES"] * 2 * (c["BM"] * c["BK"] + c["BK"] * c["BN"]),
        constraints=[
            *_MMA_CONSTRAINTS,
            C(
                "BK == 32 or BK % 64 == 0",
                "a swizzled row is 4 or a multiple of 8 16-byte chunks: BK is 32 or a multiple of 64",
            ),
            C("BN % 64 == 0", "a swizzled row of B is a multiple of 8 16-byte chunks: BN is a multiple of 64"),
            C("STAGES >= 2", "the pipeline needs at least two stages"),
            C("STAGES * 2 * (BM * BK + BK * BN) <= 232448", "the stages fit in 227 KB of shared memory per block"),
        ],
        space=dict(
            BM=(64, 128, 256),
            BN=(64, 128),
            BK=(32, 64),
            WM=(32, 64),
            WN=(32, 64),
            STAGES=(2, 3, 4),
            NUM_THREADS=(128, 256),
        ),
    ),
    KernelSpec(
        name="wgmma",
        template="gemm/13_wgmma/kernel.cu",
        **_hopper_half(),
        summary="Hopper: TMA into 128-byte-swizzled shared memory, mbarrier stages, wgmma m64nNk16 by WGS warpgroups",
        defaults=dict(BM=128, BN=256, STAGES=4, WGS=2, NUM_THREADS=256),
        block=lambda c: (c["NUM_THREADS"], 1, 1),
        grid=_grid_nm("BM", "BN"),
        smem=lambda c: c["STAGES"] * (c["BM"] + c["BN"]) * 128 + 1024 + 16 * c["STAGES"],
        constraints=[
            *_WGMMA_CONSTRAINTS,
            C("NUM_THREADS == 128 * WGS", "NUM_THREADS is the WGS consumer warpgroups: 128 * WGS"),
            C("BM % (64 * WGS) == 0", "each consumer warpgroup owns whole 64-row wgmma tiles"),
            C(
                "STAGES * (BM + BN) * 128 + 1024 + 16 * STAGES <= 232448",
                "the stages fit in 227 KB of shared memory per block",
            ),
        ],
        space=dict(BM=(128, 256), BN=(128, 256), STAGES=(3, 4, 5), WGS=(1, 2), NUM_THREADS=(128, 256)),
    ),
    KernelSpec(
        name="wgmma_ws",
        template="gemm/14_wgmma_ws/kernel.cu",
        **_hopper_half(),
        persistent=True,  # one block per multiprocessor walks the tiles: grid = min(tiles, resident blocks)
        schedules_batch=True,  # and a batch's tiles as one run
        reads_transposed=True,  # x @ w.T: w.T read in place (CUMM_TA / CUMM_TB)
        summary="warp-specialized persistent wgmma: a TMA producer warpgroup, consumers with setmaxnreg, grouped"
        " tile order, TMA-store epilogue",
        defaults=dict(BM=128, BN=256, STAGES=4, WGS=2, GM=8, CL=1, EPI=1, PP=0, SK=4, NUM_THREADS=384),
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
            *_WGMMA_CONSTRAINTS,
            *positive("GM"),
            *_WS3_CONSTRAINTS,
            C("CL in (1, 2)", "CL is 1, or 2: clusters of two blocks (two tile rows) that share B by multicast"),
            C(
                "PP == 0",
                "PP = 1 (ping-pong consumers) is correct but measured 0.85-0.87x PP = 0 at 4096^3 on the H200: PP = 0",
            ),
            C("EPI in (0, 1)", "EPI is 0 (direct stores) or 1 (TMA-store epilogue for half outputs)"),
            C("SK == 0 or PP == 0", "stream-K (SK > 0) needs PP = 0"),
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
            PP=(0,),
            SK=(0, 4),
            NUM_THREADS=(256, 384, 512),
        ),
    ),
    # FP32 accuracy on Hopper's warpgroup tensor cores: tf32x3's split with wgmma_ws's machinery.
    KernelSpec(
        name="wgmma_tf32x3",
        template="gemm/15_wgmma_tf32x3/kernel.cu",
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
    ),
    # Beside the half ladder, for products with few tiles and a deep K: wgmma_ws's producer and consumers with
    # each tile's K split over a cluster, the partial sums added in distributed shared memory.
    KernelSpec(
        name="wgmma_cluster_split_k",
        template="gemm/16_wgmma_cluster_split_k/kernel.cu",
        **_hopper_half(),
        branch=True,  # auto runs it where the tuned table says it won (few tiles, deep K), never as the top rung
        summary="wgmma_ws's warp specialization with each tile's K split over a cluster of KS blocks, the partial"
        " sums added in distributed shared memory (for few tiles and a deep K)",
        # Clusters of two: on the H200 66 clusters of two blocks of ~200 KB fit at once, but only 30 of four (ncu's
        # Max Active Clusters), so 32 tiles of 128 x 256 with KS = 4 ran in two waves (1024 x 1024 x 8192: 54.5
        # against 33.1 us for 64 tiles of 128 x 128 with KS = 2, graph-timed). The tuner times these first.
        defaults=dict(BM=128, BN=128, STAGES=6, WGS=2, GM=8, KS=2, NUM_THREADS=384),
        configs={"one_warpgroup": dict(BM=64, BN=128, STAGES=8, WGS=1, NUM_THREADS=256)},
        block=lambda c: (c["NUM_THREADS"], 1, 1),
        grid=lambda c, M, N, K: (c["KS"] * cdiv(M, c["BM"]) * cdiv(N, c["BN"]), 1, 1),
        smem=lambda c: c["STAGES"] * (c["BM"] + c["BN"]) * 128 + 1024 + 16 * c["STAGES"],
        constraints=[
            *_WGMMA_CONSTRAINTS,
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
    ),
    # Chain kernel (cumm.multi_dot): E = A @ B @ C for A m x k, B k x p, C p x n. Its grid, block and
    # smem callables take (cfg, M, N, K) = (cfg, m, n, p): E is M x N and K = p is the inner dimension
    # of the second product; the grid depends on m alone (CL blocks, one cluster, per BM-row panel).
    KernelSpec(
        name="fused3",
        template="chain/fused3/kernel.cu",
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
    ),
    KernelSpec(
        name="fused3_tc",
        template="chain/fused3_tc/kernel.cu",
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
        smem=lambda c: max(_tf32x3_smem(c), 4 * (c["KS"] - 1) * c["BM"] * c["BN"]),
        defaults=dict(BM=32, BN=64, BK=32, WM=16, WN=32, STAGES=4, NUM_THREADS=128, MINB=1, KS=1),
        constraints=[
            *_TF32X3_CONSTRAINTS,
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
    ),
    KernelSpec(
        name="fused3_wg",
        template="chain/fused3_wg/kernel.cu",
        headers=("include/cluster.cuh", "include/grid_barrier.cuh", "include/sm90.cuh"),
        min_cc=90,
        arch_specific=True,  # wgmma: sm_90a only
        summary="A @ B @ C in one persistent launch on wgmma: big tiles, K split over a cluster of blocks"
        " or over warpgroups of one block",
        kind="chain",
        persistent=True,
        # BM x BN tiles, each tile's K split over a cluster of CL blocks or (KW = 2) over two warpgroups of
        # one block; TMA = 1: chunks by the copy engine for 16-byte aligned operands (others run the
        # cp.async form of the same tiles, cumm/_chain/plans.py). Each is the fastest measured at some chain
        # size on the H200 (cumm/_chain/rules.py, docs/chain.md).
        configs={
            "kw64x32": dict(BM=64, BN=32, BK=64, CL=1, STAGES=2, MINB=1, TMA=1, KW=2, PC=1),
            "wg64x32": dict(BM=64, BN=32, BK=64, CL=2, STAGES=2, MINB=1, TMA=1, RF=1),
            "wg128x64": dict(BM=128, BN=64, BK=32, CL=2, STAGES=4, MINB=1, TMA=1, MN=1),
        },
        block=lambda c: (2 * c["BM"] * c["KW"], 1, 1),  # a warpgroup (128 threads) per 64 rows, per K group
        # CL blocks (a cluster) per tile of the larger phase; cumm.multi_dot caps it at the clusters the
        # GPU holds at once
        grid=lambda c, M, N, K: (c["CL"] * cdiv(M, c["BM"]) * cdiv(max(N, K), c["BN"]), 1, 1),
        smem=_wg_smem,
        # kw64x32's cp.async form (what cumm/_chain/plans.py's cp_async_config runs for an unaligned
        # operand: K over a cluster of 2, chunks of 32), which takes operands of any alignment
        defaults=dict(BM=64, BN=32, BK=32, CL=2, STAGES=4, MINB=1, TMA=0, KW=1, RF=0, PC=0, MN=0),
        constraints=[
            *positive("BM", "BN", "BK", "CL", "STAGES", "MINB"),
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
                "MN=1 puts Y's big and small halves into one wgmma of N = 2 BN (at most 128 here): use BN <= 64"
                " with MN=1",
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
            MINB=(1,),
            TMA=(0, 1),
            KW=(1, 2),
            RF=(0, 1),
            PC=(0, 1),
            MN=(0, 1),
        ),
    ),
]:
    add(_spec, builtin=True)
del _spec


def get_spec(name: str) -> KernelSpec:
    try:
        return REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown kernel {name!r}; the kernels are {list(REGISTRY)}") from None


def gemm_kernels() -> list[str]:
    return [n for n, s in REGISTRY.items() if s.kind == "gemm"]
