"""The ladder: every rung's spec, discovered in its folder, in ladder order.

A rung is a folder ``cumm/kernels/<kind>/<NN_name>/`` holding ``kernel.cu`` (the CUDA template) and ``spec.py``
(a module that defines ``SPEC``, its :class:`~cumm.KernelSpec`: parameters, defaults, constraints, launch geometry
and its own policy hooks). The folders are loaded here, the matrix-product ladder (``gemm``, ordered by their
numbers) before the chain kernels (``chain``) and the grouped-product kernels (``grouped``), and each goes
through the same checks as a user's kernel (:func:`cumm.register`). Adding a rung = adding a folder; nothing else
names kernels. Spec pieces that several rungs share are in :mod:`cumm.ladder.common`.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from ..core.dtypes import DTYPES
from ..core.spec import KernelSpec
from .registry import REGISTRY, add

KERNELS = Path(__file__).resolve().parent.parent / "kernels"
KINDS = ("gemm", "chain", "grouped")  # the folders of rungs under KERNELS, loaded in this order
_MODULES: dict[str, ModuleType] = {}  # rung name -> its spec module


def load_spec_file(path: str | Path, module_name: str | None = None) -> ModuleType:
    """Import the spec file at ``path`` as a module (a rung's folder is not a Python package: its name starts
    with its number)."""
    path = Path(path)
    module_name = module_name or f"cumm_user_spec_{path.parent.name}"
    loader = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(loader)
    sys.modules[module_name] = module  # (dataclasses and inspect look a module up by name)
    loader.loader.exec_module(module)
    return module


def _discover() -> None:
    for kind in KINDS:
        for spec_file in sorted((KERNELS / kind).glob("*/spec.py")):
            module = load_spec_file(spec_file, f"cumm.ladder.rungs.{spec_file.parent.name}")
            spec = getattr(module, "SPEC", None)
            if not isinstance(spec, KernelSpec) or spec.kind != kind:
                raise TypeError(f"{spec_file} must define SPEC, a KernelSpec of kind {kind!r}")
            _MODULES[spec.name] = module
            add(spec, builtin=True)


def rung_module(name: str) -> ModuleType:
    """The spec module of the ladder's rung ``name`` (its policy constants and hooks)."""
    try:
        return _MODULES[name]
    except KeyError:
        raise ValueError(f"{name!r} is not one of the ladder's rungs: {list(_MODULES)}") from None


def get_spec(name: str) -> KernelSpec:
    try:
        return REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown kernel {name!r}; the kernels are {list(REGISTRY)}") from None


def split_kernels() -> list[str]:
    """The rungs whose spec splits K (``split_k``), in ladder order."""
    return [n for n, s in REGISTRY.items() if s.split_k]


def split_refusal(name: str, splits: int) -> ValueError:
    """The error for ``split_k=splits`` > 1 on rung ``name``, whose spec does not split K."""
    return ValueError(
        f"kernel {name!r} does not support split_k={splits}; the kernels that do are {split_kernels()} "
        "(or kernel='auto')"
    )


def gemm_kernels() -> list[str]:
    return [n for n, s in REGISTRY.items() if s.kind == "gemm"]


def kernels(kind: str = "gemm", dtype: str | None = None) -> list[str]:
    """Kernel names in ladder order (``kind="gemm"``: usable with :func:`matmul`; ``"chain"``: :func:`multi_dot`);
    ``dtype`` ("float32", "float16", "bfloat16"): only the rungs that multiply arrays of that dtype."""
    if dtype is not None and dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    return [n for n, s in REGISTRY.items() if s.kind == kind and (dtype is None or dtype in s.dtypes)]


_discover()
