"""Fused epilogues (cumm/plan/epilogue.py, include/epilogue.cuh): rendering, checks, offline compiles and NVRTC
messages on the CPU; every named epilogue and a user's snippet against float64 on the GPU (SIMT, mma and wgmma_ws
rungs, the TMA-store path included, odd shapes, batches)."""

from __future__ import annotations

import dataclasses
import itertools
import math
import re
import types

import numpy as np
import pytest

import cumm
from cumm.core.errors import CompileError
from cumm.ladder import REGISTRY
from cumm.plan import epilogue as E
from cumm.plan import routes as RT
from cumm.runtime import render as R
from cumm.runtime.compile import compile_offline

GELU_BIAS = E.Epilogue("v += bias[col]; v = cumm_gelu(v);", "", (("bias", "bfloat16"),), "bias+gelu")
SNIPPET = E.Epilogue("", "v = v * (1.0f / (1.0f + __expf(-v))) * aux[row * ld_aux + col];", (("aux", "float32"),), "s")


# ---- CPU: rendering ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kernel", ["naive", "warptile", "double_buffer", "mma", "wgmma_ws"])
def test_no_epilogue_renders_as_before(kernel):
    """A variant without an epilogue renders without the hook: same source, name and template hash (so its SASS
    and tuned entries are unchanged); with_flags(flags, None) is the variant of flags."""
    spec = REGISTRY[kernel]
    cfg = spec.resolve(None, 90)
    flags = (1, 1, 1) if "float32" in spec.dtypes else (1, 1, 1, 0, R.dtype_flag("bfloat16", "bfloat16"))
    assert E.with_flags(flags, None) == R.variant(flags)
    name, src = R.render(spec, cfg, flags)
    assert "#define CUMM_EPI 1" not in src and "epilogue.cuh" not in src and "cumm_epi_user" not in src
    name2, src2 = R.render(spec, cfg, (*flags, *(0,) * (6 - len(flags)), None))  # an explicit None epilogue
    assert (name2, src2) == (name, src)


def test_epilogue_render_splices_snippet_and_names_variant():
    spec = REGISTRY["double_buffer"]
    cfg = spec.resolve(None, 90)
    name0, _ = R.render(spec, cfg, (1, 1, 1))
    name, src = R.render(spec, cfg, E.with_flags((1, 1, 1), SNIPPET))
    assert name != name0 and name.endswith("_e" + SNIPPET.digest)
    assert "#define CUMM_EPI 1" in src and "#define CUMM_EPI_NOPS 1" in src
    assert f'#line 1 "{R.SNIPPET_FILE}"\n{SNIPPET.snippet}\n' in src
    assert "cumm_epi_in<float, 0>(cumm_al, 0, z)" in src and "ld_aux" in src
    # the hook comes after the headers and before the template
    assert src.index("include/epilogue.cuh") < src.index(
        "cumm_epi_user(float& v, const int row, const int col, const int z,\n"
    )
    assert src.index("cumm_epi_user(float& v") < src.index(spec.template)


def test_epilogue_digest_keys_variants():
    a = E.Epilogue("", "v = v * 2.0f;", (), "s")
    b = E.Epilogue("", "v = v * 3.0f;", (), "s")
    c = E.Epilogue("", "v = v * 2.0f;", (("x", "float32"),), "s")
    d = E.Epilogue("", "v = v * 2.0f;", (("x", "bfloat16"),), "s")
    assert len({a.digest, b.digest, c.digest, d.digest}) == 4
    assert a.digest == E.Epilogue("", "v = v * 2.0f;", (), "another label").digest  # the label is not code
    spec = REGISTRY["warptile"]
    cfg = spec.resolve(None, 90)
    names = {R.kernel_name(spec, cfg, E.with_flags((1, 1, 1), e)) for e in (a, b, c, d)}
    assert len(names) == 4


def test_with_flags_pads_defaults():
    assert E.with_flags((1, 0, 1), SNIPPET) == (1, 0, 1, 0, 0, 0, SNIPPET)
    assert E.with_flags((1, 1, 1, 1, 2), SNIPPET) == (1, 1, 1, 1, 2, 0, SNIPPET)
    assert R.variant((1, 1, 1)).epilogue is None and E.with_flags((1, 1, 1), SNIPPET).epilogue is SNIPPET


def test_epilogue_arguments_gathered_once():
    """matmul's epilogue keywords as one dict (None without any: the plain product's path), shared by decision(),
    which names a keyword matmul does not take."""
    from cumm.api import fused
    from cumm.api.decision import decision

    assert fused.arguments(None) is None and fused.arguments(None, operands={}) is None
    got = fused.arguments(None, bias="b", activation="gelu")
    assert got == dict(
        bias="b", activation="gelu", residual=None, epilogue=None, operands=None, aux=None, glu=None, scale_result=None
    )
    with pytest.raises(TypeError, match="gate"):
        decision(None, None, None, gate="silu")


