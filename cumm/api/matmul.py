"""``cumm.matmul``: key -> plan -> launch.

A call's *key* holds everything its checks and decisions depend on but the data pointers: the kind, shape,
strides, dtype, device and 16-byte misalignment of each array (``out`` too, or None), ``kernel``, ``config``,
``split_k`` and whether ``beta`` is zero. The first call with a key runs every check and makes a :class:`Call`,
which carries every decision: the kernel's :class:`Plan` (spec, configuration, compiled kernel, launch geometry),
the split count, the repacking of unaligned operands, the staging of an unaligned output, the edge strips and
the packed kernel arguments. A later call with that key tests only what depends on the pointers (``out``
overlapping an input) and launches: for most calls one driver launch with the arguments written into a
packed buffer, no Python-level argument conversion.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping

import cupy
import numpy as np

from ..ladder import get_spec
from ..plan import splitk as _splitk
from ..plan.execute import execute, run_cached
from ..plan.operands import F32_MAX, compute_capability, config_key, prepare, real_scalar, span, stacked, staging
from ..plan.plan import decide
from ..runtime import arrays as _arrays
from ..runtime.launch import Call
from . import fused as _fused

# ---------------------------------------------------------------------------------------------------
# The key of a call: everything but the pointers
# ---------------------------------------------------------------------------------------------------

_ND = cupy.ndarray


def _key(a, b, out, kernel, config, split_k, beta) -> tuple | None:
    """The call's key, or None when this call is not cached (another kind of array, an unhashable argument).
    (matmul's hot path builds the same tuple inline for cupy arrays.)"""
    ta = type(a)
    try:
        if ta is _ND and type(b) is _ND and (out is None or type(out) is _ND):
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
        hash(key)
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
    alpha: float = 1.0,
    beta: float = 0.0,
    split_k: int | None = None,
    bias=None,
    activation: str | None = None,
    residual=None,
    epilogue: str | None = None,
    operands: Mapping | None = None,
    aux=None,
):
    """C = alpha * a @ b + beta * out, for 2-D GPU arrays (cupy, torch, or anything with
    ``__cuda_array_interface__`` / ``__dlpack__``); the result is of the inputs' kind (see README.md).

    ``kernel``: a rung's name (``cumm.kernels()``) or "auto"; ``config``: overrides of its tile parameters;
    ``split_k``: slices of K run in parallel and summed (kernels with ``split_k`` in their spec); None: 1, or
    the heuristic's choice for kernel="auto". Kernels run on the stream of the inputs' library: torch's current
    stream for torch tensors, CuPy's current stream otherwise.

    Fused epilogue (cumm/plan/epilogue.py, docs/beyond.md), per element, after alpha and before beta * out and the
    cast: ``bias`` ((N,) or (1, N): per column; (M, 1): per row), ``activation`` ("relu", "gelu", "gelu_tanh",
    "silu"), ``residual`` (a matrix like the result), then ``epilogue``, CUDA statements over the float ``v``, its
    ``row``, ``col``, product ``z`` and the arrays of ``operands`` ({"gate": t}: ``gate[i]``, ``ld_gate``; ``aux=t``
    is ``operands={"aux": t}``).
    """
    if operands or not (bias is None and activation is None and residual is None and epilogue is None and aux is None):
        epi = dict(bias=bias, activation=activation, residual=residual, epilogue=epilogue, operands=operands, aux=aux)
        return _fused.matmul(a, b, out, kernel, config, alpha, beta, split_k, epi, _checked)  # its own call cache
    # (the cached paths take alpha and beta as they are: floats that float32 holds; NaN, inf or larger go to the
    # checks, which name them)
    if (
        type(a) is _ND
        and type(b) is _ND
        and type(alpha) is float
        and type(beta) is float
        and -F32_MAX <= alpha <= F32_MAX
        and -F32_MAX <= beta <= F32_MAX
    ):
        da, db = a.data, b.data
        pa, pb = da.ptr, db.ptr
        if out is None:
            part = None
        elif type(out) is _ND:
            do = out.data
            part = (out.shape, out.strides, out.dtype, do.device_id, do.ptr & 15)
        else:
            return _checked(a, b, out, kernel, config, alpha, beta, split_k, None)
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
            return _checked(a, b, out, kernel, config, alpha, beta, split_k, None)
        if call is None:
            return _checked(a, b, out, kernel, config, alpha, beta, split_k, key)
        if out is not None and _overlaps(pa, pb, do.ptr, call.spans):
            return _checked(a, b, out, kernel, config, alpha, beta, split_k, None)  # its checks, its message
        if not call.fast:  # copies, split-K or strips around the kernel: decided, run on cupy views
            if out is None:
                with cupy.cuda.Device(call.dev):
                    out = _ND(call.out_shape, call.dtype)
            return run_cached(call, a, b, out, alpha, beta, cupy.cuda.get_current_stream().ptr)
        dev = call.dev
        if dev != _getdevice():
            with cupy.cuda.Device(dev):
                return _launch_cupy(call, pa, pb, out, alpha, beta)
        # (the common case inline: _launch_cupy without its call, Call.launch without tensor maps)
        if out is None:
            out = _ND(call.out_shape, call.dtype)
        if call.maps:
            call.launch(pa, pb, out.data.ptr, alpha, beta, _stream().ptr)
        else:
            with call.lock:
                call._launch(pa, pb, out.data.ptr, alpha, beta, _stream().ptr)
        return out
    key = _key(a, b, out, kernel, config, split_k, beta)
    call = _calls.get(key) if key is not None else None
    if (
        call is None
        or type(alpha) is not float
        or type(beta) is not float
        or not (-F32_MAX <= alpha <= F32_MAX and -F32_MAX <= beta <= F32_MAX)
    ):
        return _checked(a, b, out, kernel, config, alpha, beta, split_k, key)
    # torch tensors
    pa, pb = a.data_ptr(), b.data_ptr()
    if out is None:
        if call.torch_empty is None:
            call.torch_empty = _arrays.torch_empty(call.out_shape, call.dtype, call.dev)
        out = call.torch_empty()
        pc = out.data_ptr()
    else:
        pc = out.data_ptr()
        if _overlaps(pa, pb, pc, call.spans):
            return _checked(a, b, out, kernel, config, alpha, beta, split_k, None)
    stream = _arrays.torch_stream(call.dev)
    if not call.fast:
        return run_cached(call, a, b, out, alpha, beta, stream)
    if call.dev != _getdevice():
        with cupy.cuda.Device(call.dev):
            call.launch(pa, pb, pc, alpha, beta, stream)
    else:
        call.launch(pa, pb, pc, alpha, beta, stream)
    return out


