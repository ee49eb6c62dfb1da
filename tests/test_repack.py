"""Operand repacking (cumm/plan/repack.py): the decision rule on the CPU, the repacked products on the GPU."""

from __future__ import annotations

import dataclasses
import math
import re
from importlib import resources

import pytest

import cumm
from cumm.ladder import REGISTRY
from cumm.plan import plan as _plan
from cumm.plan import repack as _repack
from cumm.plan.repack import loads_vectorized, padded_ld, repack_plan, should_repack, should_stage_out

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


def test_copy_engine_rows_pay_on_large_products_only():
    """Rows the copy engine cannot read are copied into rows on 16 bytes when the copy costs at most
    TMA_COPY_FRACTION of the product on the copy-engine rung (else its fallback rung runs)."""
    from cumm.plan.repack import pads_for_copy_engine

    assert pads_for_copy_engine(4096, 50257, 4096, "b", 2)  # a vocabulary-sized N: B copied
    assert pads_for_copy_engine(4096, 4097, 4096, "a", 2) and pads_for_copy_engine(4096, 4097, 4096, "a", 4)
    assert not pads_for_copy_engine(127, 131, 137, "a", 2) and not pads_for_copy_engine(127, 131, 137, "b", 2)
    assert not pads_for_copy_engine(64, 8192, 8191, "b", 2)  # B used by 64 rows only: the fallback
    M, N, K = 2048, 4101, 512
    copy = _repack.COPY_FIXED_S + 2 * 2 * K * N / _repack.COPY_BYTES_PER_S
    want = copy <= _repack.TMA_COPY_FRACTION * 2 * M * N * K / _repack.TMA_FLOPS_PER_S[2]
    assert pads_for_copy_engine(M, N, K, "b", 2) == want == True  # noqa: E712


def test_copy_engine_rows_are_padded_to_128_bytes():
    """Copies for the copy engine keep the 256-byte L2 promotion: rows of 128 bytes or more padded to 128."""
    from cumm.plan.repack import copy_engine_ld
    from cumm.runtime.tmaps import MapSpec, l2_promotion

    assert copy_engine_ld(50257, 2) == 50304 and copy_engine_ld(4101, 4) == 4128 and copy_engine_ld(64, 2) == 64
    assert copy_engine_ld(7, 2) == 8 and copy_engine_ld(1, 4) == 4 and copy_engine_ld(63, 2) == 64
    for cols, item in ((50257, 2), (4101, 4), (65, 2), (33, 4)):
        ld = copy_engine_ld(cols, item)
        assert l2_promotion(MapSpec(1, cols, 100, ld, 64, 64, 3, item)) == 3


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


def test_an_operand_declared_alone_is_the_only_one_copied():
    """vector_loads="b": a kernel whose A loads are not 16-byte gains nothing from a copy of A."""
    only_b = dataclasses.replace(REGISTRY["warptile"], vector_loads="b")
    assert repack_plan(only_b, 4095, 4095, 4095, False, False) == (False, True)


def test_declared_vector_loads():
    for name in ("vectorized", "bank_conflict_free", "warptile", "double_buffer"):
        assert REGISTRY[name].vector_loads is True, name
    for name in ("naive", "coalesced", "smem", "blocktile_1d", "blocktile_2d"):
        assert not REGISTRY[name].vector_loads, name


@pytest.mark.parametrize(
    "spec", [s for s in REGISTRY.values() if s.kind == "gemm" and s.vector_loads], ids=lambda s: s.name
)
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
    warp, db = REGISTRY["warptile"], dataclasses.replace(REGISTRY["warptile"], vector_loads="b")
    assert _repack.prepare(warp, 4095, 4095, 4095, "A", 4095, "B", 4095, (0, 0, 0)) == (
        "packed A",
        4096,
        "packed B",
        4096,
    )
    assert _repack.prepare(db, 4095, 4095, 4095, "A", 4095, "B", 4095, (0, 0, 0)) == ("A", 4095, "packed B", 4096)
    assert _repack.prepare(warp, 4095, 4095, 4095, "A", 4096, "B", 4095, (1, 0, 0)) == ("A", 4096, "packed B", 4096)
    assert _repack.prepare(warp, 127, 131, 137, "A", 137, "B", 131, (0, 0, 0)) == ("A", 137, "B", 131)