def test_pack_layout():
    x = types.SimpleNamespace(data=types.SimpleNamespace(ptr=0x1000))
    b = E.pack(2.0, 7, 9, 0x2000, 16, 0, [(x, 5, 3)])
    assert len(b) == SNIPPET.nbytes == 64
    assert np.frombuffer(b[:4], np.float32)[0] == 2.0
    assert tuple(np.frombuffer(b[4:16], np.int32)) == (7, 9, 0)
    assert tuple(np.frombuffer(b[16:], np.int64)) == (0x2000, 16, 0, 0x1000, 5, 3)
    assert len(E.pack(1.0, 1, 1, 0, 1, 0, [])) == E.Epilogue("", "", (), "").nbytes == 64


# ---- CPU: offline compiles and NVRTC messages ------------------------------------------------------------------


@pytest.mark.parametrize(
    "kernel,dt",
    [
        ("blocktile_2d", "float32"),
        ("double_buffer", "float32"),
        ("wgmma_tf32x3", "float32"),
        ("wgmma_f16x3", "float32"),
        ("mma_swizzled_pipeline", "bfloat16"),
        ("wgmma", "float16"),
        ("wgmma_ws", "bfloat16"),
        ("wgmma_cluster_split_k", "bfloat16"),
        ("skinny16", "bfloat16"),
        ("wgmma_swap_ab", "bfloat16"),
    ],
)
@pytest.mark.parametrize("batched", [0, 1])
def test_epilogue_compiles_offline(kernel, dt, batched):
    """Every store path takes the CummAlpha overloads (a store that does not would not compile: no conversion)."""
    spec = REGISTRY[kernel]
    if batched and not R.supports_batch(spec):
        pytest.skip(f"{kernel} runs no batches")
    cfg = spec.resolve(None, 90)
    flags = (1, 1, 1, batched, 0 if dt == "float32" else R.dtype_flag(dt, dt))
    k = compile_offline(spec, cfg, "sm_90", E.with_flags(flags, GELU_BIAS))
    assert k.registers > 0


@pytest.mark.parametrize(
    "kernel,dt,act",
    [("double_buffer", "float32", a) for a in E.ACTIVATIONS]
    + [("wgmma_pingpong", "bfloat16", a) for a in ("gelu", "gelu_tanh", "silu")]
    + [("wgmma_ws", "float16", "gelu_tanh"), ("wgmma_pingpong", "float16", "gelu")],
)
def test_named_activation_first_compiles_offline(kernel, dt, act):
    """A named activation is the accumulator's first expression (act_ab / act_a, include/epilogue.cuh), in every
    C dtype's form (bfloat16 C's halved gelu / gelu_tanh / silu, the others')."""
    spec = REGISTRY[kernel]
    flags = (1, 1, 1, 0, 0 if dt == "float32" else R.dtype_flag(dt, dt))
    for bias in (None, _Fake((7,))):
        epi, _ = _build(bias=bias, activation=act)
        assert epi.first.startswith(E.ACTIVATIONS[act] + ("_ab(" if bias else "_a("))
        assert compile_offline(spec, spec.resolve(None, 90), "sm_90", E.with_flags(flags, epi)).registers > 0


def test_named_activation_with_an_operand_named_acc_compiles():
    """An operand the user names `acc` beside a named activation: the accumulator's parameter is cumm_acc (cumm_
    names are refused for operands), so nothing is declared twice."""
    spec = REGISTRY["double_buffer"]
    epi, _ = _build(bias=_Fake((7,)), activation="relu", epilogue="v += acc[col];", operands={"acc": _Fake((7,))})
    assert "acc" in dict(epi.operands)
    assert compile_offline(spec, spec.resolve(None, 90), "sm_90", E.with_flags((1, 1, 1, 0, 0), epi)).registers > 0


def test_tf32x3_takes_no_epilogue():
    assert RT.route("tf32x3", "auto", None) == "double_buffer"
    with pytest.raises(ValueError, match="does not take an epilogue"):
        RT.route("tf32x3", "tf32x3", None)
    with pytest.raises(ValueError, match="split_k=4 with an epilogue"):
        RT.route("warptile", "warptile", 4)
    assert RT.route("wgmma_ws", "auto", None) == "wgmma_ws"


def test_the_fallback_route_is_asked_with_the_first(monkeypatch):
    """decide asks, with an epilogue call's route, the rung its rung's fallback would hand it to: wgmma_tf32x3
    falls back to tf32x3, whose stores take none (double_buffer's do); the wgmma rungs' fallback takes one."""
    assert RT.fallback_route("wgmma_tf32x3") == "double_buffer" == RT.route("tf32x3", "auto", None)
    assert RT.fallback_route("wgmma_ws") is None and RT.fallback_route("warptile") is None
    monkeypatch.setitem(REGISTRY, "warptile", dataclasses.replace(REGISTRY["warptile"], fallback="not-a-rung"))
    assert RT.fallback_route("warptile") is None  # (decide's REGISTRY[...] says what it is, as before)

    def refuse(kernel, requested, split_k):
        raise ValueError(f"nothing below {kernel} takes it")

    monkeypatch.setattr(RT, "route", refuse)  # no rung takes it: the error, for decide to raise if the fallback runs
    err = RT.fallback_route("wgmma_tf32x3")
    assert isinstance(err, ValueError) and str(err) == "nothing below tf32x3 takes it"


