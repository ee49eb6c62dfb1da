"""cumm::linear (``act(x @ weight.T + bias) + residual``, one fused launch, with its backward), cumm::linear_fp8 (the
same value cast to FP8 with a scale, inference) and :class:`Linear`."""

import math

import torch

from ..api.matmul import matmul as _cumm_matmul
from ..runtime.arrays import torch_one
from .common import DTYPES, act, act_backward, check_activation, check_dtypes

_LINEAR_SCHEMA = (
    "(Tensor x, Tensor weight, Tensor? bias=None, str? activation=None, Tensor? residual=None, "
    'str rung="auto") -> Tensor'
)


def _linear_check(x, weight, bias, activation, residual) -> tuple:
    """The result's shape; the errors the real op would raise, before anything runs (also while tracing)."""
    check_activation(activation)
    torch._check(x.dim() >= 1, lambda: f"cumm.linear: x must have 1 or more dimensions, got shape {tuple(x.shape)}")
    torch._check(
        weight.dim() == 2 and weight.shape[1] == x.shape[-1],
        lambda: (
            f"cumm.linear: weight must be (out_features, in_features) = (N, {x.shape[-1]}) for x of shape "
            f"{tuple(x.shape)}; got {tuple(weight.shape)}"
        ),
    )
    check_dtypes(x, weight, "x", "weight")
    shape = (*x.shape[:-1], weight.shape[0])
    if bias is not None:
        torch._check(
            bias.dim() == 1 and bias.shape[0] == weight.shape[0] and bias.dtype in DTYPES,
            lambda: (
                f"cumm.linear: bias must be of shape ({weight.shape[0]},) and float32, float16 or bfloat16; got "
                f"{tuple(bias.shape)} {bias.dtype}"
            ),
        )
    if residual is not None:
        torch._check(
            tuple(residual.shape) == shape and residual.dtype in DTYPES,
            lambda: (
                f"cumm.linear: residual must be of the result's shape {shape} and float32, float16 or bfloat16; "
                f"got {tuple(residual.shape)} {residual.dtype}"
            ),
        )
    return shape


def _empty_sum(shape, device, bias, activation, residual) -> torch.Tensor:
    """K = 0's act(bias) + residual in float32, which no kernel runs (cumm refuses an epilogue at K = 0)."""
    z = torch.zeros(shape, dtype=torch.float32, device=device)
    z = act(z + bias.float() if bias is not None else z, activation)
    return z + residual.float() if residual is not None else z


@torch.library.custom_op("cumm::linear", mutates_args=(), schema=_LINEAR_SCHEMA)
def _linear_op(x, weight, bias=None, activation=None, residual=None, rung="auto"):
    shape = _linear_check(x, weight, bias, activation, residual)
    N, K = weight.shape
    M = math.prod(x.shape[:-1])
    if M == 0 or N == 0:
        return x.new_empty(shape)
    if K == 0:
        return _empty_sum(shape, x.device, bias, activation, residual).to(x.dtype)
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
        gz = act_backward(g, z, ctx.activation)
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
    if K == 0:  # scaled and cast saturating, as the kernels do
        z = _empty_sum(shape, x.device, bias, activation, residual) * scale_result.float().reshape(())
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
    if scale_result is None:  # 1, made once a device (off the GPU the op says what is wrong)
        scale_result = torch_one(x.get_device()) if x.is_cuda else torch.ones((), dtype=torch.float32)
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
        check_activation(activation)
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
