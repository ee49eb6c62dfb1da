"""cumm::glu_linear: a gated MLP's ``act(x @ w1.T) * (x @ w3.T)`` as one product, its fake and backward,
:func:`glu_weight` and :class:`GLULinear`."""

import math

import torch

from ..api.matmul import matmul as _cumm_matmul
from ..plan.epilogue import ACTIVATIONS
from ..plan.operands import GLU_BLOCK
from .common import act, act_backward, check_dtypes


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
    check_dtypes(x, weight, "x", "weight")
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
    dp = torch.stack((act_backward(g3 * up, gate, ctx.activation), g3 * act(gate, ctx.activation)), 2)
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
