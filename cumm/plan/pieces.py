"""The FP16 pieces of FP32 operands for a rung whose spec says ``pieces`` (23_wgmma_f16x3): made on each call,
before its launch, by kernels/auxiliary/pieces.cu.

A's pieces are M rows of [hi | lo] (2 K' halves, K' = K rounded up to a 64-deep slab, zeros past K), then the M
row shifts (int32); B's are 2 K' rows [hi; lo] of N halves rounded up to 8 (16-byte rows for the copy engine),
then the N column shifts. The kernel reads the shifts after the pieces (its A + M lda, B + 2 K' ldb), so the call
keeps its usual arguments. Traffic: A and B read once from DRAM (the second read of a row or a column block
finds it in cache) and written as 4 bytes an element; a 2048 x 2048 operand is 16 MB in, 16 MB out.
"""

from __future__ import annotations

import functools

import cupy
import numpy as np

from ..core.spec import cdiv
from ..ladder.common import PIECES_SLAB
from ..runtime import arrays as _arrays
from ..runtime.compile import AUX_KERNELS, aux_kernels
from ..runtime.launch import Launch

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


def _sizes(M: int, N: int, K: int) -> tuple[int, int, int, int, int]:
    """(A's pieces' bytes, B's, A's part with its shifts, B's, the buffer's bytes): A's pieces then its shifts, B's
    pieces then its shifts (each part on 128 bytes), B's column maxima."""
    kp = padded_k(K)
    la, lb = lds(N, K)
    sa, sb = 2 * M * la, 2 * (2 * kp * lb)
    na, nb = _align(sa + 4 * M), _align(sb + 4 * N)
    return sa, sb, na, nb, na + nb + 4 * N


class Splitter:
    """The pieces of A and B of fixed shapes and row strides, made by the module's three kernels launched through
    the driver with their arguments packed once (runtime.launch.Launch) on the pointers each call gives, into a
    buffer from the allocator of the launches' stream (torch's caching allocator for torch tensors, else cupy's pool
    on cupy's current stream: a block freed behind the launches is reused only behind them). CuPy's launches of the
    same kernels and the operands' views cost 60-160 us a call on the host at 2048^3, more than the product there."""

    def __init__(self, M: int, N: int, K: int, lda: int, ldb: int, dev: int, kind: str):
        kp = padded_k(K)
        lb = lds(N, K)[1]
        sa, sb, na, nb, self.nbytes = _sizes(M, N, K)
        self.offsets = (sa, na, na + sb, na + nb)  # A's shifts, B's pieces, B's shifts, B's column maxima
        rows, colmax, cols = aux_kernels(TEMPLATE, NAMES, dev)
        # (None: a pointer each call gives, in the order of the tuple __call__ passes)
        self.rows = Launch(rows, min(M, MAX_ROW_BLOCKS), THREADS, 0, (M, K, None, lda, kp, None, None, N, None))
        grid = (cdiv(N, THREADS), min(cdiv(K, COLMAX_ROWS), 65535), 1)
        self.colmax = Launch(colmax, grid, THREADS, 0, (K, N, None, ldb, None))
        grid = (cdiv(lb // 2, THREADS), min(kp, MAX_COL_ROW_BLOCKS), 1)
        self.cols = Launch(cols, grid, THREADS, 0, (K, N, None, ldb, kp, lb, None, None, None))
        self.torch = kind == _arrays.TORCH
        self.alloc = (
            _arrays.torch_empty((self.nbytes,), np.uint8, dev)
            if self.torch
            else functools.partial(cupy.empty, self.nbytes, dtype=cupy.uint8)
        )

    def __call__(self, a: int, b: int, stream: int) -> tuple[object, int, int]:
        """(buffer, A's pieces' address, B's) for A at ``a``, B at ``b``, made on ``stream`` (the device current);
        CuPy's OutOfMemoryError when the buffer cannot be had (either allocator's)."""
        try:
            buf = self.alloc()
        except Exception as e:
            if type(e).__name__ != "OutOfMemoryError":  # (torch's is its own class)
                raise
            raise cupy.cuda.memory.OutOfMemoryError(self.nbytes, 0) from e
        p = buf.data_ptr() if self.torch else buf.data.ptr
        sa, pb, sb, mx = (p + o for o in self.offsets)
        self.rows((a, p, sa, mx), stream)
        self.colmax((b, mx), stream)
        self.cols((b, mx, pb, sb), stream)
        return buf, p, pb


def splitter(call) -> Splitter | None:
    """A cached call's Splitter (made once, kept in its decisions) when its rung reads pieces made from the caller's
    own arrays (decide's ``pieces_from``: their row strides), else None."""
    d = call.decisions
    sp = d.get("splitter")
    if sp is None and d.get("pieces_from"):
        sp = d["splitter"] = Splitter(call.M, call.N, call.K, *d["pieces_from"], call.dev, call.kind)
    return sp


def split(call, a: cupy.ndarray, lda: int, b: cupy.ndarray, ldb: int) -> tuple[object, int, int]:
    """(buffer, A's pieces' address, B's) for the checked path's row-major cupy views ``a`` (M x K) and ``b``
    (K x N), row strides ``lda``, ``ldb`` (the caller's arrays or decide's copies), made on cupy's current stream
    by a Splitter kept in the call's decisions per pair of strides; CuPy's OutOfMemoryError when there is no room."""
    d = call.decisions
    key = ("split", lda, ldb)
    sp = d.get(key)
    with cupy.cuda.Device(call.dev):
        if sp is None:
            sp = d[key] = Splitter(call.M, call.N, call.K, lda, ldb, call.dev, _arrays.CUPY)
        return sp(a.data.ptr, b.data.ptr, cupy.cuda.get_current_stream().ptr)


def _align(nbytes: int) -> int:
    return cdiv(nbytes, 128) * 128  # (the copy engine needs 16-byte aligned bases)
