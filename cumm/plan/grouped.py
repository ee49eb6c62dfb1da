"""Every decision of a grouped product (``cumm.grouped_matmul``): the kernel's configuration and variant, which
operands the copy engine reads in place and which go through a padded copy, the tensor maps, the grid; and the
launch with its arguments packed once per shape (:class:`GroupedCall`).

The kernel is ``wgmma_grouped`` (cumm/kernels/grouped/wgmma_grouped): one persistent launch over the tiles of
every group, the group sizes read on the device.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

import cupy
import numpy as np
from cupy_backends.cuda.api import driver as _driver

from ..ladder import get_spec, rung_module
from ..runtime import scratch, tmaps
from ..runtime.arrays import retry_without_context
from ..runtime.compile import device_kernel
from ..runtime.render import TRANSPOSED_B, Variant, dtype_flag
from ..runtime.tmaps import MapSpec

KERNEL = "wgmma_grouped"
CONTIGUOUS, MASKED = "contiguous", "masked"


def gmax() -> int:
    """The most groups the kernel's shared table holds."""
    return rung_module(KERNEL).GMAX


def tma_ok(x: cupy.ndarray, inner: int) -> bool:
    """Whether the copy engine reads ``x`` in place with axis ``inner`` contiguous: its address on 16 bytes, every
    other stride a multiple of 16 bytes and not zero (a broadcast group would alias one matrix)."""
    item = x.dtype.itemsize
    if x.data.ptr % 16 or x.strides[inner] != item:
        return False
    return all(s > 0 and s % 16 == 0 for i, s in enumerate(x.strides) if i != inner)


