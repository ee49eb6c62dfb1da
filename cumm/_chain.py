"""``cumm.multi_dot``: a chain of matrix products, numpy.linalg.multi_dot semantics for 2-D float32 cupy arrays.

Two arrays are one ``cumm.matmul``. Three arrays (m x k, k x p, p x n) run a fused kernel when
fusing pays, else two ``cumm.matmul`` calls in the cheaper order. Four or more arrays are multiplied
pairwise in the order of least multiply-adds, found by the classic O(N^3) dynamic program (numpy's
``multi_dot`` does the same).

The fused kernels (``kernel="auto"`` picks with :func:`select`) both multiply in the (A @ B) @ C order, so
that order must not cost more multiply-adds than A @ (B @ C):
* ``fused3`` (SIMT, thread block clusters, compute capability 9.0+): T = A @ B stays in shared memory;
  fastest for the smallest chains (up to n = 160 for square ones, BM16_MAX_FMA);
* ``fused3_tc`` (tensor cores, FP32 accuracy by the tf32x3 split, 8.0+): one persistent launch, T through
  L2, one grid barrier; tile shapes grow with the chain (TC_RULE); up to n = 3072 for square chains,
  past which two tf32x3 GEMMs are as fast and the fused launch saves nothing;
* ``fused3_wg`` (compute capability 9.0 only, warpgroup tensor cores): the same persistent scheme with big
  tiles whose K is split over a thread block cluster (WG_RULE): on the H200 5-15 % faster than fused3_tc
  from n = 384 to 2048 (bench/NOTES.md, session 7).

The persistent kernels launch through the driver with their arguments packed once per shape (_Launch); on
compute capability 9.0+ with programmatic stream serialization, so that back-to-back chains overlap one
launch's end with the next one's start (each waits for its predecessor before touching memory).

A three-array call that fuses is checked and planned once per key (kernel=, the operands' shapes, strides,
devices and pointer misalignment; see _fast_call): later calls with that key test only what depends on the
pointers (out overlapping an input) and launch.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

import cupy
import numpy as np
from cupy_backends.cuda.api import driver as _driver

from ._compile import device_kernel
from ._ladder import get_spec
from ._matmul import matmul
from ._operands import INT32_MAX, check_operand, check_out, compute_capability, row_major

KERNELS = ("auto", "fused3", "fused3_tc", "fused3_wg", "pairwise")
_F32 = np.dtype(np.float32)

# fused3 configurations (sm_90+), chosen from device-time sweeps on an H200 (bench/chain.py --configs):
#   bm32: a 32-row panel per cluster of 4 blocks; 128-wide slices of T and panels of E; 8 x 8 thread tiles
#         (64 FFMA per 4 LDS.128) and 32-deep slabs split over 4 k-slices: 256 threads, 113 KB of shared
#         memory (a 512-column chunk of T, then stages or partial tiles). 43 us at n = 512 (bm16: 50).
#   bm16: a 16-row panel per cluster of 8; 32-wide slices; 4 x 4 thread tiles over 4 k-slices: 128 threads,
#         33 KB, several blocks per multiprocessor. Small chains, which are latency-bound: 9.5 us at
#         n = 128 and 16 us at n = 256 (bm32: 17 and 26).
CONFIGS: dict[str, dict[str, int]] = {
    "bm32": dict(BM=32, BN=128, BK=32, CL=4, PCH=1, TM=8, TN=8, KS=4, MINB=1),
    "bm16": dict(BM=16, BN=32, BK=32, CL=8, PCH=1, TM=4, TN=4, KS=4, MINB=2),
}
BM32_MIN_ROWS = 384  # m from which bm32 beats bm16 (measured: bm16 at 256, bm32 at 512)
# Without clusters (compute capability < 9.0) one block computes a whole row panel: same tiles, CL = 1,
# and CL * PCH slices per block so that a chunk of T stays as wide as with a cluster.


def no_cluster(cfg: Mapping[str, int]) -> dict[str, int]:
    return dict(cfg, CL=1, PCH=cfg["CL"] * cfg["PCH"])




def chain_cost(dims: Sequence[int]) -> tuple[int, list[list[int]]]:
    """Least multiply-add count of the chain whose i-th matrix is dims[i] x dims[i + 1], and the split table:
    split[i][j] = s means the best order for matrices i..j multiplies (i..s) by (s+1..j)."""
    nmat = len(dims) - 1
    cost = [[0] * nmat for _ in range(nmat)]
    split = [[0] * nmat for _ in range(nmat)]
    for span in range(1, nmat):
        for i in range(nmat - span):
            j = i + span
            best = None
            for s in range(i, j):
                q = cost[i][s] + cost[s + 1][j] + dims[i] * dims[s + 1] * dims[j + 1]
                if best is None or q < best:
                    best, split[i][j] = q, s
            cost[i][j] = best
    return (cost[0][nmat - 1] if nmat else 0), split


def chain_order(dims: Sequence[int]):
    """The cheapest parenthesization as nested pairs of matrix indices, e.g. ((0, 1), 2)."""
    _, split = chain_cost(dims)

    def build(i, j):
        return i if i == j else (build(i, split[i][j]), build(split[i][j] + 1, j))

    return build(0, len(dims) - 2)


def select(m: int, k: int, p: int, n: int, cc: int) -> str | None:
    """kernel="auto" for three arrays: a CONFIGS (fused3), TC_CONFIGS or WG_CONFIGS name, or None for two matmuls.
    ``cc``: the compute capability as an int (90 for 9.0)."""
    if cc < 80 or min(m, k, p, n) < 1:
        return None
    fused = m * p * (k + n)  # (A @ B) @ C, the order the fused kernels compute
    if fused > k * n * (m + p):  # A @ (B @ C) is cheaper: two matmuls in that order
        return None
    if cc >= 90 and fused <= BM16_MAX_FMA:
        return "bm16"
    if get_spec("fused3_wg").supports(cc):
        return wg_config_for(fused) or tc_config_for(fused)
    return tc_config_for(fused)


def fused_config(m: int) -> str:
    return "bm32" if m >= BM32_MIN_ROWS else "bm16"


def _plan(config: str | Mapping[str, int], flags: tuple[int, int, int], dev: int):
    """(kernel, block, dynamic shared memory, grid function) of ``config`` (a CONFIGS name or a dict)."""
    spec = get_spec("fused3")
    cc = compute_capability(dev)
    over = dict(CONFIGS[config]) if isinstance(config, str) else dict(config)
    if cc < 90 and isinstance(config, str):
        over = no_cluster(over)
    cfg = spec.resolve(over, cc)
    kern = device_kernel(spec, cfg, flags, dev)
    return kern, spec.block(cfg), spec.smem(cfg), lambda m, n, p: spec.grid(cfg, m, n, p)


# Per (kernel or configuration, alignment flags, device, dimensions, leading dimensions): the _Launch.
_launches: dict[tuple, object] = {}
_LAUNCH_CACHE_MAX = 4096


def _launch(config, flags, dev, ints) -> _Launch:
    """fused3's launch with ``config`` (a CONFIGS name or a dict) for ints = (m, k, p, n, lda, ldb, ldc, lde)."""
    key = (config if isinstance(config, str) else tuple(sorted(config.items())), flags, dev, ints)
    hit = _launches.get(key)
    if hit is None:
        kern, block, smem, grid = _plan(config, flags, dev)
        m, k, p, n = ints[:4]
        if len(_launches) >= _LAUNCH_CACHE_MAX:
            _launches.clear()
        hit = _launches[key] = _Launch(kern, grid(m, n, p)[0], block[0], smem, _layout(ints))
    return hit


