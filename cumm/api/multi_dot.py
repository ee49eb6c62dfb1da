"""``cumm.multi_dot``: a chain of matrix products, numpy.linalg.multi_dot semantics for 2-D GPU arrays (cupy, torch,
DLPack, CUDA array interface; float32, float16, bfloat16: the half dtypes pairwise, no chain rung runs them).

Two arrays are one ``cumm.matmul``. Three arrays (m x k, k x p, p x n) run a fused kernel when fusing pays
(``rules``), else two ``cumm.matmul`` calls in the cheaper order. Four or more arrays are multiplied pairwise
in the order of least multiply-adds (``order``).

The fused kernels are the registry's chain kernels (``cumm.kernels("chain")``), each with named
configurations in its spec; ``plans`` turns a kernel and configuration into a cached launch for a shape,
``launch`` launches it through the driver (programmatic dependent launch for the persistent ones) and
``cumm.runtime.tmaps`` makes the copy engine's tensor maps. How the kernels work and what they measure: docs/chain.md.

A three-array call that fuses is checked and planned once per key (kernel=, the operands' shapes, strides,
devices and pointer misalignment; see ``_fast_call``): later calls with that key test only what depends on the
pointers (out overlapping an input) and launch.
"""

from __future__ import annotations

import contextlib
from typing import NamedTuple

import cupy
import numpy as np

from ..ladder import REGISTRY
from ..plan import chain_plans as plans
from ..plan import chain_rules as rules
from ..plan.chain_order import chain_order
from ..plan.operands import INT32_MAX, check_operand, check_out, compute_capability, span, staging, writable_in_place
from ..runtime import arrays as _arrays
from ..runtime.launch import Launch
from .matmul import matmul

__all__ = ["multi_dot"]

CHAIN_KERNELS = tuple(n for n, s in REGISTRY.items() if s.kind == "chain")
KERNELS = ("auto", *CHAIN_KERNELS, "pairwise")
_F32 = np.dtype(np.float32)
_CACHE_MAX = plans.LAUNCH_CACHE_MAX

_chosen: dict[tuple, tuple[str, str] | None] = {}  # (m, k, p, n, device) -> rules.select()'s answer


def _supports(kernel: str, cc: int) -> bool:
    return REGISTRY[kernel].supports(cc)


class _Fast(NamedTuple):
    """A three-array chain's fused launch, kept under multi_dot's key of a call that passed every check."""

    launch: Launch
    dev: int
    shape: tuple[int, int]  # the result's
    spans: tuple[int, int, int, int]  # bytes from A's, B's, C's and E's pointer to the end of its last element


# multi_dot's fast path. The key holds everything its checks and its plan depend on except the pointers:
# kernel=, each operand's shape, strides and device (dtypes are tested first), out's (or None when multi_dot
# allocates it) and the pointers' misalignment from 16 bytes. A call with a known key needs only the overlap
# test of out against the inputs (from the spans) before its launch: at n = 512 on the H200's host, 14.9 us per
# call against 25.4 through the checks and plan lookups (docs/chain.md).
_fast: dict[tuple, _Fast] = {}
_ND = cupy.ndarray


def _fast_call(arrays, kernel: str, out):
    """(E, None) where the call was launched by the fast path, else (None, the key to remember a launch under,
    or None where this call cannot have one)."""
    if (type(arrays) is not list and type(arrays) is not tuple) or len(arrays) != 3 or type(kernel) is not str:
        return None, None  # (an unhashable kernel= gets the checked path's message)
    a, b, c = arrays
    if not (
        type(a) is _ND and type(b) is _ND and type(c) is _ND and a.dtype is _F32 and b.dtype is _F32 and c.dtype is _F32
    ):  # (the builtin dtype is a singleton)
        return None, None
    da, db, dc = a.data, b.data, c.data
    pa, pb, pc = da.ptr, db.ptr, dc.ptr
    if out is None:
        part, mis = None, 0
    elif type(out) is _ND and out.dtype is _F32:
        de = out.data
        pe = de.ptr
        part, mis = (out.shape, out.strides, de.device_id), (pe & 15) << 12
    else:
        return None, None
    key = (
        kernel,
        a.shape,
        a.strides,
        da.device_id,
        b.shape,
        b.strides,
        db.device_id,
        c.shape,
        c.strides,
        dc.device_id,
        part,
        (pa & 15) | (pb & 15) << 4 | (pc & 15) << 8 | mis,
    )
    plan = _fast.get(key)
    if plan is None:
        return None, key
    ea, eb, ec, ee = plan.spans
    if out is None:
        with cupy.cuda.Device(plan.dev) if plan.dev != cupy.cuda.runtime.getDevice() else contextlib.nullcontext():
            out = cupy.empty(plan.shape, dtype=_F32)
        pe = out.data.ptr
        if pe & 15:  # the plan assumed a 16-byte aligned E (the pool's are); the checked path plans for this one
            return None, None
    elif pe < pa + ea and pa < pe + ee or pe < pb + eb and pb < pe + ee or pe < pc + ec and pc < pe + ee:
        return None, None  # out overlaps an input: the checked path says which
    plans.run(plan.launch, plan.dev, (pa, pb, pc, pe))
    return out, None


