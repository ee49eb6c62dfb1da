"""What the benchmark runs and how it checks it: the rotating operand sets, the calls (cuBLAS's and cumm's, with or
without beta) and their verification against a float64 product.

Apart from the timing rounds (:mod:`.bench`): these say what one call computes and whether it is right, the same
for the bench, the shape suite and the scripts in bench/; the rounds say how it is timed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

from ..runtime.timing import n_input_sets
from .bench_rows import CUBLAS, UNFUSED, check_beta

L2_FALLBACK_BYTES = 60 * 2**20  # H200; used only if the device does not report its L2 size


class BenchError(RuntimeError):
    """The benchmark cannot produce honest numbers here (no GPU, TF32 forced, broken baseline)."""


def c0_scale(K: int, beta: float, dtype: str = "float32") -> float:
    """The standard deviation of the random C0 that :func:`verify` starts C from when beta != 0: beta * C0 as
    large as A @ B's elements (std sqrt(K) for normal inputs), so a call that ignores beta or C is off by about
    the whole result, never by less than the dtype's tolerance; for float16 the deviation is capped at 2^12, so C0
    stays far below float16's largest value (65504)."""
    scale = math.sqrt(max(K, 1)) / abs(beta)
    return min(scale, 2.0**12 if dtype == "float16" else 2.0**100)


# The verification threshold per dtype (core.dtypes.TOLERANCE): relative Frobenius error against float64 of the
# (rounded) inputs. A half result is rounded to 11 (float16) or 8 (bfloat16) significant bits, so its error is ~2^-12
# or ~2^-9.


def np_dtype(dtype: str):
    if dtype == "bfloat16":
        from ..runtime.arrays import bfloat16

        return bfloat16()
    import numpy as np

    return np.dtype(dtype)


def product_reference(a, b):
    """The float64 product and its Frobenius norm."""
    import cupy

    ref = a.astype(cupy.float32).astype(cupy.float64) @ b.astype(cupy.float32).astype(cupy.float64)
    return ref, float(cupy.linalg.norm(ref))


def glu_product_reference(glu: str, abc: tuple):
    """glu='s float64 result on a (A, B, C, W1, W3) set, act(A @ W1) * (A @ W3), and its Frobenius norm."""
    import cupy

    from .epiref import glu_pair

    a, w1, w3 = (x.astype(cupy.float32).astype(cupy.float64) for x in (abc[0], abc[3], abc[4]))
    ref = glu_pair(glu, a @ w1, a @ w3)
    return ref, float(cupy.linalg.norm(ref))


def input_sets(
    rng, M: int, N: int, K: int, n_sets: int | None = None, dtype: str = "float32", beta: float = 0.0
) -> list[tuple]:
    """Rotating (A, B, C) sets of ``dtype``; A and B random normal, C uninitialized (every call writes it) or, with
    ``beta`` != 0, random normal too (every call reads it)."""
    import cupy

    item = 4 if dtype == "float32" else 2
    if n_sets is None:
        dev = cupy.cuda.Device()
        l2 = dev.attributes.get("L2CacheSize") or L2_FALLBACK_BYTES
        pool = cupy.get_default_memory_pool()
        free = cupy.cuda.runtime.memGetInfo()[0] + pool.free_bytes()
        n_sets = n_input_sets(item * (M * K + K * N), item * (M * K + K * N + M * N), l2, free)
    f32, dt = cupy.float32, np_dtype(dtype)
    return [
        (
            rng.standard_normal((M, K), dtype=f32).astype(dt),
            rng.standard_normal((K, N), dtype=f32).astype(dt),
            cupy.empty((M, N), dtype=dt) if beta == 0.0 else rng.standard_normal((M, N), dtype=f32).astype(dt),
        )
        for _ in range(n_sets)
    ]


def glu_input_sets(rng, M: int, N: int, K: int, dtype: str, n_sets: int | None = None) -> list[tuple]:
    """Rotating (A, B, C, W1, W3) sets for a glu= race: A (M x K), W1 and W3 (K x N) random normal, B =
    cumm.glu_weight(W1, W3) (K x 2N, what the cumm kernels read), C (M x N) uninitialized. The unfused baseline
    reads A, W1 and W3; the rotation counts those bytes (one side's)."""
    import cupy

    from ..api.glu import glu_weight

    item = 4 if dtype == "float32" else 2
    if n_sets is None:
        l2 = cupy.cuda.Device().attributes.get("L2CacheSize") or L2_FALLBACK_BYTES
        free = cupy.cuda.runtime.memGetInfo()[0] + cupy.get_default_memory_pool().free_bytes()
        n_sets = n_input_sets(item * (M * K + 2 * K * N), item * (M * K + 4 * K * N + M * N), l2, free)
    f32, dt = cupy.float32, np_dtype(dtype)
    sets = []
    for _ in range(n_sets):
        a = rng.standard_normal((M, K), dtype=f32).astype(dt)
        w1 = rng.standard_normal((K, N), dtype=f32).astype(dt)
        w3 = rng.standard_normal((K, N), dtype=f32).astype(dt)
        sets.append((a, glu_weight(w1, w3), cupy.empty((M, N), dtype=dt), w1, w3))
    return sets


