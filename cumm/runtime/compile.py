"""Compilation: offline (NVRTC, no GPU needed) and for a device (CuPy RawKernel, cached).

``compile_offline`` runs NVRTC directly through CuPy's bindings and reads registers, spills and shared
memory from ptxas's report; it needs neither a GPU nor a driver. ``device_kernel`` compiles through
CuPy for a device, keeps one kernel per (kernel, configuration, flags, device) in process and relies on
CuPy's on-disk cache across processes (for the sm_90a cubins, cumm's own verified one: ``runtime.cache``).
Concurrent requests for the same new configuration compile it once.
"""

from __future__ import annotations

import ctypes
import hashlib
import re
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from ..core.errors import CompileError, ConfigError, SharedMemoryError
from ..core.spec import Config, KernelSpec
from . import cache as _cache
from .render import ALIGNED, render, snippet_errors, template_hash, variant

# CuPy adds -ftz=true and its own -arch when it compiles; offline compiles add the same so that the
# register report matches what runs.
NVRTC_OPTIONS = ("-std=c++17",)
# An epilogue variant's `/` (a user's snippet: `v / (1.0f + __expf(-v))`) as the fast division (div.full: 2 ulp,
# branch-free) instead of IEEE's reciprocal, check and called slow path per element, which kept the scheduler from
# overlapping elements. Variants without an epilogue compile as before.
EPILOGUE_OPTIONS = ("-prec-div=false",)


def options(flags) -> tuple[str, ...]:
    """NVRTC's options for the compile variant ``flags`` (before -ftz and -arch)."""
    return NVRTC_OPTIONS + EPILOGUE_OPTIONS if variant(flags).epilogue is not None else NVRTC_OPTIONS


DEFAULT_SMEM_LIMIT = 48 * 1024


@dataclass(frozen=True)
class CompiledKernel:
    """What NVRTC and ptxas made of one configuration for one architecture."""

    kernel: str
    config: dict[str, int]
    arch: str
    name: str
    cubin: bytes = field(repr=False)
    registers: int
    spill_stores: int
    spill_loads: int
    stack_bytes: int
    static_shared_bytes: int
    dynamic_shared_bytes: int
    threads: int
    log: str = field(repr=False)

    @property
    def spill_bytes(self) -> int:
        return self.spill_stores + self.spill_loads

    @property
    def shared_bytes(self) -> int:
        return self.static_shared_bytes + self.dynamic_shared_bytes


_ARCH_RE = re.compile(r"sm_(\d{2,3})a?")


def _parse_ptxas(log: str, name: str) -> dict[str, int]:
    # ptxas reports each entry function; ours has exactly one.
    section = log[log.find(f"Compiling entry function '{name}'") :]

    def grab(pattern: str) -> int:
        m = re.search(pattern, section)
        return int(m.group(1)) if m else 0

    return dict(
        registers=grab(r"Used (\d+) registers"),
        stack_bytes=grab(r"(\d+) bytes stack frame"),
        spill_stores=grab(r"(\d+) bytes spill stores"),
        spill_loads=grab(r"(\d+) bytes spill loads"),
        static_shared_bytes=grab(r"(\d+) bytes smem"),
    )


def _cubin(nvrtc, prog: int) -> bytes:
    """The program's cubin, whole. CuPy's getCUBIN drops the last byte (it treats the buffer like
    NUL-terminated PTX), which truncates the ELF's program headers; ask the loaded NVRTC directly."""
    try:
        lib = ctypes.CDLL(f"libnvrtc.so.{nvrtc.getVersion()[0]}")  # the copy CuPy already loaded
        size = ctypes.c_size_t()
        if lib.nvrtcGetCUBINSize(ctypes.c_void_p(prog), ctypes.byref(size)) == 0:
            buf = ctypes.create_string_buffer(size.value)
            if lib.nvrtcGetCUBIN(ctypes.c_void_p(prog), buf) == 0:
                return buf.raw
    except (OSError, AttributeError):
        pass
    return nvrtc.getCUBIN(prog)