def _remember(key: tuple, launch: Launch, dev: int, ops, args) -> None:
    """Keep ``launch`` under multi_dot's ``key`` if the call ran on its own arrays (``ops``
    are ``args``: no operand was copied to make it row-major)."""
    if any(x is not y for x, y in zip(ops, args, strict=True)):
        return
    if len(_fast) >= _CACHE_MAX:
        _fast.clear()
    _fast[key] = _Fast(launch, dev, args[3].shape, tuple(span(x) for x in args))


_orders: dict[tuple[int, ...], object] = {}  # dims -> chain_order(dims)


def _pairwise(arrays, dims, out):
    """The chain multiplied pairwise with cumm.matmul in the cheapest order; the last product goes into out."""
    key = tuple(dims)
    order = _orders.get(key)
    if order is None:  # (the dynamic program: 8.6 us per call for three arrays on the development host)
        if len(_orders) >= _CACHE_MAX:
            _orders.clear()
        order = _orders[key] = chain_order(key)

    def run(node, dst=None):
        if isinstance(node, int):
            return arrays[node]
        return matmul(run(node[0]), run(node[1]), out=dst)

    return run(order, out)


def multi_dot(arrays, *, kernel: str = "auto", out=None):
    """The product of two or more 2-D GPU arrays, like numpy.linalg.multi_dot: cupy arrays, torch CUDA tensors,
    or anything with ``__cuda_array_interface__`` / ``__dlpack__`` (as cumm.matmul takes); the result is of the
    inputs' kind (torch in, torch out). float32, float16 or bfloat16, one dtype for all.

    ``kernel``: "auto" (for three arrays a fused kernel when one runs the dtype and fusing pays, else pairwise
    cumm.matmul), "fused3", "fused3_tc" or "fused3_wg" (force that fused kernel; three float32 arrays only) or
    "pairwise" (cumm.matmul calls in the cheapest order).
    ``out``: an array of the inputs' kind and the result's shape, of the inputs' dtype or float32, that overlaps
    none of the inputs; returned (a layout the kernels cannot write is staged, as in cumm.matmul).
    """
    done, fast_key = _fast_call(arrays, kernel, out)
    if done is not None:
        return done
    if (type(arrays) is list or type(arrays) is tuple) and all(type(x) is _ND for x in arrays):
        if out is None or type(out) is _ND:
            return _multi_dot(arrays, kernel, out, fast_key)
    return _other_kinds(arrays, kernel, out)


def _other_kinds(arrays, kernel: str, out):
    """multi_dot on torch tensors or other GPU arrays: on cupy views of them, on the inputs' stream; the result of
    the inputs' kind."""
    arrays = list(arrays)
    if len(arrays) < 2:
        raise ValueError(f"multi_dot needs at least two arrays, got {len(arrays)}")
    if kernel not in KERNELS:
        raise ValueError(f"unknown kernel {kernel!r} for multi_dot; use one of {list(KERNELS)}")
    kinds = [_arrays.kind(x) for x in arrays]
    for i, x in enumerate(arrays[1:], 1):
        if kinds[i] != kinds[0]:
            raise TypeError(
                f"arrays[0] is a {_arrays.describe(arrays[0])} but arrays[{i}] is a {_arrays.describe(x)}: pass "
                "arrays of one kind (the result is of the inputs' kind)"
            )
    if out is not None and _arrays.kind(out) != kinds[0]:
        raise TypeError(
            f"arrays[0] is a {_arrays.describe(arrays[0])} but out is a {_arrays.describe(out)}: pass arrays of "
            "one kind (the result is of the inputs' kind)"
        )
    views = [_arrays.as_cupy(x, f"arrays[{i}]") for i, x in enumerate(arrays)]
    for i, x in enumerate(views):
        check_operand(x, f"arrays[{i}]")
    result = out
    if out is None:
        rows, cols = views[0].shape[0], views[-1].shape[1]
        result = _arrays.empty(
            kinds[0] if kinds[0] == "torch" else "cupy", (rows, cols), views[0].dtype, views[0].data.device_id
        )
    vout = None if result is None else _arrays.as_cupy(result, "out")
    dev = views[0].data.device_id
    stream = _arrays.torch_stream(dev) if kinds[0] == "torch" else None
    with _arrays.on_stream(stream, dev) if stream is not None else contextlib.nullcontext():
        _multi_dot(views, kernel, vout, None)
    return result


