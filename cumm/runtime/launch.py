"""Launching the chain kernels through the driver: arguments packed once per shape, programmatic dependent
launch (PDL) for the persistent kernels, and how many blocks or clusters a device holds at once.

CuPy's conversion of the same arguments took half of a 12 us launch at n = 512 on the H200 (docs/chain.md),
so a :class:`Launch` keeps them in 8-byte slots and each call writes only its pointers.
"""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Mapping

import cupy
import numpy as np
from cupy_backends.cuda.api import driver as _driver

from . import tmaps
from .arrays import retry_without_context
from .tmaps import Maps, MapSpec


class Launch:
    """One chain kernel for fixed dimensions, launched through the driver with its arguments packed once in
    8-byte slots. ``layout`` lists the arguments in order: an int is an int32 argument, None a pointer that
    each call supplies (fused3: m k p n A lda B ldb C ldc E lde; the persistent kernels add T ldt bar). CuPy's
    conversion of the same arguments took half of a 12 us launch at n = 512 (docs/chain.md).
    ``pdl``: launch with programmatic stream serialization (cuLaunchKernelEx), for kernels that start with
    cumm_grid_dependency_wait (grid_barrier.cuh), on devices of compute capability 9.0 and later.
    ``maps``: tensor-map arguments after the layout's (fused3_wg with TMA = 1), each made for one of the call's
    pointers by a _Maps, which keeps them per pointer; the call writes their addresses into its argument
    pointers."""

    __slots__ = (
        "func",
        "grid",
        "threads",
        "smem",
        "slots",
        "pointer_slots",
        "ptrs",
        "params",
        "lock",
        "kern",
        "scratch",
        "ex",
        "config",
        "config_ref",
        "attr",
        "maps",
        "persistent",
    )

    def __init__(
        self,
        kern,
        grid: int,
        threads: int,
        smem: int,
        layout: tuple[int | None, ...],
        scratch: int = 0,
        pdl: bool = False,
        maps: tuple[MapSpec, ...] = (),
        persistent: bool = False,
    ):
        self.kern = kern  # keeps the module loaded
        self.persistent = persistent  # its call passes T and the barrier word after A, B, C, E (plans.run)
        self.scratch = scratch  # bytes of the scratch array (T)
        self.func, self.grid, self.threads, self.smem = kern.kernel.ptr, grid, threads, smem
        self.slots = np.zeros(len(layout), dtype=np.uint64)
        for slot, value in enumerate(layout):
            if value is not None:
                self.slots[slot] = value  # an int32 argument in the low half of its (little-endian) slot
        self.pointer_slots = tuple(slot for slot, value in enumerate(layout) if value is None)
        base = self.slots.ctypes.data
        self.ptrs = np.array([base + 8 * i for i in range(len(layout) + len(maps))], dtype=np.uint64)  # (maps:
        # set per call)
        self.params = self.ptrs.ctypes.data
        # map launches share the arena's lock: a map's row cannot be handed to another map between the lookup
        # of its address and the launch, which copies it
        self.lock = tmaps.arena.lock if maps else threading.Lock()
        # (argument index, operand index, its _Maps) of each map the kernel reads
        self.maps = tuple((len(layout) + i, spec.operand, Maps(spec)) for i, spec in enumerate(maps))
        self.ex = _launch_kernel_ex() if pdl else None
        if self.ex is not None:
            self.attr = LaunchAttribute(PROGRAMMATIC_STREAM_SERIALIZATION)
            self.attr.value[0] = 1  # programmaticStreamSerializationAllowed
            self.config = LaunchConfig((grid, 1, 1), (threads, 1, 1), smem, None, ctypes.addressof(self.attr), 1)
            self.config_ref = ctypes.byref(self.config)

    def __call__(self, pointers: tuple[int, ...], stream: int, retry: bool = True) -> None:
        with self.lock:  # the slots and the launch configuration are shared; the driver copies them at the launch
            s = self.slots
            for slot, ptr in zip(self.pointer_slots, pointers, strict=True):
                s[slot] = ptr
            for arg, operand, maps in self.maps:
                ptr = pointers[operand]
                self.ptrs[arg] = maps.known.get(ptr) or maps.make(ptr)
            if self.ex is None:
                try:
                    _driver.launchKernel(
                        self.func, self.grid, 1, 1, self.threads, 1, 1, self.smem, stream, self.params, 0
                    )
                    return
                except _driver.CUDADriverError as e:
                    err = e
            else:
                self.config.stream = stream
                rc = self.ex(self.config_ref, self.func, self.params, None)
                if not rc:
                    return
                err = _driver.CUDADriverError(rc)
        # a thread without a current context (see retry_without_context): made current, then launched once more
        if retry and retry_without_context(err):
            self(pointers, stream, retry=False)
            return
        raise err