def _operands(a, b, c, out):
    """Row-major operands of a fused chain, their leading dimensions, alignment flags (VEC_C covers C and E)
    and data pointers."""
    a, lda = row_major(a, "arrays[0]", copy_ok=True)
    b, ldb = row_major(b, "arrays[1]", copy_ok=True)
    c, ldc = row_major(c, "arrays[2]", copy_ok=True)
    e, lde = row_major(out, "out", copy_ok=False)
    if max(lda, ldb, ldc, lde) > INT32_MAX:
        raise ValueError(f"leading dimensions must be below 2**31, got {lda}, {ldb}, {ldc}, {lde}")
    pa, pb, pc, pe = a.data.ptr, b.data.ptr, c.data.ptr, e.data.ptr
    flags = (int(pa % 16 == 0 and lda % 4 == 0), int(pb % 16 == 0 and ldb % 4 == 0),
             int(pc % 16 == 0 and ldc % 4 == 0 and pe % 16 == 0 and lde % 4 == 0))
    return (a, b, c, e), (lda, ldb, ldc, lde), flags, (pa, pb, pc, pe)


def _fused3(a, b, c, out, config: str | Mapping[str, int], dev: int, fast_key: tuple | None = None):
    """E = a @ b @ c into ``out`` with the fused kernel; arguments already checked, every dimension >= 1.
    ``fast_key``: multi_dot's key for this call, under which later calls find the launch (_remember)."""
    m, k = a.shape
    p, n = c.shape
    ops, (lda, ldb, ldc, lde), flags, pointers = _operands(a, b, c, out)
    launch = _launch(config, flags, dev, (m, k, p, n, lda, ldb, ldc, lde))
    _run_fused(launch, dev, pointers)
    if fast_key is not None:
        _remember(fast_key, launch, _run_fused, dev, ops, (a, b, c, out))
    return out


def _run_fused(launch: _Launch, dev: int, pointers: tuple[int, ...]) -> None:
    """Queue fused3's ``launch`` on ``dev``'s current stream."""
    with cupy.cuda.Device(dev) if dev != cupy.cuda.runtime.getDevice() else contextlib.nullcontext():
        launch(pointers, cupy.cuda.get_current_stream().ptr)