def _multi_dot(arrays, kernel: str, out, fast_key):
    """multi_dot on cupy arrays (the checked path; ``fast_key``: the fast path's key to keep the launch under)."""
    arrays = list(arrays)
    if len(arrays) < 2:
        raise ValueError(f"multi_dot needs at least two arrays, got {len(arrays)}")
    if kernel not in KERNELS:
        raise ValueError(f"unknown kernel {kernel!r} for multi_dot; use one of {list(KERNELS)}")
    if kernel in CHAIN_KERNELS and len(arrays) != 3:
        raise ValueError(f"kernel={kernel!r} multiplies exactly three arrays, got {len(arrays)}")
    for i, x in enumerate(arrays):
        check_operand(x, f"arrays[{i}]")
        if x.dtype != arrays[0].dtype:
            raise TypeError(
                f"arrays[0] has dtype {arrays[0].dtype} and arrays[{i}] {x.dtype}: multi_dot multiplies arrays of "
                "one dtype (convert one with .astype)"
            )
    dt = arrays[0].dtype.name
    if kernel in CHAIN_KERNELS and dt not in REGISTRY[kernel].dtypes:
        raise TypeError(
            f"kernel={kernel!r} multiplies {', '.join(REGISTRY[kernel].dtypes)} arrays, got {dt}: use kernel='auto' "
            "or 'pairwise'"
        )
    shapes = [x.shape for x in arrays]
    dims = [shapes[0][0]]
    for i, (rows, cols) in enumerate(shapes):
        if rows != dims[-1]:
            raise ValueError(
                f"shapes {shapes[i - 1]} (arrays[{i - 1}]) and {shapes[i]} (arrays[{i}]) do not align: "
                f"{dims[-1]} columns against {rows} rows"
            )
        dims.append(cols)
    dev = arrays[0].data.device_id  # (x.device builds a Device object per call)
    for i, x in enumerate(arrays[1:], 1):
        if x.data.device_id != dev:
            raise ValueError(
                f"arrays[0] is on device {dev} and arrays[{i}] on device {x.data.device_id}; put all on one device"
            )
    if max(dims) > INT32_MAX:
        raise ValueError(f"dimensions must be below 2**31, got {dims}")
    m, n = dims[0], dims[-1]
    if out is None:
        with cupy.cuda.Device(dev) if dev != cupy.cuda.runtime.getDevice() else contextlib.nullcontext():
            out = cupy.empty((m, n), dtype=arrays[0].dtype)  # on the arrays' device, whichever is current
        if out.data.ptr & 15:  # the fast path's key for out=None assumes a 16-byte aligned E (the pool's are)
            fast_key = None
    else:
        check_out(out, arrays, (m, n), dev)

    if len(arrays) == 2:
        return matmul(arrays[0], arrays[1], out=out)
    if not writable_in_place(out, (), m, n):  # staged as in matmul: computed row-major, copied back
        staged = staging(out, 0.0)
        _multi_dot(arrays, kernel, staged, None)
        out[...] = staged
        return out
    fusable = dt == "float32" and out.dtype == _F32 and all(dt in REGISTRY[k].dtypes for k in CHAIN_KERNELS)
    if len(arrays) == 3 and kernel != "pairwise" and min(dims) >= 1 and fusable:
        _, k, p, _ = dims
        if kernel in CHAIN_KERNELS:
            choice = kernel, rules.forced(kernel, m, m * p * (k + n))
        else:
            key = (m, k, p, n, dev)
            choice = _chosen.get(key, False)
            if choice is False:
                if len(_chosen) >= _CACHE_MAX:
                    _chosen.clear()
                choice = _chosen[key] = rules.select(m, k, p, n, compute_capability(dev), _supports)
        if choice is not None:
            launch, ops = plans.fused(arrays[0], arrays[1], arrays[2], out, *choice, dev)
            if fast_key is not None:
                _remember(fast_key, launch, dev, ops, (arrays[0], arrays[1], arrays[2], out))
            return out
    if m == 0 or n == 0:
        return out
    return _pairwise(arrays, dims, out)
