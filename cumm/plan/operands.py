"""Argument checks and operand layouts shared by ``cumm.matmul`` and ``cumm.multi_dot``.

Each check raises with a message naming the argument, what is wrong and what would be right.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import cupy
import numpy as np

# The dtypes matmul takes: float32, and float16 / bfloat16 (CuPy's bfloat16 comes from ml_dtypes) for the rungs
# that declare them (KernelSpec.dtypes; cumm.kernels(dtype=...) lists them).
from ..core.dtypes import DTYPES as SUPPORTED_DTYPES
from ..core.dtypes import FP8
from ..runtime import arrays as _arrays
from . import repack as _repack

INT32_MAX = 2**31 - 1
# glu= (cumm/plan/epilogue.py): the product's columns alternate GLU_BLOCK gate and GLU_BLOCK up columns, the
# wgmma fragment's column block (include/epilogue.cuh pairs a thread's blocks j and j + 1); C has half of them.
GLU_BLOCK = 8
F32_MAX = float(np.finfo(np.float32).max)  # alpha and beta reach the kernels as float32 scalars


def real_scalar(value, name: str) -> float:
    """``value`` (alpha, beta) as a float: TypeError unless a real number, ValueError unless finite and within
    float32's range (a larger one would reach the kernels as inf)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number (a Python or numpy float or int), got {value!r}")
    v = float(value)
    if not math.isfinite(v):
        raise ValueError(f"{name} must be finite, got {v}")
    if abs(v) > F32_MAX:
        raise ValueError(
            f"{name} must be within float32's range (|{name}| <= {F32_MAX:.4g}; the kernels take a float32), got {v}"
        )
    return v


_cc: dict[int, int] = {}


def compute_capability(device_id: int) -> int:
    cc = _cc.get(device_id)
    if cc is None:
        cc = _cc[device_id] = int(cupy.cuda.Device(device_id).compute_capability)
    return cc


def check_operand(x, name: str, batched: bool = False) -> None:
    """A cupy array of a supported dtype: 2-D (``batched``: at least 1-D, matmul's batches and vectors)."""
    if not isinstance(x, cupy.ndarray):
        raise TypeError(
            f"{name} must be a cupy.ndarray, got {type(x).__module__}.{type(x).__name__}; "
            f"move it to the GPU first with cupy.asarray({name})"
        )
    if batched and x.ndim == 0:
        raise ValueError(f"{name} must have at least one dimension (matmul does not take scalars), got shape ()")
    if not batched and x.ndim != 2:
        raise ValueError(f"{name} must be 2-D (a matrix), got a {x.ndim}-D array of shape {x.shape}")
    if x.dtype.name not in SUPPORTED_DTYPES:
        raise TypeError(f"{name} has dtype {x.dtype}; supported dtypes: {', '.join(SUPPORTED_DTYPES)}")


def row_major(x, name: str, copy_ok: bool):
    """(array, leading dimension) with unit column stride; copies only when allowed and needed."""
    rows, cols = x.shape
    s0, s1 = x.strides  # tested first: x.flags builds a Flags object per call
    item = x.dtype.itemsize
    if (s1 == item or cols <= 1) and s0 > 0 and s0 % item == 0 and s0 // item >= cols:
        return x, s0 // item
    if x.flags.c_contiguous:
        return x, max(cols, 1)
    if not copy_ok:
        raise ValueError(
            f"{name} must be C-contiguous (or row-major with unit column stride); got strides {x.strides} "
            f"for shape {x.shape}: pass cupy.ascontiguousarray({name}) and copy back"
        )
    ldx = _repack.column_major(x)
    if ldx is not None:  # a transposed view (w.T): a tiled copy, not CuPy's strided one
        return _repack.transposed_copy(x, ldx)
    return cupy.ascontiguousarray(x), max(cols, 1)


class Layout(NamedTuple):
    """How a rung reads one operand of a product, known before anything is copied: ``src`` (its matrix, or the
    batch's 3-D view) as it is (``copy`` ""), or copied by a tiled copy of its column-major matrices (``copy``
    "transposed": :func:`cumm.plan.repack.lay_out`); the leading dimension, batch stride in elements (0: one matrix
    for every product) and transposed flag (1: column-major matrices read in place) of what the kernel reads, and
    whether the copy engine and 16-byte loads can read it (each matrix and row on 16 bytes; a copy is a fresh
    buffer)."""

    src: object
    copy: str
    ld: int
    bs: int
    transposed: int
    readable: int


