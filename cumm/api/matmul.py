"""``cumm.matmul``: key -> plan -> launch.

A call's *key* is everything its checks and decisions depend on but the pointers (each array's kind, shape,
strides, dtype, device and 16-byte misalignment, ``kernel``, ``config``, ``split_k``, whether beta is zero). The
first call with a key runs every check and makes a :class:`Call` holding every decision; a later one tests only
``out`` overlapping an input and launches (mostly one driver launch from a packed argument buffer).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping

import cupy
import numpy as np

from ..ladder import get_spec, split_refusal
from ..plan import splitk as _splitk
from ..plan.decide import decide
from ..plan.execute import execute, run_cached
from ..plan.operands import F32_MAX, config_key, new_out, prepare, real_scalar, span, stacked, staging
from ..runtime import arrays as _arrays
from ..runtime.launch import Call
from . import fused as _fused

# ---- The key of a call: everything but the pointers -----------------------------------------------

_ND = cupy.ndarray


def _key(a, b, out, kernel, config, split_k, beta, epi: dict | None = None) -> tuple | None:
    """The call's key, or None when this call is not cached (another kind of array, an unhashable argument).
    (matmul's hot path builds the same tuple inline for cupy arrays.) ``epi``: the epilogue's arguments, whose
    calls are kept in cumm/api/fused.py under the kernel's name and that module's key."""
    ta = type(a)
    try:
        if epi is not None:
            sig = _fused.key(a, b, out, config, split_k, beta, epi)
            key = None if sig is None else (kernel, sig)
        elif ta is _ND and type(b) is _ND and (out is None or type(out) is _ND):
            da, db = a.data, b.data
            key = (
                a.shape,
                a.strides,
                a.dtype,
                da.device_id,
                da.ptr & 15,
                b.shape,
                b.strides,
                b.dtype,
                db.device_id,
                db.ptr & 15,
                None if out is None else (out.shape, out.strides, out.dtype, out.data.device_id, out.data.ptr & 15),
                kernel,
                None if config is None else tuple(sorted(config.items())),
                split_k,
                beta == 0.0,
            )
        elif ta.__module__ == "torch" and type(b) is ta and (out is None or type(out) is ta):
            key = (
                "torch",
                a.shape,
                a.stride(),
                a.dtype,
                a.get_device(),
                a.data_ptr() & 15,
                b.shape,
                b.stride(),
                b.dtype,
                b.get_device(),
                b.data_ptr() & 15,
                None if out is None else (out.shape, out.stride(), out.dtype, out.get_device(), out.data_ptr() & 15),
                kernel,
                None if config is None else tuple(sorted(config.items())),
                split_k,
                beta == 0.0,
            )
        else:
            return None
        hash(key)  # (None too)
        return key
    except Exception:  # an unhashable kernel=, a config that is not a mapping: the checked path says what
        return None


_calls: dict[tuple, Call] = {}
_CALLS_MAX = 4096


def matmul(
    a,
    b,
    *,
    kernel: str = "auto",
    config: Mapping[str, int] | None = None,
    out=None,
    out_dtype=None,
    alpha: float = 1.0,
    beta: float = 0.0,
    split_k: int | None = None,
    bias=None,
    activation: str | None = None,
    residual=None,
    epilogue: str | None = None,
    operands: Mapping | None = None,
    aux=None,
    glu: str | None = None,
    scale_result=None,
):
    """C = alpha * a @ b + beta * out for GPU arrays (cupy, torch, ``__cuda_array_interface__`` / ``__dlpack__``),
    a result of the inputs' kind, on their library's current stream (README.md). ``kernel``: a rung's name
    (``cumm.kernels()``) or "auto"; ``config``: tile overrides; ``split_k``: slices of K summed (None: 1, or auto's
    choice). Fused epilogue (docs/beyond.md): ``bias``, ``activation`` ("relu", "gelu", "gelu_tanh", "silu"),
    ``residual``, ``epilogue`` (CUDA statements over ``v``, ``row``, ``col``, ``z`` and ``operands``), ``aux``;
    ``glu`` (an activation's name): C = act(a @ w1) * (a @ w3), half of b's columns, for b = cumm.glu_weight(w1, w3).
    FP8 C (bfloat16 / float16 inputs, torch): ``out`` a torch.float8_e4m3fn or float8_e5m2 tensor, written as
    fp8(scale_result * v) after the epilogue, rounded to nearest even and saturated (``scale_result``: a float32
    one-element tensor; none: 1); beta must be 0. ``out_dtype`` (in place of ``out``): a new C of that dtype, the
    inputs' (the default), float32, or for torch tensors an FP8 dtype.
    """
    if out_dtype is not None:
        out = new_out(a, b, out, out_dtype, glu is not None, beta)
    plain = type(alpha) is float and type(beta) is float and abs(alpha) <= F32_MAX and abs(beta) <= F32_MAX
    # (cached paths: alpha, beta floats that float32 holds, else the checks name them); every miss ends at the bottom
    key = None
    epi = _fused.arguments(out, bias, activation, residual, epilogue, operands, aux, glu, scale_result)
    if epi is not None:
        key = _key(a, b, out, kernel, config, split_k, beta, epi)  # its own call cache (cumm/api/fused.py)
        hit = _fused.calls.get(key) if key is not None else None
        if hit is not None and plain:
            got = _fused.run(hit, a, b, out, alpha, beta, epi)
            if got is not None:
                return got
            key = None  # out overlaps an input (its checks, its message), or no room for pieces (the fallback)
    elif type(a) is _ND and type(b) is _ND and plain and (out is None or type(out) is _ND):
        da, db = a.data, b.data
        pa, pb = da.ptr, db.ptr
        part = None if out is None else (out.shape, out.strides, out.dtype, out.data.device_id, out.data.ptr & 15)
        try:
            key = (
                a.shape,
                a.strides,
                a.dtype,
                da.device_id,
                pa & 15,
                b.shape,
                b.strides,
                b.dtype,
                db.device_id,
                pb & 15,
                part,
                kernel,
                None if config is None else tuple(sorted(config.items())),
                split_k,
                beta == 0.0,
            )
            call = _calls.get(key)
        except Exception:  # unhashable kernel= or config values, a config that is not a mapping
            key = call = None
        if call is not None and out is not None and _overlaps(pa, pb, out.data.ptr, call.spans):
            key = None  # its checks, its message
        elif call is not None and not call.fast:  # copies, split-K or strips around the kernel: run on cupy views
            if out is None:
                with cupy.cuda.Device(call.dev):
                    out = _ND(call.out_shape, call.dtype)
            return run_cached(call, a, b, out, alpha, beta, cupy.cuda.get_current_stream().ptr)
        elif call is not None:
            dev = call.dev
            if dev != _getdevice():
                with cupy.cuda.Device(dev):
                    out = _ND(call.out_shape, call.dtype) if out is None else out
                    call.launch(pa, pb, out.data.ptr, alpha, beta, _stream().ptr)
                    return out
            # (the common case: Call.launch without tensor maps inline)
            if out is None:
                out = _ND(call.out_shape, call.dtype)
            if call.maps:
                call.launch(pa, pb, out.data.ptr, alpha, beta, _stream().ptr)
            else:
                with call.lock:
                    call._launch(pa, pb, out.data.ptr, alpha, beta, _stream().ptr)
            return out
    else:  # torch tensors (any other kind has no key)
        key = _key(a, b, out, kernel, config, split_k, beta)
        call = _calls.get(key) if key is not None else None
        if call is not None and plain:
            pa, pb, given = a.data_ptr(), b.data_ptr(), out is not None
            if out is None:
                if call.torch_empty is None:
                    call.torch_empty = _arrays.torch_empty(call.out_shape, call.dtype, call.dev)
                out = call.torch_empty()
            pc = out.data_ptr()
            if given and _overlaps(pa, pb, pc, call.spans):
                key = None  # its checks, its message
            else:
                stream = _arrays.torch_stream(call.dev)
                if not call.fast:
                    return run_cached(call, a, b, out, alpha, beta, stream)
                if call.dev != _getdevice():
                    with cupy.cuda.Device(call.dev):
                        call.launch(pa, pb, pc, alpha, beta, stream)
                else:
                    call.launch(pa, pb, pc, alpha, beta, stream)
                return out
    return _checked(a, b, out, kernel, config, alpha, beta, split_k, key, epi)


_getdevice = cupy.cuda.runtime.getDevice
_stream = cupy.cuda.get_current_stream


def _overlaps(pa: int, pb: int, pc: int, spans: tuple[int, int, int]) -> bool:
    ea, eb, ec = spans
    return (pc < pa + ea and pa < pc + ec) or (pc < pb + eb and pb < pc + ec)


def _checked(a, b, out, kernel, config, alpha, beta, split_k, key, epi_args=None):
    """The whole call with every check; makes the Call and keeps it under ``key`` (here or in fused.py) if it can.
    The rung's name is resolved once, here (``spec``; None: auto), and goes one way: to decide and the Call."""
    akind = _arrays.kind(a)
    split_k = None if split_k is None else _splitk.check_arg(split_k)
    if not isinstance(kernel, str):
        raise TypeError(f"kernel must be a str (a rung's name or 'auto'), got {kernel!r}")
    try:  # the name resolved once; an unknown one is reported after the operands' checks (split_k > 1: now)
        spec, unknown = (None if kernel == "auto" else get_spec(kernel)), None
    except ValueError as e:
        if split_k is not None and split_k > 1:
            raise
        spec, unknown = None, e
    if spec is not None and split_k is not None and split_k > 1 and not spec.split_k:
        raise split_refusal(spec.name, split_k)
    config_key(config)
    alpha, beta = real_scalar(alpha, "alpha"), real_scalar(beta, "beta")
    glu = epi_args is not None and epi_args["glu"] is not None  # C has half of the product's columns
    p = q = prepare(a, b, out, beta, akind, glu)
    epi, epi_ops = (None, ()) if epi_args is None else _fused.build(p, akind, a, epi_args)
    stream = _arrays.torch_stream(p.dev) if akind == "torch" else None
    with _arrays.on_stream(stream, p.dev) if stream is not None else contextlib.nullcontext():
        if p.stage:  # an out the kernels cannot write in place: computed row-major (not cached), copied back
            key, epi_args, akind = None, _fused.as_cupy_args(epi_args), "cupy"
            q = prepare(p.a, p.b, staging(p.out, beta), beta, akind, glu, p.fp8)
            epi, epi_ops = (None, ()) if epi_args is None else _fused.build(q, akind, p.a, epi_args)
        if not q.empty and q.K == 0:  # the empty sum: alpha * 0 + beta * out
            _empty_sum(q.out, beta)
        elif not q.empty:  # the checked call on checked operands q (cumm.plan.operands.Operands)
            if unknown is not None:
                raise unknown
            a2, b2, o2, batch, folded = q.a2, q.b2, q.o2, q.batch, False
            if batch and b2.ndim == 2 and epi is None:
                # a batch times one matrix, a's (and out's) matrices stacked: one product of batch * M rows, tiled
                # for that size; cached under this call's key (a fast call launches on the caller's pointers: the
                # stacked views')
                af, of = stacked(a2, q.K), stacked(o2, q.N)
                if af is not None and of is not None:
                    a2, o2, batch, folded = af, of, (), True
            got = decide(a2, b2, o2, batch, spec, config, split_k, beta, q.dev, akind, epi)
            if got is None:  # auto chose a rung without batches: one product at a time
                _each(a2, b2, o2, batch, config, alpha, beta, epi_args)
            else:
                call, ops = got
                call.out_shape = q.shape
                call.spans = (span(q.a), span(q.b), span(q.out))  # the caller's arrays: the cached paths' overlap test
                if epi is not None:  # one launch, alpha as the CummAlpha argument (include/epilogue.cuh); fused.py
                    _fused.first(call, ops, q, alpha, beta, epi_ops, key, epi_args)
                else:
                    if key is not None and akind in ("cupy", "torch") and (call.fast or not (batch or folded)):
                        if len(_calls) >= _CALLS_MAX:
                            _calls.clear()
                        _calls[key] = call
                    execute(call, ops, q.a, q.b, q.out, alpha, beta)
        if q is not p:
            p.out[...] = q.out
    return p.result


def _empty_sum(out, beta: float) -> None:
    """alpha * 0 + beta * out, in place (an Operands field cannot be rebound)."""
    if beta == 0.0:
        out.fill(0)
    else:
        out *= np.float32(beta)


def _each(a, b, out, batch, config, alpha, beta, epi_args=None) -> None:
    """A batched product as one matmul (and launch) per product of the batch under kernel="auto", its operands
    broadcast (an epilogue's batched operands: product idx's matrix)."""
    na, nb = a.ndim - 2, b.ndim - 2
    for idx in np.ndindex(*batch):
        ia = tuple(0 if d == 1 else i for i, d in zip(idx[len(idx) - na :], a.shape[:na], strict=True))
        ib = tuple(0 if d == 1 else i for i, d in zip(idx[len(idx) - nb :], b.shape[:nb], strict=True))
        extra = _fused.product_args(epi_args, idx)
        matmul(a[ia], b[ib], kernel="auto", config=config, out=out[idx], alpha=alpha, beta=beta, **extra)
