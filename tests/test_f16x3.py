"""wgmma_f16x3 (gemm/23_wgmma_f16x3): FP32 products from FP16 pieces. CPU: its spec's rules (what auto gives it, its
tiles for a shape, its maps over the pieces) and the pieces' layout; GPU: odd shapes, views, alpha and beta, wide
dynamic range, NaN / infinity / zero rows, against float64 and cuBLAS FP32, and what auto runs."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cumm
from cumm.ladder import rung_module
from cumm.plan import pieces as _pieces

from .conftest import check_alpha_beta, rel_err

KERNEL = "wgmma_f16x3"
RUNG = rung_module(KERNEL)
SPEC = RUNG.SPEC
SMS = 132  # the H200's multiprocessors
# The pieces keep 22 of FP32's 24 bits and each 64 of K's three products are promoted into FP32 totals: measured on
# the H200 1.5e-7 (257 x 384 x 520) to 2.0e-7 (4096^3) on random normal data, where cuBLAS FP32 erred 2.1e-7 to
# 1.2e-6 and wgmma_tf32x3 2.6e-7 to 3.2e-7.
FLOOR = 3e-7


# ---- CPU: the rules ------------------------------------------------------------------------------------------------


def test_auto_gives_it_large_products_only():
    assert not RUNG._takes(1024, 1024, 1024, SMS)  # the pieces cost more than the product saves
    for shape in [(1536, 1536, 1536), (2048, 2048, 2048), (8192, 8192, 8192), (8192, 8192, 256), (512, 8192, 8192)]:
        assert RUNG._takes(*shape, SMS), shape
    assert not RUNG._takes(65536, 16, 8192, SMS)  # a thin product: the pieces are most of its bytes
    from cumm.plan.auto import top

    assert top(90, shape=(4096, 4096, 4096, SMS)) == KERNEL
    assert top(90, shape=(512, 512, 512, SMS)) == "wgmma_tf32x3"
    assert top(90) == "wgmma_tf32x3"  # no shape (a caller's bare configuration, a batch): the rung below
    assert top(90, batched=True) == "wgmma_tf32x3"  # it runs no batches
    assert top(80, shape=(4096, 4096, 4096, SMS)) == "tf32x3"  # sm_90a only


@pytest.mark.parametrize(
    ("shape", "wide"),
    [((1536, 1536, 1536), True), ((2048, 2048, 2048), False), ((4096, 4096, 4096), False), ((8192, 8192, 8192), True)],
)
def test_wide_tiles_where_their_rounds_cost_no_more(shape, wide):
    got = RUNG._wide_tiles(SPEC.defaults, *shape, SMS)
    assert got == (dict(SPEC.configs["wide"]) if wide else {})
    assert RUNG._wide_tiles({**SPEC.defaults, "BN": 64}, *shape, SMS) == {}  # a configuration given: kept


def test_configurations_keep_the_constraints():
    for cfg in [SPEC.defaults, *({**SPEC.defaults, **c} for c in SPEC.configs.values())]:
        SPEC.check(dict(cfg))
    with pytest.raises(cumm.ConfigError, match="registers"):
        SPEC.check({**SPEC.defaults, "BN": 192, "PROMO": 2})
    with pytest.raises(cumm.ConfigError, match="three stages"):
        SPEC.check({**SPEC.defaults, "STAGES": 5, "PROMO": 2})


def test_maps_cover_both_pieces():
    a, b = SPEC.tensor_maps(SPEC.defaults, 100, 30, 65, 256, 32, 30, False)
    assert (a.cols, a.rows, a.ld, a.box_cols, a.box_rows, a.elem) == (256, 100, 256, 64, 128, 2)  # [hi | lo], K' = 128
    assert (b.cols, b.rows, b.ld, b.box_cols, b.box_rows, b.elem) == (30, 256, 32, 64, 64, 2)  # [hi; lo]
    assert _pieces.lds(30, 65) == (256, 32) and _pieces.lds(1, 1) == (128, 8)


def _emulated(a, b):
    """The rung's product, emulated with numpy: the pieces as the module says, exact products, FP32 sums of each 64
    of K's three products added into FP32 totals."""
    import numpy as np

    def scaled(x, axis):
        m = np.where(np.isfinite(x), np.abs(x), 0).max(axis=axis, keepdims=True)
        s = np.where(m > 0, 15 - np.frexp(m)[1], 0)
        return np.ldexp(x, s).astype(np.float32), s

    (x, sa), (y, sb) = scaled(a, 1), scaled(b, 0)
    xh, yh = x.astype(np.float16), y.astype(np.float16)
    xl, yl = (x - xh.astype(np.float32)).astype(np.float16), (y - yh.astype(np.float32)).astype(np.float16)
    d = np.zeros((a.shape[0], b.shape[1]), np.float32)
    f64 = np.float64
    for k in range(0, a.shape[1], 64):
        s = slice(k, k + 64)
        p = xl[:, s].astype(f64) @ yh[s].astype(f64) + xh[:, s].astype(f64) @ yl[s].astype(f64)
        d += (p + xh[:, s].astype(f64) @ yh[s].astype(f64)).astype(np.float32)
    return np.ldexp(d, -(sa + sb)).astype(np.float32)