@pytest.mark.parametrize("cc", [75, 80, 90])
def test_routes_answers_as_decide_asked_one_by_one(monkeypatch, cc):
    """routes(): route, then (auto, an epilogue reading no M x N operand) the short-K route, then (a batch under auto)
    a rung that runs the batch in one launch and takes an epilogue, then fallback_route, for every rung, dtype,
    batch, depth and epilogue kind, as decide asked them one at a time."""
    monkeypatch.setattr(RT, "compute_capability", lambda dev: cc)
    monkeypatch.setattr(RT, "multiprocessors", lambda dev: 132)
    monkeypatch.setattr(RT._auto, "epilogue_tie", lambda *args: None)  # (no tuned table: test_pingpong's tie test)
    plain = E.Epilogue("v += bias[col];", "", (("bias", "float32"),), "bias")
    matrix = dataclasses.replace(plain, reads_matrix=True)

    def one_by_one(kernel, auto, batch, dt, K, epi):
        routed = RT.route(kernel, "auto" if auto else kernel, None)
        if auto and not epi.reads_matrix:
            routed = RT.short_k_route(routed, K, dt, cc, 4096, 4096, 132)
        if batch and auto and not REGISTRY[routed].batches:
            able = [
                n
                for n, s in REGISTRY.items()
                if s.kind == "gemm" and s.batches and dt in s.dtypes and s.min_cc <= cc and s.epilogue
            ]
            routed = able[-1] if able else routed
        return routed, RT.fallback_route(routed), None

    for kernel, spec in REGISTRY.items():
        for dt in spec.dtypes if spec.kind == "gemm" else ():
            for auto, batch, (K, epi) in itertools.product(
                (True, False), ((), (3,)), ((4096, plain), (1024, plain), (1024, matrix))
            ):
                try:
                    want = one_by_one(kernel, auto, batch, dt, K, epi)
                except ValueError as e:
                    with pytest.raises(ValueError, match=re.escape(str(e))):
                        RT.routes(kernel, auto, None, batch, dt, 0, (4096, 4096, K), epi)
                    continue
                got = RT.routes(kernel, auto, None, batch, dt, 0, (4096, 4096, K), epi)
                assert got == want, (kernel, auto, batch, dt, K, epi.reads_matrix)
    # the short-K route itself, on the H200: wgmma_pingpong in the top rung's place at K <= 2048, and deeper where
    # its 128 x 192 tiles fill the rounds (8192 x 14336) but not where they leave a round short (4096^3)
    if cc == 90:
        assert RT.routes("wgmma_ws", True, None, (), "bfloat16", 0, (4096, 4096, 1024), plain)[0] == "wgmma_pingpong"
        assert RT.routes("wgmma_ws", True, None, (), "bfloat16", 0, (4096, 4096, 1024), matrix)[0] == "wgmma_ws"
        assert RT.routes("wgmma_ws", False, None, (), "bfloat16", 0, (4096, 4096, 1024), plain)[0] == "wgmma_ws"
        assert RT.routes("wgmma_ws", True, None, (), "bfloat16", 0, (8192, 14336, 4096), plain)[0] == "wgmma_pingpong"
        assert RT.routes("wgmma_ws", True, None, (), "bfloat16", 0, (4096, 4096, 4096), plain)[0] == "wgmma_ws"


def test_snippet_compile_error_names_its_line():
    spec = REGISTRY["warptile"]
    epi = E.Epilogue("", "float t = v * 2.0f;\nv = t + not_declared;", (), "snippet")
    with pytest.raises(CompileError) as e:
        compile_offline(spec, spec.resolve(None, 90), "sm_90", E.with_flags((1, 1, 1), epi))
    msg = str(e.value)
    assert "epilogue snippet line 2" in msg and "not_declared" in msg and "v = t + not_declared;" in msg


def test_snippet_errors_without_snippet_is_empty():
    assert R.snippet_errors("warptile.cu(3): error: x", "no snippet here") == ""


# ---- CPU: argument checks ----------------------------------------------------------------------------------------


class _Fake:
    """Enough of a cupy array for build()'s checks (no GPU)."""

    def __init__(self, shape, dtype="float32", dev=0, strides=None):
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype) if dtype != "bfloat16" else types.SimpleNamespace(name="bfloat16", itemsize=2)
        item = self.dtype.itemsize
        self.ndim = len(self.shape)
        self.size = math.prod(self.shape)
        if strides is None:
            strides, s = [], item
            for d in reversed(self.shape):
                strides.insert(0, s)
                s *= max(d, 1)
        self.strides = tuple(strides)
        self.data = types.SimpleNamespace(ptr=4096, device_id=dev)

    def reshape(self, *shape):
        shape = shape[0] if len(shape) == 1 and isinstance(shape[0], tuple) else shape
        return _Fake(shape, self.dtype.name, self.data.device_id)


def _build(M=5, N=7, batch=(), **kw):
    return E.build(None, M, N, batch, 0, as_cupy=lambda x, name: x, **kw)


def test_build_none():
    assert _build() == (None, ())