class Layouts(NamedTuple):
    """An operand's layout for a rung that reads row-major matrices (``rows``) and for one that reads column-major
    ones in place (``in_place``: ``KernelSpec.reads_transposed``)."""

    rows: Layout
    in_place: Layout


def operand_layouts(x, batch: tuple[int, ...]) -> Layouts:
    """x's :class:`Layouts`. Every matrix is made row-major, copying only what cannot be viewed so, except for a
    rung that reads column-major matrices in place when the copy engine can read them; a layout that neither reads
    is copied by CuPy here. A 2-D product is a batch of one (``batch`` is ())."""
    rows, cols = x.shape[-2:]
    item = x.dtype.itemsize

    def made(src, copy: str, ld: int, bs: int, transposed: int = 0) -> Layout:
        fresh = bool(copy) or src.data.ptr % 16 == 0
        return Layout(src, copy, ld, bs, transposed, int(fresh and ld * item % 16 == 0 and bs * item % 16 == 0))

    if math.prod(x.shape[:-2]) == 1:  # one matrix for every product of the batch (row_major's cases)
        m = x.reshape(rows, cols)
        s0, s1 = m.strides
        ldx = _repack.column_major(m)
        if (s1 == item or cols <= 1) and s0 > 0 and s0 % item == 0 and s0 // item >= cols:
            rows_first = made(m, "", s0 // item, 0)
        elif m.flags.c_contiguous:
            rows_first = made(m, "", max(cols, 1), 0)
        elif ldx is not None:  # a transposed view (w.T): a tiled copy, not CuPy's strided one
            rows_first = made(m, "transposed", _repack.padded_ld(cols, item), 0)
        else:
            rows_first = made(cupy.ascontiguousarray(m), "", max(cols, 1), 0)
        in_place = ldx is not None and aligned(m, ldx)
        return Layouts(rows_first, made(m, "", ldx, 0, 1) if in_place else rows_first)
    if x.shape[:-2] != batch:  # broadcast over some batch dimensions only: materialize
        x = cupy.broadcast_to(x, batch + (rows, cols))
    x3 = x.reshape(math.prod(batch), rows, cols)
    s0, s1, s2 = x3.strides
    if (s2 == item or cols <= 1) and s1 > 0 and s1 % item == 0 and s1 // item >= cols and s0 >= 0 and s0 % item == 0:
        rows_first = made(x3, "", max(s1 // item, cols, 1), s0 // item)
        return Layouts(rows_first, rows_first)
    ldx = _repack.column_major(x3)
    if ldx is None:
        x3 = cupy.ascontiguousarray(x3)
        s0, s1 = x3.strides[:2]
        rows_first = made(x3, "", max(s1 // item, cols, 1), s0 // item)
        return Layouts(rows_first, rows_first)
    ld = _repack.padded_ld(cols, item)  # a batch of transposed views: a tiled copy, rows on 16 bytes
    in_place = aligned(x3, ldx) and (s0 // item) * item % 16 == 0
    rows_first = made(x3, "transposed", ld, rows * ld)
    return Layouts(rows_first, made(x3, "", ldx, s0 // item, 1) if in_place else rows_first)


def span(x) -> int:
    """Bytes from an array's pointer to the end of its last element (as cupy.may_share_memory bounds it, for
    non-negative strides); 0 for an empty one. The cached calls' overlap test of out against the inputs."""
    if x.size == 0:
        return 0
    return sum((d - 1) * s for d, s in zip(x.shape, x.strides, strict=True)) + x.dtype.itemsize


def aligned(x, ld: int) -> int:
    """1 when every row of ``x`` (leading dimension ``ld``) starts on a 16-byte boundary: 16-byte accesses."""
    return int(x.data.ptr % 16 == 0 and ld * x.dtype.itemsize % 16 == 0)


def check_out(out, inputs, shape, dev: int, names=None, fp8: int = 0) -> None:
    """out must be an array of the inputs' dtype or float32 (``fp8``: the bytes of an FP8 C) of the result's
    ``shape`` (or (M, N)) on ``dev`` sharing no memory with any input (matmul, multi_dot)."""
    names = names or [f"arrays[{i}]" for i in range(len(inputs))]
    if not isinstance(out, cupy.ndarray):
        raise TypeError(f"out must be a cupy.ndarray, got {type(out).__module__}.{type(out).__name__}")
    want = {"uint8"} if fp8 else {inputs[0].dtype.name, "float32"}
    if out.dtype.name not in want:
        raise TypeError(
            f"out has dtype {out.dtype}; it must be {' or '.join(sorted(want))} (the inputs' dtype, or "
            "float32 to keep the FP32 accumulation)"
        )
    if out.shape != tuple(shape):
        shapes = " x ".join(str(x.shape) for x in inputs)
        raise ValueError(f"out has shape {out.shape}; the product {shapes} needs {tuple(shape)}")
    if out.data.device_id != dev:
        raise ValueError(f"out is on device {out.data.device_id} but the inputs are on device {dev}")
    for name, x in zip(names, inputs, strict=True):
        if cupy.may_share_memory(out, x):
            raise ValueError(f"out overlaps {name} in memory; the product reads it while writing out: pass a new array")


def stacks(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """Whether an array of ``shape`` and ``strides`` (..., rows, cols) is its matrices one after another, row after
    row: its leading dimensions and rows collapse into one (dimensions of size 1 take any stride)."""
    step = None
    for n, s in zip(reversed(shape[:-1]), reversed(strides[:-1]), strict=True):
        if n == 1:
            continue
        if step is not None and s != step:
            return False
        step = s * n
    return True


def stacked(x, cols: int):
    """``x`` (..., rows, cols) as one (batch * rows) x cols matrix when that is a view of it, else None. Decided from
    the strides first: a reshape that cannot be a view copies the whole array."""
    if not stacks(x.shape, x.strides):
        return None
    v = x.reshape(-1, cols)
    return v if shares(v, x) else None


def shares(view, x) -> bool:
    """Whether ``view`` (made by a reshape of ``x``) is a view of x's memory, not a copy."""
    return view.data.mem is x.data.mem and view.data.ptr == x.data.ptr


def shapes(a, b) -> tuple[int, int, int, tuple[int, ...], tuple[int, ...]]:
    """(M, N, K, batch shape, result shape) of ``a @ b`` with numpy's matmul rules: the last two dimensions are
    the matrices, the others broadcast; a 1-D a is a row (its dimension is dropped from the result), a 1-D b a
    column (likewise)."""
    sa = (1, *a.shape) if a.ndim == 1 else a.shape
    sb = (*b.shape, 1) if b.ndim == 1 else b.shape
    M, K = sa[-2:]
    K2, N = sb[-2:]
    if K != K2:
        raise ValueError(
            f"shapes {a.shape} and {b.shape} do not align: a has {K} columns, b has {K2} rows"
            + (" (its last dimension)" if a.ndim != 2 or b.ndim != 2 else "")
        )
    ba, bb = sa[:-2], sb[:-2]
    batch = []
    for i in range(1, max(len(ba), len(bb)) + 1):
        x = ba[-i] if i <= len(ba) else 1
        y = bb[-i] if i <= len(bb) else 1
        if x != y and 1 not in (x, y):
            raise ValueError(
                f"batch dimensions do not broadcast: a's {ba} and b's {bb} differ at dimension {-i - 2} "
                f"({x} against {y}; each must be equal or 1)"
            )
        batch.append(max(x, y) if 0 not in (x, y) else 0)
    batch = tuple(reversed(batch))
    shape = batch + ((M,) if a.ndim != 1 else ()) + ((N,) if b.ndim != 1 else ())
    return M, N, K, batch, shape


def dtype_name(dtype) -> str:
    """A dtype's name: a torch dtype's ("float8_e4m3fn" for torch.float8_e4m3fn), a numpy or CuPy dtype's (or
    a type's, np.float32), or a name as it is."""
    if isinstance(dtype, str):
        return dtype
    text = str(dtype)
    if text.startswith("torch."):
        return text.removeprefix("torch.")
    try:
        return np.dtype(dtype).name
    except TypeError:
        return text


def new_out(a, b, out, out_dtype, glu: bool = False, beta=0.0):
    """A new C of ``out_dtype`` (a torch or numpy dtype, or its name) for ``a @ b`` (half of b's columns with
    ``glu``), of the inputs' kind on their device: matmul's ``out_dtype=``. TypeError for an ``out`` beside it or
    a dtype matmul does not write: the inputs' dtype, float32, or for torch tensors FP8 (float8_e4m3fn,
    float8_e5m2); ValueError for a beta (a new C has no values to add)."""
    if out is not None:
        raise TypeError("pass out= or out_dtype=, not both (C's dtype is out's)")
    if beta != 0.0:
        raise ValueError(f"beta={beta} adds beta * out, and out_dtype= makes a new C: pass out= (of that dtype)")
    name, akind = dtype_name(out_dtype), _arrays.kind(a)
    inputs = dtype_name(getattr(a, "dtype", None))
    takes = list(dict.fromkeys((inputs, "float32"))) + (list(FP8) if akind == _arrays.TORCH else [])
    if name not in takes:
        why = " (FP8 C: torch tensors; CuPy has no FP8 dtype)" if name in FP8 else ""
        raise TypeError(f"out_dtype={name}: matmul writes {', '.join(takes)} for {inputs} {akind} inputs{why}")
    M, N, K, batch, shape = shapes(a, b)
    if glu:
        shape = shape[:-1] + (N // 2,)
    dev = _arrays.device_of(a)
    if name in FP8:
        import torch

        return torch.empty(shape, dtype=getattr(torch, name), device=torch.device("cuda", dev))
    dt = _arrays.bfloat16() if name == "bfloat16" else np.dtype(name)
    return _arrays.empty(_arrays.TORCH if akind == _arrays.TORCH else _arrays.CUPY, shape, dt, dev)


def glu_columns(b, N: int) -> int:
    """C's columns for a glu= product of ``b`` (N columns): N / 2; ValueError for a b whose columns are not pairs
    of GLU_BLOCK-column blocks."""
    if b.ndim < 2:
        raise ValueError(f"glu= pairs the columns of a matrix b (K x 2N); b has shape {b.shape}")
    if N % (2 * GLU_BLOCK):
        raise ValueError(
            f"glu= pairs b's columns in blocks of {GLU_BLOCK} gate then {GLU_BLOCK} up columns: b has {N} columns, "
            f"not a multiple of {2 * GLU_BLOCK}; make b with cumm.glu_weight(w1, w3) from w1 and w3 of a multiple of "
            f"{GLU_BLOCK} columns (pad both with zero columns and slice the result)"
        )
    return N // 2


def config_key(config) -> tuple | None:
    """``config`` as a hashable key part; TypeError for anything but None or a mapping of names to ints."""
    if config is None:
        return None
    if not isinstance(config, Mapping):
        raise TypeError(
            f"config must be a mapping of parameter names to ints, e.g. {{'BM': 64, 'BN': 64}}, or None; "
            f"got {type(config).__name__} {config!r}"
        )
    try:
        return tuple(sorted(config.items()))
    except TypeError:
        raise TypeError(f"config's keys must be parameter names (str), got {list(config)!r}") from None


# An out the kernels cannot write in place (negative, zero or non-unit column strides, a transposed view, matrices that
# are not rows one after another): the product goes into a row-major staging array, copied back into out after it
# (as cupy.matmul does). With beta != 0 the staging array starts as a copy of out.


def writable_in_place(out, batch: tuple[int, ...], M: int, N: int) -> bool:
    """Whether the kernels write ``out`` (the result's shape) as it is: C-contiguous, or every matrix row-major
    with unit column stride and positive row stride at least N, the matrices at positive strides, and the
    (batch, M, N) view of out a view, not a copy."""
    if out.flags.c_contiguous:
        return True
    item = out.dtype.itemsize
    if any(s <= 0 or s % item for d, s in zip(out.shape, out.strides, strict=True) if d > 1):
        return False
    o = out.reshape(batch + (M, N))
    if not shares(o, out):
        return False
    s_row, s_col = o.strides[-2:]
    return (N <= 1 or s_col == item) and (M <= 1 or s_row // item >= N)


def staging(out, beta: float):
    """A C-contiguous array of out's shape and dtype on its device: out's values when beta != 0 (C is read)."""
    with cupy.cuda.Device(out.data.device_id):
        return cupy.ascontiguousarray(out) if beta != 0.0 else cupy.empty(out.shape, out.dtype)


class Operands(NamedTuple):
    """A matmul call's checked operands: cupy views ``a``, ``b``, ``out`` of the caller's arrays, the result (of the
    inputs' kind: ``out`` itself when given), and the views ``a2``, ``b2``, ``o2`` with numpy's rules for vectors
    applied (a 1-D a is one row, a 1-D b one column; o2 is out as batch + (M, N))."""

    a: object
    b: object
    out: object
    result: object
    a2: object
    b2: object
    o2: object
    M: int
    N: int
    K: int
    batch: tuple[int, ...]
    shape: tuple[int, ...]
    dev: int
    stage: bool  # out is not written in place (writable_in_place): the product goes through staging(out)
    fp8: int = 0  # out is FP8 (3: float8_e4m3fn, 4: float8_e5m2), ``out`` its bytes (a uint8 view)

    @property
    def empty(self) -> bool:
        """No element to write."""
        return self.M == 0 or self.N == 0 or 0 in self.batch


def prepare(a, b, out, beta: float, akind: str, glu: bool = False, fp8: int = 0) -> Operands:
    """Every check of matmul's arrays (kind, dtype, shapes with numpy's broadcasting, device, out), and ``out``
    made when not given (of the inputs' kind). ``glu``: C has half of the product's columns (:func:`glu_columns`).
    An FP8 torch out (or ``fp8`` with ``out`` its bytes: a staged call's) is viewed as bytes (CuPy has no FP8)."""
    user_out = out
    fp8 = fp8 or _arrays.fp8_code(out)
    a_in, b_in = a, b
    a, b = _arrays.as_cupy(a, "a"), _arrays.as_cupy(b, "b")
    for name, x in (("b", b_in), ("out", out)):
        if x is not None and _arrays.kind(x) != akind:
            raise TypeError(
                f"a is a {_arrays.describe(a_in)} but {name} is a {_arrays.describe(x)}: pass arrays of "
                "one kind (the result is of the inputs' kind)"
            )
    check_operand(a, "a", batched=True)
    check_operand(b, "b", batched=True)
    if a.dtype != b.dtype:
        raise TypeError(
            f"a has dtype {a.dtype} and b {b.dtype}: matmul multiplies arrays of one dtype (convert one with .astype)"
        )
    M, N, K, batch, shape = shapes(a, b)
    if fp8:
        check_fp8_out(a.dtype.name, beta)
    dev = a.data.device_id  # (x.device builds a Device object per call)
    if b.data.device_id != dev:
        raise ValueError(f"a is on device {dev} and b on device {b.data.device_id}; put both on one device")
    if max(M, N, K) > INT32_MAX:
        raise ValueError(f"dimensions must be below 2**31, got M={M}, N={N}, K={K}")
    nc = N  # C's columns
    if glu:
        nc = glu_columns(b, N)
        shape = shape[:-1] + (nc,)
    if user_out is None:
        if beta != 0.0:
            raise ValueError(f"beta={beta} needs out= (C = alpha * a @ b + beta * out)")
        result = _arrays.empty(akind if akind == "torch" else "cupy", shape, a.dtype, dev)
    else:
        result = user_out
    out = (
        _arrays.byte_view(result, "out") if fp8 and _arrays.kind(result) == "torch" else _arrays.as_cupy(result, "out")
    )
    if user_out is not None:
        check_out(out, (a, b), shape, dev, ("a", "b"), fp8)
        if not writable_in_place(out, batch, M, nc):
            return Operands(a, b, out, result, None, None, None, M, N, K, batch, shape, dev, True, fp8)
    a2 = a[None, :] if a.ndim == 1 else a
    b2 = b[:, None] if b.ndim == 1 else b
    o2 = out.reshape(batch + (M, nc)) if out.ndim != len(batch) + 2 else out
    if o2.size and not shares(o2, out):
        raise ValueError(
            f"out (shape {out.shape}, strides {out.strides}) cannot be viewed as the {batch + (M, nc)} "
            "result without a copy: pass a C-contiguous out"
        )
    return Operands(a, b, out, result, a2, b2, o2, M, N, K, batch, shape, dev, False, fp8)


def check_fp8_out(dtype: str, beta: float) -> None:
    """An FP8 C (cast from the FP32 result times scale_result) is written by the 16-bit rungs' epilogue, once: the
    inputs must be bfloat16 or float16 and beta 0 (C is never read)."""
    if dtype == "float32":
        raise TypeError(
            "an FP8 out is written by the bfloat16 and float16 rungs' epilogue; a and b are float32: cast them "
            "(.to(torch.bfloat16)), or pass a float32 out"
        )
    if beta != 0.0:
        raise ValueError(
            f"beta={beta} with an FP8 out: an FP8 C is written, never read (C = fp8(scale_result * v)); pass beta=0 "
            "and add the old C with residual= (a bfloat16 / float16 matrix)"
        )
