"""glu= (a gated MLP's silu(x @ w1) * (x @ w3) as one product over cumm.glu_weight(w1, w3)): its shape rule, routing,
rendering and offline compiles on the CPU (rungs whose stores do not pair fail to compile a GLU variant); on the
GPU every rung that pairs, against float64 with the output NaN-poisoned first, odd shapes, batches, transposed
weights, the rest of the epilogue after the pair, torch tensors beside torch's own error."""

from __future__ import annotations

import math
import types

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cumm
from cumm.core.errors import CompileError
from cumm.ladder import REGISTRY
from cumm.plan import epilogue as E
from cumm.plan import routes as RT
from cumm.plan.operands import GLU_BLOCK, glu_columns
from cumm.runtime import render as R
from cumm.runtime.compile import compile_offline

from .test_epilogue import _acts, _dt, _f64, _rel

GLU = E.Epilogue("", "", (), "glu_silu", False, "cumm_silu")
GLU_RUNGS = ["wgmma", "wgmma_ws", "wgmma_pingpong"]

# ---- CPU --------------------------------------------------------------------------------------------------------


def test_glu_rungs_are_the_tile_store_rungs():
    assert sorted(n for n, s in REGISTRY.items() if s.glu) == sorted(GLU_RUNGS)


def test_glu_columns():
    b = types.SimpleNamespace(ndim=2, shape=(64, 32))
    assert glu_columns(b, 32) == 16 and glu_columns(b, 2 * GLU_BLOCK) == GLU_BLOCK
    with pytest.raises(ValueError, match=r"b has 24 columns, not a multiple of 16; make b with cumm.glu_weight"):
        glu_columns(b, 24)
    with pytest.raises(ValueError, match=r"matrix b \(K x 2N\); b has shape \(64,\)"):
        glu_columns(types.SimpleNamespace(ndim=1, shape=(64,)), 1)


def test_build_and_digest():
    assert E.build(None, 8, 32, (), 0, glu="silu")[0] == GLU
    epi, _ = E.build(None, 8, 32, (), 0, glu="gelu_tanh", epilogue="v = v * 2.0f;")
    assert epi.glu == "cumm_gelu_tanh" and epi.label == "glu_gelu_tanh+snippet" and epi.columns(32) == 16
    assert GLU.digest != E.Epilogue("", "", (), "x").digest  # (an empty epilogue's code without the pair)
    assert E.Epilogue("", "", (), "x").columns(32) == 32
    with pytest.raises(ValueError, match=r"glu='swish'; it must be one of \['gelu', 'gelu_tanh', 'relu', 'silu'\]"):
        E.build(None, 8, 32, (), 0, glu="swish")


def test_render_defines_the_pairing_before_the_hook():
    spec = REGISTRY["wgmma_pingpong"]
    _, src = R.render(
        spec, spec.resolve(None, 90), E.with_flags((1, 1, 1, 0, R.dtype_flag("bfloat16", "bfloat16")), GLU)
    )
    assert src.index("#define CUMM_EPI_GLU cumm_silu") < src.index("include/epilogue.cuh")


@pytest.mark.parametrize("kernel", GLU_RUNGS)
@pytest.mark.parametrize("dt", ["bfloat16", "float16"])
@pytest.mark.parametrize("batched", [0, 1])
def test_glu_compiles_offline_without_spills(kernel, dt, batched):
    spec = REGISTRY[kernel]
    if batched and not R.supports_batch(spec):
        pytest.skip(f"{kernel} runs no batches")
    k = compile_offline(
        spec, spec.resolve(None, 90), "sm_90", E.with_flags((1, 1, 1, batched, R.dtype_flag(dt, dt)), GLU)
    )
    assert k.spill_bytes == 0 and k.registers > 0


@pytest.mark.parametrize("kernel", ["mma_swizzled_pipeline", "wgmma_swap_ab", "wgmma_cluster_split_k", "double_buffer"])
def test_stores_that_do_not_pair_do_not_compile_a_glu_variant(kernel):
    """The per-element and per-pair overloads are not defined in a GLU variant: no silent unpaired store."""
    spec = REGISTRY[kernel]
    dt = spec.dtypes[0]
    flags = (1, 1, 1, 0, 0 if dt == "float32" else R.dtype_flag(dt, dt))
    with pytest.raises(CompileError, match="cumm_store|CummAlpha|cumm_epilogue"):
        compile_offline(spec, spec.resolve(None, 90), "sm_90", E.with_flags(flags, GLU))