def test_build_named_order_and_operands():
    epi, ops = _build(bias=_Fake((7,)), activation="gelu", residual=_Fake((5, 7), "float16"))
    # bias and activation are one expression of the accumulator (alpha and the bias in its first instruction)
    assert epi.first == "cumm_gelu_ab(cumm_acc, cumm_al.a, bias[col])"
    assert epi.named == "v += residual[(i64)row * ld_residual + col];"
    assert epi.operands == (("bias", "float32"), ("residual", "float16"))
    assert [(ld, bs) for _, ld, bs in ops] == [(0, 0), (7, 0)]
    epi, _ = _build(bias=_Fake((5, 1)))
    assert epi.named == "v += bias[row];" and epi.first == ""
    epi, _ = _build(bias=_Fake((5, 1)), activation="silu")
    assert epi.first == "cumm_silu_ab(cumm_acc, cumm_al.a, bias[row])" and epi.named == ""
    epi, _ = _build(activation="gelu_tanh")
    assert epi.first == "cumm_gelu_tanh_a(cumm_acc, cumm_al.a)"
    # with glu= the activation is a statement on the pair's value (alpha already applied)
    epi, _ = _build(N=16, bias=_Fake((8,)), activation="relu", glu="silu")
    assert epi.first == "" and epi.named == "v += bias[col]; v = cumm_relu(v);"
    epi, _ = _build(bias=_Fake((1, 7)))
    assert epi.named == "v += bias[col];"
    epi, ops = _build(M=5, N=7, batch=(3,), residual=_Fake((3, 5, 7)))
    assert ops[0][1:] == (7, 35)


def test_build_says_when_it_reads_a_matrix():
    """auto's short-K route (wgmma_pingpong) is not taken for an epilogue that reads an operand per element."""
    assert not _build(bias=_Fake((7,)), activation="gelu")[0].reads_matrix
    assert not _build(epilogue="v *= s[col];", operands={"s": _Fake((7,))})[0].reads_matrix
    assert _build(residual=_Fake((5, 7)))[0].reads_matrix
    assert _build(epilogue="v *= aux[row * ld_aux + col];", aux=_Fake((5, 7)))[0].reads_matrix
    a, b = _build(bias=_Fake((7,)))[0], _build(bias=_Fake((7,)))[0]
    assert a.digest == b.digest and a == b


@pytest.mark.parametrize(
    "kw,match",
    [
        (dict(bias=_Fake((6,))), r"bias has shape \(6,\); it must be \(7,\) or \(1, 7\).*\(5, 1\)"),
        (dict(bias=_Fake((5, 7))), "bias has shape"),
        (dict(activation="tanh"), "activation='tanh'; it must be one of"),
        (dict(residual=_Fake((7, 5))), r"residual has shape \(7, 5\); it must be \(5, 7\)"),
        (dict(bias=_Fake((7,), "int32")), "bias has dtype int32"),
        (dict(bias=_Fake((7,), dev=1)), "bias is on device 1 and a on device 0"),
        (dict(aux=_Fake((5, 7))), "read only by an epilogue= snippet"),
        (dict(epilogue="v = v * x[col];", operands={"row": _Fake((7,))}), "operand name 'row'"),
        (dict(epilogue="v = 1;", operands={"2x": _Fake((7,))}), "must be a C identifier"),
        (dict(epilogue="v = 1;", operands={"cumm_x": _Fake((7,))}), "starting with 'cumm'"),
        (dict(epilogue="v = 1;", aux=_Fake((7,)), operands={"aux": _Fake((7,))}), "name the same operand"),
        (dict(epilogue="   "), "epilogue must be a non-empty str"),
        (dict(epilogue=3), "epilogue must be a non-empty str"),
    ],
)
def test_build_errors(kw, match):
    with pytest.raises((ValueError, TypeError), match=match):
        _build(**kw)


def test_build_batched_residual_shape():
    with pytest.raises(ValueError, match=r"\(4, 5, 7\)"):
        _build(batch=(4,), residual=_Fake((3, 5, 7)))


def test_build_snippet_with_operands():
    epi, ops = _build(
        epilogue="v *= gate[(i64)row * ld_gate + col] + s[col];", operands={"gate": _Fake((5, 7))}, aux=None
    )
    assert epi.operands == (("gate", "float32"),) and epi.snippet.startswith("v *= gate")
    epi, ops = _build(epilogue="v *= aux[col];", aux=_Fake((7,), "float16"))
    assert epi.operands == (("aux", "float16"),) and ops[0][1:] == (0, 0)


# ---- GPU -----------------------------------------------------------------------------------------------------


def _acts():
    import cupy
    from cupyx.scipy.special import erf

    return {
        None: lambda v: v,
        "relu": lambda v: cupy.maximum(v, 0),
        "gelu": lambda v: 0.5 * v * (1 + erf(v / math.sqrt(2))),
        "gelu_tanh": lambda v: 0.5 * v * (1 + cupy.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v**3))),
        "silu": lambda v: v / (1 + cupy.exp(-v)),
    }


def _rel(c, ref):
    import cupy

    c64 = cupy.asarray(c).astype(cupy.float32).astype(cupy.float64)
    den = float(cupy.linalg.norm(ref))
    return float(cupy.linalg.norm(c64 - ref)) / (den or 1.0)