# The persistent kernels: one launch, T = A @ B through a scratch array in L2, one grid barrier, the same
# arguments. fused3_tc (mma.sync, cc 8.0+) and fused3_wg (wgmma, cc 9.0 only). Tile shapes by chain size,
# from device-time sweeps on an H200 (bench/chain.py --configs): small tiles while the chain is small (more
# tiles than multiprocessors), larger ones as it grows.
TC_CONFIGS: dict[str, dict[str, int]] = {
    "tc32x32": dict(BM=32, BN=32, BK=64, WM=16, WN=16, STAGES=4, NUM_THREADS=128, MINB=1),
    "tc32x64": dict(BM=32, BN=64, BK=64, WM=16, WN=32, STAGES=4, NUM_THREADS=128, MINB=1),  # (sweep base)
    "tc64x64": dict(BM=64, BN=64, BK=32, WM=32, WN=32, STAGES=4, NUM_THREADS=128, MINB=1),
    "tc128x128": dict(BM=128, BN=128, BK=32, WM=64, WN=32, STAGES=3, NUM_THREADS=256, MINB=1),
}
TC_CONFIG = TC_CONFIGS["tc32x64"]
# (largest fused multiply-add count m*p*(k + n), configuration); a square chain of size n counts 2 n^3
# KS > 1 (k-sliced warps) measured within 3 % of KS = 1 at n = 384 and 512 and slower elsewhere: not used.
TC_RULE = ((2 * 768**3, "tc32x32"), (2 * 1536**3, "tc64x64"), (2 * 3072**3, "tc128x128"))
# fused3_wg (wgmma, compute capability 9.0 only): BM x BN tiles, each tile's K split over a cluster of CL blocks
# or (KW = 2) over two warpgroups of one block. TMA = 1: chunks by the copy engine for 16-byte aligned operands
# (others run cp_async_config's form of the same tiles). The rule is the fastest measured configuration at each
# size, from batches of back-to-back launches on the H200 (bench/ab_wg.py; us per call): kw64x32 to n = 512
# (512: 14.7 against wg64x32's 15.4; 384: 12.2 against 13.3), wg128x64 to 704 (every tile in one round; 704:
# 26.2 against wg64x32's 33.6), wg64x32 to 896 (768: 43.2 against 49.4), wg128x64 to 4096 (device time at 4096:
# 3351 us against cupy's 5347); fused3_tc is as fast up to 320. wg64x32 waits for a chunk's wgmma before the
# next chunk's proxy fence (RF = 1: 896 55.5 -> 54.7 us per call, session 14). kw64x32 splits its first
# phase-2 tile's C while the grid barrier waits (PC = 1: 512 16.6 -> 16.0 us per call, session 15). wg128x64
# multiplies X's big half by Y's big and small halves in one wgmma of N = 128 (MN = 1: 1024 61.9 -> 60.3 us per
# call, 2048 413 -> 397; still slower than wg64x32 at 768 and 896; session 16). History and the configurations
# that lost: bench/NOTES.md, sessions 7 to 16; tables: bench/results/h200_chain.md.
WG_CONFIGS: dict[str, dict[str, int]] = {
    "kw64x32": dict(BM=64, BN=32, BK=64, CL=1, STAGES=2, MINB=1, XA=0, TMA=1, KW=2, PC=1),
    "wg64x32": dict(BM=64, BN=32, BK=64, CL=2, STAGES=2, MINB=1, XA=0, TMA=1, RF=1),
    "wg128x64": dict(BM=128, BN=64, BK=32, CL=2, STAGES=4, MINB=1, XA=0, TMA=1, MN=1),
}
# (largest m*p*(k + n), configuration or None where fused3_tc is as fast): kernel="auto" on compute capability 9.0
WG_RULE = ((2 * 320**3, None), (2 * 512**3, "kw64x32"), (2 * 704**3, "wg128x64"), (2 * 896**3, "wg64x32"),
           (2 * 4096**3, "wg128x64"))
PERSISTENT = {**dict.fromkeys(TC_CONFIGS, "fused3_tc"), **dict.fromkeys(WG_CONFIGS, "fused3_wg")}
BM16_MAX_FMA = 2 * 160**3  # fused3's bm16 (clusters, sm_90) wins up to here (H200: at n = 128; tc32x32 at 192)
SCRATCH_CACHE_MAX = 64 << 20  # scratch up to this size is kept per stream between calls; larger from the pool


def tc_config_for(fused: int) -> str | None:
    """The fused3_tc configuration for a chain of ``fused`` multiply-adds, None past the rule (pairwise)."""
    return next((name for limit, name in TC_RULE if fused <= limit), None)


def wg_config_for(fused: int) -> str | None:
    """The fused3_wg configuration kernel="auto" picks for a chain of ``fused`` multiply-adds (compute
    capability 9.0), None where another kernel is as fast or faster."""
    return next((name for limit, name in WG_RULE if fused <= limit), None)


def wg_forced(fused: int) -> str:
    """kernel="fused3_wg": the rule's configuration, the smallest one below it, the largest one past it."""
    return next((name for limit, name in WG_RULE if fused <= limit and name), WG_RULE[-1][1])