@given(
    m=st.integers(1, 40),
    n=st.integers(1, 40),
    k=st.integers(1, 300),
    spread=st.integers(0, 40),
    seed=st.integers(0, 2**31 - 1),
)
@settings(max_examples=40, deadline=None)
def test_the_pieces_keep_fp32_accuracy_emulated(m, n, k, spread, seed):
    """The split itself (CPU emulation): within FP32's error of |A||B| on rows and columns of any scale."""
    import numpy as np

    rng = np.random.default_rng(seed)
    a = (rng.standard_normal((m, k)) * np.exp2(rng.integers(-spread, spread + 1, (m, 1)))).astype(np.float32)
    b = (rng.standard_normal((k, n)) * np.exp2(rng.integers(-spread, spread + 1, (1, n)))).astype(np.float32)
    a *= np.exp2(rng.integers(-12, 13, a.shape)).astype(np.float32)  # and each element by its own 2^e, |e| <= 12
    ref = a.astype(np.float64) @ b.astype(np.float64)
    bound = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)
    err = np.abs(_emulated(a, b) - ref)
    assert (err <= 2**-20 * bound + 1e-300).all()


# ---- GPU -------------------------------------------------------------------------------------------------------------

SHAPES = [
    (1, 1, 1),
    (1, 300, 1000),
    (300, 1, 1000),
    (7, 1, 7),
    (127, 131, 137),
    (128, 128, 64),
    (4097, 37, 65),
    (64, 4097, 33),
    (1000, 1000, 1),
    (2048, 2048, 7),
    (521, 523, 4099),
]


