"""What to install when CuPy is missing. ``import cumm`` works without it, so that ``cumm --help`` and ``cumm
--version`` do; the API (``cumm.matmul`` and the rest of ``cumm.__all__``) and the GPU commands say this instead."""

from __future__ import annotations

import sys

HINT = (
    "cumm needs CuPy, which is not installed. Install cumm with the extra for your CUDA version, which brings "
    'CuPy, NVRTC and the CUDA runtime headers from PyPI; from a clone of the repository: pip install ".[cuda12]" '
    '(CUDA 12) or pip install ".[cuda13]" (CUDA 13). (pip install cumm would install PyPI\'s unrelated "cumm".)'
)


def cupy_missing() -> str | None:
    """None if CuPy imports, else :data:`HINT`."""
    try:
        import cupy  # noqa: F401
    except ImportError:
        return HINT
    return None


def missing_api(name: str):
    """``cumm.__getattr__`` without CuPy: a public name raises ImportError with :data:`HINT`."""
    if name in vars(sys.modules["cumm"]).get("__all__", ()):
        raise ImportError(f"cumm.{name}: {HINT}", name="cupy")
    raise AttributeError(f"module 'cumm' has no attribute {name!r}")
