"""Operand repacking: copy an unaligned A or B into a padded buffer so the kernel can use 16-byte loads.

A row-major operand allows float4 loads only when its pointer is 16-byte aligned and its leading
dimension is a multiple of 4; otherwise ``cumm.matmul`` runs the kernel's scalar-load variant, which
costs ~11% at 4095^3 on an H200 (37.2 against 41.7 TFLOP/s for warptile). For a large product, copying
the operand into a fresh buffer (256-byte aligned, from CuPy's pool) whose leading dimension is rounded
up to a multiple of 4 costs far less than that, so :func:`prepare` does it when the cost model says so.

The padding columns (K .. ld-1 of A, N .. ld-1 of B) are zero-filled, but nothing relies on that: the
kernels that declare ``vector_loads`` never read them. Checked in common.cuh and the templates: ``cumm_load4`` (used by
``cumm_tile_fetch`` in vectorized, bank_conflict_free, warptile, double_buffer) issues the 16-byte load only when
``col + 3 < ncols`` and otherwise loads element by element under ``col + i < ncols``;
``cumm_cp_async_chunk`` (tf32x3) passes ``src_bytes = 4 * min(4, ncols - col)``, so cp.async reads only
in-range bytes and zero-fills the rest. A kernel that reads past K or N must not declare ``vector_loads``.

An unaligned output C (pointer or leading dimension) forces the kernels' scalar store path: four stores
where one would do, each touching its own sectors, at the end of every tile where nothing overlaps them when
a kernel runs one block per SM. On the H200 that costs 0.05-0.14 ms at 4096^3 (double_buffer 2.99 -> 3.13 ms
with ldc = 4097; docs/ladder.md). For a large product :func:`stage_out` gives the kernel a padded,
aligned buffer instead (C copied in first only when beta != 0) and :func:`unstage_out` copies the result
back: ~0.04 ms for 4096 x 4096 at ~3.7 TB/s. Same cost rule as the operands, with C's M x N elements.
``CUMM_REPACK=0`` in the environment (read once, at import) turns repacking and staging off.

Transposed operands: a column-major one (``w.T`` of a row-major ``w``, as ``x @ w.T`` passes it) that the rung does
not read in place (``KernelSpec.reads_transposed``: wgmma_ws, when its columns start on 16 bytes) is copied into a
row-major buffer by :func:`transposed_copy` (kernels/auxiliary/transpose.cu,
64 x 64 tiles through shared memory), whatever ``CUMM_REPACK`` says: CuPy's own copy of such a view moves one
element per 32-byte sector on one of its sides (a 4096 x 4096 float16 ``w.T``: 0.13-2.4 ms on an H100 in three runs,
against 40 us here). Its rows are padded to 16 bytes, so the copy is always readable 16 bytes at a time.
"""

from __future__ import annotations

import os

import cupy
import numpy as np

from ..core.spec import KernelSpec
from ..runtime.compile import aux_kernels

ENABLED = os.environ.get("CUMM_REPACK", "1").strip() != "0"

# Cost model (H200 figures; the rule is a ratio, so it moves little with the GPU):
COPY_BYTES_PER_S = 4e12  # device-to-device copy bandwidth: read + write of every element
COPY_FIXED_S = 3e-6  # one copy kernel's launch and tail on the GPU: keeps small products as they are
KERNEL_FLOPS_PER_S = 40e12  # the vector-load rungs at large sizes; slower kernels only make copies cheaper
MAX_COPY_FRACTION = 0.03  # repack when the copy costs at most this fraction of the product

_LANES = 4  # floats per 16-byte load
COPY_TEMPLATE, COPY_NAME, UNPACK_NAME = "auxiliary/repack.cu", "cumm_repack", "cumm_unpack"
COPY_THREADS = 256  # one float4 of the buffer per thread
COPY_MAX_ROW_BLOCKS = 65535  # gridDim.y; the kernel strides over further rows
TRANSPOSE_TEMPLATE = "auxiliary/transpose.cu"
TRANSPOSE_NAMES = {2: "cumm_transpose_b16", 4: "cumm_transpose_b32"}  # by element size
TRANSPOSE_TILE, TRANSPOSE_MAX_GRID = 64, 65535  # the kernel strides over tiles and matrices past the grid


def copy_seconds(rows: int, cols: int) -> float:
    """Estimated time to copy a rows x cols float32 matrix into a padded buffer (read + write)."""
    return COPY_FIXED_S + 2 * 4 * rows * cols / COPY_BYTES_PER_S


