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

from .glu_op import GLULinear, glu_linear, glu_weight
from .linear_op import Linear, linear
from .matmul_op import matmul

__all__ = ["GLULinear", "Linear", "glu_linear", "glu_weight", "linear", "matmul"]
