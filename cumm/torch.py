"""cumm inside torch models: ``torch.library`` custom ops, so ``torch.compile(model, fullgraph=True)`` calls cumm's
kernels without a graph break, and :class:`Linear`, an ``nn.Linear`` whose forward is one fused cumm launch.

    >>> import torch, cumm.torch
    >>> mlp = torch.nn.Sequential(cumm.torch.Linear(1024, 4096, activation="gelu"), cumm.torch.Linear(4096, 1024))
    >>> y = torch.compile(mlp.cuda().bfloat16(), fullgraph=True)(x)

Four ops are registered when this module is first imported (``import cumm`` never imports torch):

* ``torch.ops.cumm.matmul(a, b, rung="auto")``: ``a @ b`` with ``numpy.matmul``'s rules (batches broadcast,
  1-D operands), as ``cumm.matmul(a, b, kernel=kernel)``.
* ``torch.ops.cumm.linear(x, weight, bias=None, activation=None, residual=None, rung="auto")``:
  ``act(x @ weight.T + bias) + residual`` over the last dimension of ``x`` (``weight`` is ``(N, K)`` as in
  ``nn.Linear``), one launch with the epilogue fused (docs/beyond.md, Fused epilogues).
* ``torch.ops.cumm.glu_linear(x, weight, activation="silu", rung="auto")``: a gated MLP's ``act(x @ w1.T) *
  (x @ w3.T)`` as one product (``cumm.matmul``'s ``glu=``), ``weight`` the ``(2N, K)`` interleaving of w1 and w3
  (:func:`glu_weight`); :class:`GLULinear` holds one.
* ``torch.ops.cumm.linear_fp8(x, weight, scale_result, out_dtype, bias=None, activation=None, residual=None,
  rung="auto")``: ``linear``'s value cast to FP8 (``out_dtype`` torch.float8_e4m3fn or float8_e5m2) times
  ``scale_result`` in the same epilogue, saturating (the next FP8 layer's input; inference: no backward).
  ``linear(..., out_dtype=torch.float8_e4m3fn, scale_result=s)`` calls it.

Each has a fake (meta) implementation that gives the real one's shape, dtype and strides (a new contiguous tensor)
and checks what the real one checks about shapes and dtypes, and (but ``linear_fp8``) a backward made of more cumm
launches (two products per op; ``linear`` with an activation recomputes its pre-activation with a third), so they
train too.
"""

import math

import torch

from .api.matmul import matmul as _cumm_matmul
from .plan.epilogue import ACTIVATIONS
from .plan.operands import GLU_BLOCK

__all__ = ["GLULinear", "Linear", "glu_linear", "glu_weight", "linear", "matmul"]

_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def _check_dtypes(x: torch.Tensor, w: torch.Tensor, xn: str, wn: str) -> None:
    torch._check(
        x.dtype == w.dtype and x.dtype in _DTYPES,
        lambda: f"cumm: {xn} and {wn} must have one dtype of float32, float16, bfloat16; got {x.dtype} and {w.dtype}",
    )


def _check_activation(activation: str | None) -> None:
    if activation is not None and activation not in ACTIVATIONS:
        raise ValueError(f"activation={activation!r}; it must be one of {sorted(ACTIVATIONS)} or None")


# ---------------------------------------------------------------------------------------------------
# cumm::matmul
# ---------------------------------------------------------------------------------------------------


def matmul_shape(a_shape, b_shape) -> tuple:
    """The shape of ``a @ b`` under ``numpy.matmul``'s rules; an error naming both shapes if they do not fit."""
    if len(a_shape) == 0 or len(b_shape) == 0:
        raise ValueError(f"cumm: matmul takes arrays of 1 or more dimensions, got shapes {a_shape} and {b_shape}")
    a2 = tuple(a_shape) if len(a_shape) > 1 else (1, a_shape[0])
    b2 = tuple(b_shape) if len(b_shape) > 1 else (b_shape[0], 1)
    torch._check(
        a2[-1] == b2[-2],
        lambda: (
            f"cumm: a @ b needs a's last dimension equal to b's {'only' if len(b_shape) == 1 else 'second to last'}"
            f" one; got shapes {tuple(a_shape)} and {tuple(b_shape)}"
        ),
    )
    batch = tuple(torch.broadcast_shapes(a2[:-2], b2[:-2]))
    return batch + ((a2[-2],) if len(a_shape) > 1 else ()) + ((b2[-1],) if len(b_shape) > 1 else ())