class _Launch:
    """One chain kernel for fixed dimensions, launched through the driver with its arguments packed once in
    8-byte slots. ``layout`` lists the arguments in order: an int is an int32 argument, None a pointer that
    each call supplies (fused3: m k p n A lda B ldb C ldc E lde; the persistent kernels add T ldt bar). CuPy's
    conversion of the same arguments took half of a 12 us launch at n = 512 (bench/NOTES.md, session 4).
    ``pdl``: launch with programmatic stream serialization (cuLaunchKernelEx), for kernels that start with
    cumm_grid_dependency_wait (grid_barrier.cuh), on devices of compute capability 9.0 and later.
    ``maps``: tensor-map arguments after the layout's (fused3_wg with TMA = 1), each made for one of the call's
    pointers by a _Maps, which keeps them per pointer; the call writes their addresses into its argument
    pointers."""

    __slots__ = ("func", "grid", "threads", "smem", "slots", "pointer_slots", "ptrs", "params", "lock", "kern",
                 "scratch", "ex", "config", "config_ref", "attr", "maps")

    def __init__(self, kern, grid: int, threads: int, smem: int, layout: tuple[int | None, ...], scratch: int = 0,
                 pdl: bool = False, maps: tuple[_MapSpec, ...] = ()):
        self.kern = kern  # keeps the module loaded
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
        self.lock = _arena.lock if maps else threading.Lock()
        # (argument index, operand index, its _Maps) of each map the kernel reads
        self.maps = tuple((len(layout) + i, spec.operand, _Maps(spec)) for i, spec in enumerate(maps))
        self.ex = _launch_kernel_ex() if pdl else None
        if self.ex is not None:
            self.attr = _LaunchAttribute(_PROGRAMMATIC_STREAM_SERIALIZATION)
            self.attr.value[0] = 1  # programmaticStreamSerializationAllowed
            self.config = _LaunchConfig((grid, 1, 1), (threads, 1, 1), smem, None, ctypes.addressof(self.attr), 1)
            self.config_ref = ctypes.byref(self.config)

    def __call__(self, pointers: tuple[int, ...], stream: int) -> None:
        with self.lock:  # the slots and the launch configuration are shared; the driver copies them at the launch
            s = self.slots
            for slot, ptr in zip(self.pointer_slots, pointers, strict=True):
                s[slot] = ptr
            for arg, operand, maps in self.maps:
                ptr = pointers[operand]
                self.ptrs[arg] = maps.known.get(ptr) or maps.make(ptr)
            if self.ex is None:
                _driver.launchKernel(self.func, self.grid, 1, 1, self.threads, 1, 1, self.smem, stream, self.params,
                                     0)
                return
            self.config.stream = stream
            rc = self.ex(self.config_ref, self.func, self.params, None)
        if rc:
            raise _driver.CUDADriverError(rc)


def _layout(ints: tuple[int, ...]) -> tuple[int | None, ...]:
    """m k p n, then a pointer before each leading dimension: (m, k, p, n, None, lda, None, ldb, ...)."""
    return (*ints[:4], *(x for ld in ints[4:] for x in (None, ld)))


class _MapSpec(NamedTuple):
    """A 2-D tensor map of a row-major float32 operand (rows x cols, leading dimension ld) read in boxes of
    box_rows x box_cols, for the copy engine (cp.async.bulk.tensor)."""

    operand: int  # which of the launch's pointers
    cols: int
    rows: int
    ld: int
    box_cols: int
    box_rows: int
    swizzle: int  # CUtensorMapSwizzle: 0 none, 1/2/3 = 32/64/128-byte spans (box_cols * 4 bytes)


_tmap_fns: dict[str, object] = {}  # cuTensorMapEncodeTiled, cuTensorMapReplaceAddress, looked up once


def _tmap_fn(name: str, argtypes: list):
    """A tensor-map function of the driver through ctypes (CuPy wraps none)."""
    fn = _tmap_fns.get(name)
    if fn is None:
        fn = getattr(ctypes.CDLL("libcuda.so.1"), name)  # already loaded by CuPy
        fn.argtypes = argtypes
        fn.restype = ctypes.c_int
        _tmap_fns[name] = fn
    return fn


def _encode(ptr: int, spec: _MapSpec, out: np.ndarray) -> None:
    """cuTensorMapEncodeTiled into ``out`` (16 words, 64-byte aligned): elements past the matrix's edges arrive
    as zeros; L2 promotion of 256 bytes."""
    u64, u32, p, i = ctypes.c_uint64, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_int
    encode = _tmap_fn("cuTensorMapEncodeTiled", [p, i, ctypes.c_uint, p, p, p, p, p, i, i, i, i])
    rc = encode(out.ctypes.data, 7, 2, ptr, (u64 * 2)(spec.cols, spec.rows), (u64 * 1)(4 * spec.ld),
                (u32 * 2)(spec.box_cols, spec.box_rows), (u32 * 2)(1, 1), 0, spec.swizzle, 3, 0)
    if rc:
        raise RuntimeError(f"the driver could not make a tensor map (CUresult {rc}) for {spec} at {ptr:#x}")


def _aligned_map() -> np.ndarray:
    """16 zero words, 64-byte aligned (where the driver writes a map)."""
    buf = np.zeros(16 + 8, dtype=np.uint64)
    word = (-buf.ctypes.data % 64) // 8
    return buf[word:word + 16]


class _Arena:
    """Tensor maps (CUtensorMap: 16 words, 64-byte aligned) in one array, handed out round robin: the driver
    copies a launch's arguments when it is queued, so a map's row can be reused once its owner (a _Maps) has
    forgotten it."""

    ROWS = 4096

    def __init__(self):
        self.buf = np.zeros(self.ROWS * 16 + 8, dtype=np.uint64)
        word = (-self.buf.ctypes.data % 64) // 8
        self.rows = self.buf[word:word + self.ROWS * 16].reshape(self.ROWS, 16)
        self.base = self.rows.ctypes.data
        self.owners: list = [None] * self.ROWS  # (_Maps, pointer) per row
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