def _launch_cupy(call: Call, pa: int, pb: int, out, alpha: float, beta: float):
    """A cached single-launch call on cupy arrays, on the current device (call.dev); out checked already."""
    if out is None:
        out = _ND(call.out_shape, call.dtype)
    pc = out.data.ptr
    call.launch(pa, pb, pc, alpha, beta, cupy.cuda.get_current_stream().ptr)
    return out


def decision(a, b, out, *, kernel: str = "auto", config: Mapping[str, int] | None = None, beta: float = 0.0) -> str:
    """What a call ``matmul(a, b, kernel=kernel, config=config, out=out, beta=beta)`` made earlier runs: "<kernel>
    <non-default parameters>", the split count when it splits and the operands it copies on each call (a transposed
    view a rung does not read in place, rows padded for 16-byte or copy-engine reads, C staged), e.g. "tf32x3 BM=64
    BN=64 split_k=4", "wgmma_ws (copies B)"; "" if not known."""
    key = _key(a, b, out, kernel, config, None, float(beta))
    call = _calls.get(key) if key is not None else None
    if call is None:
        return ""
    spec, cfg = call.plan.spec, call.plan.cfg
    base = spec.default_config(compute_capability(call.dev))
    diff = " ".join(f"{k}={v}" for k, v in cfg.items() if base.get(k) != v)
    splits = call.decisions.get("splits", 1)
    copies = call.decisions.get("copies", ())  # operands laid out anew (transposed, padded rows) and staged outputs
    extra = f"(copies {' and '.join(copies)})" if copies else ""
    return " ".join(x for x in (spec.name, diff, f"split_k={splits}" if splits > 1 else "", extra) if x)


_getdevice = cupy.cuda.runtime.getDevice
_stream = cupy.cuda.get_current_stream