def test_output_staging_rule():
    """Staging C costs one copy (two with beta: C comes in first); it pays for large K, not for small products."""
    assert should_stage_out(4096, 4096, 4096, 0.0) and should_stage_out(4096, 4096, 4096, 1.0)
    assert not should_stage_out(127, 131, 137, 0.0)
    assert not should_stage_out(4096, 4096, 64, 0.0)  # the copy would cost more than 3 % of the product
    k0 = next(k for k in range(1, 10**5, 16) if should_stage_out(4096, 4096, k, 0.0))
    k1 = next(k for k in range(1, 10**5, 16) if should_stage_out(4096, 4096, k, 0.5))
    assert 1000 < k0 < 1500 and 2 * k0 - 32 <= k1 <= 2 * k0 + 32


def test_staged_kernels_store_c_16_bytes_at_a_time():
    """stage_out buys nothing unless the template has a VEC_C path; vectorized opts out (measured slower)."""
    staged = [n for n, s in REGISTRY.items() if s.stage_out]
    assert staged == ["bank_conflict_free", "warptile", "double_buffer", "tf32x3"]
    for name in staged:
        code = re.sub(r"//[^\n]*", "", resources.files("cumm").joinpath("kernels", REGISTRY[name].template).read_text())
        assert "VEC_C" in code, name


def test_which_is_checked():
    with pytest.raises(ValueError, match="'a' or 'b'"):
        should_repack(4096, 4096, 4096, "c")


def test_padded_ld():
    assert [padded_ld(n) for n in (1, 3, 4, 5, 4095, 4096)] == [4, 4, 4, 8, 4096, 4096]
    assert [padded_ld(n, 2) for n in (1, 7, 8, 9, 4097)] == [8, 8, 8, 16, 4104]  # 16-bit elements: 8 to 16 bytes


def test_env_switch_is_read_at_import():
    import os
    import subprocess
    import sys

    code = "import cumm.plan.repack as r; print(r.ENABLED)"
    env = {**os.environ, "CUMM_REPACK": "0"}
    assert (
        subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout.strip()
        == "False"
    )
    env["CUMM_REPACK"] = "1"
    assert (
        subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout.strip()
        == "True"
    )


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
        buf[:, x.shape[1] :] = math.nan
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
    from cumm.plan import auto as _auto

    name = kernel if kernel != "auto" else _auto.select(M, N, K, a.device.id, None)[0]
    spec = cumm.kernel_spec(name)
    if spec.tensor_maps is None:
        expect = _expected(name, (M, K), (K, N))
    elif _repack.pads_for_copy_engine(M, N, K, "a", 4) and _repack.pads_for_copy_engine(M, N, K, "b", 4):
        expect = []  # rows the copy engine cannot read (lda = 1027) are copied for it: the rung stays, no repack
    else:  # its fallback rung (loads of any alignment) runs, and repacks
        expect = _expected(spec.fallback, (M, K), (K, N))
    _check(kernel, a, b, forced, expect)


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
    """Only the unaligned operand is copied, then out (unaligned, read with beta != 0) into its staging buffer."""
    import cupy

    a = rng.standard_normal((M, 1028), dtype=cupy.float32)  # aligned: lda = 1028
    b = rng.standard_normal((1028, N), dtype=cupy.float32)
    c0 = rng.standard_normal((M, N), dtype=cupy.float32)
    out = c0.copy()
    cumm.matmul(a, b, kernel="warptile", out=out, alpha=0.5, beta=-1.0)
    assert [shape for shape, _, _ in forced] == [(1028, N), (M, N)]
    ref = 0.5 * (a.astype(cupy.float64) @ b.astype(cupy.float64)) - c0.astype(cupy.float64)
    assert rel_err(out, ref) < TOL


@pytest.mark.gpu
def test_disabled_and_default_threshold_do_not_repack(rng, forced, monkeypatch):
    import cupy

    a = rng.standard_normal((M, K), dtype=cupy.float32)
    b = rng.standard_normal((K, N), dtype=cupy.float32)
    from cumm.api import matmul as _matmul

    # the switch is read once, at import: calls cached before it flips (here, by the tests above) keep their
    # decisions, so each setting starts with no cached calls
    monkeypatch.setattr(_repack, "ENABLED", False)
    monkeypatch.setattr(_matmul, "_calls", {})
    _check("warptile", a, b, forced, [])
    monkeypatch.setattr(_repack, "ENABLED", True)
    monkeypatch.setattr(_repack, "MAX_COPY_FRACTION", 0.03)
    monkeypatch.setattr(_matmul, "_calls", {})
    _check("warptile", a, b, forced, [])  # 1031 x 1029 x 1027 is below the default threshold
    _check("smem", a, b, forced, [])  # no vector loads: never repacked


