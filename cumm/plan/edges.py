"""Edge strips: keep a thin last row or column of tiles from costing a whole wave.

A GEMM kernel launches ceil(M / BM) x ceil(N / BN) blocks. When M is a few rows past a multiple of BM (4097
with BM = 128), the last row of blocks does almost no useful work but each of its blocks holds a block slot as
long as a full tile does, and if those blocks push the grid past a whole number of waves (blocks resident at
once on the device), the product takes a wave longer: 4097^3 ran at 0.80-0.84 of 4096^3 on the H200.

When the remainder is at most ``EDGE_ROWS`` rows (or columns) and the full grid needs more waves than the
tile-aligned part, ``cumm.matmul`` runs the GEMM kernel on the aligned part, Mm x Nm, and
``kernels/edge_strip.cu`` on the rest: the bottom strip (M - Mm rows, all N columns) and the right strip
(Mm rows, N - Nm columns), each split over K into slices summed by ``splitk_reduce`` (deterministic, alpha
and beta applied there). The strips read A and B once: 0.10 ms of a 3.54 ms 4097^3 product with warptile on
the H200 (1.3 TB/s, below the memory bandwidth; docs/ladder.md).

``CUMM_EDGES=0`` turns this off. The decision (``split``) is pure arithmetic, testable without a GPU.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np

from ..core.spec import cdiv
from ..runtime.compile import aux_kernels, aux_source
from . import splitk as _splitk

ENABLED = os.environ.get("CUMM_EDGES", "1").strip() != "0"
EDGE_ROWS = 16  # as in edge_strip.cu: the thickest strip its kernels take
JB = 128  # columns of a strip per block (EDGE_JB)
KT = 32  # slab depth (EDGE_KT); slices of K are whole slabs
TEMPLATE = "auxiliary/edge_strip.cu"
NAMES = ("cumm_edge_rows", "cumm_edge_cols")
BLOCKS_PER_SM = 16  # strip blocks to aim for per multiprocessor (slices of K supply them): loads in flight


def split(M: int, N: int, bm: int, bn: int, grid: Callable[[int, int], int], slots: int) -> tuple[int, int]:
    """(Mm, Nm): the part the GEMM kernel should compute; (M, N) when strips would not pay.

    ``grid(m, n)`` is the kernel's block count for an m x n product; ``slots`` the blocks resident at once.
    A remainder becomes a strip when it is 1..EDGE_ROWS thick, the tiles are thicker than a strip (skinny's
    4-row blocks are not) and the kernel keeps at least one tile in that direction; strips are used only when
    they save a wave."""
    rm, rn = M % bm, N % bn
    mm = M - rm if 0 < rm <= EDGE_ROWS < bm and M > bm else M
    nn = N - rn if 0 < rn <= EDGE_ROWS < bn and N > bn else N
    if (mm, nn) == (M, N) or slots < 1:
        return M, N
    if cdiv(grid(M, N), slots) <= cdiv(grid(mm, nn), slots):  # no wave saved: the strips would only add work
        return M, N
    return mm, nn


def slices(L: int, K: int, sms: int) -> tuple[int, int]:
    """(S, KC): slices of K for a strip L long, so that the strip's kernel has ~BLOCKS_PER_SM blocks per SM;
    KC is a whole number of slabs and every one of the S slices is non-empty."""
    want = max(1, min(cdiv(K, KT), cdiv(BLOCKS_PER_SM * sms, cdiv(L, JB))))
    kc = cdiv(cdiv(K, want), KT) * KT
    return cdiv(K, kc), kc


def source() -> str:
    return aux_source(TEMPLATE)


def run(
    M: int,
    N: int,
    K: int,
    mm: int,
    nn: int,
    alpha: float,
    a,
    lda: int,
    b,
    ldb: int,
    beta: float,
    c,
    ldc: int,
    sms: int,
    dev: int,
) -> None:
    """C[mm:, :] and C[:mm, nn:] of C = alpha * a @ b + beta * C (row-major views with leading dimensions
    lda, ldb, ldc; the caller has the GEMM kernel compute C[:mm, :nn])."""
    import cupy

    rows, cols = aux_kernels(TEMPLATE, NAMES, dev)
    i32, f32 = np.int32, np.float32
    if mm < M:  # bottom strip: X = a[mm:] (R x K), Y = b (K x N); W[z] is R x N, like C's rows
        R, L = M - mm, N
        S, kc = slices(L, K, sms)
        w = cupy.empty((S, R, L), dtype=f32)
        rows(
            (cdiv(L, JB), S),
            (JB,),
            (i32(R), i32(L), i32(K), i32(kc), a[mm:], i32(lda), i32(1), b, i32(ldb), i32(1), w, i32(L), i32(1)),
        )
        _splitk.reduce(w, S, R, L, alpha, beta, c[mm:], ldc)
    if nn < N:  # right strip (mm >= 1): X = b[:, nn:] read as R x K, Y = a^T (K x mm); W[z] is mm x R, like C
        R, L = N - nn, mm
        S, kc = slices(L, K, sms)
        w = cupy.empty((S, L, R), dtype=f32)
        cols(
            (cdiv(L, JB), S),
            (JB,),
            (i32(R), i32(L), i32(K), i32(kc), b[:, nn:], i32(1), i32(ldb), a, i32(1), i32(lda), w, i32(1), i32(R)),
        )
        _splitk.reduce(w, S, L, R, alpha, beta, c[:mm, nn:], ldc)