def glu_call(kernel: str, glu: str, epi: Mapping | None = None) -> Callable:
    """``call(a, b, c, w1, w3)`` writing the gated product into c: a cumm kernel ("auto" too) with ``glu=`` over
    b = glu_weight(w1, w3) (and the rest of ``epi``), or for :data:`UNFUSED` the eager torch code a user writes
    (``act(x @ w1) * (x @ w3)``: two cuBLAS products, the activation and the product of both, into c)."""
    from ..api import matmul as _api

    if kernel != UNFUSED:
        kw = dict(epi or {}, glu=glu)
        return lambda a, b, c, w1, w3: _api.matmul(a, b, kernel=kernel, out=c, **kw)
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        raise BenchError("glu='s baseline is torch's act(x @ w1) * (x @ w3): install torch") from None
    act = {
        "silu": F.silu,
        "gelu": F.gelu,
        "gelu_tanh": lambda v: F.gelu(v, approximate="tanh"),
        "relu": F.relu,
    }[glu]
    views: dict = {}

    def call(a, b, c, w1, w3):
        key = (a.data.ptr, c.data.ptr, w1.data.ptr, w3.data.ptr)
        t = views.get(key)
        if t is None:
            t = views[key] = tuple(torch.from_dlpack(x) for x in (a, c, w1, w3))
        x, y, t1, t3 = t
        torch.mul(act(x @ t1), x @ t3, out=y)

    return call


def kernel_call(kernel: str, dtype: str = "float32", beta: float = 0.0, epi: Mapping | None = None) -> Callable:
    """``call(a, b, c)`` writing a @ b into c: cuBLAS (cupy.matmul for float32; torch.matmul, the cuBLAS
    fp16/bf16 products with FP32 accumulation that users call, on the same memory for half dtypes), or a cumm
    kernel ("auto" too). With ``beta`` != 0 the call computes c = a @ b + beta * c in place: cuBLAS through
    ``cupy.cublas.gemm`` (float32; cupy.matmul has no beta) or ``torch.Tensor.addmm_`` (half dtypes), a cumm
    kernel through ``cumm.matmul(..., beta=beta)``."""
    import cupy

    from ..api import matmul as _api

    beta = check_beta(beta)
    if kernel == CUBLAS and dtype == "float32":
        if beta == 0.0:
            return lambda a, b, c: cupy.matmul(a, b, out=c)
        from cupy import cublas  # needs the cuBLAS library: imported only here

        return lambda a, b, c: cublas.gemm("N", "N", a, b, out=c, alpha=1.0, beta=beta)
    if kernel == CUBLAS:
        try:
            import torch
        except ImportError:
            what = "torch.matmul" if beta == 0.0 else "torch.Tensor.addmm_"
            raise BenchError(f"the {dtype} cuBLAS baseline is {what}: install torch") from None
        views: dict = {}

        def views_of(a, b, c) -> tuple:
            key = (a.data.ptr, b.data.ptr, c.data.ptr)
            t = views.get(key)
            if t is None:
                t = views[key] = (torch.from_dlpack(a), torch.from_dlpack(b), torch.from_dlpack(c))
            return t

        if beta == 0.0:

            def call(a, b, c):
                t = views_of(a, b, c)
                torch.matmul(t[0], t[1], out=t[2])

        else:

            def call(a, b, c):
                t = views_of(a, b, c)
                t[2].addmm_(t[0], t[1], beta=beta)  # cuBLAS's gemm with beta, on C's memory

        return call
    epi = dict(epi or {})  # a fused epilogue (cumm kernels only; cuBLAS runs the plain product beside)
    if beta == 0.0:
        return lambda a, b, c: _api.matmul(a, b, kernel=kernel, out=c, **epi)
    return lambda a, b, c: _api.matmul(a, b, kernel=kernel, out=c, beta=beta, **epi)