def _nvrtc_compile(nvrtc, spec: KernelSpec, cfg: Config, arch: str, source: str, options: list[str]):
    prog = nvrtc.createProgram(source, f"{spec.name}.cu", [], [])
    try:
        try:
            nvrtc.compileProgram(prog, options)
        except nvrtc.NVRTCError as e:
            log = nvrtc.getProgramLog(prog)
            raise CompileError(
                f"NVRTC failed to compile kernel {spec.name!r} for {arch} with {dict(cfg)}: {e}\n"
                f"{snippet_errors(log, source)}{log}",
                log=log,
                source=source,
            ) from None
        return nvrtc.getProgramLog(prog).rstrip("\x00"), _cubin(nvrtc, prog)
    finally:
        nvrtc.destroyProgram(prog)


def compile_offline(spec: KernelSpec, cfg: Config, arch: str = "sm_90", flags=ALIGNED) -> CompiledKernel:
    from cupy.cuda import nvrtc

    if not isinstance(arch, str) or not _ARCH_RE.fullmatch(arch):
        raise ValueError(f"arch must look like 'sm_80' or 'sm_90', got {arch!r}")
    cc = int(arch[3:].rstrip("a"))
    spec.check_cc(cc, arch)
    arch = spec.target(cc) if spec.arch_specific else arch
    name, source = render(spec, cfg, flags)
    opts = [*options(flags), "-ftz=true", f"-arch={arch}", "--ptxas-options=-v"]
    log, cubin = _nvrtc_compile(nvrtc, spec, cfg, arch, source, opts)
    if f"Compiling entry function '{name}'" not in log:
        # Seen with NVRTC 13 on the H200 machine (driver 580): PTX it has compiled before is served from the
        # driver's compute cache (~/.nv/ComputeCache) without running ptxas, so the log has no report
        # (CUDA_CACHE_DISABLE=1 at process start avoids it). An unused, uniquely named global makes the
        # PTX new, so ptxas runs and reports; the kernel's code is unchanged.
        fresh = f"{source}\n__device__ int cumm_fresh_{uuid.uuid4().hex};  // forces a ptxas run\n"
        log, cubin = _nvrtc_compile(nvrtc, spec, cfg, arch, fresh, opts)
        if f"Compiling entry function '{name}'" not in log:
            raise CompileError(
                f"NVRTC compiled kernel {spec.name!r} for {arch} but returned no ptxas report (registers, "
                f"spills); log: {log!r}",
                log=log,
                source=source,
            )
    return CompiledKernel(
        kernel=spec.name,
        config=dict(cfg),
        arch=arch,
        name=name,
        cubin=cubin,
        dynamic_shared_bytes=spec.smem(cfg),
        threads=spec.threads(cfg),
        log=log,
        **_parse_ptxas(log, name),
    )


# ---------------------------------------------------------------------------------------------------
# Device compilation
# ---------------------------------------------------------------------------------------------------

_kernels: dict[tuple, object] = {}
_key_locks: dict[tuple, threading.Lock] = {}
_registry_lock = threading.Lock()
stats = {"compiles": 0, "compile_seconds": 0.0}  # read by tests and the bench report


def device_kernel(spec: KernelSpec, cfg: Config, flags: tuple[int, ...], device_id: int):
    """A compiled, launch-ready ``cupy.RawKernel`` for ``cfg`` on ``device_id`` (cached)."""
    # The template's hash: a kernel registered again (cumm.register(..., replace=True)) with other code
    # never gets one compiled from the old text.
    flags = variant(flags)  # (1, 1, 1) and Variant() are one kernel
    key = (spec.name, template_hash(spec), tuple(cfg[k] for k in spec.params), flags, device_id)
    kern = _kernels.get(key)
    if kern is not None:
        return kern
    with _registry_lock:
        lock = _key_locks.setdefault(key, threading.Lock())
    with lock:
        kern = _kernels.get(key)
        if kern is None:
            name, source = render(spec, cfg, flags)
            kern = _kernels[key] = _build(spec, cfg, flags, device_id, name, source)
    return kern