def _dt(name):
    import cupy

    if name == "bfloat16":
        import ml_dtypes

        return ml_dtypes.bfloat16
    return cupy.dtype(name)


def _f64(x):
    import cupy

    return cupy.asarray(x).astype(cupy.float32).astype(cupy.float64)


# (kernel, dtype): SIMT lower and top rungs, tf32x3 on wgmma, mma, wgmma (13) and wgmma_ws (TMA-store path for
# bf16 with N % 8 == 0, direct stores otherwise), and auto
RUNGS = [
    ("blocktile_2d", "float32"),
    ("double_buffer", "float32"),
    ("wgmma_tf32x3", "float32"),
    ("wgmma_f16x3", "float32"),  # (FP32 from FP16 pieces: auto's FP32 rung for large products)
    ("mma_swizzled_pipeline", "bfloat16"),
    ("wgmma", "float16"),
    ("wgmma_ws", "bfloat16"),
    ("skinny16", "float16"),  # (auto's rung for one-row half products)
    ("wgmma_swap_ab", "bfloat16"),  # (transposed tiles: C written an element at a time)
    ("auto", "float32"),
    ("auto", "bfloat16"),
]
SHAPES = [(1, 1, 1), (37, 41, 13), (129, 256, 65), (257, 131, 300)]  # N = 256: wgmma_ws's TMA store; 131: direct
_SM90 = {"wgmma_tf32x3", "wgmma_f16x3", "wgmma", "wgmma_ws", "wgmma_swap_ab"}


def _b(rng, K, N, dt):
    """B as a view of rows padded to 16 bytes: the copy engine reads it whatever N is, so wgmma_ws keeps an N off
    the 8-column grid and stores C through its direct path (cumm_store_tile), N % 8 == 0 through the TMA store."""
    pad = (-N) % 8
    return rng.standard_normal((K, N + pad), dtype="float32").astype(_dt(dt))[:, :N]


def _cfg(kernel):
    """A named rung runs its default tiles on every shape (one variant to compile per epilogue: wgmma_ws's take
    ~15 s each); auto chooses its own."""
    return None if kernel == "auto" else {}


def _tol(dt, out_ref):
    """float32: 1e-5 (tf32x3 and FP32 FMAs); 16-bit: the error of the float64 reference rounded to the output's
    dtype, times 2, plus a little (accumulation order)."""
    if dt == "float32":
        return 1e-5
    return 2 * _rel(out_ref.astype(_dt(dt)), out_ref) + 2e-3


ACTIVATIONS = [None, "relu", "gelu", "gelu_tanh", "silu"]


def _named_case(rng, kernel, dt, M, N, K, act):
    import cupy

    a = rng.standard_normal((M, K), dtype="float32").astype(_dt(dt))
    b = _b(rng, K, N, dt)
    bias = rng.standard_normal((N,), dtype="float32").astype(_dt(dt))
    res = rng.standard_normal((M, N), dtype="float32").astype(_dt(dt))
    c0 = rng.standard_normal((M, N), dtype="float32").astype(_dt(dt))
    p = _f64(a) @ _f64(b)
    f = _acts()[act]
    out = cupy.full((M, N), math.nan, dtype="float32").astype(_dt(dt))
    cumm.matmul(a, b, kernel=kernel, config=_cfg(kernel), out=out, alpha=0.5, bias=bias, activation=act)
    ref = f(0.5 * p + _f64(bias)[None, :])
    assert _rel(out, ref) < _tol(dt, ref)
    # per-row bias, residual, beta: C = act(alpha A@B + bias) + residual + beta C
    rb = rng.standard_normal((M, 1), dtype="float32").astype(_dt(dt))
    out = c0.copy()
    cumm.matmul(
        a, b, kernel=kernel, config=_cfg(kernel), out=out, alpha=-1.0, beta=2.0, bias=rb, activation=act, residual=res
    )
    ref = f(-p + _f64(rb)) + _f64(res) + 2.0 * _f64(c0)
    assert _rel(out, ref) < _tol(dt, ref)


@pytest.mark.gpu
@pytest.mark.parametrize("act", ACTIVATIONS)
@pytest.mark.parametrize("M,N,K", [(1, 1, 1), (67, 45, 33), (300, 257, 129)])
def test_activations(rng, act, M, N, K):
    """Every activation's math, on the cheapest rung to compile."""
    _named_case(rng, "naive", "float32", M, N, K, act)


@pytest.mark.gpu
@pytest.mark.parametrize("kernel,dt", RUNGS)
@pytest.mark.parametrize("M,N,K", SHAPES)
def test_named_epilogues(rng, kernel, dt, M, N, K, request):
    """bias (per column, per row), an activation (one per rung, in turn: few variants to compile), residual, beta."""
    if kernel in _SM90:
        request.getfixturevalue("sm90")
    act = ACTIVATIONS[1 + RUNGS.index((kernel, dt)) % 4]
    _named_case(rng, kernel, dt, M, N, K, act)


