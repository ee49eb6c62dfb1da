"""Operand repacking (cumm/_repack.py): the decision rule on the CPU, the repacked products on the GPU."""

from __future__ import annotations

import math
import re
from importlib import resources

import pytest

import cumm
from cumm import _repack
from cumm._ladder import REGISTRY
from cumm._repack import loads_vectorized, padded_ld, repack_plan, should_repack

from .conftest import rel_err

TOL = 1e-5
VECTOR = ["vectorized", "bank_conflict_free", "warptile", "double_buffer"]


# --------------------------------------------------------------------------------------------------
# The decision (CPU)
# --------------------------------------------------------------------------------------------------


def test_large_misaligned_product_repacks_both_operands():
    assert should_repack(4095, 4095, 4095, "a") and should_repack(4095, 4095, 4095, "b")
    assert repack_plan(REGISTRY["warptile"], 4095, 4095, 4095, False, False) == (True, True)


@pytest.mark.parametrize("shape", [(127, 131, 137), (1031, 1029, 1027), (1, 1, 1), (33, 4097, 7)])
def test_small_products_do_not_repack(shape):
    M, N, K = shape
    assert not should_repack(M, N, K, "a") and not should_repack(M, N, K, "b")
    assert repack_plan(REGISTRY["warptile"], M, N, K, False, False) == (False, False)


def test_rule_is_the_cost_ratio():
    """Copy time <= MAX_COPY_FRACTION x product time, with the module's constants."""
    M, N, K = 4095, 4095, 4095
    copy = _repack.COPY_FIXED_S + 8 * M * K / _repack.COPY_BYTES_PER_S
    assert copy <= _repack.MAX_COPY_FRACTION * 2 * M * N * K / _repack.KERNEL_FLOPS_PER_S
    # A is reused N times and B M times: a skinny N never pays for copying A, a skinny M for copying B.
    assert not should_repack(8192, 64, 8191, "a") and should_repack(8192, 64, 8191, "b")
    assert should_repack(64, 8192, 8191, "a") and not should_repack(64, 8192, 8191, "b")
    assert not should_repack(8192, 8192, 5, "a")  # a tiny K: the copy's fixed cost dominates


def test_monotone_in_the_reuse_dimension():
    seen = [should_repack(4096, n, 4096, "a") for n in range(256, 8193, 256)]
    assert seen == sorted(seen) and seen[0] is False and seen[-1] is True


def test_kernels_without_vector_loads_never_repack():
    for name, spec in REGISTRY.items():
        if not spec.vector_loads:
            assert repack_plan(spec, 8191, 8191, 8191, False, False) == (False, False), name


def test_aligned_operands_never_repack():
    for name in VECTOR:
        spec = REGISTRY[name]
        assert repack_plan(spec, 8191, 8191, 8191, True, True) == (False, False), name
        assert repack_plan(spec, 8191, 8191, 8191, True, False) == (False, True), name
        assert repack_plan(spec, 8191, 8191, 8191, False, True) == (loads_vectorized(spec, "a"), False), name


def test_double_buffer_repacks_only_b():
    """Its A copies are 4-byte cp.async whatever VEC_A says, so copying A would buy nothing."""
    assert repack_plan(REGISTRY["double_buffer"], 4095, 4095, 4095, False, False) == (False, True)


def test_declared_vector_loads():
    for name in ("vectorized", "bank_conflict_free", "warptile"):
        assert REGISTRY[name].vector_loads is True, name
    assert REGISTRY["double_buffer"].vector_loads == "b"
    for name in ("naive", "coalesced", "smem", "blocktile_1d", "blocktile_2d"):
        assert not REGISTRY[name].vector_loads, name


@pytest.mark.parametrize("spec", [s for s in REGISTRY.values() if s.kind == "gemm" and s.vector_loads],
                         ids=lambda s: s.name)
def test_declared_operands_have_a_vector_path(spec):
    """A declared operand's flag must be used by the template (outside comments), or repacking buys nothing."""
    src = resources.files("cumm").joinpath("kernels", spec.template).read_text()
    code = re.sub(r"//[^\n]*", "", src)
    for which in "ab":
        if loads_vectorized(spec, which):
            assert f"VEC_{which.upper()}" in code, f"{spec.name} declares {which} but never uses VEC_{which.upper()}"


def test_prepare_replaces_only_the_planned_operands(monkeypatch):
    """prepare() on the CPU, with a stand-in for the copy: the right operand gets the right (buffer, ld)."""
    monkeypatch.setattr(_repack, "repack", lambda x: (f"packed {x}", 4096))
    warp, db = REGISTRY["warptile"], REGISTRY["double_buffer"]
    assert _repack.prepare(warp, 4095, 4095, 4095, "A", 4095, "B", 4095, (0, 0, 0)) == (
        "packed A", 4096, "packed B", 4096)
    assert _repack.prepare(db, 4095, 4095, 4095, "A", 4095, "B", 4095, (0, 0, 0)) == ("A", 4095, "packed B", 4096)
    assert _repack.prepare(warp, 4095, 4095, 4095, "A", 4096, "B", 4095, (1, 0, 0)) == (
        "A", 4096, "packed B", 4096)
    assert _repack.prepare(warp, 127, 131, 137, "A", 137, "B", 131, (0, 0, 0)) == ("A", 137, "B", 131)