def _build(spec: KernelSpec, cfg: Config, flags, device_id: int, name: str, source: str):
    """Compile ``source`` (``render``'s, whose function is ``name``) for ``device_id`` and check its resources."""
    import cupy
    from cupy.cuda.compiler import CompileException

    t0 = time.perf_counter()
    with cupy.cuda.Device(device_id) as dev:
        dynamic = spec.smem(cfg)
        limit = dev.attributes.get("MaxSharedMemoryPerBlockOptin", DEFAULT_SMEM_LIMIT)

        def too_much(static: int) -> SharedMemoryError:
            return SharedMemoryError(
                f"kernel {spec.name!r} with {dict(cfg)} needs {static + dynamic} bytes of shared memory per "
                f"block ({static} static + {dynamic} dynamic); device {device_id} allows {limit}"
            )

        if dynamic > limit:  # known before compiling
            raise too_much(0)
        if spec.arch_specific:
            kern = _arch_specific_kernel(spec, cfg, name, source, int(dev.compute_capability), options(flags))
        else:
            kern = cupy.RawKernel(source, name, options=options(flags))
            try:
                kern.compile()
            except CompileException as e:
                raise CompileError(
                    f"NVRTC failed to compile kernel {spec.name!r} with {dict(cfg)}:\n{snippet_errors(str(e), source)}"
                    f"{e}",
                    log=str(e),
                    source=source,
                ) from None
        static = kern.shared_size_bytes
        if static + dynamic > limit:
            raise too_much(static)
        if dynamic > DEFAULT_SMEM_LIMIT - static:
            kern.max_dynamic_shared_size_bytes = dynamic  # opt in past the 48 KB default
        threads = spec.threads(cfg)
        if kern.max_threads_per_block < threads:
            raise ConfigError(
                f"kernel {spec.name!r} with {dict(cfg)} uses {kern.num_regs} registers per thread, so at most "
                f"{kern.max_threads_per_block} threads fit in a block on device {device_id}; it needs {threads}"
            )
    stats["compiles"] += 1
    stats["compile_seconds"] += time.perf_counter() - t0
    return kern


class ArchKernel:
    """A kernel compiled for an architecture-specific target (sm_90a) and loaded as a module.

    CuPy's RawKernel always compiles for the plain architecture (sm_90), which has no wgmma. This offers
    the part of RawKernel's interface cumm uses: ``kernel`` (the cupy Function), the attributes below and
    the call."""

    def __init__(self, module, name: str):
        self.module = module  # the Function does not keep its module loaded
        self.kernel = module.get_function(name)

    def _attribute(self, which: str) -> int:
        from cupy_backends.cuda.api import driver

        return driver.funcGetAttribute(getattr(driver, f"CU_FUNC_ATTRIBUTE_{which}"), self.kernel.ptr)

    def _set_max_dynamic_shared(self, value: int) -> None:
        from cupy_backends.cuda.api import driver

        driver.funcSetAttribute(self.kernel.ptr, driver.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, value)

    # RawKernel's attribute names, read from the driver (CU_FUNC_ATTRIBUTE_<name>)
    num_regs = property(lambda self: self._attribute("NUM_REGS"))
    shared_size_bytes = property(lambda self: self._attribute("SHARED_SIZE_BYTES"))
    max_threads_per_block = property(lambda self: self._attribute("MAX_THREADS_PER_BLOCK"))
    max_dynamic_shared_size_bytes = property(
        lambda self: self._attribute("MAX_DYNAMIC_SHARED_SIZE_BYTES"), _set_max_dynamic_shared
    )

    def __call__(self, grid, block, args, *, shared_mem: int = 0, stream=None):
        self.kernel(grid, block, args, shared_mem=shared_mem, stream=stream)


def _arch_specific_kernel(
    spec: KernelSpec, cfg: Config, name: str, source: str, cc: int, opts: tuple[str, ...] = NVRTC_OPTIONS
) -> ArchKernel:
    """Compile ``source`` for sm_<cc>a with NVRTC (cubin cached on disk, see :func:`arch_specific_cubin`) and
    load it into the current device's context. A cached cubin the driver refuses is set aside and rebuilt."""
    from cupy.cuda import function
    from cupy_backends.cuda.api.driver import CUDADriverError

    def load(cubin: bytes) -> ArchKernel:
        module = function.Module()
        module.load(cubin)
        return ArchKernel(module, name)

    return arch_specific_cubin(spec, cfg, name, source, cc, load=load, load_errors=(CUDADriverError,), opts=opts)


