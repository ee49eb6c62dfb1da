"""Launching the chain kernels through the driver: arguments packed once per shape, programmatic dependent
launch (PDL) for the persistent kernels, and how many blocks or clusters a device holds at once.

CuPy's conversion of the same arguments took half of a 12 us launch at n = 512 on the H200 (docs/chain.md),
so a :class:`Launch` keeps them in 8-byte slots and each call writes only its pointers.
"""

from __future__ import annotations

import ctypes
import functools
import threading
from collections.abc import Mapping

import cupy
import numpy as np
from cupy_backends.cuda.api import driver as _driver

from ..core.dtypes import F32
from . import arrays as _arrays
from . import scratch, tmaps
from .arrays import retry_without_context
from .driver import (  # noqa: F401 - LaunchConfig, LaunchAttribute: the driver structs a Launch fills
    PDL,
    PROGRAMMATIC_STREAM_SERIALIZATION,
    LaunchAttribute,
    LaunchConfig,
    launch_kernel_ex,
    max_active_clusters,
)
from .render import layout_of
from .tmaps import Maps, MapSpec, fp8_c_map


class Launch:
    """One chain kernel for fixed dimensions, launched through the driver with its arguments packed once in
    8-byte slots. ``layout`` lists the arguments in order: an int is an int32 argument, None a pointer that
    each call supplies (fused3: m k p n A lda B ldb C ldc E lde; the persistent kernels add T ldt bar). CuPy's
    conversion of the same arguments took half of a 12 us launch at n = 512 (docs/chain.md).
    ``pdl``: launch with programmatic stream serialization (cuLaunchKernelEx), for kernels that start with
    cumm_grid_dependency_wait (grid_barrier.cuh), on devices of compute capability 9.0 and later.
    ``maps``: tensor-map arguments after the layout's (fused3_wg with TMA = 1), each made for one of the call's
    pointers by a _Maps, which keeps them per pointer; the call writes their addresses into its argument
    pointers. A map given as None is one the kernel does not read (zeros). ``order``: which of the call's pointers
    each of the layout's pointer slots takes (default: the first ones, in order), so that the maps' operand
    indices and the slots can name different pointers (scaled_matmul: A and B only through their maps)."""

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
        grid: int | tuple[int, int, int],
        threads: int,
        smem: int,
        layout: tuple[int | None, ...],
        scratch: int = 0,
        pdl: bool = False,
        maps: tuple[MapSpec | None, ...] = (),
        persistent: bool = False,
        order: tuple[int, ...] | None = None,
    ):
        self.kern = kern  # keeps the module loaded
        self.persistent = persistent  # its call passes T and the barrier word after A, B, C, E (plans.run)
        self.scratch = scratch  # bytes of the scratch array (T)
        self.func, self.threads, self.smem = kern.kernel.ptr, threads, smem
        self.grid = grid if isinstance(grid, tuple) else (grid, 1, 1)  # (blocks in x, or the grid's three)
        self.slots = np.zeros(len(layout), dtype=np.uint64)
        for slot, value in enumerate(layout):
            if value is not None:
                self.slots[slot] = value  # an int32 argument in the low half of its (little-endian) slot
        slots = [slot for slot, value in enumerate(layout) if value is None]
        self.pointer_slots = tuple(zip(slots, order or range(len(slots)), strict=True))  # (slot, pointer index)
        base = self.slots.ctypes.data
        self.ptrs = np.array([base + 8 * i for i in range(len(layout) + len(maps))], dtype=np.uint64)  # (maps:
        # set per call)
        self.params = self.ptrs.ctypes.data
        # map launches share the arena's lock: a map's row cannot be handed to another map between the lookup
        # of its address and the launch, which copies it
        self.lock = tmaps.arena.lock if maps else threading.Lock()
        # (argument index, operand index, its _Maps) of each map the kernel reads
        self.maps = tuple((len(layout) + i, spec.operand, Maps(spec)) for i, spec in enumerate(maps) if spec)
        for i, spec in enumerate(maps):
            if spec is None:
                self.ptrs[len(layout) + i] = _ZERO_MAP.ctypes.data
        self.ex = launch_kernel_ex() if pdl else None
        if self.ex is not None:
            self.attr = LaunchAttribute(PROGRAMMATIC_STREAM_SERIALIZATION)
            self.attr.value[0] = 1  # programmaticStreamSerializationAllowed
            self.config = LaunchConfig(self.grid, (threads, 1, 1), smem, None, ctypes.addressof(self.attr), 1)
            self.config_ref = ctypes.byref(self.config)

    def __call__(self, pointers: tuple[int, ...], stream: int, retry: bool = True) -> None:
        with self.lock:  # the slots and the launch configuration are shared; the driver copies them at the launch
            s = self.slots
            for slot, i in self.pointer_slots:
                s[slot] = pointers[i]
            for arg, operand, maps in self.maps:
                ptr = pointers[operand]
                self.ptrs[arg] = maps.known.get(ptr) or maps.make(ptr)
            if self.ex is None:
                try:
                    _driver.launchKernel(self.func, *self.grid, self.threads, 1, 1, self.smem, stream, self.params, 0)
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