def test_glu_route(monkeypatch):
    monkeypatch.setattr(RT, "compute_capability", lambda dev: 90)
    monkeypatch.setattr(RT, "multiprocessors", lambda dev: 132)
    assert RT.glu_route("skinny16", True, "bfloat16", 90, False) == "wgmma_ws"  # the top rung of those that pair
    assert RT.routes("skinny16", True, None, (), "bfloat16", 0, (4096, 4096, 4096), GLU)[0] == "wgmma_ws"
    assert (
        RT.routes("wgmma_ws", True, None, (), "bfloat16", 0, (4096, 4096, 1024), GLU)[0] == "wgmma_pingpong"
    )  # short K
    assert RT.routes("wgmma_pingpong", False, None, (), "float16", 0, (4096, 4096, 4096), GLU)[0] == "wgmma_pingpong"
    assert REGISTRY[RT.routes("wgmma_swap_ab", True, None, (3,), "bfloat16", 0, (3 * 64, 4096, 4096), GLU)[0]].glu
    with pytest.raises(ValueError, match=r"kernel 'mma' cannot run glu= .* the rungs that do: \['wgmma', 'wgmma_ws'"):
        RT.routes("mma", False, None, (), "bfloat16", 0, (64, 64, 64), GLU)
    with pytest.raises(ValueError, match=r"glu= runs on the rungs .*bfloat16 and float16 products .* float32 product"):
        RT.routes("double_buffer", True, None, (), "float32", 0, (64, 64, 64), GLU)
    with pytest.raises(ValueError, match=r"this is a bfloat16 product on 80"):
        RT.glu_route("mma", True, "bfloat16", 80, False)


# ---- GPU --------------------------------------------------------------------------------------------------------


def _tol(dt, ref):
    """The float64 reference rounded to the output's dtype, twice, plus accumulation order."""
    return 2 * _rel(ref.astype(_dt(dt)), ref) + 2e-3


def _weights(rng, K, N, dt, batch=()):
    w1 = rng.standard_normal(batch + (K, N), dtype="float32").astype(_dt(dt))
    w3 = rng.standard_normal(batch + (K, N), dtype="float32").astype(_dt(dt))
    return w1, w3


@pytest.mark.gpu
def test_glu_weight_layout(rng):
    import cupy

    w1, w3 = _weights(rng, 5, 24, "float32")
    w = cumm.glu_weight(w1, w3)
    assert w.shape == (5, 48)
    for q in range(3):
        assert cupy.array_equal(w[:, 16 * q : 16 * q + 8], w1[:, 8 * q : 8 * q + 8])
        assert cupy.array_equal(w[:, 16 * q + 8 : 16 * q + 16], w3[:, 8 * q : 8 * q + 8])
    wt = cumm.glu_weight(w1.T, w3.T, dim=0)  # nn.Linear's (out, in) weights
    assert wt.shape == (48, 5) and cupy.array_equal(wt.T, w)
    with pytest.raises(ValueError, match="not a multiple of 8: pad both with zero columns to 16"):
        cumm.glu_weight(w1[:, :12], w3[:, :12])
    with pytest.raises(ValueError, match="must match in shape and dtype"):
        cumm.glu_weight(w1, w3[:, :16])
    with pytest.raises(ValueError, match="dim=2 is not a dimension"):
        cumm.glu_weight(w1, w3, dim=2)
    with pytest.raises(ValueError, match="must be matrices"):
        cumm.glu_weight(w1[0], w3[0])