@pytest.mark.gpu
@pytest.mark.parametrize("config", [None, "wide", "PROMO=2"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_odd_shapes(shape, config, rng, sm90):
    import cupy

    from cumm.api.decision import decision

    M, N, K = shape
    a = rng.standard_normal((M, K), dtype=cupy.float32)
    b = rng.standard_normal((K, N), dtype=cupy.float32)
    ref = a.astype(cupy.float64) @ b.astype(cupy.float64)
    out = cupy.full((M, N), math.nan, dtype=cupy.float32)
    cfg = {"PROMO": 2} if config == "PROMO=2" else None if config is None else dict(SPEC.configs[config])
    cumm.matmul(a, b, kernel=KERNEL, config=cfg, out=out)
    if cfg is None:
        assert decision(a, b, out, kernel=KERNEL).startswith(KERNEL)
    err, cublas = rel_err(out, ref), rel_err(a @ b, ref)
    assert err < max(FLOOR, cublas), f"{shape}: {err:.2e} (cuBLAS FP32 {cublas:.2e})"


@pytest.mark.gpu
def test_views_and_unaligned_operands(rng, sm90):
    import cupy

    a = rng.standard_normal((641, 903), dtype=cupy.float32)[1::2, 3:]  # odd pitch, offset start
    b = rng.standard_normal((900, 301), dtype=cupy.float32)[:, 1:]
    bt = rng.standard_normal((300, 900), dtype=cupy.float32).T  # a transposed view
    for x, y in ((a, b), (a, bt)):
        ref = x.astype(cupy.float64) @ y.astype(cupy.float64)
        assert rel_err(cumm.matmul(x, y, kernel=KERNEL), ref) < FLOOR


@pytest.mark.gpu
def test_alpha_beta(rng, sm90):
    check_alpha_beta(rng, 256, 128, 64, 1e-5, kernel=KERNEL)


@pytest.mark.gpu
def test_at_most_cublas_error_on_deep_products(rng, sm90):
    import cupy

    a = rng.standard_normal((1024, 4096), dtype=cupy.float32)
    b = rng.standard_normal((4096, 1024), dtype=cupy.float32)
    ref = a.astype(cupy.float64) @ b.astype(cupy.float64)
    assert rel_err(cumm.matmul(a, b, kernel=KERNEL), ref) <= rel_err(a @ b, ref)


@pytest.mark.gpu
def test_wide_dynamic_range(rng, sm90):
    """Rows of A and columns of B scaled by 2^e, e in -60 .. 60, and every element by e^(3 N(0, 1)): the shifts
    keep each row's and column's scale; elementwise within FP32's error of |A||B|."""
    import cupy

    M, N, K = 300, 500, 700
    a = rng.standard_normal((M, K), dtype=cupy.float32) * cupy.exp2(rng.integers(-60, 61, (M, 1))).astype(cupy.float32)
    b = rng.standard_normal((K, N), dtype=cupy.float32) * cupy.exp(3 * rng.standard_normal((K, N))).astype(cupy.float32)
    ref = a.astype(cupy.float64) @ b.astype(cupy.float64)
    bound = cupy.abs(a).astype(cupy.float64) @ cupy.abs(b).astype(cupy.float64)
    got, cublas = cumm.matmul(a, b, kernel=KERNEL), a @ b
    assert rel_err(got, ref) < max(FLOOR, rel_err(cublas, ref))
    worst = float(cupy.max(cupy.abs(cublas - ref) / bound))  # (measured 9.2e-7; this rung 5.8e-7)
    assert float(cupy.max(cupy.abs(got - ref) / bound)) <= max(2**-20, worst)


@pytest.mark.gpu
def test_nan_infinity_and_zero_rows(rng, sm90):
    """NaN propagates to its row; an infinity makes its row NaN (the rung's stated caveat, as wgmma_tf32x3's);
    a row of zeros gives zeros; the other rows are untouched."""
    import cupy

    a = rng.standard_normal((64, 80), dtype=cupy.float32)
    b = rng.standard_normal((80, 48), dtype=cupy.float32)
    a[3, 5], a[7, 9], a[11] = math.nan, math.inf, 0.0
    b[:, 20] = 0.0
    out = cumm.matmul(a, b, kernel=KERNEL)
    assert cupy.isnan(out[3]).all() and cupy.isnan(out[7]).all()
    assert (out[11] == 0).all()
    rest = cupy.delete(out, [3, 7], axis=0)
    assert cupy.isfinite(rest).all() and (rest[:, 20] == 0).all()


@pytest.mark.gpu
def test_auto_runs_it_on_large_products_only(rng, sm90):
    import cupy

    from cumm.api.decision import decision

    big = rng.standard_normal((2048, 2048), dtype=cupy.float32)
    cumm.matmul(big, big)
    assert decision(big, big, None).split()[0] == KERNEL
    small = rng.standard_normal((512, 512), dtype=cupy.float32)
    cumm.matmul(small, small)
    assert decision(small, small, None).split()[0] != KERNEL


def _no_room(*args, **kwargs):
    import cupy

    raise cupy.cuda.memory.OutOfMemoryError(1 << 40, 0)


@pytest.mark.gpu
@pytest.mark.parametrize("unaligned", [False, True], ids=["aligned", "unaligned"])
def test_no_room_for_the_pieces_runs_the_fallback(unaligned, rng, sm90, monkeypatch):
    """Where the pieces' memory cannot be had, the product runs on the spec's fallback (wgmma_tf32x3: FP32 read in
    place, its own fallback for operands the copy engine cannot read), first and cached calls alike, each on its
    own arrays."""
    import cupy

    assert SPEC.fallback == "wgmma_tf32x3"
    monkeypatch.setattr(_pieces.Splitter, "__call__", _no_room)  # (the checked path's and the cached calls')
    for _ in range(3):  # the first call, then the cached one twice on new data (the fallback decided once)
        a = rng.standard_normal((300, 523 if unaligned else 520), dtype=cupy.float32)[:, :517]
        b = rng.standard_normal((517, 260), dtype=cupy.float32)
        ref = a.astype(cupy.float64) @ b.astype(cupy.float64)
        out = cupy.full((300, 260), math.nan, dtype=cupy.float32)
        cumm.matmul(a, b, kernel=KERNEL, out=out)
        assert rel_err(out, ref) < max(FLOOR, rel_err(a @ b, ref))


def _bias_gelu(a, b, bias, tanh: bool):
    """act(a @ b + bias) in float64 (GELU exact, or its tanh form)."""
    import cupy
    from cupyx.scipy.special import erf

    v = a.astype(cupy.float64) @ b.astype(cupy.float64) + bias.astype(cupy.float64)[None, :]
    if tanh:
        return 0.5 * v * (1 + cupy.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v**3)))
    return 0.5 * v * (1 + erf(v / math.sqrt(2)))


