"""Shared fixtures. GPU tests carry the ``gpu`` marker and are skipped, with the reason, without a GPU."""

from __future__ import annotations

import pytest


def _gpu_skip_reason() -> str | None:
    from cumm._bench import gpu_unavailable

    return gpu_unavailable()


GPU_SKIP_REASON = _gpu_skip_reason()


def pytest_collection_modifyitems(config, items):
    if GPU_SKIP_REASON is None:
        return
    skip = pytest.mark.skip(reason=GPU_SKIP_REASON)
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def rng():
    """Fresh random normal data for every test (never zeros); the seed is printed on failure."""
    import cupy
    import numpy as np

    seed = int(np.random.SeedSequence().entropy % 2**31)
    print(f"random seed {seed}")
    return cupy.random.default_rng(seed)


def rel_err(c, ref) -> float:
    import cupy

    c64 = c.astype(cupy.float64)
    num = float(cupy.linalg.norm(c64 - ref))
    den = float(cupy.linalg.norm(ref))
    return num / den if den else num