_arena = _Arena()


class _Maps:
    """The tensor maps of one _MapSpec, by pointer: ``known`` maps a pointer to its map's address in the arena.
    The first map is encoded by the driver (cuTensorMapEncodeTiled); later ones copy it and have the driver move
    it to their address (cuTensorMapReplaceAddress). On the H200's host an encoding took 7.6-13.8 us through
    ctypes, a replacement 0.9 us, a map made here 2.8 us with the Python around it
    (bench/results/h200_tma_probe.log); a pointer seen before costs a dict lookup."""

    def __init__(self, spec: _MapSpec):
        self.spec, self.known = spec, {}
        self.first: np.ndarray | None = None

    def make(self, ptr: int) -> int:
        row = _arena.take(self, ptr)
        out = _arena.rows[row]
        address = _arena.base + 128 * row
        if self.first is None:
            _encode(ptr, self.spec, out)
            self.first = out.copy()
        else:
            out[:] = self.first
            rc = _tmap_fn("cuTensorMapReplaceAddress", [ctypes.c_void_p] * 2)(address, ptr)
            if rc:
                raise RuntimeError(f"the driver could not move a tensor map (CUresult {rc}) to {ptr:#x} for "
                                   f"{self.spec}")
        self.known[ptr] = address
        return address


def wg_maps(cfg: Mapping[str, int], ints: tuple[int, ...]) -> tuple[_MapSpec, ...]:
    """fused3_wg's tensor-map arguments (CUMM_WG_ARGS in fused3_wg.cu: A, B, T, C) for configuration ``cfg``
    and ints = (m, k, p, n, lda, ldb, ldc, lde, ldt); () without TMA. The launch's pointers are (A, B, C, E, T,
    bar)."""
    if not cfg.get("TMA"):
        return ()
    m, k, p, n, lda, ldb, ldc, _, ldt = ints
    bm, bn, bk = cfg["BM"], cfg["BN"], cfg["BK"]
    # X's boxes: a row is one swizzle span (BK = 64: two boxes of 32 columns; the spec allows only these BK)
    span = min(bk, 32)
    swizzle = {8: 1, 16: 2, 32: 3}[span]
    return (_MapSpec(0, k, m, lda, span, bm, swizzle), _MapSpec(1, p, k, ldb, bn, bk, 0),
            _MapSpec(4, p, m, ldt, span, bm, swizzle), _MapSpec(2, n, p, ldc, bn, bk, 0))


