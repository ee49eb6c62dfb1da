"""Shared fixtures. GPU tests carry the ``gpu`` marker and are skipped, with the reason, without a GPU; tests of
two GPUs carry ``multigpu`` and are skipped, with the reason, where fewer than two are present."""

from __future__ import annotations

import os

import pytest

try:
    from hypothesis import HealthCheck, settings
except ImportError:  # (a test run without the test extra: the hypothesis tests fail to import, not every test)
    settings = None

# hypothesis profiles for tests/test_property.py (tests that set max_examples themselves keep theirs):
# "default" is the GPU suite's fixed budget; "long" (pytest --hypothesis-profile=long tests/test_property.py) is a
# device session's, >= 50,000 examples (CUMM_LONG_EXAMPLES: a share of them, for several processes in parallel,
# each drawing its own random examples). No example database: a failure prints its reproduction (print_blob).
if settings is not None:
    _PROFILE = dict(deadline=None, database=None, print_blob=True, suppress_health_check=[HealthCheck.too_slow])
    settings.register_profile("default", max_examples=100, **_PROFILE)
    settings.register_profile("long", max_examples=int(os.environ.get("CUMM_LONG_EXAMPLES", 52_000)), **_PROFILE)
PROPERTY_EXAMPLES = [0]  # examples run by tests/test_property.py, printed at the end of the session


def pytest_terminal_summary(terminalreporter):
    if PROPERTY_EXAMPLES[0]:
        terminalreporter.write_line(f"hypothesis: {PROPERTY_EXAMPLES[0]} examples of cumm.matmul run (test_property)")


def _gpu_skip_reason() -> str | None:
    from cumm.runtime.timing import gpu_unavailable

    return gpu_unavailable()


GPU_SKIP_REASON = _gpu_skip_reason()


def _multigpu_skip_reason() -> str | None:
    if GPU_SKIP_REASON is not None:
        return GPU_SKIP_REASON
    import cupy

    n = cupy.cuda.runtime.getDeviceCount()
    return None if n >= 2 else f"needs two CUDA GPUs; this machine has {n}"


MULTIGPU_SKIP_REASON = _multigpu_skip_reason()


def pytest_collection_modifyitems(config, items):
    for marker, reason in (("gpu", GPU_SKIP_REASON), ("multigpu", MULTIGPU_SKIP_REASON)):
        if reason is None:
            continue
        skip = pytest.mark.skip(reason=reason)
        for item in items:
            if marker in item.keywords:
                item.add_marker(skip)


@pytest.fixture
def sm90():
    """Skip a GPU test of an sm_90a-only rung (wgmma, wgmma_ws, wgmma_tf32x3) on another compute capability."""
    import cupy

    cc = int(cupy.cuda.Device().compute_capability)
    if cc != 90:
        pytest.skip(f"the warpgroup (wgmma) rungs run on compute capability 9.0 (sm_90a) only; this GPU is {cc}")


@pytest.fixture
def rng():
    """Fresh random normal data for every test (never zeros); the seed is printed on failure."""
    import cupy
    import numpy as np

    seed = int(np.random.SeedSequence().entropy % 2**31)
    print(f"random seed {seed}")
    return cupy.random.default_rng(seed)


def check_alpha_beta(rng, M: int, N: int, K: int, tol: float, **matmul_kwargs) -> None:
    """cumm.matmul with alpha = -0.5, beta = 2 against float64; then beta = 0 into a NaN-filled out, which
    must not be read (NaN * 0 is NaN)."""
    import math

    import cupy

    import cumm

    a = rng.standard_normal((M, K), dtype=cupy.float32)
    b = rng.standard_normal((K, N), dtype=cupy.float32)
    ref = a.astype(cupy.float64) @ b.astype(cupy.float64)
    c0 = rng.standard_normal((M, N), dtype=cupy.float32)
    out = c0.copy()
    cumm.matmul(a, b, out=out, alpha=-0.5, beta=2.0, **matmul_kwargs)
    assert rel_err(out, -0.5 * ref + 2.0 * c0.astype(cupy.float64)) < tol
    out = cupy.full((M, N), math.nan, dtype=cupy.float32)
    cumm.matmul(a, b, out=out, alpha=3.0, **matmul_kwargs)
    assert rel_err(out, 3.0 * ref) < tol


def rel_err(c, ref) -> float:
    import cupy

    c64 = cupy.asarray(c).astype(cupy.float64)  # (a torch tensor through __cuda_array_interface__)
    num = float(cupy.linalg.norm(c64 - ref))
    den = float(cupy.linalg.norm(ref))
    return num / den if den else num


@pytest.fixture
def clean_registry():
    """Whatever a test registers is gone afterwards (other tests iterate over the kernels)."""
    from cumm.ladder import registry as _register
    from cumm.runtime import render as _render

    before = dict(_register.REGISTRY)
    yield
    for name in list(_register.REGISTRY):
        if name not in before:
            del _register.REGISTRY[name]
        elif _register.REGISTRY[name] is not before[name]:
            _register.REGISTRY[name] = before[name]
    _render.template_hash.cache_clear()