# (M, N (C's columns), K): one row, odd rows and depths (K % 8 != 0: rows the copy engine cannot read, copied), a
# column block past C's edge, a tile's worth and more
SHAPES = [(1, 8, 1), (37, 24, 13), (129, 136, 64), (300, 520, 300), (4097, 264, 72)]


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", ["auto", *GLU_RUNGS])
@pytest.mark.parametrize("dt", ["bfloat16", "float16"])
@pytest.mark.parametrize("M,N,K", SHAPES)
def test_glu_against_float64(rng, sm90, kernel, dt, M, N, K):
    import cupy

    act = ["silu", "gelu", "gelu_tanh", "relu"][SHAPES.index((M, N, K)) % 4]
    x = rng.standard_normal((M, K), dtype="float32").astype(_dt(dt))
    w1, w3 = _weights(rng, K, N, dt)
    out = cupy.full((M, N), math.nan, dtype="float32").astype(_dt(dt))
    cfg = None if kernel == "auto" else {}
    got = cumm.matmul(x, cumm.glu_weight(w1, w3), kernel=kernel, config=cfg, out=out, alpha=0.5, glu=act)
    assert got is out
    ref = _acts()[act](0.5 * (_f64(x) @ _f64(w1))) * (0.5 * (_f64(x) @ _f64(w3)))
    assert _rel(out, ref) < _tol(dt, ref), (kernel, act)


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", ["auto", "wgmma_ws", "wgmma_pingpong"])
def test_glu_then_the_rest_of_the_epilogue(rng, sm90, kernel):
    """bias, residual, a snippet with an operand and beta apply to the pair's value, at C's (row, col)."""
    import cupy

    M, N, K, dt = 131, 136, 200, "bfloat16"
    x = rng.standard_normal((M, K), dtype="float32").astype(_dt(dt))
    w1, w3 = _weights(rng, K, N, dt)
    w = cumm.glu_weight(w1, w3)
    bias = rng.standard_normal((N,), dtype="float32").astype(_dt(dt))
    res = rng.standard_normal((M, N), dtype="float32").astype(_dt(dt))
    s = rng.standard_normal((N,), dtype="float32")
    c0 = rng.standard_normal((M, N), dtype="float32").astype(_dt(dt))
    g = _acts()["silu"](_f64(x) @ _f64(w1)) * (_f64(x) @ _f64(w3))
    cfg = None if kernel == "auto" else {}
    got = cumm.matmul(x, w, kernel=kernel, config=cfg, glu="silu", bias=bias, activation="relu", residual=res)
    ref = cupy.maximum(g + _f64(bias), 0) + _f64(res)
    assert _rel(got, ref) < _tol(dt, ref)
    out = c0.copy()
    snip = "v = v * sc[col] + 0.01f * row;"
    cumm.matmul(x, w, kernel=kernel, config=cfg, out=out, beta=-1.5, glu="silu", epilogue=snip, operands={"sc": s})
    ref = g * _f64(s) + 0.01 * cupy.arange(M, dtype=cupy.float64)[:, None] - 1.5 * _f64(c0)
    assert _rel(out, ref) < _tol(dt, ref)


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", ["auto", "wgmma_ws", "wgmma_pingpong"])
@pytest.mark.parametrize("shape_x,wbatch", [((3, 37, 64), ()), ((2, 65, 40), (2,)), ((4, 128, 72), (1,))])
def test_batched_glu(rng, sm90, kernel, shape_x, wbatch):
    import cupy

    dt, N = "float16", 72
    x = rng.standard_normal(shape_x, dtype="float32").astype(_dt(dt))
    w1, w3 = _weights(rng, shape_x[-1], N, dt, wbatch)
    out = cupy.full(shape_x[:-1] + (N,), math.nan, dtype=_dt(dt))
    cfg = None if kernel == "auto" else {}
    cumm.matmul(x, cumm.glu_weight(w1, w3), kernel=kernel, config=cfg, out=out, glu="silu")
    ref = _acts()["silu"](_f64(x) @ _f64(w1)) * (_f64(x) @ _f64(w3))
    assert out.shape == ref.shape and _rel(out, ref) < _tol(dt, ref)


@pytest.mark.gpu
def test_glu_torch_linear_weights_and_errors(rng, sm90):
    """nn.Linear's (out, in) weights interleaved along dim 0, the transposed view read in place; the error within
    1.5x of torch's unfused silu(x @ w1.T) * (x @ w3.T); the cached second call; errors before any launch."""
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F

    M, N, K = 257, 1032, 520
    x = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    w1 = torch.randn(N, K, device="cuda", dtype=torch.bfloat16) / K**0.5
    w3 = torch.randn(N, K, device="cuda", dtype=torch.bfloat16) / K**0.5
    w13 = cumm.glu_weight(w1, w3, dim=0)
    assert isinstance(w13, torch.Tensor) and w13.shape == (2 * N, K)
    ref = F.silu(x.double() @ w1.double().T) * (x.double() @ w3.double().T)

    def err(y):
        return float((y.double() - ref).norm() / ref.norm())

    got = cumm.matmul(x, w13.T, glu="silu")
    again = cumm.matmul(x, w13.T, glu="silu")  # (the cached call)
    assert isinstance(got, torch.Tensor) and got.shape == (M, N) and torch.equal(got, again)
    assert err(got) <= 1.5 * err(F.silu(x @ w1.T) * (x @ w3.T)) + 1e-3
    with pytest.raises(ValueError, match="not a multiple of 16"):
        cumm.matmul(x, w13.T[:, :24], glu="silu")
    with pytest.raises(ValueError, match="kernel 'mma' cannot run glu="):
        cumm.matmul(x, w13.T, kernel="mma", glu="silu")
    with pytest.raises(ValueError, match="glu= runs on the rungs"):
        cumm.matmul(x.float(), w13.T.float(), glu="silu")
    with pytest.raises(ValueError, match=r"out has shape \(257, 2064\); the product .* needs \(257, 1032\)"):
        cumm.matmul(x, w13.T, glu="silu", out=torch.empty(M, 2 * N, device="cuda", dtype=torch.bfloat16))


