"""cumm: GEMM kernels as CUDA source templates, compiled at run time by NVRTC through CuPy.

    >>> import cupy, cumm
    >>> a = cupy.random.standard_normal((4096, 4096), dtype=cupy.float32)
    >>> c = cumm.matmul(a, a, kernel="double_buffer")

The public API is what ``__all__`` lists; modules whose names start with an underscore are internal.
"""

try:
    import cupy as _cupy  # noqa: F401
except ImportError:  # pragma: no cover - exercised only without CuPy
    _cupy = None

from collections.abc import Mapping as _Mapping

if _cupy is None:  # the command line's --help and --version work; the API says what to install (core/install.py)
    from .core.install import missing_api as __getattr__  # noqa: F401
else:
    from .api.glu import glu_weight
    from .api.grouped import grouped_matmul
    from .api.matmul import matmul
    from .api.multi_dot import multi_dot
    from .api.scaled import scaled_matmul
    from .core.errors import CompileError, ConfigError, SharedMemoryError
    from .core.spec import Constraint, KernelSpec
    from .ladder import REGISTRY as _REGISTRY  # noqa: F401
    from .ladder import get_spec as _get_spec
    from .ladder import kernels
    from .ladder.registry import register, unregister
    from .plan.operands import SUPPORTED_DTYPES
    from .runtime.compile import CompiledKernel
    from .runtime.compile import compile_offline as _compile_offline
    from .tools.bench import bench
    from .tools.check import CheckReport, check
    from .tools.new import kernel_source
    from .tools.tune import tune

__version__ = "0.1.0"

__all__ = [
    "CheckReport",
    "CompileError",
    "CompiledKernel",
    "ConfigError",
    "Constraint",
    "KernelSpec",
    "SharedMemoryError",
    "SUPPORTED_DTYPES",
    "bench",
    "check",
    "compile",
    "kernel_source",
    "kernel_spec",
    "glu_weight",
    "grouped_matmul",
    "kernels",
    "matmul",
    "multi_dot",
    "register",
    "scaled_matmul",
    "tune",
    "unregister",
]


def kernel_spec(name: str) -> "KernelSpec":
    """The declarative spec of kernel ``name``: parameters, defaults, constraints, launch geometry."""
    return _get_spec(name)


def compile(
    kernel: str, config: "_Mapping[str, int] | None" = None, arch: str = "sm_90", *, aligned: bool = True
) -> "CompiledKernel":
    """Compile ``kernel`` for ``arch`` with NVRTC, without a GPU; report registers, spills, shared memory.

    ``config`` overrides any subset of the defaults for that architecture; ``aligned=False`` compiles the
    variant used when operands do not allow 16-byte accesses.
    """
    spec = _get_spec(kernel)
    if not isinstance(arch, str) or not arch.startswith("sm_") or not arch[3:].rstrip("a").isdigit():
        raise ValueError(f"arch must look like 'sm_80' or 'sm_90', got {arch!r}")
    cfg = spec.resolve(config, int(arch[3:].rstrip("a")))
    flags = (1, 1, 1) if aligned else (0, 0, 0)
    return _compile_offline(spec, cfg, arch, flags)


if _cupy is None:  # pragma: no cover
    del kernel_spec, compile  # the install hint instead (__getattr__)