def test_which_is_checked():
    with pytest.raises(ValueError, match="'a' or 'b'"):
        should_repack(4096, 4096, 4096, "c")


def test_padded_ld():
    assert [padded_ld(n) for n in (1, 3, 4, 5, 4095, 4096)] == [4, 4, 4, 8, 4096, 4096]


def test_env_switch_is_read_at_import():
    import os
    import subprocess
    import sys

    code = "import cumm._repack as r; print(r.ENABLED)"
    env = {**os.environ, "CUMM_REPACK": "0"}
    assert subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          check=True).stdout.strip() == "False"
    env["CUMM_REPACK"] = "1"
    assert subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          check=True).stdout.strip() == "True"


# --------------------------------------------------------------------------------------------------
# The repacked products (GPU)
# --------------------------------------------------------------------------------------------------

M, N, K = 1031, 1029, 1027  # below the threshold: the tests force the path by raising the allowed fraction


@pytest.fixture
def forced(monkeypatch):
    """Repack whenever a vector-load kernel's operand is unaligned; record what was repacked.

    The padding columns are set to NaN: a kernel that read them would poison the result.
    """
    calls = []
    real = _repack.repack

    def spy(x):
        buf, ld = real(x)
        buf[:, x.shape[1]:] = math.nan
        calls.append((x.shape, ld, buf.data.ptr))
        return buf, ld

    monkeypatch.setattr(_repack, "ENABLED", True)
    monkeypatch.setattr(_repack, "MAX_COPY_FRACTION", math.inf)
    monkeypatch.setattr(_repack, "repack", spy)
    return calls


def _check(kernel, a, b, calls, expect):
    import cupy

    a0, b0 = a.copy(), b.copy()
    ref = a.astype(cupy.float64) @ b.astype(cupy.float64)
    out = cupy.full((a.shape[0], b.shape[1]), math.nan, dtype=cupy.float32)
    calls.clear()
    cumm.matmul(a, b, kernel=kernel, out=out)
    assert [shape for shape, _, _ in calls] == expect, calls
    for shape, ld, ptr in calls:
        assert ld % 4 == 0 and ld >= shape[1] and ptr % 16 == 0
    err = rel_err(out, ref)
    assert err < TOL, f"{kernel}: relative error {err:.3e}"
    assert (a == a0).all() and (b == b0).all(), "an input was modified"


def _expected(kernel, a_shape, b_shape):
    spec = cumm.kernel_spec(kernel)
    return [s for w, s in (("a", a_shape), ("b", b_shape)) if loads_vectorized(spec, w)]


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", VECTOR + ["auto"])
def test_repacked_contiguous_operands(kernel, rng, forced):
    import cupy

    a = rng.standard_normal((M, K), dtype=cupy.float32)  # lda = K = 1027, ldb = N = 1029: not multiples of 4
    b = rng.standard_normal((K, N), dtype=cupy.float32)
    from cumm import _auto

    name = kernel if kernel != "auto" else _auto.select(M, N, K, a.device.id, None)[0]
    _check(kernel, a, b, forced, _expected(name, (M, K), (K, N)))


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", VECTOR)
def test_repacked_misaligned_views(kernel, rng, forced):
    import cupy

    big_a = rng.standard_normal((M + 1, K + 5), dtype=cupy.float32)
    big_b = rng.standard_normal((K + 2, N + 4), dtype=cupy.float32)  # ldb = N + 4, a multiple of 4...
    a = big_a[1:, 1 : K + 1]
    b = big_b[2:, 3 : N + 3]  # ... but the pointer is 3 floats off
    _check(kernel, a, b, forced, _expected(kernel, (M, K), (K, N)))


@pytest.mark.gpu
def test_repacked_with_beta_and_aligned_partner(rng, forced):
    """Only the unaligned operand is copied; out (read with beta != 0) is never copied."""
    import cupy

    a = rng.standard_normal((M, 1028), dtype=cupy.float32)  # aligned: lda = 1028
    b = rng.standard_normal((1028, N), dtype=cupy.float32)
    c0 = rng.standard_normal((M, N), dtype=cupy.float32)
    out = c0.copy()
    cumm.matmul(a, b, kernel="warptile", out=out, alpha=0.5, beta=-1.0)
    assert [shape for shape, _, _ in forced] == [(1028, N)]
    ref = 0.5 * (a.astype(cupy.float64) @ b.astype(cupy.float64)) - c0.astype(cupy.float64)
    assert rel_err(out, ref) < TOL


@pytest.mark.gpu
def test_disabled_and_default_threshold_do_not_repack(rng, forced, monkeypatch):
    import cupy

    a = rng.standard_normal((M, K), dtype=cupy.float32)
    b = rng.standard_normal((K, N), dtype=cupy.float32)
    monkeypatch.setattr(_repack, "ENABLED", False)
    _check("warptile", a, b, forced, [])
    monkeypatch.setattr(_repack, "ENABLED", True)
    monkeypatch.setattr(_repack, "MAX_COPY_FRACTION", 0.03)
    _check("warptile", a, b, forced, [])  # 1031 x 1029 x 1027 is below the default threshold
    _check("smem", a, b, forced, [])  # no vector loads: never repacked