@st.composite
def _glu_cases(draw) -> dict:
    """M, C's columns (a multiple of 8), K from 1 to a few thousand (at most one large), a batch, the weight given
    as (K, 2N) or as the transposed view of nn.Linear's (2N, K), the rung and the activation."""
    small = st.one_of(st.integers(1, 70), st.sampled_from((1, 2, 3, 7, 13, 31, 127)))
    M, K = draw(small), draw(small)
    N = 8 * draw(st.integers(1, 40))
    big = draw(st.sampled_from(("", "", "", "M", "N", "K")))
    if big == "M":
        M = draw(st.sampled_from((257, 1021, 4097)))
    elif big == "N":
        N = 8 * draw(st.sampled_from((127, 257, 513)))
    elif big == "K":
        K = draw(st.sampled_from((509, 1024, 2053)))
    batch = tuple(draw(st.lists(st.integers(1, 3), max_size=1 if big else 2)))
    return dict(
        M=M,
        N=N,
        K=K,
        batch=batch,
        wbatch=draw(st.booleans()) and bool(batch),
        linear=draw(st.booleans()),
        dt=draw(st.sampled_from(("bfloat16", "float16"))),
        kernel=draw(st.sampled_from(("auto", *GLU_RUNGS))),
        act=draw(st.sampled_from(("silu", "gelu", "gelu_tanh", "relu"))),
        alpha=draw(st.sampled_from((1.0, -0.5))),
        out=draw(st.sampled_from(("c", "c", "f32", "t"))),  # C in the inputs' dtype, float32, a transposed view
    )


@pytest.mark.gpu
@settings(
    max_examples=60,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(c=_glu_cases())
def test_glu_property(c, sm90):
    """Random shapes, batches and weight layouts through glu= against float64, output NaN-poisoned first."""
    import cupy

    if c["batch"] and c["kernel"] == "wgmma":  # (it runs no batches: kernel="auto" runs them one at a time)
        c["kernel"] = "auto"
    rng = cupy.random.default_rng(abs(hash(tuple(sorted(map(str, c.items()))))) % 2**31)
    M, N, K, dt = c["M"], c["N"], c["K"], c["dt"]
    x = rng.standard_normal(c["batch"] + (M, K), dtype="float32").astype(_dt(dt))
    wb = c["batch"] if c["wbatch"] else ()
    w1, w3 = _weights(rng, K, N, dt, wb)
    if c["linear"]:  # nn.Linear's (2N, K) layout, multiplied by its transposed view (read in place)
        w = cumm.glu_weight(w1.swapaxes(-1, -2), w3.swapaxes(-1, -2), dim=-2).swapaxes(-1, -2)
    else:
        w = cumm.glu_weight(w1, w3)
    out = cupy.full(c["batch"] + (M, N), math.nan, dtype="float32")
    if c["out"] != "f32":
        out = out.astype(_dt(dt))
    if c["out"] == "t":  # (written through a row-major staging array)
        out = cupy.full(c["batch"] + (N, M), math.nan, dtype="float32").astype(_dt(dt)).swapaxes(-1, -2)
    cfg = None if c["kernel"] == "auto" else {}
    cumm.matmul(x, w, kernel=c["kernel"], config=cfg, out=out, alpha=c["alpha"], glu=c["act"])
    a = c["alpha"]
    ref = _acts()[c["act"]](a * (_f64(x) @ _f64(w1))) * (a * (_f64(x) @ _f64(w3)))
    assert _rel(out, ref) < _tol("float32" if c["out"] == "f32" else dt, ref) + 1e-5, c
