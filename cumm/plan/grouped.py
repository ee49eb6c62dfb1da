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
from ..runtime import tmaps
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


class GroupedCall:
    """The kernel for one key (layout, shapes, strides, dtype, device, alignment, config): compiled, its tensor
    maps kept per pointer, its arguments in 8-byte slots: G rows N K offs C ldc bsc, then the two maps by value."""

    def __init__(self, layout: str, G: int, rows: int, N: int, K: int, a, b, lay: int, out, device_id: int, config):
        spec = get_spec(KERNEL)
        masked = layout == MASKED
        over = dict(config or {})
        if "MASKED" in over and over["MASKED"] != int(masked):
            raise ValueError(f"config's MASKED is set by the layout ({layout}: {int(masked)}); leave it out")
        over["MASKED"] = int(masked)
        self.cfg = cfg = spec.resolve(over, 90)
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
        self.maps = (tmaps.Maps(amap), tmaps.Maps(bmap))
        bsc = out.strides[0] // item if masked else 0
        # one block per multiprocessor: the tile count is on the device (the offsets)
        self.grid = cupy.cuda.Device(device_id).attributes["MultiProcessorCount"]
        self.threads, self.smem = spec.threads(cfg), spec.smem(cfg)
        self.slots = np.zeros(8, dtype=np.uint64)
        for i, v in ((0, G), (1, rows), (2, N), (3, K), (6, ldc)):
            self.slots[i] = v
        self.slots[7:8] = np.array([bsc], dtype=np.int64).view(np.uint64)
        self.params = np.array([self.slots.ctypes.data + 8 * i for i in range(8)] + [0, 0], dtype=np.uint64)
        self.func = self.kern.kernel.ptr
        self.lock = threading.Lock()

    def launch(self, pa: int, pb: int, poffs: int, pc: int, stream: int) -> None:
        with tmaps.arena.lock:  # a map's arena row cannot be handed on between its lookup and the launch
            self.slots[4], self.slots[5] = poffs, pc
            for i, (maps, p) in enumerate(zip(self.maps, (pa, pb), strict=True)):
                self.params[8 + i] = maps.known.get(p) or maps.make(p)
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
        out.data.ptr % 4,
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
