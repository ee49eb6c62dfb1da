"""The cached path of ``cumm.matmul`` calls with an epilogue (cumm/plan/epilogue.py).

The first call with a key (``kernel`` beside this module's :func:`key`: every array's kind, shape, strides,
dtype, device and 16-byte misalignment, ``config``, ``split_k``, whether beta is zero, the activation and the
snippet) runs matmul's checked path, which keeps its Call in ``calls`` when it is one launch on the caller's own
arrays (no copy of an operand), or one launch after the FP16 pieces of the caller's own A and B (a rung with
``pieces``); a later call packs the CummAlpha argument with its pointers, makes the pieces if any, and launches
(:func:`run`). Where the pieces' memory cannot be had, the call runs on the rung's fallback (not kept).
"""

from __future__ import annotations

import cupy

from ..plan import epilogue as _epilogue
from ..plan import pieces as _pieces
from ..plan.execute import without_pieces
from ..plan.operands import row_major
from ..runtime import arrays as _arrays

calls: dict[tuple, tuple] = {}  # (kernel, key()) -> (Call, operand layouts, (M, N))
_CALLS_MAX = 1024
_ND = cupy.ndarray


def arguments(
    out,
    bias=None,
    activation: str | None = None,
    residual=None,
    epilogue: str | None = None,
    operands=None,
    aux=None,
    glu: str | None = None,
    scale_result=None,
) -> dict | None:
    """matmul's epilogue arguments as one dict, or None when the call has none. An FP8 out (a torch tensor, written
    by the epilogue's stores) is an epilogue call, its scale 1 when not given (torch._scaled_mm's default)."""
    fp8 = out is not None and type(out) is not _ND and _arrays.fp8_code(out)
    if not (
        operands
        or fp8
        or bias is not None
        or activation is not None
        or residual is not None
        or epilogue is not None
        or aux is not None
        or glu is not None
        or scale_result is not None
    ):
        return None
    if fp8 and scale_result is None:
        scale_result = _arrays.torch_one(out.get_device())
    return dict(
        bias=bias,
        activation=activation,
        residual=residual,
        epilogue=epilogue,
        operands=operands,
        aux=aux,
        glu=glu,
        scale_result=scale_result,
    )


def _sig(x) -> tuple:
    """(kind, shape, strides, dtype, device, misalignment) of a cupy array or torch tensor (callers test None)."""
    if type(x) is _ND:
        return ("cupy", x.shape, x.strides, x.dtype, x.data.device_id, x.data.ptr & 15)
    if type(x).__module__ == "torch":  # (its shape a torch.Size: a tuple)
        return ("torch", x.shape, x.stride(), x.dtype, x.get_device(), x.data_ptr() & 15)
    raise TypeError  # another kind: the checked path


def _ptr(x) -> int:
    return x.data.ptr if type(x) is _ND else x.data_ptr()


def _in_order(epi_args: dict) -> list:
    """The epilogue's arrays in its operands' order (plan/epilogue.py build: bias, residual, operands, aux, an FP8
    C's scale)."""
    ops = epi_args["operands"] or {}
    xs = [epi_args["bias"], epi_args["residual"], *ops.values(), epi_args["aux"], epi_args["scale_result"]]
    return [x for x in xs if x is not None]


def key(a, b, out, config, split_k, beta, epi_args: dict) -> tuple | None:
    """The call's key but the kernel's name (cumm.matmul puts it beside), or None when it is not cached (another
    kind of array, an unhashable argument)."""
    try:
        ops, bias, res, aux, sr = (epi_args[n] for n in ("operands", "bias", "residual", "aux", "scale_result"))
        k = (
            _sig(a),
            _sig(b),
            None if out is None else _sig(out),
            None if config is None else tuple(sorted(config.items())),
            split_k,
            beta == 0.0,
            epi_args["activation"],
            epi_args["epilogue"],
            None if bias is None else _sig(bias),
            None if res is None else _sig(res),
            tuple((n, None if x is None else _sig(x)) for n, x in ops.items()) if ops else (),
            None if aux is None else _sig(aux),
            epi_args["glu"],
            None if sr is None else _sig(sr),
        )
        hash(k)
        return k
    except Exception:  # noqa: BLE001 - an unhashable or unknown argument: the checked path says what
        return None


def keep(k: tuple | None, call, epi_args: dict, arrays, shape) -> None:
    """Keep ``call`` under ``k`` when it launches on the caller's arrays (or on FP16 pieces made from them) and
    every epilogue operand is read in place."""
    if k is None or not (call.fast or _pieces.splitter(call)):
        return
    users = _in_order(epi_args)
    if len(users) != len(arrays) or any(_ptr(u) != x.data.ptr for u, (x, _, _) in zip(users, arrays, strict=True)):
        return  # an operand was copied (a layout the kernel does not read): copied again on every call
    if len(calls) >= _CALLS_MAX:
        calls.clear()
    calls[k] = (call, tuple((ld, bs) for _, ld, bs in arrays), shape)