# --------------------------------------------------------------------------------------------------
# Staging an unaligned output (GPU)
# --------------------------------------------------------------------------------------------------


@pytest.fixture
def staging(monkeypatch):
    """Stage every unaligned C of a vector-load kernel; record the staging buffers (padding set to NaN)."""
    calls = []
    real = _repack.stage_out

    def spy(c, beta):
        got = real(c, beta)
        buf, ld = got
        buf[:, c.shape[1] :] = math.nan
        calls.append((c.shape, ld, buf.data.ptr))
        return got

    monkeypatch.setattr(_repack, "ENABLED", True)
    monkeypatch.setattr(_repack, "MAX_COPY_FRACTION", math.inf)
    monkeypatch.setattr(_repack, "stage_out", spy)
    return calls


def _wide_out(rng, m, n, shift):
    """A view of m x n inside a larger random array: ldc = n + 3 (odd), pointer ``shift`` floats in."""
    import cupy

    big = rng.standard_normal((m + 1, n + 3), dtype=cupy.float32)
    return big, big[1:, shift : shift + n]


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", [n for n, s in REGISTRY.items() if s.stage_out])
@pytest.mark.parametrize("beta", [0.0, -0.5])
def test_staged_output(kernel, beta, rng, staging):
    """The result lands in the view (alpha, beta applied once) and nothing around the view changes."""
    import cupy

    m, n, k = 301, 263, 129
    a = rng.standard_normal((m, k), dtype=cupy.float32)
    b = rng.standard_normal((k, n), dtype=cupy.float32)
    big, out = _wide_out(rng, m, n, shift=1)
    if beta == 0.0:
        out[...] = math.nan  # never read when beta = 0
    big0 = big.copy()
    c0 = out.astype(cupy.float64)
    cumm.matmul(a, b, kernel=kernel, out=out, alpha=1.5, beta=beta)
    assert [(shape, ld % 4) for shape, ld, _ in staging] == [((m, n), 0)]
    ref = 1.5 * (a.astype(cupy.float64) @ b.astype(cupy.float64))
    if beta:
        ref += beta * c0
    assert rel_err(out, ref) < TOL
    mask = cupy.ones(big.shape, dtype=bool)
    mask[1:, 1 : 1 + n] = False
    assert bool((big[mask] == big0[mask]).all()), "an element outside out was written"


@pytest.mark.gpu
def test_staged_output_with_edge_strips(rng, staging, monkeypatch):
    """Strips (forced: one block per wave) write the staging buffer too, and it all comes back."""
    import cupy

    from cumm.plan import edges as _edges

    monkeypatch.setattr(_plan.Plan, "slots", lambda self, dev: 1)
    monkeypatch.setattr(_edges, "ENABLED", True)
    m, n, k = 259, 261, 77  # 128 x 256 tiles: remainders 3 and 5
    a = rng.standard_normal((m, k), dtype=cupy.float32)
    b = rng.standard_normal((k, n), dtype=cupy.float32)
    _, out = _wide_out(rng, m, n, shift=2)
    c0 = out.astype(cupy.float64)
    cumm.matmul(a, b, kernel="double_buffer", out=out, beta=2.0)
    assert len(staging) == 1
    ref = a.astype(cupy.float64) @ b.astype(cupy.float64) + 2.0 * c0
    assert rel_err(out, ref) < TOL