def kernel_seconds(M: int, N: int, K: int) -> float:
    """Estimated time of the M x N x K product (2 flops per multiply-add)."""
    return 2 * M * N * K / KERNEL_FLOPS_PER_S


def should_repack(M: int, N: int, K: int, which: str) -> bool:
    """Whether copying operand ``which`` ("a": M x K, "b": K x N) costs at most MAX_COPY_FRACTION of the product.

    Past the fixed cost, the ratio is 4 * KERNEL_FLOPS_PER_S / (COPY_BYTES_PER_S * N) for A (each element of A
    is used N times), and the same with M for B, so A needs N > ~1.33k and B needs M > ~1.33k; the fixed cost
    raises the bar for small products (square ones repack from n = 1893, 4096 x N x 4096 repacks A from N ~1.5k).
    """
    if which == "a":
        rows, cols = M, K
    elif which == "b":
        rows, cols = K, N
    else:
        raise ValueError(f"which must be 'a' or 'b', got {which!r}")
    return copy_seconds(rows, cols) <= MAX_COPY_FRACTION * kernel_seconds(M, N, K)


def loads_vectorized(spec: KernelSpec, which: str) -> bool:
    """Whether ``spec`` declares 16-byte global loads of operand ``which`` (see KernelSpec.vector_loads)."""
    v = spec.vector_loads
    return v is True or (isinstance(v, str) and which in v)


def repack_plan(spec: KernelSpec, M: int, N: int, K: int, aligned_a: bool, aligned_b: bool) -> tuple[bool, bool]:
    """(repack A, repack B): only operands that forbid 16-byte loads, of a kernel that would use them, if it pays."""
    if MAX_COPY_FRACTION * kernel_seconds(M, N, K) < COPY_FIXED_S:  # no copy can pay: keep small calls cheap
        return False, False
    return (
        not aligned_a and loads_vectorized(spec, "a") and should_repack(M, N, K, "a"),
        not aligned_b and loads_vectorized(spec, "b") and should_repack(M, N, K, "b"),
    )


def should_stage_out(M: int, N: int, K: int, beta: float) -> bool:
    """Whether computing an unaligned C in a padded buffer pays: the copy back (and in, when beta != 0)
    costs at most MAX_COPY_FRACTION of the product (K > ~1.33k, or ~2.67k with beta; see should_repack)."""
    copies = 1 if beta == 0.0 else 2
    return copies * copy_seconds(M, N) <= MAX_COPY_FRACTION * kernel_seconds(M, N, K)


# Copy-engine rungs (tensor maps) read only rows that start on 16 bytes; other operands send the call to the spec's
# fallback rung, which runs at about half their rate at large sizes (tuned tables, 4096^3: bf16
# mma_swizzled_pipeline 328 against wgmma_ws 694 TFLOP/s on the H200, 333 / 667 on the H100; float32 tf32x3 63
# against wgmma_tf32x3 113). A copy into rows it reads (:func:`copy_engine_rows`) keeps the fast rung; it pays when
# it costs at most half of the product at that rung's rate (below: no copy, the fallback runs).
TMA_FLOPS_PER_S = {2: 600e12, 4: 110e12}  # by element size: the copy-engine rungs at large sizes (H200)
TMA_COPY_FRACTION = 0.5


def pads_for_copy_engine(M: int, N: int, K: int, which: str, item: int) -> bool:
    """Whether copying operand ``which`` ("a": M x K, "b": K x N; ``item``-byte elements) into rows the copy engine
    reads costs at most TMA_COPY_FRACTION of the product on a copy-engine rung: A needs N of about 1.3k and more
    (16-bit), B an M of that; less for float32, whose rung is slower."""
    rows, cols = (M, K) if which == "a" else (K, N)
    copy = COPY_FIXED_S + 2 * item * rows * cols / COPY_BYTES_PER_S
    return copy <= TMA_COPY_FRACTION * 2 * M * N * K / TMA_FLOPS_PER_S.get(item, TMA_FLOPS_PER_S[4])


