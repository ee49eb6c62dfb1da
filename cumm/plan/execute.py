"""Carrying out a decided call (:func:`cumm.plan.decide.decide`): :func:`execute` for the call that made the decision,
:func:`run` for a call that is more than one launch on the caller's arrays (copied or repacked operands, split-K,
a staged output, edge strips), cached and run again on each later call with its key."""

from __future__ import annotations

import contextlib

import cupy

from ..ladder import REGISTRY
from ..runtime import arrays as _arrays
from ..runtime.driver import multiprocessors
from ..runtime.launch import Call
from ..runtime.render import TRANSPOSED_A, TRANSPOSED_B
from . import edges as _edges
from . import pieces as _pieces
from . import repack as _repack
from .decide import decide
from .operands import aligned, row_major
from .plan import get_plan


def execute(call: Call, ops: tuple, a, b, out, alpha: float, beta: float) -> None:
    """The first run of a call on the operands :func:`decide` made (``ops``; copies are not made twice), or on the
    caller's cupy views ``a``, ``b``, ``out`` for a fast call, on the current stream."""
    sptr = cupy.cuda.get_current_stream().ptr
    with cupy.cuda.Device(call.dev):
        if call.fast:
            call.launch(a.data.ptr, b.data.ptr, out.data.ptr, alpha, beta, sptr)
        elif call.batch is not None and not call.direct:  # grid z over the batch, through Plan.launch
            M, N, K = call.M, call.N, call.K
            call.plan.launch(
                M, N, K, alpha, ops[0], call.lda, ops[1], call.ldb, beta, ops[2], call.ldc, batch=call.batch
            )
        elif call.direct and not call.decisions.get("pieces"):  # one launch on the row-major operands decide made
            call.launch(ops[0].data.ptr, ops[1].data.ptr, ops[2].data.ptr, alpha, beta, sptr)
        else:
            run(call, *ops, alpha, beta)


def run(call: Call, a, b, c, alpha: float, beta: float) -> None:
    """A call that is not one launch on the caller's arrays (copied or repacked operands, split-K, a staged output,
    edge strips), on cupy views of its arrays, on the current stream."""
    d = call.decisions
    M, N, K = call.M, call.N, call.K
    lay = call.plan.flags.layout  # transposed operands the kernel reads in place
    a, lda = (a, call.lda) if lay & TRANSPOSED_A else row_major(a, "a", copy_ok=True)
    b, ldb = (b, call.ldb) if lay & TRANSPOSED_B else row_major(b, "b", copy_ok=True)
    c, ldc = row_major(c, "out", copy_ok=False)
    if d.get("pad_a"):  # rows the copy engine cannot read, copied into rows it reads (see _decide)
        a, lda = _repack.copy_engine_rows(a)
    if d.get("pad_b"):
        b, ldb = _repack.copy_engine_rows(b)
    if d.get("pieces"):  # one launch on the operands' FP16 pieces (their lds are the call's)
        try:
            buf, pa, pb = _pieces.split(call, a, lda, b, ldb)
        except cupy.cuda.memory.OutOfMemoryError:  # no room for the pieces: the rung that reads FP32 in place
            _without_pieces(call, a, b, c, alpha, beta)
            return
        with cupy.cuda.Device(call.dev):
            call.launch(pa, pb, c.data.ptr, alpha, beta, cupy.cuda.get_current_stream().ptr)
        del buf  # (back to the pool behind the launch, on this stream)
        return
    if call.direct:  # a copy-engine or half rung: one launch on the row-major copies (its maps made per pointer)
        with cupy.cuda.Device(call.dev):
            call.launch(a.data.ptr, b.data.ptr, c.data.ptr, alpha, beta, cupy.cuda.get_current_stream().ptr)
        return
    plan = call.plan
    try:
        if d["repack_a"]:
            a, lda = _repack.repack(a)
        if d["repack_b"]:
            b, ldb = _repack.repack(b)
    except cupy.cuda.memory.OutOfMemoryError:  # the copy is an optimization: run the scalar variant instead
        a, lda = row_major(a, "a", copy_ok=True)
        b, ldb = row_major(b, "b", copy_ok=True)
        flags = plan.flags._replace(vec_a=aligned(a, lda), vec_b=aligned(b, ldb))
        plan = get_plan(plan.spec.name, plan.cfg, flags, call.dev)
    staged = _repack.stage_out(c, beta) if d["stage"] else None
    if d["stage"] and staged is None:  # out of memory for the padded buffer: the scalar-store variant, in place
        plan = get_plan(plan.spec.name, plan.cfg, plan.flags._replace(vec_c=aligned(c, ldc)), call.dev)
    tgt, ldt = staged if staged is not None else (c, ldc)
    dev = call.dev
    with cupy.cuda.Device(dev):
        plan.launch(d["mm"], d["nn"], K, alpha, a, lda, b, ldb, beta, tgt, ldt, d["splits"])
        if (d["mm"], d["nn"]) != (M, N):
            _edges.run(M, N, K, d["mm"], d["nn"], alpha, a, lda, b, ldb, beta, tgt, ldt, multiprocessors(dev), dev)
    if staged is not None:
        _repack.unstage_out(tgt, ldt, c, ldc)