@pytest.mark.gpu
def test_output_not_staged_when_aligned_small_or_out_of_memory(rng, monkeypatch):
    import cupy

    calls = []
    real = _repack.stage_out
    monkeypatch.setattr(_repack, "stage_out", lambda c, beta: calls.append(c.shape) or real(c, beta))
    a = rng.standard_normal((64, 64), dtype=cupy.float32)
    b = rng.standard_normal((64, 63), dtype=cupy.float32)
    cumm.matmul(a, b, kernel="warptile")  # unaligned (ldc = 63) but small: the scalar stores are cheaper
    cumm.matmul(a, b[:, :60].copy(), kernel="warptile")  # aligned
    monkeypatch.setattr(_repack, "MAX_COPY_FRACTION", math.inf)
    cumm.matmul(a, b, kernel="vectorized")  # no stage_out in its spec
    assert calls == []

    def oom(*args, **kwargs):
        raise cupy.cuda.memory.OutOfMemoryError(1 << 40, 0)

    monkeypatch.setattr(_repack, "MAX_COPY_FRACTION", math.inf)
    monkeypatch.setattr(_repack, "repack", oom)  # beta != 0: staging copies C in first, which fails here
    c0 = rng.standard_normal((64, 63), dtype=cupy.float32)
    out = c0.copy()
    cumm.matmul(a, b, kernel="warptile", out=out, beta=1.0)
    assert calls == [(64, 63)]  # tried, fell back to the scalar stores
    ref = a.astype(cupy.float64) @ b.astype(cupy.float64) + c0.astype(cupy.float64)
    assert rel_err(out, ref) < TOL


# --------------------------------------------------------------------------------------------------
# Transposed operands: the tiled copy (kernels/auxiliary/transpose.cu)
# --------------------------------------------------------------------------------------------------


def test_column_major_views_are_recognized():
    import numpy as np

    w = np.zeros((6, 10), dtype=np.float32)
    assert _repack.column_major(w.T) == 10
    assert _repack.column_major(w.T[1:, 2:]) == 10  # a view into it keeps the column stride
    assert _repack.column_major(np.zeros((3, 6, 10), np.float16).swapaxes(-1, -2)) == 10
    assert _repack.column_major(w) is None  # row-major already
    assert _repack.column_major(w.T[::-1]) is None  # negative strides: CuPy's copy
    assert _repack.column_major(w[:, :1].T) is None  # one row: row-major too
    assert _repack.column_major(np.zeros((6, 10), np.float64).T) is None  # no kernel for 8-byte elements
    assert _repack.column_major(w.T[::2]) is None  # rows 2 elements apart: not a unit row stride
    assert _repack.column_major(w[::2].T) == 20  # every other row of w: columns 20 apart


def _transposed_shapes():
    return [(2, 2), (67, 131), (131, 67), (4097, 130), (130, 4097)]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("shape", _transposed_shapes())
