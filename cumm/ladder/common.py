"""Spec pieces several rungs share: constraint families, launch geometry, the Hopper half rungs' tensor maps.

A rung's own choices live in its folder's ``spec.py`` (cumm/kernels/<kind>/<NN_name>/spec.py); what two or more
rungs declare alike is written once here, and a rung copied with ``cumm new`` imports it from here too.
"""

from __future__ import annotations

from cumm.core.dtypes import HALF
from cumm.core.spec import Constraint, at_most_1024_threads, cdiv, positive

C = Constraint


SMEM_STATIC_LIMIT = 48 * 1024  # static __shared__ arrays cannot opt in past 48 KB


def grid_nm(bm: str, bn: str):
    """Blocks tile C: x along N (BN columns each), y along M (BM rows each)."""
    return lambda c, M, N, K: (cdiv(N, c[bn]), cdiv(M, c[bm]), 1)


def static_smem(expr: str) -> Constraint:
    return C(f"({expr}) * 4 <= {SMEM_STATIC_LIMIT}", "static shared memory is limited to 48 KB per block")


THREADS_2D = "(BM // TM) * (BN // TN)"


# Constraints of the register-tiled, float4 rungs (vectorized and up).
FLOAT4_TILES = [
    C("TM % 4 == 0 and TN % 4 == 0", "a thread's tile is read as float4s, so TM and TN are multiples of 4"),
    C("BK % 4 == 0 and BN % 4 == 0", "tiles are fetched as float4s along K (A) and N (B)"),
]


SWIZZLE = [
    C("BK in (4, 8, 16, 32)", "the A swizzle XORs by (k/4) * 128/BK, which needs BK in 4, 8, 16, 32"),
    C("BM % 32 == 0", "the A swizzle permutes 32-column bands, so BM is a multiple of 32"),
]


def warptile_derived(c):
    wmiter = (c["WM"] * c["WN"]) // (32 * c["TM"] * c["TN"] * c["WNITER"])
    return {
        "WMITER": wmiter,
        "WSUBM": c["WM"] // wmiter if wmiter else 0,
        "WSUBN": c["WN"] // c["WNITER"],
    }


WARPTILE_CONSTRAINTS = [
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
    *FLOAT4_TILES,
    *SWIZZLE,
    C(
        "(BM * BK) % (4 * NUM_THREADS) == 0 and (BK * BN) % (4 * NUM_THREADS) == 0",
        "every thread fetches the same number of float4s of the A and B tiles",
    ),
]


WARPTILE_DEFAULTS = dict(BM=128, BN=128, BK=16, WM=64, WN=32, WNITER=2, TM=4, TN=4, NUM_THREADS=256, MINB=2)