def resident_blocks(kern, cfg: Mapping[str, int], threads: int, smem: int) -> int:
    """How many blocks of ``kern`` (configuration ``cfg``) the current device holds at once: whole clusters of
    CL blocks for a clustered kernel (fused3_wg), else blocks per multiprocessor times multiprocessors."""
    cl = cfg.get("CL", 1)
    if cl > 1:
        return cl * max_active_clusters(kern.kernel.ptr, cl, threads, smem)
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


class Call:
    """Every decision of a matmul call with a given key, and how to run it on new pointers."""

    __slots__ = (
        "plan",
        "kind",
        "dev",
        "M",
        "N",
        "K",
        "lda",
        "ldb",
        "ldc",
        "dtype",
        "out_shape",
        "spans",
        "fast",
        "slots",
        "f32",
        "params",
        "params_ptr",
        "func",
        "grid",
        "lock",
        "decisions",
        "batch",
        "alpha",
        "beta",
        "geometry",
        "torch_empty",
        "direct",
        "maps",
        "scratch",
        "cell",
        "epi",
        "splits",
        "rslots",
        "rf32",
        "rparams",
        "rparams_ptr",
        "rgeometry",
        "workspace",
    )

    def __init__(
        self,
        plan,  # a cumm.plan.plan.Plan
        kind_: str,
        dev: int,
        dims,
        lds,
        dtype,
        out_shape,
        spans,
        fast: bool,
        decisions: dict,
        batch: tuple[int, int, int, int] | None = None,
        direct: bool = False,
        reduce: tuple[int, int, int] | None = None,  # split-K's sum: (CUfunction, blocks, threads), a fast call
    ):
        self.plan, self.kind, self.dev = plan, kind_, dev
        (self.M, self.N, self.K), (self.lda, self.ldb, self.ldc) = dims, lds
        self.dtype, self.out_shape, self.spans, self.fast = dtype, out_shape, spans, fast
        self.decisions = decisions  # what the checked path decided (repack, stage, splits, edges), for run()
        self.batch = batch  # (count, batch strides of A, B, C in elements) of a batched product
        self.lock = threading.Lock()
        self.torch_empty = None  # torch.empty for this call's result (torch inputs), made on first use
        # direct: one driver launch (launch()) runs the call on row-major operands, copies or not; fast: and on
        # the caller's own arrays, so a cached call may launch straight on their pointers
        self.direct = direct or fast
        self.maps = ()
        self.scratch = None  # (device pointer cell, bytes) of a kernel that takes a workspace
        # split-K on the caller's arrays: grid z = the slices, each writing its partial sum into a fresh float32
        # workspace (ldc = N; the kernel sets alpha 1, beta 0), then the reduce kernel adds them into C
        self.splits = decisions.get("splits", 1) if reduce is not None else 1
        if self.direct:
            M, N, K = dims
            # CUMM_GEMM_ARGS: M N K alpha A lda B ldb beta C ldc, each in an 8-byte slot (int32 and float32 in the
            # low half, little-endian)
            # (batched: then bsa bsb bsc as int64, and the batch count for a kernel that walks the batch's tiles)
            spec = plan.spec
            walk = batch is not None and spec.schedules_batch
            n = 11 if batch is None else 15 if walk else 14
            self.slots = np.zeros(n, dtype=np.uint64)
            self.f32 = self.slots.view(np.float32)
            for slot, v in ((0, M), (1, N), (2, K), (5, self.lda), (7, self.ldb), (10, self.ldc)):
                self.slots[slot] = v
            if self.splits > 1:
                self.slots[10] = N  # the workspace's rows
                # splitk_reduce(M, N, S, W, alpha, beta, C, ldc), each argument in an 8-byte slot
                self.rslots = np.zeros(8, dtype=np.uint64)
                self.rf32 = self.rslots.view(np.float32)
                for slot, v in ((0, M), (1, N), (2, self.splits), (7, self.ldc)):
                    self.rslots[slot] = v
                self.rparams = np.array([self.rslots.ctypes.data + 8 * i for i in range(8)], dtype=np.uint64)
                self.rparams_ptr = self.rparams.ctypes.data
                self.rgeometry = (reduce[1], reduce[2], reduce[0])
                # the workspace from the allocator of the stream the launches go to: torch's caching allocator on
                # torch's current stream for torch tensors, else cupy's pool on cupy's current stream (a block freed
                # after the launches is reused only behind them on that stream)
                size = self.splits * M * N
                self.workspace = (
                    _arrays.torch_empty((size,), np.float32, dev)
                    if kind_ == _arrays.TORCH
                    else functools.partial(cupy.empty, size, dtype=cupy.float32)
                )
            if batch is not None:
                self.slots[11:14] = np.array(batch[1:], dtype=np.int64).view(np.uint64)
            if walk:
                self.slots[14] = batch[0]
            if spec.tensor_maps is not None:  # tensor maps by value after the arguments, made per pointer
                c_map = bool(plan.flags[2]) and dtype != F32
                lay = layout_of(plan.flags)  # (passed only when set: a user's tensor_maps need not take it)
                kw = {"layout": lay} if lay else {}
                specs = spec.tensor_maps(plan.cfg, M, N, K, self.lda, self.ldb, self.ldc, c_map, **kw)
                epi = plan.flags.epilogue
                if epi is not None and epi.glu and len(specs) > 2:  # C (the third map) is half the product's width
                    c = spec.tensor_maps(plan.cfg, M, epi.columns(N), K, self.lda, self.ldb, self.ldc, c_map, **kw)
                    specs = (*specs[:2], c[2], *specs[3:])
                if epi is not None and epi.fp8 and len(specs) > 2 and specs[2] is not None:
                    specs = (*specs[:2], fp8_c_map(specs[2]), *specs[3:])
                if batch is not None:  # the batched variant reads 3-D maps: the batch is their third dimension
                    specs = [m and m.batched(batch[0], batch[1 + m.operand]) for m in specs]
                self.maps = tuple(
                    (n + i, m.operand, tmaps.Maps(m)) if m is not None else (n + i, None, None)
                    for i, m in enumerate(specs)
                )
            gx, gy, gz = spec.grid(plan.cfg, M, N, K)
            if walk:  # the batch's tiles are one run
                gx *= batch[0]
            if spec.persistent:  # one block per slot walks the tiles (of its product when grid z is the batch)
                slots = max(1, plan.slots(dev) // (1 if batch is None or walk else batch[0]))
                # fewer tiles than slots: a stream-K kernel spreads their k-slabs over every slot when its
                # workspace function gives it a workspace for that many blocks
                wide = batch is None and spec.workspace is not None and gx < slots
                gx = slots if wide and spec.workspace(plan.cfg, M, N, K, slots) else min(gx, slots)
            # a workspace pointer after the maps: a per-stream buffer, written at launch (null when not needed
            # or batched)
            ws = [np.zeros(1, dtype=np.uint64)] if spec.workspace is not None else []
            if ws and batch is None:
                nbytes = spec.workspace(plan.cfg, M, N, K, gx)
                if nbytes:
                    self.scratch = (ws[0], nbytes)
            self.params = np.array(
                [self.slots.ctypes.data + 8 * i for i in range(n)] + [0] * len(self.maps) + [w.ctypes.data for w in ws],
                dtype=np.uint64,
            )
            self.cell = ws  # kept alive: params holds its address
            for arg, operand, _ in self.maps:
                if operand is None:  # a zeroed map the kernel does not read
                    self.params[arg] = _ZERO_MAP.ctypes.data
            self.params_ptr = self.params.ctypes.data  # (the .ctypes property builds an object per access)
            self.alpha = self.beta = None  # the alpha and beta written into the slots last
            # an epilogue variant's alpha is a CummAlpha (include/epilogue.cuh): its bytes, passed per call as
            # `alpha` (cumm.plan.epilogue.pack), are written here and the argument points at them
            self.epi = None
            epi = plan.flags.epilogue
            if epi is not None:
                self.epi = np.zeros(epi.nbytes // 8, dtype=np.uint64)
                self.params[3] = self.epi.ctypes.data
            self.func = plan.kern.kernel.ptr
            gz = self.splits if self.splits > 1 else gz
            self.grid = (gx, gy, gz if batch is None or walk else batch[0])
            self.geometry = (*self.grid, *plan.block, plan.smem, self.func)

    def launch(self, pa: int, pb: int, pc: int, alpha: float, beta: float, stream: int) -> None:
        """The kernel on these pointers (a direct call: no split, no repacking, no staging, no strips)."""
        if self.maps:
            with tmaps.arena.lock:  # a map's arena row cannot be handed on between its lookup and the launch
                ptrs = (pa, pb, pc)
                for arg, operand, maps in self.maps:
                    if maps is not None:
                        p = ptrs[operand]
                        self.params[arg] = maps.known.get(p) or maps.make(p)
                self._launch(pa, pb, pc, alpha, beta, stream)
            return
        with self.lock:  # the slots are shared; the driver copies them when the launch is queued
            self._launch(pa, pb, pc, alpha, beta, stream)

    def _launch(self, pa: int, pb: int, pc: int, alpha: float, beta: float, stream: int) -> None:
        if self.splits > 1:
            self._launch_split(pa, pb, pc, alpha, beta, stream)
            return
        s = self.slots
        s[4] = pa
        s[6] = pb
        s[9] = pc
        if self.scratch is not None:
            cell, nbytes = self.scratch
            cell[0] = scratch.pointer(self.dev, stream, nbytes)
        if alpha != self.alpha or beta != self.beta:
            if self.epi is not None:  # alpha: a CummAlpha's bytes
                self.epi[:] = np.frombuffer(alpha, dtype=np.uint64)
                self.f32[16] = beta
                self.alpha, self.beta = alpha, beta
            else:
                self.f32[6], self.f32[16] = self.alpha, self.beta = alpha, beta
        gx, gy, gz, bx, by, bz, smem, func = self.geometry
        try:
            _driver.launchKernel(func, gx, gy, gz, bx, by, bz, smem, stream, self.params_ptr, 0)
        except _driver.CUDADriverError as e:
            if not retry_without_context(e):
                raise
            _driver.launchKernel(func, gx, gy, gz, bx, by, bz, smem, stream, self.params_ptr, 0)

    def _launch_split(self, pa: int, pb: int, pc: int, alpha: float, beta: float, stream: int) -> None:
        ws = self.workspace()  # (alive until both launches are queued)
        pw = ws.data_ptr() if self.kind == _arrays.TORCH else ws.data.ptr
        s, r = self.slots, self.rslots
        s[4], s[6], s[9] = pa, pb, pw
        r[3], r[6] = pw, pc
        self.rf32[8], self.rf32[10] = alpha, beta
        gx, gy, gz, bx, by, bz, smem, func = self.geometry
        rblocks, rthreads, rfunc = self.rgeometry
        _driver.launchKernel(func, gx, gy, gz, bx, by, bz, smem, stream, self.params_ptr, 0)
        _driver.launchKernel(rfunc, rblocks, 1, 1, rthreads, 1, 1, 0, stream, self.rparams_ptr, 0)


_ZERO_MAP = tmaps.aligned_map()  # 128 zero bytes, 64-byte aligned: a map argument a kernel does not read