def cubin_path(name: str, source: str, options: list[str], nvrtc_version) -> Path:
    """Where the cubin of ``source`` compiled with ``options`` by that NVRTC is cached."""
    parts = [_cache.FORMAT.decode(), source, *options, str(nvrtc_version)]
    key = hashlib.sha256("\0".join(parts).encode()).hexdigest()[:24]
    return _cache.cache_dir() / "cubin" / f"{name}-{key}.cubin"


def arch_specific_cubin(
    spec: KernelSpec,
    cfg: Config,
    name: str,
    source: str,
    cc: int,
    load=None,
    load_errors=(),
    opts: tuple[str, ...] = NVRTC_OPTIONS,
):
    """The cubin of ``source`` for sm_<cc>a (no GPU needed), from the disk cache if a verified one is there, else
    compiled by NVRTC and cached (keyed by source, options and NVRTC version); through ``load`` when given.
    A cached file that does not verify, or whose ``load`` raises one of ``load_errors``, is set aside with a
    warning and the cubin compiled again (:mod:`cumm.runtime.cache`)."""
    from cupy.cuda import nvrtc

    full = [*opts, "-ftz=true", f"-arch={spec.target(cc)}"]
    path = cubin_path(name, source, full, nvrtc.getVersion())

    def build() -> bytes:
        return _nvrtc_compile(nvrtc, spec, cfg, full[-1][6:], source, full)[1]

    return _cache.fetch(path, build, load, load_errors)


# ---------------------------------------------------------------------------------------------------
# Auxiliary kernels (split-K reduction, edge strips, repacking): fixed sources, no configuration
# ---------------------------------------------------------------------------------------------------


# template -> its extern "C" functions; every auxiliary kernel is listed here (the CPU tests compile them all)
AUX_KERNELS: dict[str, tuple[str, ...]] = {
    "auxiliary/splitk_reduce.cu": ("cumm_splitk_reduce",),
    "auxiliary/edge_strip.cu": ("cumm_edge_rows", "cumm_edge_cols"),
    "auxiliary/repack.cu": ("cumm_repack", "cumm_unpack"),
    "auxiliary/transpose.cu": ("cumm_transpose_b16", "cumm_transpose_b32"),
    "auxiliary/pieces.cu": ("cumm_pieces_rows", "cumm_pieces_colmax", "cumm_pieces_cols"),
}
# Headers an auxiliary kernel takes after common.cuh (pieces.cu: tc16.cuh's FP16 conversions)
AUX_HEADERS: dict[str, tuple[str, ...]] = {"auxiliary/pieces.cu": ("include/tc16.cuh",)}


def aux_source(template: str) -> str:
    """common.cuh, the template's AUX_HEADERS, then ``template`` (files of cumm/kernels): the whole source of an
    auxiliary kernel."""
    from .render import COMMON_HEADER, template_text

    parts = (COMMON_HEADER, *AUX_HEADERS.get(template, ()), template)
    return "\n".join(line for f in parts for line in (f'#line 1 "{f}"', template_text(f)))


_aux: dict[tuple, tuple] = {}
_aux_lock = threading.Lock()


def aux_kernels(template: str, names: tuple[str, ...], device_id: int) -> tuple:
    """The ``extern "C"`` functions ``names`` of ``template`` as cupy RawKernels for ``device_id`` (compiled
    once per process and device; CuPy's disk cache keeps them across processes)."""
    key = (template, names, device_id)
    hit = _aux.get(key)
    if hit is None:
        import cupy

        with _aux_lock:
            hit = _aux.get(key)
            if hit is None:
                with cupy.cuda.Device(device_id):
                    mod = cupy.RawModule(code=aux_source(template), options=NVRTC_OPTIONS)
                    hit = _aux[key] = tuple(mod.get_function(n) for n in names)
    return hit