@torch.library.custom_op("cumm::matmul", mutates_args=(), schema='(Tensor a, Tensor b, str rung="auto") -> Tensor')
def _matmul_op(a: torch.Tensor, b: torch.Tensor, rung: str = "auto") -> torch.Tensor:
    # (the op's argument is `rung`, not `kernel`: inductor's fallback kernels take a `kernel` argument of their own)
    y = _cumm_matmul(a, b, kernel=rung)
    return y if y.is_contiguous() else y.contiguous()  # (the fake's strides: a new row-major tensor)


@_matmul_op.register_fake
def _matmul_fake(a: torch.Tensor, b: torch.Tensor, rung: str = "auto") -> torch.Tensor:
    _check_dtypes(a, b, "a", "b")
    return a.new_empty(matmul_shape(a.shape, b.shape))


def _matmul_setup(ctx, inputs, output) -> None:
    a, b, kernel = inputs
    ctx.kernel = kernel
    ctx.save_for_backward(a, b)


def _matmul_backward(ctx, g):
    """dA = g @ B^T, dB = A^T @ g, each summed over the dimensions its operand was broadcast along."""
    a, b = ctx.saved_tensors
    a2 = a if a.dim() > 1 else a.unsqueeze(0)
    b2 = b if b.dim() > 1 else b.unsqueeze(-1)
    g2 = g if b.dim() > 1 else g.unsqueeze(-1)  # (N = 1 first: a 0-d g of two vectors)
    g2 = g2 if a.dim() > 1 else g2.unsqueeze(-2)
    ga = gb = None
    if ctx.needs_input_grad[0]:
        ga = _reduce_to(torch.ops.cumm.matmul(g2, b2.transpose(-1, -2), ctx.kernel), a2).reshape(a.shape)
    if ctx.needs_input_grad[1]:
        gb = _reduce_to(torch.ops.cumm.matmul(a2.transpose(-1, -2), g2, ctx.kernel), b2).reshape(b.shape)
    return ga, gb, None