def layout(ints: tuple[int, ...]) -> tuple[int | None, ...]:
    """m k p n, then a pointer before each leading dimension: (m, k, p, n, None, lda, None, ldb, ...)."""
    return (*ints[:4], *(x for ld in ints[4:] for x in (None, ld)))


class LaunchConfig(ctypes.Structure):  # CUlaunchConfig (cuda.h)
    _fields_ = [
        ("grid", ctypes.c_uint * 3),
        ("block", ctypes.c_uint * 3),
        ("smem", ctypes.c_uint),
        ("stream", ctypes.c_void_p),
        ("attrs", ctypes.c_void_p),
        ("num_attrs", ctypes.c_uint),
    ]


class LaunchAttribute(ctypes.Structure):  # CUlaunchAttribute (cuda.h): an id, padding, a 64-byte value union
    _fields_ = [("id", ctypes.c_uint), ("pad", ctypes.c_uint), ("value", ctypes.c_int * 16)]


PROGRAMMATIC_STREAM_SERIALIZATION = 6  # CU_LAUNCH_ATTRIBUTEPROGRAMMATIC_STREAM_SERIALIZATION
# Programmatic dependent launch of the persistent kernels on compute capability 9.0+; CUMM_PDL=0 (read at import)
# turns it off. A shape's launch takes the value this has when the shape is first planned.
PDL = os.environ.get("CUMM_PDL", "1") != "0"
_ex: list = []  # [cuLaunchKernelEx or None], looked up once


def _launch_kernel_ex():
    """The driver's cuLaunchKernelEx (CUDA 12.0+) through ctypes, or None where the driver has none; CuPy does
    not wrap it."""
    if not _ex:
        fn = getattr(ctypes.CDLL("libcuda.so.1"), "cuLaunchKernelEx", None)  # already loaded by CuPy
        if fn is not None:
            fn.argtypes = [ctypes.c_void_p] * 4
            fn.restype = ctypes.c_int
        _ex.append(fn)
    return _ex[0]


def _max_active_clusters(func: int, cl: int, threads: int, smem: int) -> int:
    """How many clusters of ``cl`` blocks of ``func`` (compiled with that cluster size) the current device
    holds at once: cuOccupancyMaxActiveClusters, which CuPy does not wrap. A cluster's blocks must share a GPC,
    so this can be less than the blocks per multiprocessor times the multiprocessors, divided by cl."""
    lib = ctypes.CDLL("libcuda.so.1")  # already loaded by CuPy
    config = LaunchConfig((cl, 1, 1), (threads, 1, 1), smem, None, None, 0)
    count = ctypes.c_int()
    rc = lib.cuOccupancyMaxActiveClusters(ctypes.byref(count), ctypes.c_void_p(func), ctypes.byref(config))
    if rc != 0:
        raise RuntimeError(
            f"cuOccupancyMaxActiveClusters failed with CUresult {rc} (clusters of {cl} blocks of "
            f"{threads} threads, {smem} bytes of shared memory)"
        )
    return count.value


def resident_blocks(kern, cfg: Mapping[str, int], threads: int, smem: int) -> int:
    """How many blocks of ``kern`` (configuration ``cfg``) the current device holds at once: whole clusters of
    CL blocks for a clustered kernel (fused3_wg), else blocks per multiprocessor times multiprocessors."""
    cl = cfg.get("CL", 1)
    if cl > 1:
        return cl * _max_active_clusters(kern.kernel.ptr, cl, threads, smem)
    per_sm = _driver.occupancyMaxActiveBlocksPerMultiprocessor(kern.kernel.ptr, threads, smem)
    return per_sm * cupy.cuda.Device().attributes["MultiProcessorCount"]


def pdl_safe(cl: int, grid: int, resident: int) -> bool:
    """Whether a persistent launch of ``grid`` blocks in clusters of ``cl`` (``resident`` fit on an idle GPU)
    may start early behind its predecessor (PDL). Its first blocks then take whatever the predecessor leaves
    free, and once that has finished, all of its blocks must fit around them for the grid barrier to complete.
    Single blocks always do. Clusters must share a GPC, and on the H200 a grid of every resident cluster of 4
    (64 x 32 tiles, two blocks per multiprocessor) hung back to back with PDL and ran without it
    (docs/chain.md): clusters of up to 2 start early only when the grid leaves
    room (fewer blocks than fit), larger clusters never."""
    return cl == 1 or (cl == 2 and grid < resident)