def copy_engine_ld(cols: int, item: int) -> int:
    """The leading dimension of a copy made for the copy engine: rows of 128 bytes or more padded to 128 bytes (so
    that their maps keep the 256-byte L2 promotion, :func:`cumm.runtime.tmaps.l2_promotion`), shorter ones to
    16. H100, bf16, B copied for wgmma_ws: 4096 x 50257 x 4096 4.16 -> 3.34-3.47 ms, 4096 x 4101 x 4096 0.435 -> 0.40
    ms against 16-byte padding."""
    return padded_ld(cols, item) if cols * item < 128 else -(-cols * item // 128) * 128 // item


def copy_engine_rows(x: cupy.ndarray) -> tuple[cupy.ndarray, int]:
    """(y, ld): ``x`` (..., rows, cols), each matrix row-major, copied into a fresh buffer whose rows the copy engine
    reads (ld: :func:`copy_engine_ld`; rows and matrices start on 16 bytes); y is the view of its first cols
    columns, of x's shape. The padding columns are never read (the copy engine's maps end at cols) and left as they
    are. Rows one pitch apart throughout (a matrix, or a batch of them one after another) are one pitched copy
    (cudaMemcpy2DAsync): CuPy's strided assignment computes each element's address (a 4096 x 50257 bf16 B: 0.99 ms on
    an H100, the pitched copy 0.40 ms)."""
    *lead, rows, cols = x.shape
    item = x.dtype.itemsize
    ld = copy_engine_ld(cols, item)
    n = 1
    for d in lead:
        n *= d
    pitch = x.strides[-2] if rows > 1 else cols * item
    one_pitch = (x.strides[-1] == item or cols == 1) and pitch >= cols * item
    one_pitch = one_pitch and (n == 1 or x.strides[-3] == rows * pitch) and all(d == 1 for d in lead[:-1])
    with x.device:  # allocate and copy on x's device, which need not be the current one
        buf = cupy.empty((*lead, rows, ld), dtype=x.dtype)
        y = buf[..., :cols]
        if one_pitch and x.size:
            cupy.cuda.runtime.memcpy2DAsync(
                buf.data.ptr,
                ld * item,
                x.data.ptr,
                pitch,
                cols * item,
                n * rows,
                cupy.cuda.runtime.memcpyDeviceToDevice,
                cupy.cuda.get_current_stream().ptr,
            )
        else:
            y[...] = x
    return y, ld


def lay_out(layout, batched: bool) -> cupy.ndarray:
    """The 3-D array (count or 1, rows, cols) a kernel reads for an operand laid out as ``layout`` says
    (cumm.plan.operands.Layout): its view, or its tiled copy."""
    x = transposed_copy(layout.src)[0] if layout.copy else layout.src
    return x.reshape(1, *x.shape) if x.ndim == 2 else x


def pad_rows(x3: cupy.ndarray, batched: bool) -> cupy.ndarray:
    """``x3`` (a laid-out operand) copied into rows the copy engine reads (:func:`copy_engine_rows`; a product's
    matrix as the 2-D array it is)."""
    return copy_engine_rows(x3)[0] if batched else copy_engine_rows(x3[0])[0][None]


def padded_ld(cols: int, item: int = 4) -> int:
    """cols rounded up to 16 bytes' worth of ``item``-byte elements (4 floats, 8 halves; at least that many): every
    row of the buffer starts 16-byte aligned."""
    lanes = 16 // item
    return -(-max(cols, 1) // lanes) * lanes


def repack(x: cupy.ndarray) -> tuple[cupy.ndarray, int]:
    """(buffer, ld): a fresh (rows, ld) float32 array with ``x`` in its first ``cols`` columns, ld a multiple of 4.

    The padding columns are zero-filled (no kernel that loads 16 bytes reads them; see the module doc).
    ``x`` is row-major with unit column stride (the caller's ``_row_major``): kernels/repack.cu copies it.
    """
    rows, cols = x.shape
    ld = padded_ld(cols)
    ldx = cols if x.flags.c_contiguous or rows < 2 else x.strides[0] // 4
    with x.device:  # allocate and copy on x's device, which need not be the current one
        buf = cupy.empty((rows, ld), dtype=cupy.float32)
        if rows and cols:
            (kern,) = aux_kernels(COPY_TEMPLATE, (COPY_NAME,), x.device.id)
            kern(
                (-(-ld // (4 * COPY_THREADS)), min(rows, COPY_MAX_ROW_BLOCKS)),
                (COPY_THREADS,),
                (np.int32(rows), np.int32(cols), x, np.int64(ldx), buf, np.int32(ld)),
            )
    return buf, ld


def prepare(
    spec: KernelSpec,
    M: int,
    N: int,
    K: int,
    a: cupy.ndarray,
    lda: int,
    b: cupy.ndarray,
    ldb: int,
    flags: tuple[int, int, int],
) -> tuple[cupy.ndarray, int, cupy.ndarray, int]:
    """(a, lda, b, ldb) with A and/or B repacked where :func:`repack_plan` says so."""
    do_a, do_b = repack_plan(spec, M, N, K, bool(flags[0]), bool(flags[1]))
    try:
        if do_a:
            a, lda = repack(a)
        if do_b:
            b, ldb = repack(b)
    except cupy.cuda.memory.OutOfMemoryError:  # the copy is an optimization: run unpacked instead
        pass
    return a, lda, b, ldb


def stage_out(c: cupy.ndarray, beta: float) -> tuple[cupy.ndarray, int] | None:
    """(buffer, ld) for the kernel to write instead of ``c`` (holding ``c`` when beta != 0), or None when out
    of memory (the kernel then writes ``c`` through its scalar path). ``c`` is row-major, unit column stride."""
    try:
        if beta != 0.0:
            return repack(c)
        rows, cols = c.shape
        ld = padded_ld(cols)
        with c.device:
            return cupy.empty((rows, ld), dtype=cupy.float32), ld
    except cupy.cuda.memory.OutOfMemoryError:
        return None


def unstage_out(buf: cupy.ndarray, ld: int, c: cupy.ndarray, ldc: int) -> None:
    """Copy the first ``c.shape[1]`` columns of ``buf`` (row stride ``ld``) into ``c`` (row stride ``ldc``)."""
    rows, cols = c.shape
    with c.device:
        (kern,) = aux_kernels(COPY_TEMPLATE, (UNPACK_NAME,), c.device.id)
        kern(
            (-(-cols // (4 * COPY_THREADS)), min(rows, COPY_MAX_ROW_BLOCKS)),
            (COPY_THREADS,),
            (np.int32(rows), np.int32(cols), buf, np.int32(ld), c, np.int64(ldc)),
        )


def column_major(x: cupy.ndarray) -> int | None:
    """The column stride in elements when every matrix of ``x`` (its last two dimensions, rows x cols) is
    column-major (unit row stride, columns at least ``rows`` apart, non-negative strides) and ``x`` is not
    row-major already; else None."""
    if x.ndim < 2 or x.dtype.itemsize not in TRANSPOSE_NAMES:
        return None
    item = x.dtype.itemsize
    rows, cols = x.shape[-2:]
    sr, sc = x.strides[-2:]
    if rows < 2 or cols < 2 or sr != item or sc % item or sc // item < rows:
        return None
    if any(s < 0 or s % item for s in x.strides[:-2]):
        return None
    return sc // item


def transposed_copy(x: cupy.ndarray, ldx: int | None = None) -> tuple[cupy.ndarray, int]:
    """(y, ld): ``x`` (2-D or 3-D, each matrix column-major: :func:`column_major`, whose result the caller may pass
    as ``ldx``) copied into a fresh row-major buffer whose rows are padded to 16 bytes (ld: :func:`padded_ld`; the
    padding is zero-filled); y is the view of its first cols columns, of x's shape."""
    if ldx is None:
        ldx = column_major(x)
    if ldx is None or x.ndim > 3:
        raise ValueError(f"transposed_copy takes a 2-D or 3-D array of column-major matrices, got strides {x.strides}")
    item = x.dtype.itemsize
    rows, cols = x.shape[-2:]
    count = x.shape[0] if x.ndim == 3 else 1
    bsx = x.strides[0] // item if x.ndim == 3 else 0
    ld = padded_ld(cols, item)
    # 16-bit elements are read two at a time when every column of x starts on 4 bytes
    pairs = item == 2 and x.data.ptr % 4 == 0 and ldx % 2 == 0 and bsx % 2 == 0
    with x.device:  # allocate and copy on x's device, which need not be the current one
        buf = cupy.empty((count, rows, ld), dtype=x.dtype)
        if count:
            (kern,) = aux_kernels(TRANSPOSE_TEMPLATE, (TRANSPOSE_NAMES[item],), x.device.id)
            tiles = lambda n: min(-(-n // TRANSPOSE_TILE), TRANSPOSE_MAX_GRID)  # noqa: E731
            kern(
                (tiles(rows), tiles(ld), min(count, TRANSPOSE_MAX_GRID)),
                (256,),
                (
                    np.int32(rows),
                    np.int32(cols),
                    x,
                    np.int64(ldx),
                    np.int64(bsx),
                    buf,
                    np.int64(ld),
                    np.int64(rows * ld),
                    np.int32(count),
                    np.int32(pairs),
                ),
            )
    y = buf[..., :cols]
    return (y if x.ndim == 3 else y[0]), ld
