"""``cumm.glu_weight``: a gated MLP's two weights as the one weight a ``glu=`` product reads.

``silu(x @ w1) * (x @ w3)`` as one product of twice the columns, whose epilogue pairs each gate column with its up
column and writes half of them (include/epilogue.cuh): the second result is never written and read again. The pair
must sit in one thread's registers, so the weight's columns alternate GLU_BLOCK of w1 and GLU_BLOCK of w3 (the
wgmma fragment's column block). Made once, like any weight.
"""

from __future__ import annotations

import contextlib

from ..plan.operands import GLU_BLOCK
from ..runtime import arrays as _arrays


def glu_weight(w1, w3, dim: int = -1):
    """w1 and w3 (GPU arrays of one kind, shape and dtype) interleaved along ``dim`` in blocks of 8: block 2 q of
    the result is w1's block q, block 2 q + 1 w3's. ``cumm.matmul(x, glu_weight(w1, w3), glu="silu")`` is
    ``silu(x @ w1) * (x @ w3)``. For torch's ``nn.Linear`` weights (out_features x in_features) pass ``dim=0`` and
    multiply by the transposed view, ``cumm.matmul(x, w13.T, glu="silu")`` (read in place). A new array."""
    k = _arrays.kind(w1)
    if _arrays.kind(w3) != k:
        raise TypeError(f"w1 is a {_arrays.describe(w1)} but w3 is a {_arrays.describe(w3)}: pass arrays of one kind")
    a, b = _arrays.as_cupy(w1, "w1"), _arrays.as_cupy(w3, "w3")
    if a.shape != b.shape or a.dtype != b.dtype:
        raise ValueError(
            f"w1 is {a.shape} {a.dtype} and w3 {b.shape} {b.dtype}: gate and up weights must match in shape and dtype"
        )
    if a.ndim < 2:
        raise ValueError(f"w1 and w3 must be matrices (K x N, or a batch of them), got shape {a.shape}")
    if not -a.ndim <= dim < a.ndim:
        raise ValueError(f"dim={dim} is not a dimension of w1's shape {a.shape}")
    if a.data.device_id != b.data.device_id:
        raise ValueError(f"w1 is on device {a.data.device_id} and w3 on {b.data.device_id}; put both on one device")
    d = dim % a.ndim
    n = a.shape[d]
    if n % GLU_BLOCK:
        raise ValueError(
            f"w1 and w3 have {n} columns along dim {dim}, not a multiple of {GLU_BLOCK}: pad both with zero columns to "
            f"{-(-n // GLU_BLOCK) * GLU_BLOCK} (and slice glu's result to {n} columns)"
        )
    dev = a.data.device_id
    before, after = a.shape[:d], a.shape[d + 1 :]
    out = _arrays.empty(k if k == _arrays.TORCH else _arrays.CUPY, before + (2 * n,) + after, a.dtype, dev)
    o = _arrays.as_cupy(out, "out").reshape(before + (n // GLU_BLOCK, 2, GLU_BLOCK) + after)
    blocks = before + (n // GLU_BLOCK, GLU_BLOCK) + after
    at = (slice(None),) * (d + 1)
    on = _arrays.on_stream(_arrays.torch_stream(dev), dev) if k == _arrays.TORCH else contextlib.nullcontext()
    with on:
        o[at + (0,)] = a.reshape(blocks)
        o[at + (1,)] = b.reshape(blocks)
    return out