class _LaunchConfig(ctypes.Structure):  # CUlaunchConfig (cuda.h)
    _fields_ = [("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3), ("smem", ctypes.c_uint),
                ("stream", ctypes.c_void_p), ("attrs", ctypes.c_void_p), ("num_attrs", ctypes.c_uint)]


class _LaunchAttribute(ctypes.Structure):  # CUlaunchAttribute (cuda.h): an id, padding, a 64-byte value union
    _fields_ = [("id", ctypes.c_uint), ("pad", ctypes.c_uint), ("value", ctypes.c_int * 16)]


_PROGRAMMATIC_STREAM_SERIALIZATION = 6  # CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
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
    config = _LaunchConfig((cl, 1, 1), (threads, 1, 1), smem, None, None, 0)
    count = ctypes.c_int()
    rc = lib.cuOccupancyMaxActiveClusters(ctypes.byref(count), ctypes.c_void_p(func), ctypes.byref(config))
    if rc != 0:
        raise RuntimeError(f"cuOccupancyMaxActiveClusters failed with CUresult {rc} (clusters of {cl} blocks of "
                           f"{threads} threads, {smem} bytes of shared memory)")
    return count.value


def resident_blocks(kern, cfg: Mapping[str, int], threads: int, smem: int) -> int:
    """How many blocks of ``kern`` (configuration ``cfg``) the current device holds at once: whole clusters of
    CL blocks for a clustered kernel (fused3_wg), else blocks per multiprocessor times multiprocessors."""
    cl = cfg.get("CL", 1)
    if cl > 1:
        return cl * _max_active_clusters(kern.kernel.ptr, cl, threads, smem)
    per_sm = _driver.occupancyMaxActiveBlocksPerMultiprocessor(kern.kernel.ptr, threads, smem)
    return per_sm * cupy.cuda.Device().attributes["MultiProcessorCount"]


_NAMED = {"fused3_tc": TC_CONFIGS, "fused3_wg": WG_CONFIGS}  # each persistent kernel's named configurations


def cp_async_config(cfg: Mapping[str, int]) -> dict[str, int]:
    """The fused3_wg configuration that runs chains with an unaligned operand in place of ``cfg`` (TMA = 1):
    cp.async copies, in chunks of at most 32 of K (that k-loop spills with 64), as many bytes in flight; K
    split over a cluster where ``cfg`` splits it over K groups of one block (KW), if such a cluster is valid;
    C split chunk by chunk (PC = 0: PC = 1 copies it with the copy engine); three wgmma of N = BN per k-step
    (MN = 0: with MN = 1 the cp.async k-loop spills).
    K groups are correct with cp.async too (tested), but there compute-sanitizer's racecheck reports hazards
    that it also reports on a minimal correct kernel with the same barrier pattern (bench/race_named_barrier.py,
    bench/NOTES.md session 11), so it could not check this path; the cluster form it checks clean."""
    bk, kw, cl = min(cfg["BK"], 32), cfg.get("KW", 1), cfg.get("CL", 1)
    out = {**cfg, "TMA": 0, "PC": 0, "MN": 0, "BK": bk, "STAGES": cfg["STAGES"] * cfg["BK"] // bk}
    if kw == 1 or cl * kw > 8 or cfg["BM"] % (cl * kw):  # (clusters of at most 8; each rank stores BM / CL rows)
        return out
    return {**out, "KW": 1, "CL": cl * kw}


def _persistent_plan(kernel: str, config: str | Mapping[str, int], flags: tuple[int, int, int], dev: int,
                     ints: tuple[int, ...]) -> _Launch:
    """The launch of ``kernel`` (fused3_tc or fused3_wg) with ``config`` (a TC_CONFIGS / WG_CONFIGS name, or a
    dict) for ints = (m, k, p, n, lda, ldb, ldc, lde); cached."""
    key = (kernel, config if isinstance(config, str) else tuple(sorted(config.items())), flags, dev, ints)
    hit = _launches.get(key)
    if hit is None:
        spec = get_spec(kernel)
        cc = compute_capability(dev)
        spec.check_cc(cc, f"device {dev}", "use kernel='fused3' or 'pairwise'")
        cfg = spec.resolve(_NAMED[kernel][config] if isinstance(config, str) else config, cc)
        if cfg.get("TMA") and not all(flags):  # the copy engine reads 16-byte aligned operands only
            cfg = spec.resolve(cp_async_config(cfg), cc)
        kern = device_kernel(spec, cfg, flags, dev)
        threads, smem = spec.block(cfg)[0], spec.smem(cfg)
        with cupy.cuda.Device(dev):
            resident = resident_blocks(kern, cfg, threads, smem)
        if resident < 1:  # cannot happen for a configuration that compiled and fits; never launch into a hang
            raise RuntimeError(f"{kernel} with {cfg}: no block (or cluster) fits on device {dev}")
        m, k, p, n = ints[:4]
        grid = min(spec.grid(cfg, m, n, p)[0], resident)  # all blocks resident: the barrier cannot hang
        ldt = -(-p // 4) * 4  # T's rows padded to 16 bytes: phase 2 reads T with 16-byte copies
        if len(_launches) >= _LAUNCH_CACHE_MAX:
            _launches.clear()
        hit = _launches[key] = _Launch(kern, grid, threads, smem, (*_layout((*ints, ldt)), None), 4 * m * ldt,
                                           pdl=PDL and cc >= 90 and pdl_safe(cfg.get("CL", 1), grid, resident),
                                           maps=wg_maps(cfg, (*ints, ldt)))
    return hit


def pdl_safe(cl: int, grid: int, resident: int) -> bool:
    """Whether a persistent launch of ``grid`` blocks in clusters of ``cl`` (``resident`` fit on an idle GPU)
    may start early behind its predecessor (PDL). Its first blocks then take whatever the predecessor leaves
    free, and once that has finished, all of its blocks must fit around them for the grid barrier to complete.
    Single blocks always do. Clusters must share a GPC, and on the H200 a grid of every resident cluster of 4
    (64 x 32 tiles, two blocks per multiprocessor) hung back to back with PDL and ran without it
    (bench/stress_b2b.py, bench/NOTES.md session 9): clusters of up to 2 start early only when the grid leaves
    room (fewer blocks than fit), larger clusters never."""
    return cl == 1 or (cl == 2 and grid < resident)


def _tc_plan(config, flags, dev, ints) -> _Launch:
    """fused3_tc's launch (see _persistent_plan)."""
    return _persistent_plan("fused3_tc", config, flags, dev, ints)


# Per (device, stream): [the stream (held, so that its handle is not reused while cached), the barrier's word
# (two uint32 that grid_barrier.cuh reads as one 8-byte word; the pool aligns to 512 bytes), the scratch
# buffer, the word's address]. Launches on one stream run in order (a PDL launch waits for its predecessor
# before touching either), so they share the (self-resetting) word and the scratch.
_streams: dict[tuple[int, int], list] = {}


def _persistent(a, b, c, out, kernel: str, config: str | Mapping[str, int], dev: int,
                fast_key: tuple | None = None):
    """E = a @ b @ c into ``out`` with a persistent kernel; arguments already checked, every dimension >= 1.
    ``fast_key``: as for _fused3."""
    m, k = a.shape
    p, n = c.shape
    ops, (lda, ldb, ldc, lde), flags, pointers = _operands(a, b, c, out)
    launch = _persistent_plan(kernel, config, flags, dev, (m, k, p, n, lda, ldb, ldc, lde))
    _run_persistent(launch, dev, pointers)
    if fast_key is not None:
        _remember(fast_key, launch, _run_persistent, dev, ops, (a, b, c, out))
    return out


def _run_persistent(launch: _Launch, dev: int, pointers: tuple[int, ...]) -> None:
    """Queue a persistent ``launch`` on ``dev``'s current stream with that stream's barrier word and scratch T
    (pointers: A, B, C, E)."""
    if dev != cupy.cuda.runtime.getDevice():
        with cupy.cuda.Device(dev):
            _run_persistent(launch, dev, pointers)
        return
    stream = cupy.cuda.get_current_stream()
    sp = stream.ptr
    state = _streams.get((dev, sp))
    if state is None:
        bar = cupy.zeros(2, dtype=cupy.uint32)
        state = _streams[(dev, sp)] = [stream, bar, None, bar.data.ptr]
    nbytes = launch.scratch
    if nbytes <= SCRATCH_CACHE_MAX:
        t = state[2]
        if t is None or t.mem.size < nbytes:
            state[2] = None  # back to the pool first
            t = state[2] = cupy.cuda.alloc(nbytes)
    else:
        t = cupy.cuda.alloc(nbytes)  # freed into the pool (stream-ordered) after the launch is queued
    launch((*pointers, t.ptr, state[3]), sp)


def _fused3_tc(a, b, c, out, config: str | Mapping[str, int], dev: int):
    """E = a @ b @ c into ``out`` with fused3_tc; arguments already checked, every dimension >= 1."""
    return _persistent(a, b, c, out, "fused3_tc", config, dev)


def _fused3_wg(a, b, c, out, config: str | Mapping[str, int], dev: int):
    """E = a @ b @ c into ``out`` with fused3_wg; arguments already checked, every dimension >= 1."""
    return _persistent(a, b, c, out, "fused3_wg", config, dev)


_chosen: dict[tuple, str | None] = {}  # (m, k, p, n, device) -> select()'s answer

# kernel= a fused kernel by name: (m, multiply-adds) -> its configuration for the chain
_FORCED = {
    "fused3": lambda m, fused: fused_config(m),
    "fused3_tc": lambda m, fused: tc_config_for(fused) or "tc128x128",
    "fused3_wg": lambda m, fused: wg_forced(fused),
}


class _Fast(NamedTuple):
    """A three-array chain's fused launch, kept under multi_dot's key of a call that passed every check."""

    launch: _Launch
    run: Callable  # _run_persistent (fused3_tc, fused3_wg: scratch and barrier word per stream) or _run_fused
    dev: int
    shape: tuple[int, int]  # the result's
    spans: tuple[int, int, int, int]  # bytes from A's, B's, C's and E's pointer to the end of its last element


# multi_dot's fast path. The key holds everything its checks and its plan depend on except the pointers:
# kernel=, each operand's shape, strides and device (dtypes are tested first), out's (or None when multi_dot
# allocates it) and the pointers' misalignment from 16 bytes. A call with a known key needs only the overlap
# test of out against the inputs (from the spans) before its launch: at n = 512 on the H200's host, 14.9 us per
# call against 25.4 through the checks and plan lookups (bench/NOTES.md, session 12).
_fast: dict[tuple, _Fast] = {}
_ND = cupy.ndarray


def _fast_call(arrays, kernel: str, out):
    """(E, None) where the call was launched by the fast path, else (None, the key to remember a launch under,
    or None where this call cannot have one)."""
    if (type(arrays) is not list and type(arrays) is not tuple) or len(arrays) != 3 or type(kernel) is not str:
        return None, None  # (an unhashable kernel= gets the checked path's message)
    a, b, c = arrays
    if not (type(a) is _ND and type(b) is _ND and type(c) is _ND
            and a.dtype is _F32 and b.dtype is _F32 and c.dtype is _F32):  # (the builtin dtype is a singleton)
        return None, None
    da, db, dc = a.data, b.data, c.data
    pa, pb, pc = da.ptr, db.ptr, dc.ptr
    if out is None:
        key = (kernel, a.shape, a.strides, da.device_id, b.shape, b.strides, db.device_id, c.shape, c.strides,
               dc.device_id, None, (pa & 15) | (pb & 15) << 4 | (pc & 15) << 8)
    elif type(out) is _ND and out.dtype is _F32:
        de = out.data
        pe = de.ptr
        key = (kernel, a.shape, a.strides, da.device_id, b.shape, b.strides, db.device_id, c.shape, c.strides,
               dc.device_id, (out.shape, out.strides, de.device_id),
               (pa & 15) | (pb & 15) << 4 | (pc & 15) << 8 | (pe & 15) << 12)
    else:
        return None, None
    plan = _fast.get(key)
    if plan is None:
        return None, key
    ea, eb, ec, ee = plan.spans
    if out is None:
        with cupy.cuda.Device(plan.dev) if plan.dev != cupy.cuda.runtime.getDevice() else contextlib.nullcontext():
            out = cupy.empty(plan.shape, dtype=_F32)
        pe = out.data.ptr
        if pe & 15:  # the plan assumed a 16-byte aligned E (the pool's are); the checked path plans for this one
            return None, None
    elif pe < pa + ea and pa < pe + ee or pe < pb + eb and pb < pe + ee or pe < pc + ec and pc < pe + ee:
        return None, None  # out overlaps an input: the checked path says which
    plan.run(plan.launch, plan.dev, (pa, pb, pc, pe))
    return out, None


def _span(x) -> int:
    """Bytes from a row-major float32 matrix's pointer to the end of its last element (as cupy's
    may_share_memory bounds it)."""
    (rows, cols), (s0, s1) = x.shape, x.strides
    return (rows - 1) * s0 + (cols - 1) * s1 + 4


def _remember(key: tuple, launch: _Launch, run: Callable, dev: int, ops, args) -> None:
    """Keep ``launch`` (queued by ``run``) under multi_dot's ``key`` if the call ran on its own arrays (``ops``
    are ``args``: no operand was copied to make it row-major)."""
    if any(x is not y for x, y in zip(ops, args, strict=True)):
        return
    if len(_fast) >= _LAUNCH_CACHE_MAX:
        _fast.clear()
    _fast[key] = _Fast(launch, run, dev, args[3].shape, tuple(_span(x) for x in args))


_orders: dict[tuple[int, ...], object] = {}  # dims -> chain_order(dims)


def _pairwise(arrays, dims, out):
    """The chain multiplied pairwise with cumm.matmul in the cheapest order; the last product goes into out."""
    key = tuple(dims)
    order = _orders.get(key)
    if order is None:  # (the dynamic program: 8.6 us per call for three arrays on the development host)
        if len(_orders) >= _LAUNCH_CACHE_MAX:
            _orders.clear()
        order = _orders[key] = chain_order(key)

    def run(node, dst=None):
        if isinstance(node, int):
            return arrays[node]
        return matmul(run(node[0]), run(node[1]), out=dst)

    return run(order, out)


def multi_dot(arrays, *, kernel: str = "auto", out=None):
    """The product of two or more 2-D float32 cupy arrays, like numpy.linalg.multi_dot.

    ``kernel``: "auto" (for three arrays a fused kernel when it pays, else pairwise cumm.matmul), "fused3",
    "fused3_tc" or "fused3_wg" (force that fused kernel; three arrays only) or "pairwise" (cumm.matmul calls
    in the cheapest order).
    ``out``: a C-contiguous (or row-major, unit column stride) float32 array of the result's shape that
    overlaps none of the inputs; returned.
    """
    done, fast_key = _fast_call(arrays, kernel, out)
    if done is not None:
        return done
    arrays = list(arrays)
    if len(arrays) < 2:
        raise ValueError(f"multi_dot needs at least two arrays, got {len(arrays)}")
    if kernel not in KERNELS:
        raise ValueError(f"unknown kernel {kernel!r} for multi_dot; use one of {list(KERNELS)}")
    if kernel in _FORCED and len(arrays) != 3:
        raise ValueError(f"kernel={kernel!r} multiplies exactly three arrays, got {len(arrays)}")
    for i, x in enumerate(arrays):
        check_operand(x, f"arrays[{i}]")
    shapes = [x.shape for x in arrays]
    dims = [shapes[0][0]]
    for i, (rows, cols) in enumerate(shapes):
        if rows != dims[-1]:
            raise ValueError(
                f"shapes {shapes[i - 1]} (arrays[{i - 1}]) and {shapes[i]} (arrays[{i}]) do not align: "
                f"{dims[-1]} columns against {rows} rows"
            )
        dims.append(cols)
    dev = arrays[0].data.device_id  # (x.device builds a Device object per call)
    for i, x in enumerate(arrays[1:], 1):
        if x.data.device_id != dev:
            raise ValueError(f"arrays[0] is on device {dev} and arrays[{i}] on device {x.data.device_id}; "
                             "put all on one device")
    if max(dims) > INT32_MAX:
        raise ValueError(f"dimensions must be below 2**31, got {dims}")
    m, n = dims[0], dims[-1]
    if out is None:
        with cupy.cuda.Device(dev) if dev != cupy.cuda.runtime.getDevice() else contextlib.nullcontext():
            out = cupy.empty((m, n), dtype=_F32)  # on the arrays' device, whichever is current
        if out.data.ptr & 15:  # the fast path's key for out=None assumes a 16-byte aligned E (the pool's are)
            fast_key = None
    else:
        check_out(out, arrays, m, n, dev)

    if len(arrays) == 2:
        return matmul(arrays[0], arrays[1], out=out)
    if len(arrays) == 3 and kernel != "pairwise" and min(dims) >= 1:
        _, k, p, _ = dims
        forced = _FORCED.get(kernel)
        if forced:
            config = forced(m, m * p * (k + n))
        else:
            key = (m, k, p, n, dev)
            config = _chosen.get(key, False)
            if config is False:
                if len(_chosen) >= _LAUNCH_CACHE_MAX:
                    _chosen.clear()
                config = _chosen[key] = select(m, k, p, n, compute_capability(dev))
        if config in PERSISTENT:
            return _persistent(arrays[0], arrays[1], arrays[2], out, PERSISTENT[config], config, dev, fast_key)
        if config is not None:
            return _fused3(arrays[0], arrays[1], arrays[2], out, config, dev, fast_key)
    if m == 0 or n == 0:
        return out
    return _pairwise(arrays, dims, out)