def _reduce_to(g: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``g`` (of the broadcast batch) summed to ``x``'s shape, in float32 for half dtypes."""
    if g.shape == x.shape:
        return g
    lead = g.dim() - x.dim()
    dims = tuple(range(lead)) + tuple(lead + i for i, d in enumerate(x.shape[:-2]) if d == 1 and g.shape[lead + i] != 1)
    return g.sum(dim=dims, keepdim=False, dtype=torch.float32).reshape(x.shape).to(g.dtype)


_matmul_op.register_autograd(_matmul_backward, setup_context=_matmul_setup)


def matmul(a: torch.Tensor, b: torch.Tensor, *, kernel: str = "auto") -> torch.Tensor:
    """``a @ b`` through cumm (``torch.ops.cumm.matmul``): traceable by ``torch.compile``, differentiable."""
    return torch.ops.cumm.matmul(a, b, kernel)


# ---------------------------------------------------------------------------------------------------
# cumm::linear
# ---------------------------------------------------------------------------------------------------

_LINEAR_SCHEMA = (
    "(Tensor x, Tensor weight, Tensor? bias=None, str? activation=None, Tensor? residual=None, "
    'str rung="auto") -> Tensor'
)


def _linear_check(x, weight, bias, activation, residual) -> tuple:
    """The result's shape; the errors the real op would raise, before anything runs (also while tracing)."""
    _check_activation(activation)
    torch._check(x.dim() >= 1, lambda: f"cumm.linear: x must have 1 or more dimensions, got shape {tuple(x.shape)}")
    torch._check(
        weight.dim() == 2 and weight.shape[1] == x.shape[-1],
        lambda: (
            f"cumm.linear: weight must be (out_features, in_features) = (N, {x.shape[-1]}) for x of shape "
            f"{tuple(x.shape)}; got {tuple(weight.shape)}"
        ),
    )
    _check_dtypes(x, weight, "x", "weight")
    shape = (*x.shape[:-1], weight.shape[0])
    if bias is not None:
        torch._check(
            bias.dim() == 1 and bias.shape[0] == weight.shape[0] and bias.dtype in _DTYPES,
            lambda: (
                f"cumm.linear: bias must be of shape ({weight.shape[0]},) and float32, float16 or bfloat16; got "
                f"{tuple(bias.shape)} {bias.dtype}"
            ),
        )
    if residual is not None:
        torch._check(
            tuple(residual.shape) == shape and residual.dtype in _DTYPES,
            lambda: (
                f"cumm.linear: residual must be of the result's shape {shape} and float32, float16 or bfloat16; "
                f"got {tuple(residual.shape)} {residual.dtype}"
            ),
        )
    return shape


def _act(z: torch.Tensor, activation: str | None) -> torch.Tensor:
    """The activation in torch (for K = 0, where no kernel runs, and for the backward's derivative)."""
    if activation is None:
        return z
    if activation == "relu":
        return torch.relu(z)
    if activation == "silu":
        return torch.nn.functional.silu(z)
    return torch.nn.functional.gelu(z, approximate="tanh" if activation == "gelu_tanh" else "none")


def _act_backward(g: torch.Tensor, z: torch.Tensor, activation: str) -> torch.Tensor:
    """The activation's derivative at ``z`` times ``g``, by torch's own backward ops."""
    if activation == "relu":
        return torch.ops.aten.threshold_backward(g, z, 0)
    if activation == "silu":
        return torch.ops.aten.silu_backward(g, z)
    return torch.ops.aten.gelu_backward(g, z, approximate="tanh" if activation == "gelu_tanh" else "none")


@torch.library.custom_op("cumm::linear", mutates_args=(), schema=_LINEAR_SCHEMA)
def _linear_op(x, weight, bias=None, activation=None, residual=None, rung="auto"):
    shape = _linear_check(x, weight, bias, activation, residual)
    N, K = weight.shape
    M = math.prod(x.shape[:-1])
    if M == 0 or N == 0:
        return x.new_empty(shape)
    if K == 0:  # the empty sum: act(bias) + residual, which no kernel runs (cumm refuses an epilogue at K = 0)
        z = torch.zeros(shape, dtype=torch.float32, device=x.device)
        z = _act(z + bias.float() if bias is not None else z, activation)
        return (z + residual.float() if residual is not None else z).to(x.dtype)
    r2 = residual.reshape(M, N) if residual is not None else None
    y = _cumm_matmul(x.reshape(M, K), weight.t(), kernel=rung, bias=bias, activation=activation, residual=r2)
    y = y.reshape(shape)
    return y if y.is_contiguous() else y.contiguous()


@_linear_op.register_fake
def _linear_fake(x, weight, bias=None, activation=None, residual=None, rung="auto"):
    return x.new_empty(_linear_check(x, weight, bias, activation, residual))


def _linear_setup(ctx, inputs, output) -> None:
    x, weight, bias, activation, residual, kernel = inputs
    ctx.activation, ctx.kernel = activation, kernel
    ctx.has_bias, ctx.has_residual = bias is not None, residual is not None
    ctx.bias_dtype = bias.dtype if bias is not None else None
    ctx.residual_dtype = residual.dtype if residual is not None else None
    ctx.save_for_backward(x, weight, bias)


def _linear_backward(ctx, g):
    """dz = act'(z) g (z recomputed by one more launch when there is an activation); dx = dz W, dW = dz^T x,
    dbias = the sum of dz over rows, dresidual = g."""
    x, weight, bias = ctx.saved_tensors
    N, K = weight.shape
    gz = g
    if ctx.activation is not None:
        z = torch.ops.cumm.linear(x, weight, bias, None, None, ctx.kernel)
        gz = _act_backward(g, z, ctx.activation)
    gz2 = gz.reshape(-1, N)
    x2 = x.reshape(-1, K)
    gx = gw = gb = gr = None
    if ctx.needs_input_grad[0]:
        gx = torch.ops.cumm.matmul(gz2, weight, ctx.kernel).reshape(x.shape)
    if ctx.needs_input_grad[1]:
        gw = torch.ops.cumm.matmul(gz2.t(), x2, ctx.kernel)
    if ctx.has_bias and ctx.needs_input_grad[2]:
        gb = gz2.sum(0, dtype=torch.float32).to(ctx.bias_dtype)
    if ctx.has_residual and ctx.needs_input_grad[4]:
        gr = g.to(ctx.residual_dtype)
    return gx, gw, gb, None, gr, None


_linear_op.register_autograd(_linear_backward, setup_context=_linear_setup)


_FP8 = (torch.float8_e4m3fn, torch.float8_e5m2)
_LINEAR_FP8_SCHEMA = (
    "(Tensor x, Tensor weight, Tensor scale_result, ScalarType out_dtype, Tensor? bias=None, str? activation=None, "
    'Tensor? residual=None, str rung="auto") -> Tensor'
)


def _fp8_check(x, scale_result, out_dtype) -> None:
    torch._check(
        out_dtype in _FP8,
        lambda: f"cumm.linear_fp8: out_dtype must be torch.float8_e4m3fn or float8_e5m2, got {out_dtype}",
    )
    torch._check(
        x.dtype in (torch.float16, torch.bfloat16),
        lambda: f"cumm.linear_fp8: x and weight must be float16 or bfloat16 (an FP8 C), got {x.dtype}",
    )
    torch._check(
        scale_result.numel() == 1 and scale_result.dtype == torch.float32,
        lambda: (
            f"cumm.linear_fp8: scale_result must be a float32 tensor of one element, got {scale_result.dtype} of "
            f"shape {tuple(scale_result.shape)}"
        ),
    )


@torch.library.custom_op("cumm::linear_fp8", mutates_args=(), schema=_LINEAR_FP8_SCHEMA)
def _linear_fp8_op(x, weight, scale_result, out_dtype, bias=None, activation=None, residual=None, rung="auto"):
    shape = _linear_check(x, weight, bias, activation, residual)
    _fp8_check(x, scale_result, out_dtype)
    N, K = weight.shape
    M = math.prod(x.shape[:-1])
    out = torch.empty(shape, dtype=out_dtype, device=x.device)
    if M == 0 or N == 0:
        return out
    if K == 0:  # the empty sum (no kernel runs): act(bias) + residual, scaled and cast saturating as the kernels do
        z = torch.zeros(shape, dtype=torch.float32, device=x.device)
        z = _act(z + bias.float() if bias is not None else z, activation)
        z = (z + residual.float() if residual is not None else z) * scale_result.float().reshape(())
        big = torch.finfo(out_dtype).max
        return out.copy_(torch.where(z.isnan(), z, z.clamp(-big, big)))
    r2 = residual.reshape(M, N) if residual is not None else None
    _cumm_matmul(
        x.reshape(M, K),
        weight.t(),
        kernel=rung,
        bias=bias,
        activation=activation,
        residual=r2,
        out=out.view(M, N),
        scale_result=scale_result,
    )
    return out


@_linear_fp8_op.register_fake
def _linear_fp8_fake(x, weight, scale_result, out_dtype, bias=None, activation=None, residual=None, rung="auto"):
    shape = _linear_check(x, weight, bias, activation, residual)
    _fp8_check(x, scale_result, out_dtype)
    return x.new_empty(shape, dtype=out_dtype)


def linear(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    activation: str | None = None,
    residual: torch.Tensor | None = None,
    *,
    kernel: str = "auto",
    out_dtype: torch.dtype | None = None,
    scale_result: torch.Tensor | None = None,
) -> torch.Tensor:
    """``act(x @ weight.T + bias) + residual`` through cumm (``torch.ops.cumm.linear``), one fused launch:
    ``weight`` is ``(out_features, in_features)``, ``bias`` ``(out_features,)``, ``residual`` of the result's
    shape, ``activation`` one of "relu", "gelu", "gelu_tanh", "silu" or None. ``out_dtype`` an FP8 dtype: that
    value times ``scale_result`` (a float32 one-element tensor; none: 1) cast to FP8 in the same launch
    (``torch.ops.cumm.linear_fp8``, no backward); None: x's dtype."""
    if out_dtype is None or out_dtype == x.dtype:
        torch._check(scale_result is None, lambda: "cumm.linear: scale_result scales an FP8 out_dtype's C")
        return torch.ops.cumm.linear(x, weight, bias, activation, residual, kernel)
    if scale_result is None:
        scale_result = torch.ones((), dtype=torch.float32, device=x.device)
    return torch.ops.cumm.linear_fp8(x, weight, scale_result, out_dtype, bias, activation, residual, kernel)


class Linear(torch.nn.Linear):
    """``torch.nn.Linear`` (same parameters, initialisation and state dict) whose forward is ``cumm.torch.linear``,
    with an optional fused ``activation`` and ``residual``: ``Linear(1024, 4096, activation="gelu")``."""

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        device=None,
        dtype=None,
        *,
        activation: str | None = None,
        kernel: str = "auto",
    ) -> None:
        _check_activation(activation)
        super().__init__(in_features, out_features, bias, device, dtype)
        self.activation, self.kernel = activation, kernel

    @classmethod
    def from_linear(cls, m: torch.nn.Linear, *, activation: str | None = None, kernel: str = "auto") -> "Linear":
        """A cumm Linear sharing ``m``'s parameters (no copy)."""
        new = cls(m.in_features, m.out_features, m.bias is not None, "meta", activation=activation, kernel=kernel)
        new.weight, new.bias = m.weight, m.bias
        return new

    def forward(self, x: torch.Tensor, residual: torch.Tensor | None = None) -> torch.Tensor:
        return linear(x, self.weight, self.bias, self.activation, residual, kernel=self.kernel)

    def extra_repr(self) -> str:
        return super().extra_repr() + (f", activation={self.activation!r}" if self.activation else "")