def test_transposed_copy_is_the_row_major_matrix(dtype, shape, rng):
    import cupy

    from cumm.tools.bench import np_dtype

    rows, cols = shape
    w = rng.standard_normal((cols + 3, rows + 1), dtype=cupy.float32).astype(np_dtype(dtype))[1 : cols + 1, :rows]
    x = w.T  # rows x cols, column-major, pointer off the allocation's start
    y, ld = _repack.transposed_copy(x)
    assert y.shape == x.shape and y.strides == (ld * y.dtype.itemsize, y.dtype.itemsize)
    assert ld % (16 // y.dtype.itemsize) == 0 and ld >= cols and y.data.ptr % 16 == 0
    assert (
        y.view(cupy.uint16 if y.dtype.itemsize == 2 else cupy.uint32)
        == cupy.ascontiguousarray(x).view(cupy.uint16 if y.dtype.itemsize == 2 else cupy.uint32)
    ).all()
    base = y.base if y.base is not None else y
    pad = cupy.asarray(base).reshape(-1)[: rows * ld].reshape(rows, ld)[:, cols:]
    assert not pad.astype(cupy.float32).any(), "the padding columns are zero-filled"


@pytest.mark.gpu
def test_transposed_copy_of_a_batch(rng):
    import cupy

    w = rng.standard_normal((5, 70, 33), dtype=cupy.float32).astype(cupy.float16)
    x = cupy.swapaxes(w, -1, -2)[1:4]  # 3 matrices of 33 x 70, column-major
    y, ld = _repack.transposed_copy(x)
    assert y.shape == (3, 33, 70) and ld == 72
    assert (y == cupy.ascontiguousarray(x)).all()


def _spy_transposes(monkeypatch):
    seen = []
    real = _repack.transposed_copy

    def spy(x, *args):
        seen.append(x.shape)
        return real(x, *args)

    monkeypatch.setattr(_repack, "transposed_copy", spy)
    return seen


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("kernel", ["auto", "named"])
@pytest.mark.parametrize("shape", [(1, 1, 1), (127, 131, 137), (67, 200, 7), (300, 4097, 64), (2048, 1024, 512)])
def test_products_of_transposed_views(dtype, kernel, shape, rng, monkeypatch):
    """x @ w.T and x.T @ w.T, as linear layers pass them: the same product as of row-major operands; a view the
    rung does not read in place goes through the tiled copy (not CuPy's strided one)."""
    import cupy

    from cumm.tools.bench import np_dtype

    M, N, K = shape
    name = kernel if kernel == "auto" else ("wgmma_ws" if dtype != "float32" else "warptile")
    if name == "wgmma_ws" and cupy.cuda.Device().compute_capability < "90":
        pytest.skip("wgmma_ws needs sm_90")
    dt = np_dtype(dtype)
    seen = _spy_transposes(monkeypatch)
    x = rng.standard_normal((M, K), dtype=cupy.float32).astype(dt)
    w = rng.standard_normal((N, K), dtype=cupy.float32).astype(dt)
    xt = cupy.ascontiguousarray(x.T)  # K x M: xt.T is x, column-major
    ref = x.astype(cupy.float64) @ w.astype(cupy.float64).T
    # fp16/bf16: within 1.5x cuBLAS's own error on the same (row-major) operands
    tol = max(1.5 * rel_err(cupy.matmul(x, cupy.ascontiguousarray(w.T)), ref), 1e-6) if dtype != "float32" else 1e-4
    for a, b, copies in ((x, w.T, [(K, N)]), (xt.T, w.T, [(M, K), (K, N)])):
        for _ in range(2):  # the second call runs cached: copies again, writes the out it is given
            out = cupy.full((M, N), math.nan, dtype=dt)
            seen.clear()
            cumm.matmul(a, b, kernel=name, out=out)
            assert all(s in copies and min(s) > 1 for s in seen), seen  # (wgmma_ws reads aligned views in place)
            if dtype == "float32":
                assert seen == [s for s in copies if min(s) > 1], seen
            err = rel_err(out, ref)
            assert err < tol, f"{name} {dtype} {shape}: relative error {err:.3e}"
        assert rel_err(cumm.matmul(a, b, kernel=name), ref) < tol  # and a new result without out


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_batched_product_of_transposed_views(dtype, rng, monkeypatch):
    """(batch, M, K) @ w.transpose(-1, -2) with a batch of w: one launch, after one tiled copy of the batch where
    the rung does not read it in place (float32; bf16 on wgmma_ws reads it as it is)."""
    import cupy

    from cumm.tools.bench import TOLERANCES, np_dtype

    dt = np_dtype(dtype)
    seen = _spy_transposes(monkeypatch)
    x = rng.standard_normal((3, 67, 40), dtype=cupy.float32).astype(dt)
    w = rng.standard_normal((3, 50, 40), dtype=cupy.float32).astype(dt)
    out = cupy.full((3, 67, 50), math.nan, dtype=dt)
    cumm.matmul(x, cupy.swapaxes(w, -1, -2), out=out)
    in_place = dtype != "float32" and cupy.cuda.Device().compute_capability >= "90"
    assert seen == ([] if in_place else [(3, 40, 50)]), seen
    ref = x.astype(cupy.float64) @ cupy.swapaxes(w.astype(cupy.float64), -1, -2)
    assert rel_err(out, ref) < (TOLERANCES.get(dtype, TOL) if dtype != "float32" else 1e-4)


# --------------------------------------------------------------------------------------------------
# Transposed views read in place (wgmma_ws: CUMM_TA / CUMM_TB)
# --------------------------------------------------------------------------------------------------

NATIVE_SHAPES = [(120, 131, 136), (1, 4097, 64), (304, 4097, 64), (2048, 1024, 512), (64, 64, 4096), (1000, 1000, 2000)]
NATIVE_CONFIGS = [
    {},
    {"BM": 64, "BN": 64, "STAGES": 8, "WGS": 1, "GM": 4, "EPI": 0, "SK": 0, "NUM_THREADS": 256},
    {"BM": 256, "BN": 128, "STAGES": 3, "SK": 0},
]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("config", NATIVE_CONFIGS, ids=["default", "64x64", "256x128"])
@pytest.mark.parametrize("shape", NATIVE_SHAPES)
def test_wgmma_ws_reads_transposed_views_in_place(dtype, config, shape, rng, monkeypatch):
    """x @ w.T, x.T @ w and x.T @ w.T on wgmma_ws, whose copy engine reads a column-major operand whose columns start
    on 16 bytes as it is (no copy), against float64 and cuBLAS's own error; out NaN-poisoned; beta != 0 and a
    float32 out too; called twice (the second call runs cached)."""
    import cupy

    from cumm.tools.bench import np_dtype

    if cupy.cuda.Device().compute_capability < "90":
        pytest.skip("wgmma_ws needs sm_90")
    M, N, K = shape
    dt = np_dtype(dtype)
    seen = _spy_transposes(monkeypatch)
    x = rng.standard_normal((M, K), dtype=cupy.float32).astype(dt)
    w = rng.standard_normal((N, K), dtype=cupy.float32).astype(dt)
    y = rng.standard_normal((K, N), dtype=cupy.float32).astype(dt)
    xt = cupy.ascontiguousarray(x.T)  # xt.T is x, column-major (columns M apart)
    wt = cupy.ascontiguousarray(w.T)  # the row-major operand of the same product, for cuBLAS's error
    c0 = rng.standard_normal((M, N), dtype=cupy.float32).astype(dt)
    x64, w64, y64, c64 = (v.astype(cupy.float64) for v in (x, w, y, c0))
    cases = [(x, w.T, x64 @ w64.T, x, wt), (xt.T, y, x64 @ y64, x, y), (xt.T, w.T, x64 @ w64.T, x, wt)]
    for a, b, ref, ra, rb in cases:
        col = [v.strides[0] == v.dtype.itemsize and v.shape[0] > 1 for v in (a, b)]
        in_place = [v.shape for v, c in zip((a, b), col, strict=True) if c]
        # a row-major partner whose rows are not on 16 bytes sends the call to the fallback rung: both copied
        partner_ok = all(v.shape[1] * 2 % 16 == 0 for v, c in zip((a, b), col, strict=True) if not c)
        cublas = rel_err(cupy.matmul(ra, rb), ref)
        for _ in range(2):
            out = cupy.full((M, N), math.nan, dtype=dt)
            seen.clear()
            cumm.matmul(a, b, kernel="wgmma_ws", config=config, out=out)
            # columns not on 16 bytes: copied
            copied = [s for s in in_place if (s[0] * 2) % 16 or not partner_ok]
            assert seen == copied, (seen, copied)
            assert rel_err(out, ref) <= max(1.5 * cublas, 1e-6), (rel_err(out, ref), cublas)
        out = c0.copy()
        cumm.matmul(a, b, kernel="wgmma_ws", config=config, out=out, alpha=0.5, beta=-1.0)
        assert rel_err(out, 0.5 * ref - c64) <= max(
            1.5 * rel_err(cupy.matmul(ra, rb) * 0.5 - c0, 0.5 * ref - c64), 1e-6
        )
        o32 = cupy.full((M, N), math.nan, dtype=cupy.float32)
        cumm.matmul(a, b, kernel="wgmma_ws", config=config, out=o32)
        assert rel_err(o32, ref) <= max(cublas, 1e-6)


@pytest.mark.gpu
def test_auto_reads_a_transposed_weight_in_place(rng, monkeypatch):
    """kernel="auto" on bf16 x @ w.T at a shape it runs on wgmma_ws: no copy, the result of the row-major call; the
    same weight with rows off 16 bytes is copied for the rung (decision() says so)."""
    import cupy

    from cumm.api.decision import decision
    from cumm.tools.bench import np_dtype

    if cupy.cuda.Device().compute_capability < "90":
        pytest.skip("wgmma_ws needs sm_90")
    seen = _spy_transposes(monkeypatch)
    dt = np_dtype("bfloat16")
    x = rng.standard_normal((4096, 1024), dtype=cupy.float32).astype(dt)
    w = rng.standard_normal((2048, 1024), dtype=cupy.float32).astype(dt)
    ref = x.astype(cupy.float64) @ w.astype(cupy.float64).T
    cublas = rel_err(cupy.matmul(x, cupy.ascontiguousarray(w.T)), ref)
    got = cumm.matmul(x, w.T)
    assert seen == []
    assert rel_err(got, ref) <= 1.5 * cublas
    out = cupy.full((4096, 2048), math.nan, dtype=dt)  # decision() knows calls by their arguments: out= given
    cumm.matmul(x, w.T, out=out)
    assert "copies" not in decision(x, w.T, out) and decision(x, w.T, out).startswith("wgmma_ws")
    wt = cupy.zeros((1024, 2048 + 3), dtype=dt)[:, :2048]  # rows of 2051 halves, off 16 bytes: copied for the rung
    wt[...] = w.T
    out = cupy.full((4096, 2048), math.nan, dtype=dt)
    cumm.matmul(x, wt, out=out)
    assert rel_err(out, ref) <= 1.5 * cublas
    assert decision(x, wt, out).startswith("wgmma_ws") and decision(x, wt, out).endswith("(copies B)")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("shape", [(67, 50, 40), (129, 257, 72), (5, 4097, 16), (64, 64, 7), (300, 136, 1000)])
def test_wgmma_ws_reads_batched_transposed_views_in_place(dtype, shape, rng, monkeypatch):
    """Batches of transposed views (attention's q @ k.transpose(-1, -2), a.T batched, both, a 4-D batch, one
    column-major matrix broadcast over the batch) run on wgmma_ws in one launch without a copy when every matrix
    and column starts on 16 bytes (else after one tiled copy); against float64 and cuBLAS's own error, out
    NaN-poisoned, beta != 0, called twice (the second call runs cached)."""
    import cupy

    from cumm.tools.bench import np_dtype

    if cupy.cuda.Device().compute_capability < "90":
        pytest.skip("wgmma_ws needs sm_90")
    M, N, K = shape
    dt = np_dtype(dtype)
    seen = _spy_transposes(monkeypatch)

    def normal(*s):
        return rng.standard_normal(s, dtype=cupy.float32).astype(dt)

    def t(x):
        return cupy.swapaxes(x, -1, -2)

    q, k, at, y = normal(3, M, K), normal(3, N, K), normal(3, K, M), normal(3, K, N)
    q4, k4 = normal(2, 3, M, K), normal(2, 3, N, K)
    w = normal(K, M)  # w.T: one column-major M x K matrix for the whole batch
    cases = [(q, t(k)), (t(at), y), (t(at), t(k)), (q4, t(k4)), (w.T, y)]
    for a, b in cases:
        ra, rb = cupy.ascontiguousarray(a), cupy.ascontiguousarray(b)  # row-major: cuBLAS's operands
        ref = ra.astype(cupy.float64) @ rb.astype(cupy.float64)
        lead = ref.shape[:-2]  # the batch (a 2-D operand broadcast over it)
        ba = cupy.broadcast_to(ra, lead + (M, K)).reshape(-1, M, K)
        bb = cupy.broadcast_to(rb, lead + (K, N)).reshape(-1, K, N)
        cub = cupy.stack([cupy.matmul(ba[i], bb[i]) for i in range(ba.shape[0])]).reshape(ref.shape)
        cublas = rel_err(cub, ref)
        # a column-major operand is read in place when its columns and matrices start on 16 bytes
        col = [x for x in (a, b) if x.strides[-2] == 2]
        copied = [x.reshape(-1, *x.shape[-2:]).shape if x.ndim > 2 else x.shape for x in col if (x.strides[-1] % 16)]
        copied = [s[1:] if len(s) == 3 and s[0] == 1 else s for s in copied]
        for _ in range(2):
            out = cupy.full(ref.shape, math.nan, dtype=dt)
            seen.clear()
            cumm.matmul(a, b, kernel="wgmma_ws", out=out)
            assert sorted(seen) == sorted(copied), (a.shape, b.shape, seen, copied)
            assert rel_err(out, ref) <= max(1.5 * cublas, 1e-6), (a.shape, b.shape, rel_err(out, ref), cublas)
        c0 = normal(*ref.shape)
        out = c0.copy()
        cumm.matmul(a, b, kernel="wgmma_ws", out=out, alpha=0.5, beta=-1.0)
        want = 0.5 * ref - c0.astype(cupy.float64)
        assert rel_err(out, want) <= max(1.5 * rel_err(0.5 * cub - c0, want), 1e-6)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_large_products_of_rows_the_copy_engine_cannot_read_stay_on_it(dtype, rng, monkeypatch):
    """A row-major operand whose rows are not on 16 bytes (N = 4101, an odd-offset view of A) sends a copy-engine
    rung (wgmma_ws; wgmma_tf32x3 for float32) to its fallback unless a copy into rows on 16 bytes pays: at 2048 x
    4101 x 512 it does, so the rung runs on copies (one each, on every call, the cached one too); against float64
    (half: within 1.5x cuBLAS's error), out NaN-poisoned, beta != 0. A small product keeps the fallback."""
    import cupy

    from cumm.api.decision import decision
    from cumm.tools.bench import np_dtype

    if cupy.cuda.Device().compute_capability < "90":
        pytest.skip("the copy-engine rungs need sm_90")
    kernel = "wgmma_tf32x3" if dtype == "float32" else "wgmma_ws"
    fallback = "tf32x3" if dtype == "float32" else "mma_swizzled_pipeline"
    dt = np_dtype(dtype)
    copies = []
    real = _repack.copy_engine_rows

    def spy(x):
        copies.append(x.shape)
        return real(x)

    monkeypatch.setattr(_repack, "copy_engine_rows", spy)
    M, N, K = 2048, 4101, 512
    big = rng.standard_normal((M, K + 1), dtype=cupy.float32).astype(dt)
    a = big[:, 1:]  # lda = K + 1, pointer one element in: neither on 16 bytes
    b = rng.standard_normal((K, N), dtype=cupy.float32).astype(dt)  # ldb = 4101
    ref = a.astype(cupy.float64) @ b.astype(cupy.float64)
    if dtype == "float32":
        tol = 1e-5
    else:
        tol = max(1.5 * rel_err(cupy.matmul(cupy.ascontiguousarray(a), b), ref), 1e-6)
    for _ in range(2):  # the second call runs cached and copies again
        out = cupy.full((M, N), math.nan, dtype=dt)
        copies.clear()
        cumm.matmul(a, b, kernel=kernel, out=out)
        assert sorted(copies) == [(K, N), (M, K)], copies
        assert rel_err(out, ref) < tol, rel_err(out, ref)
    assert decision(a, b, out, kernel=kernel).startswith(kernel)
    assert decision(a, b, out, kernel=kernel).endswith("(copies A and B)")
    c0 = rng.standard_normal((M, N), dtype=cupy.float32).astype(dt)
    out = c0.copy()
    cumm.matmul(a, b, kernel=kernel, out=out, alpha=2.0, beta=-1.0)
    want = 2.0 * ref - c0.astype(cupy.float64)
    assert rel_err(out, want) < 2 * tol
    small_a, small_b = a[:100, :37], b[:37, :101]  # too small to pay for copies: the fallback rung
    copies.clear()
    out = cupy.full((100, 101), math.nan, dtype=dt)
    cumm.matmul(small_a, small_b, kernel=kernel, out=out)
    assert copies == [] and decision(small_a, small_b, out, kernel=kernel).startswith(fallback)
    small_ref = small_a.astype(cupy.float64) @ small_b.astype(cupy.float64)
    assert rel_err(out, small_ref) < (1e-5 if dtype == "float32" else 2e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_copy_engine_rows_are_the_same_matrix(dtype, rng):
    """The copy for the copy engine (rows on 128 bytes, or on 16 when shorter; one pitched copy where the rows are
    one pitch apart, else CuPy's) keeps every element: misaligned views, a stacked batch, a batch with gaps between
    matrices, one row, one column."""
    import cupy

    big = rng.standard_normal((3, 40, 70), dtype=cupy.float32).astype(dtype)
    flat = big.reshape(120, 70)
    views = [flat[1:, 3:60], flat[5:6, 1:50], flat[2:30, 7:8], big[:, 1:, 2:67], big[:, :20, :13], big[:1, 3:9, 1:]]
    for x in views:
        y, ld = _repack.copy_engine_rows(x)
        item = y.dtype.itemsize
        assert ld == _repack.copy_engine_ld(x.shape[-1], item) and y.shape == x.shape and y.data.ptr % 16 == 0
        assert ld * item % (128 if x.shape[-1] * item >= 128 else 16) == 0 and ld >= x.shape[-1]
        assert y.strides[-2] == ld * y.dtype.itemsize and bool((y == x).all()), (x.shape, x.strides)