def without_pieces(call: Call, a, b, c, beta: float, epilogue=None) -> tuple[Call, tuple]:
    """(Call, operands) of ``call``'s product on its rung's fallback (``KernelSpec.fallback``: a rung reading the FP32
    operands in place), decided on the row-major cupy views ``a``, ``b``, ``c``: for a call on a rung that reads FP16
    pieces (``KernelSpec.pieces``) when the pieces' memory cannot be had. ``epilogue``: the call's fused one."""
    spec = REGISTRY[call.plan.spec.fallback]
    return decide(a, b, c, (), spec, None, None, beta, call.dev, call.kind, epilogue)


def _without_pieces(call: Call, a, b, c, alpha: float, beta: float) -> None:
    """The product on the fallback rung (decided once, kept in the call's decisions), on this call's arrays."""
    d = call.decisions
    if "without_pieces" not in d:
        d["without_pieces"] = without_pieces(call, a, b, c, beta)[0]
    alt = d["without_pieces"]
    if alt.fast:  # (decided on these row-major views: their pointers are the call's)
        with cupy.cuda.Device(alt.dev):
            alt.launch(a.data.ptr, b.data.ptr, c.data.ptr, alpha, beta, cupy.cuda.get_current_stream().ptr)
    else:
        run(alt, a, b, c, alpha, beta)


def run_cached(call: Call, a, b, out, alpha: float, beta: float, stream: int):
    """A cached call that is not a single launch, on the caller's arrays (of any kind): cupy views of them, the
    kernels on ``stream``. A rung reading pieces of the caller's own arrays: the pieces' launches and the kernel's
    on their pointers (no views)."""
    sp = _pieces.splitter(call)
    if sp is not None:
        ptr = (lambda x: x.data_ptr()) if call.kind == _arrays.TORCH else (lambda x: x.data.ptr)
        try:
            with cupy.cuda.Device(call.dev):
                buf, pa, pb = sp(ptr(a), ptr(b), stream)
                call.launch(pa, pb, ptr(out), alpha, beta, stream)
            del buf  # (back to its allocator behind the launches, on their stream)
            return out
        except cupy.cuda.memory.OutOfMemoryError:
            pass  # run() finds no room either: the fallback rung
    va, vb, vo = _arrays.as_cupy(a, "a"), _arrays.as_cupy(b, "b"), _arrays.as_cupy(out, "out")
    va = va[None, :] if va.ndim == 1 else va  # numpy's rules for vectors, as in cumm.plan.operands.prepare
    vb = vb[:, None] if vb.ndim == 1 else vb
    vo = vo.reshape(call.M, call.N)
    with _arrays.on_stream(stream, call.dev) if call.kind == "torch" else contextlib.nullcontext():
        run(call, va, vb, vo, alpha, beta)
    return out