@pytest.mark.gpu
@pytest.mark.parametrize("kernel,dt", RUNGS)
@pytest.mark.parametrize("M,N,K", SHAPES)
def test_snippet(rng, kernel, dt, M, N, K, request):
    import cupy

    if kernel in _SM90:
        request.getfixturevalue("sm90")
    a = rng.standard_normal((M, K), dtype="float32").astype(_dt(dt))
    b = _b(rng, K, N, dt)
    t = rng.standard_normal((M, N), dtype="float32")
    s = rng.standard_normal((N,), dtype="float32").astype(_dt(dt))
    p = _f64(a) @ _f64(b)
    out = cupy.full((M, N), math.nan, dtype="float32").astype(_dt(dt))
    got = cumm.matmul(
        a,
        b,
        kernel=kernel,
        config=_cfg(kernel),
        epilogue="v = v * (1.0f / (1.0f + __expf(-v))) * aux[row * ld_aux + col];",
        aux=t,
    )
    ref = p / (1 + cupy.exp(-p)) * _f64(t)
    assert got.shape == (M, N) and _rel(got, ref) < max(_tol(dt, ref), 2e-5)
    # two named operands, a multi-line snippet, row and col
    snip = "float g = gate[(i64)row * ld_gate + col];\nv = v * g + sc[col] + 0.001f * row;"
    cumm.matmul(a, b, kernel=kernel, config=_cfg(kernel), out=out, epilogue=snip, operands={"gate": t, "sc": s})
    ref = p * _f64(t) + _f64(s)[None, :] + 0.001 * cupy.arange(M, dtype=cupy.float64)[:, None]
    assert _rel(out, ref) < max(_tol(dt, ref), 2e-5)


@pytest.mark.gpu
@pytest.mark.parametrize(
    "kernel,dt", [("double_buffer", "float32"), ("wgmma_ws", "bfloat16"), ("auto", "bfloat16"), ("auto", "float32")]
)
@pytest.mark.parametrize(
    "shape_a,shape_b", [((3, 37, 64), (64, 72)), ((2, 65, 40), (2, 40, 136)), ((4, 128, 64), (1, 64, 256))]
)
def test_batched_epilogue(rng, kernel, dt, shape_a, shape_b, request):
    import cupy

    if kernel in _SM90:
        request.getfixturevalue("sm90")
    a = rng.standard_normal(shape_a, dtype="float32").astype(_dt(dt))
    b = rng.standard_normal(shape_b, dtype="float32").astype(_dt(dt))
    p = _f64(a) @ _f64(b)
    batch, M, N = p.shape[:-2], p.shape[-2], p.shape[-1]
    bias = rng.standard_normal((N,), dtype="float32").astype(_dt(dt))
    res = rng.standard_normal(p.shape, dtype="float32").astype(_dt(dt))
    got = cumm.matmul(a, b, kernel=kernel, config=_cfg(kernel), bias=bias, activation="gelu", residual=res)
    ref = _acts()["gelu"](p + _f64(bias)) + _f64(res)
    assert got.shape == p.shape and _rel(got, ref) < _tol(dt, ref)
    aux = rng.standard_normal((M, N), dtype="float32")  # 2-D: broadcast over the batch
    got = cumm.matmul(
        a, b, kernel=kernel, config=_cfg(kernel), epilogue="v = v * aux[row * ld_aux + col] + z;", aux=aux
    )
    zz = cupy.arange(math.prod(batch), dtype=cupy.float64).reshape(batch + (1, 1))
    ref = p * _f64(aux) + zz
    assert _rel(got, ref) < max(_tol(dt, ref), 2e-5)


@pytest.mark.gpu
def test_torch_epilogue_and_errors(rng):
    torch = pytest.importorskip("torch")
    x = torch.randn(129, 200, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(200, 264, device="cuda", dtype=torch.bfloat16)
    bias = torch.randn(264, device="cuda", dtype=torch.bfloat16)
    got = cumm.matmul(x, w, bias=bias, activation="gelu")
    assert isinstance(got, torch.Tensor) and got.dtype == torch.bfloat16
    ref = torch.nn.functional.gelu(x.double() @ w.double() + bias.double())
    theirs = torch.nn.functional.gelu(torch.addmm(bias, x, w))
    err = float((got.double() - ref).norm() / ref.norm())
    err_torch = float((theirs.double() - ref).norm() / ref.norm())
    assert err <= 1.5 * err_torch + 1e-3
    import cupy

    with pytest.raises(TypeError, match="bias is a"):
        cumm.matmul(x, w, bias=cupy.zeros(264, dtype=cupy.float32))
    with pytest.raises(ValueError, match="bias has shape"):
        cumm.matmul(x, w, bias=bias[:10])
    with pytest.raises(ValueError, match="split_k=2 with an epilogue"):
        cumm.matmul(x.float(), w.float(), kernel="warptile", split_k=2, activation="relu")
    with pytest.raises(ValueError, match="does not take an epilogue"):
        cumm.matmul(x.float(), w.float(), kernel="tf32x3", activation="relu")
    with pytest.raises(CompileError, match="epilogue snippet line 1"):
        cumm.matmul(x, w, epilogue="v = nope;")


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["cupy", "torch"])
def test_cached_fused_calls_run_on_each_calls_arrays(kind, rng):
    """A fused call kept after its first run (cumm/api/fused.py) launches on each later call's own arrays: new inputs,
    bias and out (given, or made), each against float64."""
    import cupy

    from cumm.api import fused as _fused
    from cumm.api import matmul as _matmul

    torch = pytest.importorskip("torch") if kind == "torch" else None

    def as_kind(x):
        return torch.as_tensor(x, device="cuda") if torch is not None else x

    for i in range(4):
        a, b = (as_kind(rng.standard_normal(s, dtype="float32").astype("float16")) for s in ((130, 264), (264, 200)))
        bias = as_kind(rng.standard_normal(200, dtype="float32").astype("float16"))
        ref = cupy.maximum(_f64(a) @ _f64(b) + _f64(bias)[None, :], 0.0)
        out = as_kind(cupy.full((130, 200), math.nan, dtype="float16")) if i % 2 else None
        got = cumm.matmul(a, b, bias=bias, activation="relu", out=out)
        assert got is out if out is not None else got.shape == (130, 200)
        assert _rel(got, ref) < _tol("float16", ref), i
        if i:  # (kept after the first call with its key)
            key = _matmul._key(a, b, out, "auto", None, None, 0.0, _fused.arguments(out, bias, "relu"))
            assert key in _fused.calls, i


