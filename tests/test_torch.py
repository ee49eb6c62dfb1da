"""cumm.torch: the torch.library ops cumm::matmul and cumm::linear, their fake (meta) implementations, their
backward, and cumm.torch.Linear in a torch.compile'd model (fullgraph=True: no graph break).

Without a GPU the fakes run on meta tensors, and the real ops on CPU tensors with cumm's kernel replaced by a torch
stand-in (the ``standin`` fixture): what the ops themselves do (shapes, reshapes, K = 0, backward formulas, the
registrations torch.library.opcheck checks) is tested here; the kernels are tested on the GPU (marker ``gpu``)."""

from __future__ import annotations

import subprocess
import sys

import pytest

try:
    import torch
except ImportError:  # the CI venv has no torch
    torch = None

pytestmark = [
    pytest.mark.skipif(torch is None, reason="torch is not installed here; cumm.torch needs it"),
    # torch's own modules warn while torch.compile imports them (the GPU suite turns DeprecationWarning into errors)
    pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning"),
]

SHAPES = [  # (a shape, b shape): numpy.matmul's cases
    ((3, 4), (4, 5)),
    ((4,), (4, 5)),
    ((3, 4), (4,)),
    ((4,), (4,)),
    ((2, 3, 4), (4, 5)),
    ((3, 4), (2, 4, 5)),
    ((2, 1, 3, 4), (5, 4, 6)),
    ((7,), (2, 7, 3)),
    ((2, 3, 7), (7,)),
    ((1, 1), (1, 1)),
    ((0, 4), (4, 5)),
    ((3, 0), (0, 5)),
]


@pytest.fixture
def ct():
    import cumm.torch

    return cumm.torch


def _ref_linear(x, w, bias=None, activation=None, residual=None):
    """The op's meaning in float32 torch."""
    from cumm.torch.common import act as _act

    y = x.float() @ w.float().t()
    if bias is not None:
        y = y + bias.float()
    y = _act(y, activation)
    return y + residual.float() if residual is not None else y


