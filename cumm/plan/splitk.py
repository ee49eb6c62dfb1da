"""Split-K: an M x N x K product whose tile grid would leave multiprocessors idle, run as S slices of K.

A kernel whose spec has ``split_k=True`` starts with ``CUMM_SPLIT_K(BK)`` (``kernels/common.cuh``) and is
launched with ``gridDim.z = S``: slice z multiplies columns ``[z * KC, min(K, (z + 1) * KC))`` of A by the
same rows of B and writes the raw partial product to ``W[z]`` of a float32 workspace ``W`` (S x M x N, from
CuPy's memory pool). ``kernels/splitk_reduce.cu`` then computes ``C = alpha * sum_z W[z] + beta * C``.

``KC`` is ``ceil(K / S)`` rounded up to a multiple of ``G = lcm(BK, 4)``: whole slabs, and a slice's first
column stays a multiple of 4, so the 16-byte alignment of A (``VEC_A``) holds for ``A + k0``. Rounding up
can leave the last slices empty; ``effective_splits`` is the count launched: the ``ceil(K / KC)`` slices
that get work, at most ``ceil(K / BK)`` (every slice has at least one slab), from which the device derives
the same ``KC``. The functions here mirror the device arithmetic so that it can be tested without a GPU.
"""

from __future__ import annotations

import math
import operator

from ..core.spec import cdiv
from ..ladder import get_spec, split_refusal
from ..runtime.compile import aux_kernels, aux_source

MAX_SPLITS = 65535  # gridDim.z limit
REDUCE_TEMPLATE = "auxiliary/splitk_reduce.cu"
REDUCE_NAME = "cumm_splitk_reduce"
REDUCE_THREADS = 256
REDUCE_MAX_BLOCKS = 8192  # a grid-stride loop covers the rest


def check_arg(split_k, kernel: str = "auto") -> int:
    """``split_k`` as an int >= 1 that ``kernel`` (a name; "auto": any) can run; raises TypeError/ValueError
    before anything touches the GPU. (cumm.matmul checks the value here, and its resolved rung with
    ``cumm.ladder.split_refusal``.)"""
    try:
        if isinstance(split_k, bool):
            raise TypeError
        s = operator.index(split_k)
    except TypeError:
        raise TypeError(f"split_k must be an int >= 1 or None, got {split_k!r}") from None
    if s < 1:
        raise ValueError(f"split_k must be at least 1 (1: no split), got {s}")
    if s > 1 and kernel != "auto" and not get_spec(kernel).split_k:
        raise split_refusal(kernel, s)
    return s


def granule(bk: int) -> int:
    """lcm(BK, 4): slices are whole slabs and start on a 16-byte boundary of A's rows."""
    return bk * 4 // math.gcd(bk, 4)


def slice_depth(K: int, splits: int, bk: int) -> int:
    """KC, the depth of every slice but the last: ceil(K / S) rounded up to a multiple of lcm(BK, 4)."""
    g = granule(bk)
    return cdiv(cdiv(K, splits), g) * g


def k_range(K: int, splits: int, bk: int, z: int) -> tuple[int, int]:
    """The columns [k0, k1) of A that slice z multiplies, (0, 0) when empty (as cumm_k_slice in common.cuh)."""
    kc = slice_depth(K, splits, bk)
    k0 = min(z * kc, K)
    k1 = min(k0 + kc, K)
    return (k0, k1) if k0 < k1 else (0, 0)


def effective_splits(K: int, splits: int, bk: int) -> int:
    """Slices that get work when ``splits`` are asked for: ceil(K / KC) <= min(splits, ceil(K / BK), MAX_SPLITS).

    The device computes KC from the launched count; ceil(K / KC) launched slices give the same KC."""
    return cdiv(K, slice_depth(K, min(splits, MAX_SPLITS), bk))


def reduce_source() -> str:
    return aux_source(REDUCE_TEMPLATE)


def reduce_launch(M: int, N: int, device_id: int) -> tuple[int, int, int]:
    """(CUfunction, blocks, threads) of the reduce kernel for an M x N product: a cached call's second driver launch
    (cumm.runtime.launch.Call)."""
    (kern,) = aux_kernels(REDUCE_TEMPLATE, (REDUCE_NAME,), device_id)
    return kern.kernel.ptr, min(cdiv(M * N, REDUCE_THREADS), REDUCE_MAX_BLOCKS), REDUCE_THREADS


def reduce(ws, splits: int, M: int, N: int, alpha: float, beta: float, c, ldc: int) -> None:
    """c = alpha * ws.sum(0) + beta * c for the (splits, M, N) workspace ``ws``; c is row-major, row stride ldc."""
    import numpy as np

    i32, f32 = np.int32, np.float32
    blocks = min(cdiv(M * N, REDUCE_THREADS), REDUCE_MAX_BLOCKS)
    (kern,) = aux_kernels(REDUCE_TEMPLATE, (REDUCE_NAME,), c.device.id)
    kern((blocks,), (REDUCE_THREADS,), (i32(M), i32(N), i32(splits), ws, f32(alpha), f32(beta), c, i32(ldc)))