@pytest.mark.gpu
def test_auto_routes_around_split_k_and_tf32x3(rng):
    """Shapes where auto would split K or pick tf32x3 still get the epilogue once, on the whole sum."""
    import cupy

    for M, N, K in ((64, 64, 8192), (32, 48, 4096), (8, 8, 20000)):
        a = rng.standard_normal((M, K), dtype="float32")
        b = rng.standard_normal((K, N), dtype="float32")
        got = cumm.matmul(a, b, activation="relu", bias=cupy.ones(N, dtype=cupy.float32))
        ref = cupy.maximum(_f64(a) @ _f64(b) + 1.0, 0)
        assert _rel(got, ref) < 1e-5


# ---- cumm check / cumm bench with an epilogue ------------------------------------------------------------------


def test_epiref_check_args():
    from cumm.tools import epiref

    epiref.check_args(None, None, None)
    epiref.check_args(None, "gelu", None)
    epiref.check_args("v = 2.0f * v;", None, "2 * v")
    epiref.check_args("v = 2.0f * v;", None, lambda v, row, col: 2 * v)
    with pytest.raises(ValueError, match="needs a reference"):
        epiref.check_args("v = 2.0f * v;", None, None)
    with pytest.raises(ValueError, match="activation='tanh'"):
        epiref.check_args(None, "tanh", None)
    with pytest.raises(TypeError, match="reference must be"):
        epiref.check_args("v = v;", None, 3)
    with pytest.raises(SyntaxError):
        epiref.check_args("v = v;", None, "2 *")


@pytest.mark.parametrize("command", ["check", "bench"])
def test_cli_epilogue_errors_before_gpu(command, capsys):
    from cumm.tools.cli import main

    args = [command, "--kernel" if command == "check" else "--kernels", "warptile", "--epilogue", "v = 2.0f * v;"]
    assert main(args) == 1
    assert "needs a reference" in capsys.readouterr().err
    assert main([*args, "--reference", "2 *"]) == 1
    assert "invalid syntax" in capsys.readouterr().err


def test_cli_parses_epilogue_arguments():
    from cumm.tools.cli import build_parser

    a = build_parser().parse_args(
        ["bench", "--kernels", "auto", "--activation", "gelu", "--epilogue", "v += 1.0f;", "--reference", "v + 1"]
    )
    assert (a.activation, a.epilogue, a.reference) == ("gelu", "v += 1.0f;", "v + 1")
    with pytest.raises(SystemExit):
        build_parser().parse_args(["check", "--kernel", "warptile", "--activation", "tanh"])


@pytest.mark.gpu
def test_check_and_bench_with_epilogue():
    report = cumm.check(
        "double_buffer",
        epilogue="v = v / (1.0f + __expf(-v));",
        reference="v / (1 + exp(-v))",
        shapes=[(37, 41, 13), (129, 256, 65)],
    )
    assert report.ok, str(report)
    report = cumm.check("double_buffer", activation="gelu", shapes=[(37, 41, 13)])
    assert report.ok, str(report)
    # a wrong reference is caught
    report = cumm.check("double_buffer", epilogue="v = 2.0f * v;", reference="3 * v", shapes=[(37, 41, 13)])
    assert not report.ok
    rows = cumm.bench(
        ["double_buffer"],
        shapes=[(256, 256, 256)],
        epilogue="v = 2.0f * v;",
        reference="2 * v",
        repeat=3,
        progress=False,
    )
    assert [r["status"] for r in rows] == ["ok", "ok"]


# ---- the cheap epilogue: compile options and the 16-bit fast activations ----------------------------------------


def test_epilogue_options_only_for_epilogue_variants():
    """-prec-div=false (a snippet's `/` without IEEE's per-element slow path) only where there is an epilogue: the
    options, and so the cubin cache path, of a variant without one are what they were."""
    from cumm.runtime import compile as C

    assert C.options((1, 1, 1, 0, 0)) == C.NVRTC_OPTIONS
    assert C.options(E.with_flags((1, 1, 1, 0, 0), SNIPPET)) == (*C.NVRTC_OPTIONS, "-prec-div=false")


