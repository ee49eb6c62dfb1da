"""What the custom ops of cumm.torch share: the dtypes they take, the activations' names, and the activations and
their derivatives in torch (the backward passes, and K = 0 where no kernel runs)."""

import torch

from ..plan.epilogue import ACTIVATIONS

DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def check_dtypes(x: torch.Tensor, w: torch.Tensor, xn: str, wn: str) -> None:
    torch._check(
        x.dtype == w.dtype and x.dtype in DTYPES,
        lambda: f"cumm: {xn} and {wn} must have one dtype of float32, float16, bfloat16; got {x.dtype} and {w.dtype}",
    )


def check_activation(activation: str | None) -> None:
    if activation is not None and activation not in ACTIVATIONS:
        raise ValueError(f"activation={activation!r}; it must be one of {sorted(ACTIVATIONS)} or None")


def act(z: torch.Tensor, activation: str | None) -> torch.Tensor:
    """The activation in torch (for K = 0, where no kernel runs, and for the backward's derivative)."""
    if activation is None:
        return z
    if activation == "relu":
        return torch.relu(z)
    if activation == "silu":
        return torch.nn.functional.silu(z)
    return torch.nn.functional.gelu(z, approximate="tanh" if activation == "gelu_tanh" else "none")


def act_backward(g: torch.Tensor, z: torch.Tensor, activation: str) -> torch.Tensor:
    """The activation's derivative at ``z`` times ``g``, by torch's own backward ops."""
    if activation == "relu":
        return torch.ops.aten.threshold_backward(g, z, 0)
    if activation == "silu":
        return torch.ops.aten.silu_backward(g, z)
    return torch.ops.aten.gelu_backward(g, z, approximate="tanh" if activation == "gelu_tanh" else "none")