def _ref_glu(x, w13, activation):
    """glu_linear's meaning in float32 torch: w13's rows 16 q .. 16 q + 7 are w1's, the next 8 w3's."""
    from cumm.torch.common import act as _act

    n2, k = w13.shape
    w = w13.float().reshape(n2 // 16, 2, 8, k)
    w1, w3 = w[:, 0].reshape(n2 // 2, k), w[:, 1].reshape(n2 // 2, k)
    return _act(x.float() @ w1.t(), activation) * (x.float() @ w3.t())


@pytest.fixture
def standin(ct, monkeypatch):
    """cumm's kernel replaced by torch on the host, so the ops run (and differentiate) on CPU tensors."""

    def fake_cumm(a, b, *, kernel="auto", bias=None, activation=None, residual=None, glu=None):
        assert isinstance(kernel, str)
        if glu is not None:  # glu_linear: the weight's rows (b's columns) in turns of 8, gate then up
            return _ref_glu(a, b.t(), glu).to(a.dtype)
        if bias is None and activation is None and residual is None:
            return torch.matmul(a.float(), b.float()).to(a.dtype)
        assert a.dim() == 2 and b.dim() == 2  # linear flattens x to rows
        return _ref_linear(a, b.t(), bias, activation, residual).to(a.dtype)

    from cumm.torch import glu_op, linear_op, matmul_op

    for op in (matmul_op, linear_op, glu_op):  # (each op's module calls cumm.matmul)
        monkeypatch.setattr(op, "_cumm_matmul", fake_cumm)


def test_import_cumm_does_not_import_torch():
    code = "import sys, cumm; assert 'torch' not in sys.modules, 'import cumm imported torch'"
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("shapes", SHAPES, ids=str)
@pytest.mark.parametrize("dt", ["float32", "float16", "bfloat16"])
def test_matmul_fake_shape_dtype_strides(ct, shapes, dt):
    import numpy as np

    sa, sb = shapes
    dtype = getattr(torch, dt)
    a, b = torch.empty(sa, dtype=dtype, device="meta"), torch.empty(sb, dtype=dtype, device="meta")
    y = torch.ops.cumm.matmul(a, b)
    assert tuple(y.shape) == np.matmul(np.ones(sa), np.ones(sb)).shape
    assert y.dtype == dtype and y.device.type == "meta" and y.is_contiguous()


def test_matmul_fake_errors(ct):
    m = "meta"
    with pytest.raises(RuntimeError, match=r"last dimension.*\(3, 4\) and \(5, 6\)"):
        torch.ops.cumm.matmul(torch.empty(3, 4, device=m), torch.empty(5, 6, device=m))
    with pytest.raises(RuntimeError, match="one dtype of float32, float16, bfloat16"):
        torch.ops.cumm.matmul(torch.empty(3, 4, device=m), torch.empty(4, 6, device=m, dtype=torch.float16))
    with pytest.raises(RuntimeError, match="one dtype"):
        torch.ops.cumm.matmul(torch.empty(3, 4, device=m, dtype=torch.float64), torch.empty(4, 6, device=m))
    with pytest.raises(ValueError, match="1 or more dimensions"):
        torch.ops.cumm.matmul(torch.empty((), device=m), torch.empty(4, device=m))
    with pytest.raises(RuntimeError, match="broadcast|shape"):
        torch.ops.cumm.matmul(torch.empty(2, 3, 4, device=m), torch.empty(3, 4, 5, device=m))


@pytest.mark.parametrize("xshape", [(5, 16), (16,), (2, 3, 16), (0, 16), (4, 0)], ids=str)
@pytest.mark.parametrize("dt", ["float32", "bfloat16"])
def test_linear_fake(ct, xshape, dt):
    dtype = getattr(torch, dt)
    K = xshape[-1]
    x = torch.empty(xshape, dtype=dtype, device="meta")
    w = torch.empty(8, K, dtype=dtype, device="meta")
    bias = torch.empty(8, dtype=torch.float32, device="meta")
    res = torch.empty((*xshape[:-1], 8), dtype=dtype, device="meta")
    y = ct.linear(x, w, bias, "gelu", res)
    assert tuple(y.shape) == (*xshape[:-1], 8) and y.dtype == dtype and y.is_contiguous()


def test_linear_fake_errors(ct):
    x, w = torch.empty(5, 16, device="meta"), torch.empty(8, 16, device="meta")
    with pytest.raises(ValueError, match=r"activation='tanh'; it must be one of \['gelu', 'gelu_tanh', 'relu'"):
        ct.linear(x, w, activation="tanh")
    with pytest.raises(RuntimeError, match=r"weight must be \(out_features, in_features\) = \(N, 16\)"):
        ct.linear(x, torch.empty(16, 8, device="meta"))
    with pytest.raises(RuntimeError, match=r"bias must be of shape \(8,\)"):
        ct.linear(x, w, torch.empty(5, 8, device="meta"))
    with pytest.raises(RuntimeError, match=r"residual must be of the result's shape \(5, 8\)"):
        ct.linear(x, w, None, None, torch.empty(8, device="meta"))
    with pytest.raises(RuntimeError, match="x and weight must have one dtype"):
        ct.linear(x, w.half())
    with pytest.raises(ValueError, match="activation='swish'"):
        ct.Linear(4, 4, activation="swish")


def test_glu_weight_and_fake(ct):
    w1, w3 = torch.randn(16, 5), torch.randn(16, 5)
    w = ct.glu_weight(w1, w3)
    assert w.shape == (32, 5)
    assert torch.equal(w[0:8], w1[0:8]) and torch.equal(w[8:16], w3[0:8]) and torch.equal(w[24:32], w3[8:16])
    with pytest.raises(RuntimeError, match=r"N a multiple of 8; got \(12, 5\)"):
        ct.glu_weight(w1[:12], w3[:12])
    m = "meta"
    for xshape in [(5, 16), (16,), (2, 3, 16), (0, 16), (4, 0)]:
        x = torch.empty(xshape, dtype=torch.bfloat16, device=m)
        y = ct.glu_linear(x, torch.empty(32, xshape[-1], dtype=torch.bfloat16, device=m), "gelu")
        assert tuple(y.shape) == (*xshape[:-1], 16) and y.dtype == torch.bfloat16 and y.is_contiguous()
    x = torch.empty(5, 16, device=m)
    with pytest.raises(RuntimeError, match=r"weight must be \(2N, 16\) with 2N a multiple of 16.*got \(24, 16\)"):
        ct.glu_linear(x, torch.empty(24, 16, device=m))
    with pytest.raises(ValueError, match="activation='swish'"):
        ct.glu_linear(x, torch.empty(32, 16, device=m), "swish")
    with pytest.raises(RuntimeError, match="x and weight must have one dtype"):
        ct.glu_linear(x, torch.empty(32, 16, device=m, dtype=torch.float16))
    with pytest.raises(RuntimeError, match="multiple of 8"):
        ct.GLULinear(16, 12)


@pytest.mark.parametrize("activation", ["silu", "gelu", "gelu_tanh", "relu"])
def test_glu_linear_forward_and_backward_match_torch(ct, standin, activation):
    """The op's reshapes and its backward (the pair split and interleaved again) against torch's autograd."""
    torch.manual_seed(3)
    x = torch.randn(2, 3, 16, requires_grad=True)
    w13 = torch.randn(32, 16, requires_grad=True)
    g = torch.randn(2, 3, 16)
    y = ct.glu_linear(x, w13, activation)
    ref = _ref_glu(x, w13, activation)
    torch.testing.assert_close(y, ref)
    # (float32 sums in another order: the interleaved weight's gradient is one product of the recomputed pair, the
    # reference's two slices' products; terms that cancel leave a few 1e-5)
    for a, b in zip(torch.autograd.grad(y, (x, w13), g), torch.autograd.grad(ref, (x, w13), g), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)
    assert ct.glu_linear(torch.empty(3, 0), torch.empty(16, 0)).abs().sum() == 0  # K = 0: act(0) * 0
    torch.library.opcheck(torch.ops.cumm.glu_linear.default, (x.detach(), w13.detach(), activation, "auto"))
    torch.library.opcheck(torch.ops.cumm.glu_linear.default, (x, w13, activation))


def test_glu_module_from_linears(ct, standin):
    torch.manual_seed(4)
    gate, up = torch.nn.Linear(16, 24, bias=False), torch.nn.Linear(16, 24, bias=False)
    m = ct.GLULinear.from_linears(gate, up, activation="gelu_tanh")
    x = torch.randn(7, 16)
    ref = torch.nn.functional.gelu(gate(x), approximate="tanh") * up(x)
    torch.testing.assert_close(m(x), ref)
    assert "activation='gelu_tanh'" in repr(m) and m.weight.shape == (48, 16)
    assert ct.GLULinear(16, 8).weight.shape == (16, 16)


def _mlp(ct, K, H, N, device="cpu", dtype=None):
    torch.manual_seed(0)
    return torch.nn.Sequential(
        ct.Linear(K, H, activation="gelu", device=device, dtype=dtype), ct.Linear(H, N, device=device, dtype=dtype)
    )


def _counting_backend(graphs: list):
    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    return backend


def test_compile_fullgraph_on_meta(ct):
    """torch.compile traces the model through the fakes, in one graph that calls cumm::linear twice."""
    graphs: list = []
    model = _mlp(ct, 16, 64, 8, device="meta")
    x = torch.empty(4, 7, 16, device="meta")
    y = torch.compile(model, fullgraph=True, backend=_counting_backend(graphs))(x)
    assert tuple(y.shape) == (4, 7, 8)
    assert len(graphs) == 1
    code = graphs[0].code
    assert code.count("torch.ops.cumm.linear") == 2, code


def test_export_calls_the_ops(ct, standin):
    model = _mlp(ct, 16, 32, 8)
    ep = torch.export.export(model, (torch.randn(3, 16),))
    targets = [str(n.target) for n in ep.graph.nodes if n.op == "call_function"]
    assert targets.count("cumm.linear.default") == 2, targets


@pytest.mark.parametrize("activation", [None, "relu", "gelu", "gelu_tanh", "silu"])
@pytest.mark.parametrize("with_bias", [True, False])
@pytest.mark.parametrize("with_residual", [True, False])
def test_linear_forward_and_backward_match_torch(ct, standin, activation, with_bias, with_residual):
    """The op's reshapes and its backward formulas against torch's autograd of the same function (float32)."""
    torch.manual_seed(1)
    x = torch.randn(2, 3, 16, requires_grad=True)
    w = torch.randn(8, 16, requires_grad=True)
    bias = torch.randn(8, requires_grad=True) if with_bias else None
    res = torch.randn(2, 3, 8, requires_grad=True) if with_residual else None
    g = torch.randn(2, 3, 8)
    y = ct.linear(x, w, bias, activation, res)
    ref = _ref_linear(x, w, bias, activation, res)
    torch.testing.assert_close(y, ref)
    leaves = [t for t in (x, w, bias, res) if t is not None]
    got = torch.autograd.grad(y, leaves, g)
    want = torch.autograd.grad(ref, leaves, g)
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shapes", [s for s in SHAPES if 0 not in s[0] + s[1]], ids=str)
def test_matmul_backward_matches_torch(ct, standin, shapes):
    """dA, dB summed over broadcast batch dimensions and 1-D operands, as torch.matmul's autograd."""
    torch.manual_seed(2)
    a = torch.randn(shapes[0], requires_grad=True)
    b = torch.randn(shapes[1], requires_grad=True)
    y = ct.matmul(a, b)
    ref = torch.matmul(a, b)
    torch.testing.assert_close(y, ref)
    g = torch.randn(ref.shape)
    for got, want in zip(torch.autograd.grad(y, (a, b), g), torch.autograd.grad(ref, (a, b), g), strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_linear_k0_and_m0(ct, standin):
    """K = 0: act(bias) + residual (no kernel); M = 0: an empty result."""
    bias, res = torch.randn(4), torch.randn(3, 4)
    y = ct.linear(torch.empty(3, 0), torch.empty(4, 0), bias, "silu", res)
    torch.testing.assert_close(y, torch.nn.functional.silu(bias).expand(3, 4) + res)
    assert ct.linear(torch.empty(0, 5), torch.empty(4, 5)).shape == (0, 4)


def test_opcheck(ct, standin):
    """torch.library.opcheck: schema, fake against real (shapes, dtypes, strides), autograd registration, AOT."""
    x, w, b = torch.randn(3, 5, 16), torch.randn(8, 16), torch.randn(8)
    torch.library.opcheck(torch.ops.cumm.linear.default, (x, w, b, "gelu", None, "auto"))
    torch.library.opcheck(torch.ops.cumm.linear.default, (x.requires_grad_(), w.requires_grad_(), None, None))
    torch.library.opcheck(torch.ops.cumm.matmul.default, (torch.randn(2, 1, 3, 4), torch.randn(5, 4, 6)))


def test_from_linear_shares_parameters(ct):
    m = torch.nn.Linear(4, 3)
    c = ct.Linear.from_linear(m, activation="relu")
    assert c.weight is m.weight and c.bias is m.bias and "activation='relu'" in repr(c)
    assert set(c.state_dict()) == set(m.state_dict())


# ---------------------------------------------------------------------------------------------------
# GPU: the real kernels
# ---------------------------------------------------------------------------------------------------

U = {"float32": 2.0**-24, "float16": 2.0**-11, "bfloat16": 2.0**-8}  # unit roundoff of the result


def _rel(y, ref) -> float:
    d = (y.double() - ref).norm()
    n = ref.norm()
    return float(d / n) if n else float(d)


def _torch_mlp(cm):
    """torch's own nn.Linear MLP with ``cm``'s parameters."""
    a, b = cm[0], cm[1]
    t0 = torch.nn.Linear(a.in_features, a.out_features, device=a.weight.device, dtype=a.weight.dtype)
    t1 = torch.nn.Linear(b.in_features, b.out_features, device=b.weight.device, dtype=b.weight.dtype)
    with torch.no_grad():
        for t, c in ((t0, a), (t1, b)):
            t.weight.copy_(c.weight)
            t.bias.copy_(c.bias)
    return lambda x: t1(torch.nn.functional.gelu(t0(x)))


def _mlp64(cm, x):
    """The MLP in float64 on the same (rounded) parameters and input."""
    a, b = cm[0], cm[1]
    h = torch.nn.functional.gelu(x.double() @ a.weight.double().t() + a.bias.double())
    return h @ b.weight.double().t() + b.bias.double()


@pytest.mark.gpu
@pytest.mark.parametrize("dt", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("shape", [(8, 37, 256, 1024, 256), (3, 129, 200, 300, 100)], ids=str)
def test_compiled_mlp_matches_eager_and_torch(ct, dt, shape):
    B, S, K, H, N = shape
    dtype = getattr(torch, dt)
    torch._dynamo.reset()
    cm = _mlp(ct, K, H, N, device="cuda", dtype=dtype)
    x = torch.randn(B, S, K, device="cuda", dtype=dtype)
    with torch.no_grad():
        ref = _mlp64(cm, x)
        eager = cm(x)
        compiled = torch.compile(cm, fullgraph=True)(x)
        theirs = _torch_mlp(cm)(x)
    assert compiled.shape == eager.shape == theirs.shape == (B, S, N) and compiled.dtype == dtype
    e_torch = _rel(theirs, ref)
    for name, y in (("eager", eager), ("compiled", compiled)):
        assert not y.isnan().any(), name
        assert _rel(y, ref) <= 1.5 * e_torch + 2 * U[dt], f"{name} {dt} {shape}: {_rel(y, ref):.3e} vs {e_torch:.3e}"
    assert _rel(compiled, eager.double()) <= 4 * e_torch + 2 * U[dt]


@pytest.mark.gpu
@pytest.mark.parametrize("dt", ["float32", "bfloat16"])
def test_compiled_training_step_matches_torch(ct, dt):
    """Gradients through the compiled model (the ops' backward: more cumm launches) against nn.Linear's."""
    dtype = getattr(torch, dt)
    torch._dynamo.reset()
    cm = _mlp(ct, 96, 192, 40, device="cuda", dtype=dtype)
    tm = _mlp(ct, 96, 192, 40, device="cuda", dtype=torch.float64)  # same seed: same initial parameters
    with torch.no_grad():
        for p, q in zip(tm.parameters(), cm.parameters(), strict=True):
            p.copy_(q.double())
    x = torch.randn(5, 33, 96, device="cuda", dtype=dtype)
    loss = torch.compile(lambda m, x: m(x).float().square().mean(), fullgraph=True)(cm, x)
    loss.backward()
    tm_out = torch.nn.functional.gelu(x.double() @ tm[0].weight.t() + tm[0].bias) @ tm[1].weight.t() + tm[1].bias
    tm_out.square().mean().backward()
    tol = 1e-4 if dt == "float32" else 3e-2
    for p, q in zip(cm.parameters(), tm.parameters(), strict=True):
        assert _rel(p.grad, q.grad) < tol, (p.shape, _rel(p.grad, q.grad))


@pytest.mark.gpu
@pytest.mark.parametrize("shapes", SHAPES, ids=str)
@pytest.mark.parametrize("dt", ["float32", "bfloat16"])
def test_matmul_op_on_gpu(ct, shapes, dt):
    dtype = getattr(torch, dt)
    a = torch.randn(shapes[0], device="cuda", dtype=dtype)
    b = torch.randn(shapes[1], device="cuda", dtype=dtype)
    torch._dynamo.reset()  # one compile per shape: the cases must not add up to dynamo's recompile limit
    y = torch.compile(ct.matmul, fullgraph=True, backend="aot_eager")(a, b)  # (the op itself; inductor: the MLP)
    ref = torch.matmul(a.double(), b.double())
    assert y.shape == ref.shape and y.dtype == dtype and y.is_contiguous()
    assert _rel(y, ref) <= 1.5 * _rel(torch.matmul(a, b), ref) + 2 * U[dt]


@pytest.mark.gpu
def test_opcheck_on_gpu(ct):
    x = torch.randn(3, 5, 64, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(48, 64, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(48, device="cuda", dtype=torch.float32)
    torch.library.opcheck(torch.ops.cumm.linear.default, (x, w, b, "silu", None, "auto"))
    torch.library.opcheck(torch.ops.cumm.linear.default, (x.requires_grad_(), w.requires_grad_(), b, None, None))
    a = torch.randn(2, 1, 33, 64, device="cuda").transpose(-1, -2)
    torch.library.opcheck(torch.ops.cumm.matmul.default, (a, torch.randn(5, 33, 7, device="cuda"), "auto"))


@pytest.mark.gpu
@pytest.mark.parametrize("dt", ["bfloat16", "float16"])
def test_glu_mlp_compiled_on_gpu(ct, dt):
    """Llama's MLP, down(GLULinear(x)), compiled (fullgraph) against float64, and its gradients."""
    dtype = getattr(torch, dt)
    torch.manual_seed(5)
    torch._dynamo.reset()
    gate = torch.nn.Linear(96, 264, bias=False, device="cuda", dtype=dtype)
    up = torch.nn.Linear(96, 264, bias=False, device="cuda", dtype=dtype)
    down = ct.Linear(264, 40, bias=False, device="cuda", dtype=dtype)
    glu = ct.GLULinear.from_linears(gate, up)
    x = torch.randn(5, 33, 96, device="cuda", dtype=dtype)
    model = lambda x: down(glu(x))  # noqa: E731
    y = torch.compile(model, fullgraph=True)(x)
    x64, g64, u64, d64 = (t.detach().double().requires_grad_() for t in (x, gate.weight, up.weight, down.weight))
    ref = (torch.nn.functional.silu(x64 @ g64.t()) * (x64 @ u64.t())) @ d64.t()
    theirs = down(torch.nn.functional.silu(gate(x)) * up(x))
    assert y.shape == ref.shape and not y.isnan().any()
    assert _rel(y.detach(), ref.detach()) <= 1.5 * _rel(theirs.detach(), ref.detach()) + 2 * U[dt]
    y.float().square().mean().backward()
    ref.square().mean().backward()
    w = glu.weight.grad.double().reshape(-1, 2, 8, 96)  # the interleaved gradient, split as the weight is
    assert _rel(w[:, 0].reshape(264, 96), g64.grad) < 3e-2 and _rel(w[:, 1].reshape(264, 96), u64.grad) < 3e-2
    assert _rel(down.weight.grad, d64.grad) < 3e-2


@pytest.mark.gpu
def test_host_tensors_are_refused_with_a_hint(ct):
    with pytest.raises(TypeError, match=r"GPU array.*\.cuda\(\)"):
        ct.linear(torch.randn(3, 4), torch.randn(5, 4))