WARPTILE_SPACE = dict(
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


TF32X3_CONSTRAINTS = [
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


def tf32x3_smem(c):
    return c["STAGES"] * (c["BM"] * (c["BK"] + 4) + c["BK"] * (c["BN"] + 8)) * 4


MMA_CONSTRAINTS = [
    *positive("BM", "BN", "BK", "WM", "WN", "NUM_THREADS"),
    C("BK % 16 == 0 and WM % 16 == 0 and WN % 16 == 0", "mma.sync m16n8k16: BK, WM and WN are multiples of 16"),
    C("BM % WM == 0 and BN % WN == 0", "the warp tile WM x WN divides the block tile BM x BN"),
    C("NUM_THREADS == 32 * (BM // WM) * (BN // WN)", "one warp per warp tile: NUM_THREADS = 32 * (BM/WM) * (BN/WN)"),
    at_most_1024_threads("NUM_THREADS"),
]


WGMMA_CONSTRAINTS = [
    *positive("BM", "BN", "STAGES", "WGS"),
    C(
        "BN % 64 == 0 and BN <= 256",
        "B is copied in 64-column boxes and wgmma's N is at most 256: BN % 64 == 0, BN <= 256",
    ),
    C("STAGES >= 2", "the pipeline needs at least two stages"),
]


# The warp-specialized half rungs (14_wgmma_ws.cu, 16_wgmma_cluster_split_k.cu): a producer warpgroup and WGS
# consumer warpgroups whose accumulators fit under setmaxnreg's 232 registers.
WS_SHAPE = [
    C("NUM_THREADS == 128 * (WGS + 1)", "NUM_THREADS is a producer and WGS consumer warpgroups"),
    C("BM % (64 * WGS) == 0", "each consumer warpgroup owns whole 64-row wgmma tiles"),
]


# Stream-K's workspace, shared by wgmma_ws and wgmma_grouped (one scratch buffer a stream serves both): the flags at
# its start (their kernels' CUMM_SK_FLAGS), one per block, then a BM x BN float32 partial per block
SK_FLAGS = 4096
SK_MIN_SLABS = 32  # a stream-K tail behind whole rounds needs tiles this many 64-deep k-slabs deep


def stream_k_bytes(cfg, blocks: int) -> int:
    """Bytes of the stream-K workspace for ``blocks`` blocks of configuration ``cfg``; 0 (a null pointer: whole
    tiles) with more blocks than flags."""
    return 0 if blocks > SK_FLAGS else SK_FLAGS * 4 + blocks * cfg["BM"] * cfg["BN"] * 4


def half_maps(cfg, M: int, N: int, K: int, lda: int, ldb: int, ldc: int, c_map: bool, layout: int = 0):
    """The tensor maps of the TMA rungs (13_wgmma.cu, 14_wgmma_ws.cu): A (dims K x M, boxes 64 x BM), B (N x K,
    64 x 64), 16-bit elements moved as bits, 128-byte swizzle; and for wgmma_ws C (N x M, 64 x 64) when its TMA
    store can run (``c_map``: EPI = 1, C 16-byte aligned with ldc % 8 == 0, a half output), else None: a zeroed
    map it never reads. ``layout`` (wgmma_ws): a column-major A (bit 1) has dims M x K and boxes 64 x 64, a
    column-major B (bit 2) dims K x N and boxes 64 x 64; lda, ldb are then their column strides."""
    from cumm.runtime.render import TRANSPOSED_A, TRANSPOSED_B
    from cumm.runtime.tmaps import MapSpec

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


def hopper_half(**fields):
    """The fields every TMA + wgmma half rung shares (13_wgmma.cu and up): the headers, the dtypes, sm_90a only,
    mma_swizzled_pipeline for operands the copy engine cannot read (unaligned, ld % 8 != 0), the maps."""
    return dict(
        headers=("include/tc16.cuh", "include/sm90.cuh"),
        dtypes=HALF,
        min_cc=90,
        arch_specific=True,  # wgmma (and setmaxnreg, clusters): sm_90a only
        fallback="mma_swizzled_pipeline",
        tensor_maps=half_maps,
        **fields,
    )


def warptile_block(c):
    return (c["NUM_THREADS"], 1, 1)


# The FP8 rungs (17_fp8_wgmma, 18_fp8_block_scaled): operand formats and C's type are configuration parameters (FA,
# FB, OUT: cumm/kernels/include/fp8.cuh), so each variant is its own rendered kernel.
FP8_FORMATS = ("float8_e4m3fn", "float8_e5m2")  # FA, FB = the index
# OUT = the index; 3 and 4 (FP8, with scale_result) render include/fp8_out.cuh (cumm.runtime.render.fp8_out)
FP8_OUTPUTS = ("bfloat16", "float16", "float32", "float8_e4m3fn", "float8_e5m2")
PIECES_SLAB = 64  # K per stage of wgmma_f16x3 (64 halves: a 128-byte swizzled row); its pieces pad K to this
FP8_SLAB = 128  # K per stage: one 128-byte swizzled row of FP8 (the kernels' 128; a block scale's depth)
FP8_CONSTRAINTS = [
    C("FA in (0, 1) and FB in (0, 1)", "FA and FB pick A's and B's format: 0 float8_e4m3fn, 1 float8_e5m2"),
    C(
        "OUT in (0, 1, 2, 3, 4)",
        "OUT picks C's type: 0 bfloat16, 1 float16, 2 float32, 3 float8_e4m3fn, 4 float8_e5m2 (times scale_result)",
    ),
    C("EPI in (0, 1)", "EPI is 0 (direct stores) or 1 (TMA-store epilogue for 16-bit outputs)"),
    C("OUT < 3 or EPI == 0", "FP8 outputs (OUT = 3, 4) are stored directly: EPI = 0 (include/fp8_out.cuh)"),
    # setmaxnreg (sm90_fp8.cuh): 232 registers a consumer thread beside the producer's 40, 160 beside 32 with three
    C("WGS in (1, 2, 3)", "one, two or three consumer warpgroups"),
    C(
        "BM * BN * (1 + PROMO) <= 128 * 128 * WGS + (PROMO == 2 and WGS < 3) * 64 * 128 * WGS",
        "each consumer thread holds BM * BN / (128 WGS) FP32 accumulators, twice that with promotion (PROMO = 1: a "
        "slab's partial sums beside the FP32 totals), three times with PROMO = 2 (two partial sets): at most 128 (192 "
        "with PROMO = 2) under 232 registers, 128 under three warpgroups' 160 (offline sm_90a, no spills)",
    ),
]


def fp8_maps(cfg, M: int, N: int, K: int, lda: int, ldb: int, ldc: int, c_map: bool, layout: int = 0):
    """The FP8 rungs' tensor maps: A (M x K row-major: dims K x M, boxes FP8_SLAB x BM), B (its N x K rows: dims K x
    N, boxes FP8_SLAB x BN), bytes (UINT8), 128-byte swizzle; C (dims N x M, boxes 64 x 64, 16-bit, 128-byte swizzle)
    when the TMA store runs (``c_map``: EPI = 1, C 16-byte aligned with ldc % 8 == 0, a 16-bit output), else None."""
    from cumm.runtime.tmaps import MapSpec

    a = MapSpec(0, K, M, lda, FP8_SLAB, cfg["BM"], 3, 1, 0)
    b = MapSpec(1, K, N, ldb, FP8_SLAB, cfg["BN"], 3, 1, 0)
    return a, b, (MapSpec(2, N, M, ldc, 64, 64, 3, 2, 1) if c_map and cfg["EPI"] else None)


def fp8_block_maps(cfg, M: int, N: int, K: int, lda: int, ldb: int, ldc: int, c_map: bool, layout: int = 0):
    """fp8_block_scaled's maps: :func:`fp8_maps`, then A's scales (the call's fourth pointer) stored K-block-major
    (dims M x ceil(K / 128), row pitch :func:`scale_pitch`), read in boxes of a tile's BM scales of one block."""
    from cumm.runtime.tmaps import MapSpec

    s = MapSpec(3, M, cdiv(K, FP8_SLAB), scale_pitch(M), cfg["BM"], 1, 0)
    return (*fp8_maps(cfg, M, N, K, lda, ldb, ldc, c_map), s)


def scale_pitch(M: int) -> int:
    """The row pitch (float32 elements) of A's block scales stored K-block-major, as the copy engine reads them:
    M rounded up to 16 bytes."""
    return cdiv(M, 4) * 4


def hopper_fp8(scales: str, **fields):
    """The fields the FP8 rungs share: the headers (fp8.cuh before tc16.cuh: C's type), both FP8 dtypes, sm_90a
    only, the maps; ``scales``: the scale layout the rung applies ("tensor": per-tensor / row / column; "block":
    1 x 128 blocks of A, 128 x 128 blocks of B)."""
    return dict(
        headers=("include/fp8.cuh", "include/tc16.cuh", "include/sm90.cuh", "include/sm90_fp8.cuh"),
        dtypes=FP8_FORMATS,
        scales=scales,
        min_cc=90,
        arch_specific=True,  # wgmma (and setmaxnreg): sm_90a only
        **{"tensor_maps": fp8_maps, **fields},
    )