def run(hit: tuple, a, b, out, alpha: float, beta: float, epi_args: dict):
    """The cached launch of ``hit`` (an entry of ``calls``) on these arrays; None when out overlaps an input (then
    the checked path, which says so) or the pieces' memory cannot be had (the checked path runs the fallback)."""
    call, layouts, shape = hit
    torch_in = type(a) is not _ND
    if out is None:
        if torch_in:
            if call.torch_empty is None:
                call.torch_empty = _arrays.torch_empty(call.out_shape, call.dtype, call.dev)
            out = call.torch_empty()
        elif call.dev == _getdevice():
            out = _ND(call.out_shape, call.dtype)
        else:
            with cupy.cuda.Device(call.dev):
                out = _ND(call.out_shape, call.dtype)
    pa, pb, pc = _ptr(a), _ptr(b), _ptr(out)
    ea, eb, ec = call.spans
    if (pc < pa + ea and pa < pc + ec) or (pc < pb + eb and pb < pc + ec):
        return None
    M, N = shape
    bsc = call.batch[3] if call.batch is not None else 0
    ptrs = [(_ptr(x), ld, bs) for x, (ld, bs) in zip(_in_order(epi_args), layouts, strict=True)]
    packed = _epilogue.pack_pointers(alpha, M, N, pc, call.ldc, bsc, ptrs)
    stream = _arrays.torch_stream(call.dev) if torch_in else cupy.cuda.get_current_stream().ptr
    if call.dev == _getdevice():  # (the common case: no device switch, which costs microseconds a call)
        return _launch(call, pa, pb, pc, packed, beta, stream, out)
    with cupy.cuda.Device(call.dev):
        return _launch(call, pa, pb, pc, packed, beta, stream, out)


def _launch(call, pa: int, pb: int, pc: int, packed: bytes, beta: float, stream: int, out):
    """run's launch on the call's device: the FP16 pieces first for a rung reading them (None when their memory
    cannot be had: the checked path runs the fallback rung), then the kernel; ``out``."""
    sp = call.decisions.get("splitter")
    if sp is not None:
        try:
            buf, pa, pb = sp(pa, pb, stream)  # (buf freed on return, behind the launch on its stream)
        except cupy.cuda.memory.OutOfMemoryError:
            return None
    call.launch(pa, pb, pc, packed, beta, stream)
    return out


_getdevice = cupy.cuda.runtime.getDevice


def build(p, akind: str, a_in, epi_args: dict):
    """(Epilogue, its operands) for checked operands ``p`` (cumm.plan.operands.Operands): every epilogue array of
    the inputs' kind (``akind``), checked and laid out by cumm.plan.epilogue.build."""

    def as_cupy(x, name):
        if _arrays.kind(x) != akind:
            raise TypeError(
                f"a is a {_arrays.describe(a_in)} but {name} is a {_arrays.describe(x)}: pass arrays of one kind"
            )
        return _arrays.as_cupy(x, name)

    epi, ops = _epilogue.build(p.a, p.M, p.N, p.batch, p.dev, **epi_args, fp8=p.fp8, as_cupy=as_cupy)
    if p.K == 0:
        raise ValueError(f"K = 0 with an epilogue: a {p.M}x0 @ 0x{p.N} product has no kernel to run it in")
    return epi, ops


def as_cupy_args(epi_args: dict | None) -> dict | None:
    """``epi_args`` with its arrays as cupy views (a staged call runs on cupy views of the caller's arrays)."""
    if epi_args is None:
        return None

    def cv(x, name):
        return None if x is None else _arrays.as_cupy(x, name)

    out = dict(epi_args)
    for name in ("bias", "residual", "aux", "scale_result"):
        out[name] = cv(out[name], name)
    if out["operands"]:
        out["operands"] = {k: cv(x, k) for k, x in out["operands"].items()}
    return out


def product_args(epi_args: dict | None, idx: tuple) -> dict:
    """matmul's epilogue arguments for product ``idx`` of a batch run one product at a time: a batched operand's
    matrix idx (a bias or a 2-D operand broadcasts)."""
    if epi_args is None:
        return {}
    extra = dict(epi_args)

    def cut(x):
        return x[idx] if x is not None and x.ndim > 2 else x

    extra["residual"], extra["aux"] = cut(extra["residual"]), cut(extra["aux"])
    if extra["operands"]:
        extra["operands"] = {k: cut(x) for k, x in extra["operands"].items()}
    return extra


def first(call, ops: tuple, p, alpha: float, beta: float, epi_ops, key: tuple | None, epi_args: dict) -> None:
    """The first run of an epilogue call (one launch: on the caller's arrays when fast, else on decide's operands),
    its Call kept under ``key`` when it can be run again as it is."""
    sptr = cupy.cuda.get_current_stream().ptr
    pa, pb, pc = (p.a.data.ptr, p.b.data.ptr, p.out.data.ptr) if call.fast else (x.data.ptr for x in ops)
    buf = None
    if call.decisions.get("pieces"):  # a rung that reads FP16 pieces of the operands: made first
        (a, lda), (b, ldb) = row_major(ops[0], "a", copy_ok=True), row_major(ops[1], "b", copy_ok=True)
        try:
            buf, pa, pb = _pieces.split(call, a, lda, b, ldb)
        except cupy.cuda.memory.OutOfMemoryError:  # no room for them: the rung that reads FP32 in place (not kept)
            alt, alt_ops = without_pieces(call, a, b, ops[2], beta, call.plan.flags.epilogue)
            first(alt, alt_ops, p._replace(a=a, b=b, out=ops[2]), alpha, beta, epi_ops, None, epi_args)
            return
    bsc = call.batch[3] if call.batch is not None else 0
    N = call.plan.flags.epilogue.columns(p.N)  # C's columns: CummAlpha's N
    with cupy.cuda.Device(p.dev):
        call.launch(pa, pb, pc, _epilogue.pack(alpha, p.M, N, pc, call.ldc, bsc, epi_ops), beta, sptr)
    del buf  # (the pieces back to the pool behind the launch, on this stream)
    keep(key, call, epi_args, epi_ops, (p.M, N))