@pytest.mark.gpu
@pytest.mark.parametrize("kernel,dt", [("wgmma_ws", "bfloat16"), ("mma_swizzled_pipeline", "float16")])
@pytest.mark.parametrize("act", ["gelu", "gelu_tanh", "silu"])
def test_fast_activations_per_element(rng, kernel, dt, act, request):
    """The 16-bit C activations (erfc polynomial, tanh.approx, __fdividef) element by element over -12..12, K = 1
    (v = a exactly): each within 1.5 units of C's last place of the float64 value (C's rounding takes 0.5), plus
    2^-20 absolute (the erfc polynomial's 3e-8 where GELU's tail is far below C's units)."""
    import cupy

    if kernel == "wgmma_ws":
        request.getfixturevalue("sm90")
    M, N = 4099, 8
    a = np.linspace(-12, 12, M).astype("float32").reshape(M, 1).astype(_dt(dt))
    b = np.ones((1, N), dtype="float32").astype(_dt(dt))
    out = cupy.full((M, N), math.nan, dtype="float32").astype(_dt(dt))
    cumm.matmul(cupy.asarray(a), cupy.asarray(b), kernel=kernel, config={}, out=out, activation=act)
    ref = _acts()[act](_f64(cupy.asarray(a)) @ cupy.ones((1, N)))
    got = _f64(out)
    ulp = 2.0 ** (-7 if dt == "bfloat16" else -10) * cupy.maximum(cupy.abs(ref), 2.0**-14)
    worst = float(cupy.max((cupy.abs(got - ref) - 2.0**-20) / ulp))
    assert worst <= 1.5, f"{act} on {kernel} ({dt}): {worst:.2f} units of C's last place"


@pytest.mark.gpu
@pytest.mark.parametrize("M,N", [(131, 257), (1, 4097), (193, 7)])
def test_edge_tiles_read_operands_in_range(rng, M, N, request):
    """Elements past M or N run the epilogue at the last row / column (branch-free): an M x N operand read there is
    read in range (compute-sanitizer memcheck covers this test in lab/gpu.sh), and C is exact at the edges."""
    import cupy

    request.getfixturevalue("sm90")
    K = 65
    a = cupy.asarray(rng.standard_normal((M, K), dtype="float32").astype(_dt("bfloat16")))
    b = cupy.asarray(_b(rng, K, N, "bfloat16"))
    g = cupy.asarray(rng.standard_normal((M, N), dtype="float32").astype(_dt("bfloat16")))
    out = cupy.full((M, N), math.nan, dtype="float32").astype(_dt("bfloat16"))
    snip = "v = v * g[(i64)row * ld_g + col] + (float)(row - col);"
    cumm.matmul(a, b, kernel="wgmma_ws", config={}, out=out, epilogue=snip, operands={"g": g})
    r = cupy.arange(M, dtype=cupy.float64)[:, None] - cupy.arange(N, dtype=cupy.float64)[None, :]
    ref = (_f64(a) @ _f64(b)) * _f64(g) + r
    assert _rel(out, ref) < _tol("bfloat16", ref)


@pytest.mark.gpu
@pytest.mark.parametrize(
    "kernel,config,dt",
    [
        ("wgmma_ws", {}, "bfloat16"),
        ("wgmma_pingpong", {"BM": 128, "BN": 192, "STAGES": 4}, "bfloat16"),
        ("wgmma_pingpong", {}, "float16"),
    ],
)
@pytest.mark.parametrize("act", ["gelu_tanh", "silu"])
def test_named_activation_same_bits_as_statements(rng, kernel, config, dt, act, request):
    """A named bias + activation is one expression of the accumulator (act_ab: alpha and bfloat16 C's halving in the
    first FFMA): the same bits as the statements it replaces, v = alpha acc; v += bias; v = act(v), written as a
    snippet, on an odd shape with alpha != 1 (the halving is exact)."""
    import cupy

    request.getfixturevalue("sm90")
    M, N, K = 127, 131, 136
    a = cupy.asarray(rng.standard_normal((M, K), dtype="float32").astype(_dt(dt)))
    b = cupy.asarray(_b(rng, K, N, dt))
    bias = cupy.asarray(rng.standard_normal((N,), dtype="float32").astype(_dt(dt)))
    got = [cupy.full((M, N), math.nan, dtype="float32").astype(_dt(dt)) for _ in range(2)]
    cumm.matmul(a, b, kernel=kernel, config=config, out=got[0], alpha=0.75, bias=bias, activation=act)
    snip = f"v = cumm_{act}(v + bb[col]);"
    cumm.matmul(a, b, kernel=kernel, config=config, out=got[1], alpha=0.75, epilogue=snip, operands={"bb": bias})
    assert cupy.array_equal(got[0].view(cupy.uint16), got[1].view(cupy.uint16))
    ref = _acts()[act](0.75 * (_f64(a) @ _f64(b)) + _f64(bias)[None, :])
    assert _rel(got[0], ref) < _tol(dt, ref)
