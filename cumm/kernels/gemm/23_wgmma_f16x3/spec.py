"""The wgmma_f16x3 rung: FP32 products from three FP16 products on wgmma, the operands split into FP16 pieces
before each launch (cumm/plan/pieces.py). Its own rules: its maps over the pieces (``_piece_maps``) and the products
kernel="auto" gives it (``_takes``)."""

from __future__ import annotations

from pathlib import Path

from cumm.core.spec import Constraint, KernelSpec, cdiv, positive
from cumm.ladder.common import PIECES_SLAB

C = Constraint

# _takes' model of the two FP32 rungs on the H200 (calibrated in docs/ladder.md): wgmma_tf32x3's rate, this rung's
# three FP16 products' rate, the pieces' bytes (read 4, write 4 an element of A and B, plus the second read from
# cache) at the DRAM rate, and the fixed cost of the pieces' three launches.
TF32X3_FLOPS = 110e12
F16X3_FLOPS = 560e12 / 3
PIECES_BYTES_PER_S = 3.0e12
PIECES_FIXED_S = 12e-6


def _takes(M: int, N: int, K: int, sms: int) -> bool:
    """Whether kernel="auto" runs this rung (else wgmma_tf32x3): where its 128 x 128 tiles give at least half the
    multiprocessors a block (it has no split-K or stream-K: 1024 x 1024 x 8192, 64 tiles, ran 1.03x cuBLAS where
    wgmma_tf32x3's tuned entry runs 1.43x), and the product, at its rate, saves more than the pieces cost (their
    bytes, and the host time of their launches). Measured: behind at 1024^3 (0.91-0.95x cuBLAS against 2.2x), ahead
    at 1536^3 (2.47-2.50x against 1.75x) and 2048^3 (2.84-2.85x against 2.40-2.41x)."""
    if 2 * cdiv(M, 128) * cdiv(N, 128) < sms:
        return False
    flops = 2.0 * M * N * K
    saved = flops / TF32X3_FLOPS - flops / F16X3_FLOPS
    return saved > 8.0 * (M * K + K * N) / PIECES_BYTES_PER_S + PIECES_FIXED_S


def _wide_tiles(cfg, M: int, N: int, K: int, sms: int) -> dict[str, int]:
    """wgmma_f16x3's shape_config: 128 x 192 tiles (the "wide" configuration) instead of 128 x 128 where their rounds of
    tiles on ``sms`` blocks times their area cost no more (a round is as long as its largest tile). H200, FP32 x
    cuBLAS FP32 (docs/ladder.md): 1536^3 (one round of wide tiles, two of square) 2.47-2.50 against 2.00-2.03;
    8192^3 4.67-4.71 against 4.49-4.50; where the wide tiles cost more, 2048^3 2.22-2.23 against 2.84-2.85 and 4096^3
    3.82-3.89 against 4.09-4.15."""
    if cfg["BM"] != 128 or cfg["BN"] != 128:
        return {}

    def cost(bn: int) -> int:
        return cdiv(cdiv(M, 128) * cdiv(N, bn), sms) * bn

    return dict(SPEC.configs["wide"]) if cost(192) <= cost(128) else {}


def _piece_maps(cfg, M: int, N: int, K: int, lda: int, ldb: int, ldc: int, c_map: bool):
    """The maps of wgmma_f16x3 (23_wgmma_f16x3/kernel.cu) over the pieces: A's (dims 2 K' x M, boxes 64 x BM) and B's
    (N x 2 K', 64 x 64), 16-bit elements moved as bits, 128-byte swizzle; lda, ldb are the pieces' (halves)."""
    from cumm.runtime.tmaps import MapSpec

    kp2 = 2 * cdiv(K, PIECES_SLAB) * PIECES_SLAB
    return MapSpec(0, kp2, M, lda, 64, cfg["BM"], 3, 2, 1), MapSpec(1, N, kp2, ldb, 64, 64, 3, 2, 1)


SPEC = KernelSpec(
    name="wgmma_f16x3",
    top=True,  # kernel="auto" runs it for float32 where _takes says so (top_shapes), else wgmma_tf32x3
    raced=True,  # the tuner races it (timed through matmul: the pieces' launches count)
    template=Path(__file__).with_name("kernel.cu"),
    headers=("include/out_f32.cuh", "include/tc16.cuh", "include/sm90.cuh"),
    min_cc=90,
    arch_specific=True,  # wgmma, setmaxnreg: sm_90a only
    persistent=True,  # one block per multiprocessor walks the tiles: grid = min(tiles, resident blocks)
    pieces=True,  # its kernel reads the operands' FP16 pieces, made before each launch
    fallback="wgmma_tf32x3",  # where the pieces' memory cannot be had: the product runs there (FP32 read in place)
    top_shapes=_takes,
    tensor_maps=_piece_maps,
    shape_config=_wide_tiles,
    summary="FP32 from three FP16 wgmma products (hi and lo pieces of rows and columns scaled by powers of two, split"
    " before the launch), each 64 of K promoted into FP32 totals, warp-specialized persistent",
    defaults=dict(BM=128, BN=128, STAGES=6, GM=8, PROMO=1, NUM_THREADS=384),
    # (PROMO = 2, two partial sets taking turns, stays a parameter, not a configuration: it measured slower)
    configs={"wide": dict(BN=192, STAGES=5)},
    block=lambda c: (c["NUM_THREADS"], 1, 1),
    grid=lambda c, M, N, K: (cdiv(M, c["BM"]) * cdiv(N, c["BN"]), 1, 1),
    smem=lambda c: c["STAGES"] * (c["BM"] + c["BN"]) * 128 + 1024 + 16 * c["STAGES"] + 16,
    constraints=[
        *positive("GM"),
        C("BM in (128, 256)", "two consumer warpgroups of BM / 2 rows (m64 blocks): BM = 128 or 256"),
        C("BN in (64, 128, 192, 256)", "B is copied in 64-column boxes; wgmma N up to 256"),
        C("NUM_THREADS == 384", "a producer warpgroup and two consumer warpgroups: NUM_THREADS = 384"),
        C("PROMO in (1, 2)", "PROMO is 1 (one partial set) or 2 (two taking turns)"),
        C(
            "BM * BN * (1 + PROMO) <= 49152",
            "each consumer thread holds BM * BN / 256 FP32 totals and as many partial sums per set (PROMO sets): at "
            "most 192 of them under its 232 registers",
        ),
        C("STAGES >= 3 * PROMO", "a partial set's 64 of K is three stages (Al Bh, Ah Bl, Ah Bh): STAGES >= 3 PROMO"),
        C(
            "STAGES * (BM + BN) * 128 + 1024 + 16 * STAGES + 16 <= 232448",
            "the stages fit in 227 KB of shared memory per block",
        ),
    ],
    space=dict(BM=(128, 256), BN=(64, 128, 192), STAGES=(3, 5, 6, 7), GM=(4, 8, 16), PROMO=(1, 2), NUM_THREADS=(384,)),
)