def padded(x: cupy.ndarray, inner: int) -> cupy.ndarray:
    """A copy of ``x`` that the copy engine can read: axis ``inner`` contiguous and padded to a multiple of 8
    elements (16 bytes), the padding never read (the maps' dimensions stop at the real extent)."""
    order = [i for i in range(x.ndim) if i != inner] + [inner]
    shape = [x.shape[i] for i in order]
    shape[-1] = -(-shape[-1] // 8) * 8
    buf = cupy.empty(shape, dtype=x.dtype)
    view = buf[..., : x.shape[inner]]
    view[...] = x.transpose(order)
    inv = [order.index(i) for i in range(x.ndim)]
    return view.transpose(inv)


def operands(a: cupy.ndarray, b: cupy.ndarray) -> tuple[cupy.ndarray, cupy.ndarray, int]:
    """A and B as the kernel reads them, and B's layout (0: (G, K, N) with N contiguous; TRANSPOSED_B: K
    contiguous, the (G, N, K) weights' transposed view, read in place). An operand the copy engine cannot read
    in place (a row pitch or group stride off 16 bytes: K or N not a multiple of 8, a view, a broadcast group)
    is copied once into a padded buffer: correct on any shape, at the cost of the copy."""
    if not tma_ok(a, a.ndim - 1):
        a = padded(a, a.ndim - 1)
    item = b.dtype.itemsize
    if b.strides[2] == item and tma_ok(b, 2):
        return a, b, 0
    if b.shape[1] > 1 and b.strides[1] == item:  # K contiguous: the transposed weights
        return a, (b if tma_ok(b, 1) else padded(b, 1)), TRANSPOSED_B
    return a, padded(b, 2), 0


def epilogue_fits(masked: bool, G: int, rows: int, out) -> bool:
    """Whether ``out`` takes the TMA-store epilogue (EPI = 1): 16-byte aligned, rows of whole 16-byte pitches and,
    masked, groups a whole number of rows apart and not overlapping (the kernel's maps of C see the groups as one
    column of rows), whose rows index in 32 bits."""
    item = out.dtype.itemsize
    ldc = out.strides[-2] // item
    if out.data.ptr % 16 or ldc % 8:
        return False
    if not masked:
        return True
    bsc = out.strides[0] // item
    return bsc % ldc == 0 and bsc // ldc >= rows and (G - 1) * (bsc // ldc) + rows < 2**31 - 1


def c_rows(masked: bool, G: int, rows: int, out) -> int:
    """The rows of C's maps (EPI = 1): contiguous, C's rows; masked, every group's rows as one column."""
    return (G - 1) * (out.strides[0] // out.strides[-2]) + rows if masked else rows


def configure(layout: str, G: int, rows: int, out, config) -> dict:
    """wgmma_grouped's configuration for this call: the layout's MASKED; the TMA-store epilogue where ``out``
    takes it (:func:`epilogue_fits`); 3 stages where 4 leave no room for G groups' table."""
    spec = get_spec(KERNEL)
    mod = rung_module(KERNEL)
    masked = layout == MASKED
    over = dict(config or {})
    if "MASKED" in over and over["MASKED"] != int(masked):
        raise ValueError(f"config's MASKED is set by the layout ({layout}: {int(masked)}); leave it out")
    over["MASKED"] = int(masked)
    fits = epilogue_fits(masked, G, rows, out)
    if over.setdefault("EPI", int(fits)) and not fits:
        raise ValueError(
            "config's EPI = 1 (TMA-store epilogue) needs out 16-byte aligned with a row pitch of a multiple of 8"
            " elements (masked: groups whole rows apart); leave EPI out to have it chosen"
        )
    if "STAGES" not in over and mod.groups_fit(spec.resolve(over, 90)) < G:
        over["STAGES"] = 3
    cfg = spec.resolve(over, 90)
    if mod.groups_fit(cfg) < G:
        raise ValueError(
            f"config {dict(cfg)} leaves shared memory for the table of {mod.groups_fit(cfg)} groups, not G = {G}:"
            " take fewer STAGES or EPI = 0"
        )
    return cfg


class GroupedCall:
    """The kernel for one key (layout, shapes, strides, dtype, device, alignment, config): compiled, its tensor
    maps kept per pointer, its arguments in 8-byte slots: G rows N K offs C ldc bsc, then the four maps by value
    (A, B, and C's two of the TMA-store epilogue: its rows, and the clip map of blocks that cross a group's end),
    then the stream-K workspace (SK > 0: the stream's scratch buffer; else null)."""

    def __init__(self, layout: str, G: int, rows: int, N: int, K: int, a, b, lay: int, out, device_id: int, config):
        spec = get_spec(KERNEL)
        masked = layout == MASKED
        self.cfg = cfg = configure(layout, G, rows, out, config)
        item = a.dtype.itemsize
        ldc = out.strides[-2] // item
        vec_c = int(out.data.ptr % 4 == 0 and ldc % 2 == 0)
        self.flags = Variant(1, 1, vec_c, 0, dtype_flag(a.dtype.name, a.dtype.name), lay)
        self.kern = device_kernel(spec, cfg, self.flags, device_id)
        lda = a.strides[-2] // item
        amap = MapSpec(0, K, rows, lda, 64, cfg["BM"], 3, 2, 1)
        if masked:
            amap = amap._replace(batch=G, batch_stride=a.strides[0] // item)
        if lay:  # b[g, k, n] at k + n * ldb: dims K x N
            bmap = MapSpec(1, K, N, b.strides[2] // item, 64, 64, 3, 2, 1, G, b.strides[0] // item)
        else:
            bmap = MapSpec(1, N, K, b.strides[1] // item, 64, 64, 3, 2, 1, G, b.strides[0] // item)
        maps = [tmaps.Maps(amap), tmaps.Maps(bmap)]
        self.cshift = 0  # the clip map's base: BM rows before C (kernel.cu), in bytes
        if cfg["EPI"]:
            R = c_rows(masked, G, rows, out)
            cmap = MapSpec(2, N, R, ldc, 64, 64, 3, 2, 1)
            maps += [tmaps.Maps(cmap), tmaps.Maps(cmap._replace(rows=cfg["BM"], batch=R + 1, batch_stride=ldc))]
            self.cshift = cfg["BM"] * ldc * item
        self.maps = tuple(maps)
        bsc = out.strides[0] // item if masked else 0
        # one block per multiprocessor: the tile count is on the device (the offsets)
        self.grid = cupy.cuda.Device(device_id).attributes["MultiProcessorCount"]
        self.threads = spec.threads(cfg)
        self.smem = spec.smem(cfg) + rung_module(KERNEL).table_bytes(G)
        if self.kern.max_dynamic_shared_size_bytes < self.smem:  # the table grows with G: opt in (never lower)
            self.kern.max_dynamic_shared_size_bytes = self.smem
        self.slots = np.zeros(8, dtype=np.uint64)
        for i, v in ((0, G), (1, rows), (2, N), (3, K), (6, ldc)):
            self.slots[i] = v
        self.slots[7:8] = np.array([bsc], dtype=np.int64).view(np.uint64)
        self.dev = device_id
        self.ws_bytes = rung_module(KERNEL).workspace(cfg, self.grid)
        self.ws = np.zeros(1, dtype=np.uint64)  # the workspace pointer's slot, written at each launch
        self.params = np.array(
            [self.slots.ctypes.data + 8 * i for i in range(8)] + [0] * 4 + [self.ws.ctypes.data], dtype=np.uint64
        )
        self.func = self.kern.kernel.ptr
        self.lock = threading.Lock()

    def launch(self, pa: int, pb: int, poffs: int, pc: int, stream: int) -> None:
        with tmaps.arena.lock:  # a map's arena row cannot be handed on between its lookup and the launch
            self.slots[4], self.slots[5] = poffs, pc
            ptrs = (pa, pb, pc, pc - self.cshift)[: len(self.maps)]
            for i, (maps, p) in enumerate(zip(self.maps, ptrs, strict=True)):
                self.params[8 + i] = maps.known.get(p) or maps.make(p)
            if len(self.maps) == 2:  # EPI = 0: C's maps are not read; any map's 128 bytes stand in
                self.params[10] = self.params[11] = self.params[8]
            if self.ws_bytes:
                self.ws[0] = scratch.pointer(self.dev, stream, self.ws_bytes)  # (0 in a capture: whole tiles)
            args = (self.func, self.grid, 1, 1, self.threads, 1, 1, self.smem, stream, self.params.ctypes.data, 0)
            try:
                _driver.launchKernel(*args)
            except _driver.CUDADriverError as e:
                if not retry_without_context(e):
                    raise
                _driver.launchKernel(*args)


_calls: dict[tuple, GroupedCall] = {}


def grouped_call(
    layout: str, G: int, rows: int, N: int, K: int, a, b, lay: int, out, device_id: int, config
) -> GroupedCall:
    """The cached :class:`GroupedCall` of this key (everything but the pointers' high bits)."""
    key = (
        layout,
        G,
        rows,
        N,
        K,
        a.dtype,
        a.strides,
        a.data.ptr % 16,
        b.strides,
        b.data.ptr % 16,
        lay,
        out.strides,
        out.data.ptr % 16,
        device_id,
        None if config is None else tuple(sorted(config.items())),
    )
    call = _calls.get(key)
    if call is None:
        call = _calls[key] = GroupedCall(layout, G, rows, N, K, a, b, lay, out, device_id, config)
    return call


def check_config(config) -> Mapping[str, int] | None:
    if config is not None and not isinstance(config, Mapping):
        raise TypeError(f"config must be a mapping of wgmma_grouped's parameters to ints, or None; got {config!r}")
    return config
