"""Tensor maps (CUtensorMap) for the copy engine (TMA, ``cp.async.bulk.tensor``), made through the driver, for
the chain kernels and the TMA GEMM rungs.

CuPy wraps none of the tensor-map functions, so they are called through ctypes. A map describes a row-major
operand and the box the kernel copies; maps are kept per pointer (:class:`Maps`) in one arena of
64-byte aligned rows, handed out round robin: the driver copies a launch's arguments when it is queued, so a
row can be reused once its owner has forgotten it. The two driver queries a persistent kernel with clusters needs
(its compiled cluster width, the clusters resident at once) are here too, through the same ctypes lookup
(:func:`driver_fn`).
"""

from __future__ import annotations

import ctypes
import threading
from typing import NamedTuple

import numpy as np

from .driver import driver_fn


class MapSpec(NamedTuple):
    """A 2-D tensor map of a row-major operand (rows x cols, leading dimension ld elements) read in boxes of
    box_rows x box_cols, for the copy engine (cp.async.bulk.tensor)."""

    operand: int  # which of the launch's pointers
    cols: int
    rows: int
    ld: int
    box_cols: int
    box_rows: int
    swizzle: int  # CUtensorMapSwizzle: 0 none, 1/2/3 = 32/64/128-byte spans (box_cols * element bytes)
    elem: int = 4  # bytes per element
    dtype: int = 7  # CUtensorMapDataType: 7 FLOAT32, 1 UINT16 (16-bit halves, moved as bits)
    batch: int = 0  # 0: a 2-D map; n >= 1: a 3-D map over n matrices, batch_stride elements apart (box depth 1)
    batch_stride: int = 0

    def batched(self, count: int, stride: int) -> MapSpec:
        """This map over a batch of ``count`` matrices ``stride`` elements apart; stride 0 (one matrix for every
        product) gives a batch of one, which the kernel reads as matrix 0."""
        if stride == 0:
            return self._replace(batch=1, batch_stride=self.rows * self.ld)
        return self._replace(batch=count, batch_stride=stride)


UINT8, SWIZZLE_64B = 0, 2  # CUtensorMapDataType, CUtensorMapSwizzle


def fp8_c_map(c: MapSpec) -> MapSpec:
    """An FP8 C's map made from the 16-bit C's of the same launch (whose ld and batch stride are already bytes: a
    byte view's): one byte an element, boxes of 64 rows x 64 bytes with the 64-byte swizzle
    (include/epilogue.cuh's CummStageFp8)."""
    return c._replace(elem=1, dtype=UINT8, swizzle=SWIZZLE_64B)


def l2_promotion(spec: MapSpec) -> int:
    """CUtensorMapL2promotion for ``spec``: 256 bytes (3) when its rows start on 128-byte boundaries, else none (0).

    A row pitch that is not a multiple of 128 bytes starts each box row inside a line; promoted to 256 bytes those
    reads fetched about twice the sectors (H200, bf16 3072 x 5000 x 2048, wgmma_ws: 23.5 M L2 sectors from the
    SMs against 10.9 M at N = 5120) and ran 0.78x cuBLAS, 0.89x without promotion (graph-timed, the same run;
    3000 x 5000 x 2000 0.75 -> 0.88x, 2000 x 3000 x 4000 0.71 -> 0.82x). Aligned pitches measured the same either
    way (4096^3: 0.997-1.004x); they keep the promotion everything was tuned with."""
    return 3 if (spec.elem * spec.ld) % 128 == 0 else 0


def encode(ptr: int, spec: MapSpec, out: np.ndarray) -> None:
    """cuTensorMapEncodeTiled into ``out`` (16 words, 64-byte aligned): elements past the matrix's edges arrive
    as zeros; L2 promotion by :func:`l2_promotion`."""
    u64, u32, p, i = ctypes.c_uint64, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_int
    encode = driver_fn("cuTensorMapEncodeTiled", [p, i, ctypes.c_uint, p, p, p, p, p, i, i, i, i])
    rank = 3 if spec.batch else 2
    dims = (spec.cols, spec.rows, spec.batch)[:rank]
    strides = (spec.elem * spec.ld, spec.elem * spec.batch_stride)[: rank - 1]  # bytes, past the first dimension
    rc = encode(
        out.ctypes.data,
        spec.dtype,
        rank,
        ptr,
        (u64 * rank)(*dims),
        (u64 * (rank - 1))(*strides),
        (u32 * rank)(*(spec.box_cols, spec.box_rows, 1)[:rank]),
        (u32 * rank)(*(1, 1, 1)[:rank]),
        0,
        spec.swizzle,
        l2_promotion(spec),
        0,
    )
    if rc:
        raise RuntimeError(f"the driver could not make a tensor map (CUresult {rc}) for {spec} at {ptr:#x}")


def aligned_map() -> np.ndarray:
    """16 zero words, 64-byte aligned (where the driver writes a map)."""
    buf = np.zeros(16 + 8, dtype=np.uint64)
    word = (-buf.ctypes.data % 64) // 8
    return buf[word : word + 16]


class Arena:
    """Tensor maps (CUtensorMap: 16 words, 64-byte aligned) in one array, handed out round robin: the driver
    copies a launch's arguments when it is queued, so a map's row can be reused once its owner (a Maps) has
    forgotten it."""

    ROWS = 4096

    def __init__(self):
        self.buf = np.zeros(self.ROWS * 16 + 8, dtype=np.uint64)
        word = (-self.buf.ctypes.data % 64) // 8
        self.rows = self.buf[word : word + self.ROWS * 16].reshape(self.ROWS, 16)
        self.base = self.rows.ctypes.data
        self.owners: list = [None] * self.ROWS  # (Maps, pointer) per row
        self.next = 0
        self.lock = threading.Lock()  # held by every launch with maps

    def take(self, owner, ptr: int) -> int:
        """A row for ``owner``'s map of ``ptr`` (the row's previous owner forgets its map); the caller holds
        ``lock``."""
        row = self.next
        self.next = (row + 1) % self.ROWS
        old = self.owners[row]
        if old is not None:
            old[0].known.pop(old[1], None)
        self.owners[row] = (owner, ptr)
        return row


arena = Arena()


class Maps:
    """The tensor maps of one MapSpec, by pointer: ``known`` maps a pointer to its map's address in the arena.
    The first map is encoded by the driver (cuTensorMapEncodeTiled); later ones copy it and have the driver move
    it to their address (cuTensorMapReplaceAddress). On the H200's host an encoding took 7.6-13.8 us through
    ctypes, a replacement 0.9 us, a map made here 2.8 us with the Python around it
    (docs/chain.md); a pointer seen before costs a dict lookup."""

    def __init__(self, spec: MapSpec):
        self.spec, self.known = spec, {}
        self.first: np.ndarray | None = None

    def make(self, ptr: int) -> int:
        row = arena.take(self, ptr)
        out = arena.rows[row]
        address = arena.base + 128 * row
        if self.first is None:
            encode(ptr, self.spec, out)
            self.first = out.copy()
        else:
            out[:] = self.first
            rc = driver_fn("cuTensorMapReplaceAddress", [ctypes.c_void_p] * 2)(address, ptr)
            if rc:
                raise RuntimeError(
                    f"the driver could not move a tensor map (CUresult {rc}) to {ptr:#x} for {self.spec}"
                )
        self.known[ptr] = address
        return address
