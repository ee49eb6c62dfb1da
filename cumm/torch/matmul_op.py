"""cumm::matmul: ``a @ b`` with numpy.matmul's rules as a torch custom op, its fake and its backward."""

import torch

from ..api.matmul import matmul as _cumm_matmul
from .common import check_dtypes


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
    check_dtypes(a, b, "a", "b")
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