@pytest.mark.gpu
def test_no_room_for_the_pieces_with_an_epilogue(rng, sm90, monkeypatch):
    import cupy

    monkeypatch.setattr(_pieces.Splitter, "__call__", _no_room)
    for _ in range(2):  # (not kept: each call finds no room and runs the fallback)
        a = rng.standard_normal((257, 384), dtype=cupy.float32)
        b = rng.standard_normal((384, 200), dtype=cupy.float32)
        bias = rng.standard_normal(200, dtype=cupy.float32)
        got = cumm.matmul(a, b, kernel=KERNEL, bias=bias, activation="gelu")
        assert rel_err(got, _bias_gelu(a, b, bias, False)) < 1e-6


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["cupy", "torch"])
def test_cached_calls_make_the_pieces_on_the_callers_pointers(kind, rng, sm90):
    """Plain and fused calls are kept (the pieces made on each later call by the Splitter's launches, on the
    caller's pointers and stream) and give each call's own result; A a view with a row stride past K."""
    import cupy

    from cumm.api import fused as _fused
    from cumm.api import matmul as _matmul
    from cumm.api.decision import decision

    torch = pytest.importorskip("torch") if kind == "torch" else None

    def as_kind(x):
        return torch.as_tensor(x, device="cuda") if torch is not None else x

    for i in range(3):
        a = rng.standard_normal((300, 524), dtype=cupy.float32)[:, :517]
        b = rng.standard_normal((517, 264), dtype=cupy.float32)
        bias = rng.standard_normal(264, dtype=cupy.float32)
        got = cupy.asarray(cumm.matmul(as_kind(a), as_kind(b), kernel=KERNEL))
        ref = a.astype(cupy.float64) @ b.astype(cupy.float64)
        assert rel_err(got, ref) < max(FLOOR, rel_err(a @ b, ref)), i
        got = cupy.asarray(
            cumm.matmul(as_kind(a), as_kind(b), kernel=KERNEL, bias=as_kind(bias), activation="gelu_tanh")
        )
        assert rel_err(got, _bias_gelu(a, b, bias, True)) < 1e-6, i
    plain = [c for c in _matmul._calls.values() if c.plan.spec.name == KERNEL and c.decisions.get("splitter")]
    fused = [h for (k, _), h in _fused.calls.items() if k == KERNEL and h[0].decisions.get("splitter")]
    assert plain and fused, "the calls were not kept with their Splitter"
    x, w, z = as_kind(a), as_kind(b), as_kind(bias)
    assert decision(x, w, None, kernel=KERNEL, bias=z, activation="gelu_tanh").startswith(KERNEL)
    assert decision(x, w, None, kernel=KERNEL, bias=z, activation="silu") == ""  # (not run with silu)