# ---------------------------------------------------------------------------------------------------
# cumm::glu_linear
# ---------------------------------------------------------------------------------------------------


def glu_weight(w1: torch.Tensor, w3: torch.Tensor) -> torch.Tensor:
    """``nn.Linear``-shaped gate and up weights (N, K) as the (2N, K) weight of :func:`glu_linear`: rows in turns of
    8 (``cumm.glu_weight(w1, w3, dim=0)``, in torch ops: any device, differentiable)."""
    torch._check(
        w1.shape == w3.shape and w1.dim() == 2 and w1.shape[0] % GLU_BLOCK == 0,
        lambda: (
            f"cumm.glu_weight: w1 and w3 must be (N, K) of one shape with N a multiple of {GLU_BLOCK}; got "
            f"{tuple(w1.shape)} and {tuple(w3.shape)}"
        ),
    )
    N, K = w1.shape
    return torch.stack((w1.reshape(N // GLU_BLOCK, GLU_BLOCK, K), w3.reshape(N // GLU_BLOCK, GLU_BLOCK, K)), 1).reshape(
        2 * N, K
    )


def _glu_check(x, weight, activation) -> tuple:
    """The result's shape; the real op's errors, before anything runs (also while tracing)."""
    if activation not in ACTIVATIONS:
        raise ValueError(f"cumm.glu_linear: activation={activation!r}; it must be one of {sorted(ACTIVATIONS)}")
    torch._check(x.dim() >= 1, lambda: f"cumm.glu_linear: x must have 1 or more dimensions, got {tuple(x.shape)}")
    torch._check(
        weight.dim() == 2 and weight.shape[1] == x.shape[-1] and weight.shape[0] % (2 * GLU_BLOCK) == 0,
        lambda: (
            f"cumm.glu_linear: weight must be (2N, {x.shape[-1]}) with 2N a multiple of {2 * GLU_BLOCK}, the "
            f"interleaved gate and up weights (cumm.torch.glu_weight(w1, w3)); got {tuple(weight.shape)}"
        ),
    )
    _check_dtypes(x, weight, "x", "weight")
    return (*x.shape[:-1], weight.shape[0] // 2)


@torch.library.custom_op(
    "cumm::glu_linear",
    mutates_args=(),
    schema='(Tensor x, Tensor weight, str activation="silu", str rung="auto") -> Tensor',
)
def _glu_op(x, weight, activation="silu", rung="auto"):
    shape = _glu_check(x, weight, activation)
    N2, K = weight.shape
    M = math.prod(x.shape[:-1])
    if M == 0 or N2 == 0 or K == 0:  # (K = 0: act(0) * 0, no kernel)
        return x.new_zeros(shape)
    y = _cumm_matmul(x.reshape(M, K), weight.t(), kernel=rung, glu=activation).reshape(shape)
    return y if y.is_contiguous() else y.contiguous()


@_glu_op.register_fake
def _glu_fake(x, weight, activation="silu", rung="auto"):
    return x.new_empty(_glu_check(x, weight, activation))


def _glu_setup(ctx, inputs, output) -> None:
    x, weight, activation, kernel = inputs
    ctx.activation, ctx.kernel = activation, kernel
    ctx.save_for_backward(x, weight)


def _glu_backward(ctx, g):
    """The product P = x @ weight.T recomputed (one launch), split into its gate and up blocks; dgate = act'(gate)
    g up, dup = act(gate) g, interleaved again as dP; dx = dP weight, dweight = dP^T x."""
    x, weight = ctx.saved_tensors
    N2, K = weight.shape
    p = torch.ops.cumm.linear(x, weight, None, None, None, ctx.kernel).reshape(-1, N2 // (2 * GLU_BLOCK), 2, GLU_BLOCK)
    gate, up = p[:, :, 0], p[:, :, 1]
    g3 = g.reshape(-1, N2 // (2 * GLU_BLOCK), GLU_BLOCK)
    dp = torch.stack((_act_backward(g3 * up, gate, ctx.activation), g3 * _act(gate, ctx.activation)), 2)
    dp = dp.reshape(-1, N2)
    gx = gw = None
    if ctx.needs_input_grad[0]:
        gx = torch.ops.cumm.matmul(dp, weight, ctx.kernel).reshape(x.shape)
    if ctx.needs_input_grad[1]:
        gw = torch.ops.cumm.matmul(dp.t(), x.reshape(-1, K), ctx.kernel)
    return gx, gw, None, None


_glu_op.register_autograd(_glu_backward, setup_context=_glu_setup)


def glu_linear(
    x: torch.Tensor, weight: torch.Tensor, activation: str = "silu", *, kernel: str = "auto"
) -> torch.Tensor:
    """``act(x @ w1.T) * (x @ w3.T)`` through cumm (``torch.ops.cumm.glu_linear``), one product: ``weight`` is
    ``glu_weight(w1, w3)`` (2N, K), ``activation`` one of "silu" (SwiGLU), "gelu", "gelu_tanh" (GeGLU), "relu"."""
    return torch.ops.cumm.glu_linear(x, weight, activation, kernel)


class GLULinear(torch.nn.Module):
    """A gated MLP's gate and up projections (no bias) as one weight (2 out_features, in_features), interleaved in
    turns of 8 rows, whose forward is ``glu_linear``: ``act(x @ w1.T) * (x @ w3.T)`` in one launch. Llama's MLP is
    ``down(GLULinear(hidden, intermediate)(x))``; :meth:`from_linears` takes existing ``nn.Linear`` gate and up."""

    def __init__(
        self,
        in_features: int,
        out_features: int,
        device=None,
        dtype=None,
        *,
        activation: str = "silu",
        kernel: str = "auto",
    ) -> None:
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation={activation!r}; it must be one of {sorted(ACTIVATIONS)}")
        torch._check(
            out_features % GLU_BLOCK == 0,
            lambda: f"out_features={out_features} must be a multiple of {GLU_BLOCK} (the weight's turns)",
        )
        self.in_features, self.out_features = in_features, out_features
        self.activation, self.kernel = activation, kernel
        gate = torch.nn.Linear(in_features, out_features, False, device, dtype)  # nn.Linear's initialisation
        up = torch.nn.Linear(in_features, out_features, False, device, dtype)
        self.weight = torch.nn.Parameter(glu_weight(gate.weight.detach(), up.weight.detach()))

    @classmethod
    def from_linears(
        cls, gate: torch.nn.Linear, up: torch.nn.Linear, *, activation: str = "silu", kernel: str = "auto"
    ) -> "GLULinear":
        """One from ``gate`` (w1) and ``up`` (w3), bias-free ``nn.Linear``s of one shape (their weights copied)."""
        torch._check(
            gate.bias is None and up.bias is None, lambda: "GLULinear.from_linears takes bias-free gate and up"
        )
        new = cls(gate.in_features, gate.out_features, "meta", activation=activation, kernel=kernel)
        new.weight = torch.nn.Parameter(glu_weight(gate.weight.detach(), up.weight.detach()))
        return new

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return glu_linear(x, self.weight, self.activation, kernel=self.kernel)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, activation={self.activation!r}"
