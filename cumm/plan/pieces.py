"""The FP16 pieces of FP32 operands for a rung whose spec says ``pieces`` (23_wgmma_f16x3): made on each call,
before its launch, by kernels/auxiliary/pieces.cu.

A's pieces are M rows of [hi | lo] (2 K' halves, K' = K rounded up to a 64-deep slab, zeros past K), then the M
row shifts (int32); B's are 2 K' rows [hi; lo] of N halves rounded up to 8 (16-byte rows for the copy engine),
then the N column shifts. The kernel reads the shifts after the pieces (its A + M lda, B + 2 K' ldb), so the call
keeps its usual arguments. Traffic: A and B read once from DRAM (the second read of a row or a column block
finds it in cache) and written as 4 bytes an element; a 2048 x 2048 operand is 16 MB in, 16 MB out.
"""

from __future__ import annotations

import cupy
import numpy as np

from ..core.spec import cdiv
from ..ladder.common import PIECES_SLAB
from ..runtime.compile import AUX_KERNELS, aux_kernels

TEMPLATE = "auxiliary/pieces.cu"
NAMES = AUX_KERNELS[TEMPLATE]  # rows (A), column maxima and columns (B)
COLMAX_ROWS = 64  # rows of B per block of cumm_pieces_colmax
THREADS = 256
MAX_ROW_BLOCKS = 1 << 16  # cumm_pieces_rows' blocks stride over rows past this
MAX_COL_ROW_BLOCKS = 1024  # cumm_pieces_cols' blocks in y stride over the K' rows


def padded_k(K: int) -> int:
    return cdiv(K, PIECES_SLAB) * PIECES_SLAB  # (a piece never shares a k-slab with the other)


def lds(N: int, K: int) -> tuple[int, int]:
    """(lda, ldb) of the pieces, in halves: 2 K' for A's rows, N rounded up to 8 for B's."""
    return 2 * padded_k(K), cdiv(N, 8) * 8


def split(a: cupy.ndarray, lda: int, b: cupy.ndarray, ldb: int, M: int, N: int, K: int):
    """(buffer, A's pieces' address, B's): one fresh buffer (cupy's pool, current stream) holding both, laid out as
    the module says (each part on 128 bytes); ``a`` (M x K) and ``b`` (K x N) are row-major float32 with row strides
    ``lda``, ``ldb`` elements. Addresses, not views: this runs on every call, and a view costs microseconds."""
    kp = padded_k(K)
    la, lb = lds(N, K)
    # bytes: A's pieces then its shifts, B's pieces then its shifts, B's column maxima
    sa, sb = 2 * M * la, 2 * (2 * kp * lb)
    na, nb = _align(sa + 4 * M), _align(sb + 4 * N)
    i32, i64, ptr = np.int32, np.int64, np.uint64
    with a.device:
        buf = cupy.empty(na + nb + 4 * N, dtype=cupy.uint8)
        pa = buf.data.ptr
        pb, mx = pa + na, pa + na + nb
        rows, colmax, cols = aux_kernels(TEMPLATE, NAMES, a.device.id)
        rows(
            (min(M, MAX_ROW_BLOCKS),),
            (THREADS,),
            (i32(M), i32(K), a, i64(lda), i32(kp), ptr(pa), ptr(pa + sa), i32(N), ptr(mx)),
        )
        colmax((cdiv(N, THREADS), min(cdiv(K, COLMAX_ROWS), 65535)), (THREADS,), (i32(K), i32(N), b, i64(ldb), ptr(mx)))
        cols(
            (cdiv(lb // 2, THREADS), min(kp, MAX_COL_ROW_BLOCKS)),
            (THREADS,),
            (i32(K), i32(N), b, i64(ldb), i32(kp), i32(lb), ptr(mx), ptr(pb), ptr(pb + sb)),
        )
    return buf, pa, pb


def _align(nbytes: int) -> int:
    return cdiv(nbytes, 128) * 128  # (the copy engine needs 16-byte aligned bases)