def verify(call: Callable, abc: tuple, ref, ref_norm: float, *, beta: float = 0.0, rng=None) -> float:
    """||C - ref|| / ||ref|| with C first filled with NaN (elements a kernel never writes stay NaN).

    With ``beta`` != 0 (``call`` computing C = A @ B + beta * C) NaN would poison every element, so C starts from
    fresh random normals C0 of C's dtype instead (standard deviation :func:`c0_scale`: beta * C0 about as large
    as A @ B, so ignoring beta or C costs about the whole result), and the reference is ``ref + beta * C0`` in
    float64 (C0 as rounded to the dtype); ``ref_norm`` is then not used. ``rng``: a cupy Generator (default: a
    fresh one)."""
    import cupy

    a, b, c = abc[:3]  # (a glu= set: W1 and W3 after them, for the unfused baseline)
    if beta == 0.0:
        c.fill(math.nan)
        call(*abc)
        return float(cupy.linalg.norm(c.astype(cupy.float32).astype(cupy.float64) - ref)) / ref_norm
    rng = cupy.random.default_rng() if rng is None else rng
    scale = c0_scale(a.shape[-1], beta, c.dtype.name)
    c[...] = (rng.standard_normal(c.shape, dtype=cupy.float32) * cupy.float32(scale)).astype(c.dtype)
    want = ref + beta * c.astype(cupy.float32).astype(cupy.float64)  # C0 as rounded, before the call overwrites it
    call(a, b, c)
    got = c.astype(cupy.float32).astype(cupy.float64)
    return float(cupy.linalg.norm(got - want)) / float(cupy.linalg.norm(want))


def fp8_sets(sets: list[tuple]) -> list[tuple]:
    """An FP8 C race's sets: each (A, B, C) with a byte matrix C8 of C's shape after it, the FP8 C the cumm kernels
    write (cuBLAS, the baseline, writes the plain product into C)."""
    import cupy

    return [(*s[:3], cupy.empty(s[2].shape, dtype=cupy.uint8)) for s in sets]


def beside_fp8(call: Callable) -> Callable:
    """``call(a, b, c)`` taking an FP8 C race's set (a, b, c, c8): the baseline writes c and leaves c8 alone."""
    return lambda a, b, c, _c8: call(a, b, c)


def fp8_out_call(kernel: str, out_dtype: str, scale_result: float | None, epi: Mapping | None = None) -> Callable:
    """``call(a, b, c, c8)``: a cumm kernel ("auto" too) on torch views of a and b (bfloat16 / float16) writing
    fp8(scale_result * v) into c8 as a torch ``out_dtype`` tensor (matmul's FP8 C, after ``epi``'s epilogue)."""
    import torch

    from ..api import matmul as _api
    from .check_fp8 import as_torch, scale_tensor

    kw = dict(epi or {})
    scale = scale_tensor(scale_result)
    if scale is not None:
        kw["scale_result"] = scale
    fmt = getattr(torch, out_dtype)
    views: dict = {}

    def call(a, b, c, c8):
        key = (a.data.ptr, b.data.ptr, c8.data.ptr)
        t = views.get(key)
        if t is None:
            t = views[key] = (as_torch(a), as_torch(b), torch.from_dlpack(c8).view(fmt))
        _api.matmul(t[0], t[1], kernel=kernel, out=t[2], **kw)

    return call


def verify_fp8(call: Callable, abcd: tuple, ref, out_dtype: str, scale_result: float | None) -> tuple[float, float]:
    """(relative Frobenius error, its tolerance) of an FP8 C call: C8 poisoned (NaN bytes) first, compared with
    the float64 reference scaled and clamped to the format (cumm/tools/check_fp8.py's ``compare``: within 1.5 times
    the format's own rounding error of it)."""
    import cupy
    import torch

    from .check_fp8 import POISON, compare

    c8 = abcd[3]
    c8.fill(POISON)
    call(*abcd)
    got, want, tol = compare(torch.from_dlpack(c8).view(getattr(torch, out_dtype)), ref, out_dtype, scale_result)
    den = float(cupy.linalg.norm(want))
    return (float(cupy.linalg.norm(got - want)) / den if den else float(cupy.linalg.norm(got))), tol


def fp8_args(out_dtype: str | None, scale_result, dtype: str, beta: float, glu: str | None):
    """(out_dtype, scale_result) of an FP8 C race, None without one; ValueError, before the GPU is touched, for one
    the bench cannot run."""
    from .check_fp8 import check_args

    if out_dtype is None:
        check_args(out_dtype, [dtype], scale_result)  # (a scale_result without an FP8 C is an error)
        return None
    if beta != 0.0:
        raise ValueError(
            f"beta={beta:g} with an FP8 C: cumm writes fp8(scale_result * v) and never reads C; race it with beta 0"
        )
    if glu is not None:
        raise ValueError("an FP8 C with glu=: the bench races an FP8 C on the plain product; race glu= with a 16-bit C")
    check_args(out_dtype, [dtype], scale_result)  # the format, the inputs' dtype, the scale, torch
    return out_dtype, scale_result