def _overlaps(pa: int, pb: int, pc: int, spans: tuple[int, int, int]) -> bool:
    ea, eb, ec = spans
    return (pc < pa + ea and pa < pc + ec) or (pc < pb + eb and pb < pc + ec)


def _checked(a, b, out, kernel, config, alpha, beta, split_k, key, epi_args=None):
    """The whole call with every check; makes (and keeps under ``key``) the Call when the call can have one.
    ``epi_args``: matmul's epilogue arguments (then ``key`` is cumm/api/fused.py's, which keeps the Call)."""
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
        raise _splitk.refuse(spec.name, split_k)
    config_key(config)
    alpha, beta = real_scalar(alpha, "alpha"), real_scalar(beta, "beta")
    p = q = prepare(a, b, out, beta, akind)
    epi, epi_ops = (None, ()) if epi_args is None else _fused.build(p, akind, a, epi_args)
    stream = _arrays.torch_stream(p.dev) if akind == "torch" else None
    with _arrays.on_stream(stream, p.dev) if stream is not None else contextlib.nullcontext():
        if p.stage:  # an out the kernels cannot write in place: computed row-major (not cached), copied back
            key, epi_args, akind = None, _fused.as_cupy_args(epi_args), "cupy"
            q = prepare(p.a, p.b, staging(p.out, beta), beta, akind)
            epi, epi_ops = (None, ()) if epi_args is None else _fused.build(q, akind, p.a, epi_args)
        _run(q, spec, unknown, config, alpha, beta, split_k, key, akind, epi, epi_ops, epi_args)
        if q is not p:
            p.out[...] = q.out
    return p.result


def _run(p, spec, unknown, config, alpha, beta, split_k, key, akind, epi, epi_ops, epi_args) -> None:
    """The checked call on checked operands ``p`` (cumm.plan.operands.Operands), its rung's ``spec`` (None: auto)."""
    if p.empty:
        return
    if p.K == 0:  # the empty sum: alpha * 0 + beta * out
        if beta == 0.0:
            p.out.fill(0)
        else:
            p.out *= np.float32(beta)
        return
    if unknown is not None:
        raise unknown
    a2, b2, o2, batch, folded = p.a2, p.b2, p.o2, p.batch, False
    if batch and b2.ndim == 2 and epi is None:
        # a batch times one matrix, a's matrices stacked row after row (and out's): one product of batch * M
        # rows, which every rung runs with the tiles tuned for its size; cached under this call's key (a fast
        # call launches on the caller's pointers, which are the stacked views')
        af, of = stacked(a2, p.K), stacked(o2, p.N)
        if af is not None and of is not None:
            a2, o2, batch, folded = af, of, (), True
    got = decide(a2, b2, o2, batch, spec, config, split_k, beta, p.dev, akind, epi)
    if got is None:  # auto chose a rung without batches: one product at a time
        _each(a2, b2, o2, batch, config, alpha, beta, epi_args)
        return
    call, ops = got
    call.out_shape = p.shape
    call.spans = (span(p.a), span(p.b), span(p.out))  # the caller's arrays, which the cached paths test for overlap
    if epi is not None:  # one launch, alpha as the CummAlpha argument (include/epilogue.cuh); cached in fused.py
        _fused.first(call, ops, p, alpha, beta, epi_ops, key, epi_args)
        return
    if key is not None and akind in ("cupy", "torch") and (call.fast or not (batch or folded)):
        if len(_calls) >= _CALLS_MAX:
            _calls.clear()
        _calls[key] = call
    execute(call, ops, p.a, p.b, p.out, alpha, beta)


def _each(a, b, out, batch, config, alpha, beta, epi_args=None) -> None:
    """A batched product as one matmul (and launch) per product of the batch under kernel="auto", its operands
    broadcast (an epilogue's batched operands: product idx's matrix)."""
    na, nb = a.ndim - 2, b.ndim - 2
    for idx in np.ndindex(*batch):
        ia = tuple(0 if d == 1 else i for i, d in zip(idx[len(idx) - na :], a.shape[:na], strict=True))
        ib = tuple(0 if d == 1 else i for i, d in zip(idx[len(idx) - nb :], b.shape[:nb], strict=True))
        extra = _fused.product_args(epi_args, idx)
        matmul(a[ia], b[ib], kernel="auto", config=config, out=out[idx], alpha=alpha, beta=beta, **extra)
