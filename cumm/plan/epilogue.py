"""Fused epilogues: what ``cumm.matmul``'s ``bias=``, ``activation=``, ``residual=``, ``epilogue=`` and
``operands=`` / ``aux=`` mean, their checks, and how a call with one is planned and launched.

Every epilogue is one device function over the FP32 value ``v = alpha * (A @ B)[row, col]`` of product ``z``
(include/epilogue.cuh): the named ones are snippets this module writes, a user's snippet is spliced as given. Per
element of C, in this order::

    v = alpha * acc
    v += bias[col] (1-D bias of N, or (1, N))  or  v += bias[row] ((M, 1) bias)
    v = act(v)                                 (relu, gelu (exact, erf), gelu_tanh, silu)
      (with an activation these three are one expression, act_ab(acc, alpha, bias): include/epilogue.cuh folds
      gelu's, gelu_tanh's and silu's halving of v into the first FFMA for bfloat16 C)
    v += residual[row, col]                    (a matrix like C: (M, N), or (..., M, N) of the batch)
    <the user's snippet>                       (reads v, row, col, z and each named operand x as x[i], ld_x)
    C = v + beta * C, cast to C's dtype

With ``glu=`` (an activation's name) C has half of the product's columns, and before all of that the product's
paired columns are one value: v = act(alpha * gate) * (alpha * up), gate and up the columns 16 q + r and 16 q + 8 + r
of the product (r < 8) for C's column 8 q + r (cumm.glu_weight lays w1 and w3 out so). It runs on the rungs whose
tile stores pair a thread's column blocks (KernelSpec.glu: the wgmma rungs).

The epilogue variant of a kernel is its own compiled variant (the :class:`Epilogue` rides in the compile flags;
its digest is in the kernel's name and so in every cache key). Calls with an epilogue never split K, stage C,
repack operands or add edge strips (the epilogue runs once, in the kernel that writes C), and rungs whose stores
do not pass through the epilogue overloads (tf32x3's shared tile function) are routed to one that does
(cumm/plan/routes.py).
"""

from __future__ import annotations

import hashlib
import re
import struct
from collections.abc import Mapping
from dataclasses import dataclass

from ..runtime.render import SNIPPET_FILE, variant

ACTIVATIONS = {"relu": "cumm_relu", "gelu": "cumm_gelu", "gelu_tanh": "cumm_gelu_tanh", "silu": "cumm_silu"}
OPERAND_DTYPES = {"float32": ("float", 0), "float16": ("unsigned short", 0), "bfloat16": ("unsigned short", 1)}
# rungs whose stores go through a header function that takes alpha as a float (tf32x3_tile.cuh): no epilogue
_RESERVED = frozenset({"v", "row", "col", "z", "bias", "residual", "alpha", "beta", "M", "N", "K"})
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_HEAD = 40  # bytes of CummAlpha before its operands: a, M, N, pad, c, ldc, bsc
SCALE_OPERAND = "cumm_scale"  # an FP8 C's scale, the last operand (a cumm_ name: no user operand takes it)
FP8_LABELS = {3: "fp8_e4m3", 4: "fp8_e5m2"}  # Epilogue.fp8 -> its part of the label
_OP = 24  # bytes of a CummEpiOp: p, ld, bs


@dataclass(frozen=True)
class Epilogue:
    """A compiled epilogue: ``named`` (the statements cumm writes for bias/activation/residual), ``snippet`` (the
    user's, or ""), ``operands`` ((name, dtype) in argument order). Hashable: it keys compiled variants."""

    named: str
    snippet: str
    operands: tuple[tuple[str, str], ...]
    label: str
    # it reads an operand per element of C (a residual, a matrix for the snippet): not in the digest (the code is
    # the same), but auto's short-K route (short_k_route) is not taken for it
    reads_matrix: bool = False
    # glu=: the gate columns' activation (a device function of ACTIVATIONS' values), "" for none
    glu: str = ""
    # v from the accumulator cumm_acc (an expression over it, cumm_al and the operands): "" is alpha * cumm_acc; a named
    # activation is act_ab(cumm_acc, alpha, bias) / act_a(cumm_acc, alpha) (include/epilogue.cuh), and ``named`` then
    # holds what follows it (cumm_ names are not the user's: an operand cannot shadow the accumulator)
    first: str = ""
    # an FP8 C (3: float8_e4m3fn, 4: float8_e5m2; include/fp8_cvt.cuh's FMT): C = fp8(v * scale), the scale the last
    # operand (cumm_scale); 0: C has the kernel's own type
    fp8: int = 0

    @property
    def digest(self) -> str:
        text = repr(
            (self.named, self.snippet, self.operands)
            + ((self.glu,) if self.glu else ())
            + ((("first", self.first),) if self.first else ())
            + ((("fp8", self.fp8),) if self.fp8 else ())
        )
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    def columns(self, N: int) -> int:
        """C's columns for a product of N columns (half of them with glu=)."""
        return N // 2 if self.glu else N

    @property
    def nops(self) -> int:
        return len(self.operands)

    @property
    def nbytes(self) -> int:
        """Bytes of its CummAlpha argument (a multiple of 8)."""
        return _HEAD + _OP * max(1, self.nops)

    def definition(self) -> str:
        """The device functions cumm_epi_first (v from the accumulator: ``first``, or alpha * acc) and cumm_epi_user
        (include/epilogue.cuh): operand accessors, then the named statements, then the snippet under
        ``#line 1 "cumm epilogue snippet"`` (NVRTC's messages give the snippet's own line)."""
        head = []
        for k, (name, dt) in enumerate(self.operands):
            ctype, bf = OPERAND_DTYPES[dt]
            head.append(f"    const auto {name} = cumm_epi_in<{ctype}, {bf}>(cumm_al, {k}, z);")
            head.append(f"    const i64 ld_{name} = cumm_al.op[{k}].ld;")
            head.append(f"    (void){name};")
            head.append(f"    (void)ld_{name};")
        head += ["    (void)row;", "    (void)col;", "    (void)z;"]
        lines = [
            "__device__ __forceinline__ float cumm_epi_first(float cumm_acc, const int row, const int col,",
            "                                                const int z, const CummAlpha& cumm_al) {",
            *(head if self.first else head[-3:]),
            f"    return {self.first or 'cumm_al.a * cumm_acc'};",
            "}",
            "__device__ __forceinline__ void cumm_epi_user(float& v, const int row, const int col, const int z,",
            "                                              const CummAlpha& cumm_al) {",
            *head,
        ]
        if self.named:
            lines.append("    " + self.named)
        if self.snippet:
            lines.append("    {")
            lines.append(f'#line 1 "{SNIPPET_FILE}"')
            lines.append(self.snippet)
            lines.append(";")
            lines.append("    }")
        lines.append("}")
        return "\n".join(lines)


def _operand_dtype(x, name: str) -> str:
    dt = x.dtype.name
    if dt not in OPERAND_DTYPES:
        raise TypeError(f"{name} has dtype {dt}; epilogue operands are float32, float16 or bfloat16")
    return dt


def _matrix_layout(x, name: str, rows: int, cols: int, batch: tuple[int, ...]):
    """(array, ld, batch stride) in elements for an operand of shape (rows, cols) or batch + (rows, cols), unit
    column stride (a contiguous copy is made otherwise); the batch collapses to one stride or is copied."""
    import cupy

    shape = tuple(x.shape)
    if shape[-2:] != (rows, cols) or (len(shape) > 2 and shape[:-2] != batch):
        want = f"({rows}, {cols})" + (f" or {batch + (rows, cols)}" if batch else "")
        raise ValueError(f"{name} has shape {shape}; it must be {want} (a matrix like the result)")
    item = x.dtype.itemsize
    st = x.strides
    ok = (st[-1] == item or cols == 1) and all(s % item == 0 for s in st)
    nb = 1
    for d in shape[:-2]:
        nb *= d
    if ok and len(shape) > 2:  # the batch dims must be one stride apart
        x3 = x.reshape(nb, rows, cols)
        ok = x3.data.ptr == x.data.ptr and x3.strides[1:] == st[-2:]
        if ok:
            x = x3
    if not ok:
        x = cupy.ascontiguousarray(x)
        if len(shape) > 2:
            x = x.reshape(nb, rows, cols)
    ld = max(x.strides[-2] // item, cols)
    bs = x.strides[0] // item if x.ndim == 3 else 0
    return x, ld, bs


def build(
    a,
    M: int,
    N: int,
    batch: tuple[int, ...],
    dev: int,
    bias=None,
    activation: str | None = None,
    residual=None,
    epilogue: str | None = None,
    operands: Mapping | None = None,
    aux=None,
    glu: str | None = None,
    scale_result=None,
    fp8: int = 0,
    as_cupy=None,
):
    """(Epilogue, ((array, ld, batch stride), ...) in operand order) for these arguments, or (None, ()) when none
    is given. ``as_cupy(x, name)`` views an operand as a cupy array (the API's conversion, which also refuses host
    arrays). ``N``: the product's columns (C's are half of them with ``glu``; its shape is checked by
    cumm.plan.operands.glu_columns). ``fp8``: C is FP8 (3: e4m3, 4: e5m2; cumm.plan.operands.Operands.fp8), scaled by
    ``scale_result`` (one float32, which an FP8 C must have) before its cast. Raises TypeError / ValueError naming the
    argument and what it must be."""
    if scale_result is not None and not fp8:
        raise TypeError(
            "scale_result scales an FP8 C before its cast: pass out= a torch.float8_e4m3fn or torch.float8_e5m2 "
            "tensor, or drop scale_result"
        )
    if (
        bias is None
        and activation is None
        and residual is None
        and epilogue is None
        and not operands
        and aux is None
        and glu is None
        and not fp8
    ):
        return None, ()
    if glu is not None:
        check_glu_name(glu)
        N //= 2  # the epilogue's operands are shaped like C
    named, ops, arrays = [], [], []

    def add(name, x, layout):
        x = as_cupy(x, name)
        if x.data.device_id != dev:
            raise ValueError(f"{name} is on device {x.data.device_id} and a on device {dev}; put both on one device")
        dt = _operand_dtype(x, name)
        x, ld, bs = layout(x)
        ops.append((name, dt))
        arrays.append((x, ld, bs))

    if bias is not None:
        b = as_cupy(bias, "bias")
        shp = tuple(b.shape)
        if shp in ((N,), (1, N)):
            add("bias", bias, lambda x: (x.reshape(N) if x.ndim == 2 else x, 0, 0))
            per = "col"
        elif shp == (M, 1):
            add("bias", bias, lambda x: (x.reshape(M), 0, 0))
            per = "row"
        else:
            raise ValueError(
                f"bias has shape {shp}; it must be ({N},) or (1, {N}) (one per column) or ({M}, 1) (one per row) "
                f"for a result of {M} x {N} (broadcast over a batch)"
            )
        if bias is not None and arrays[-1][0].strides[0] != arrays[-1][0].dtype.itemsize and arrays[-1][0].size > 1:
            import cupy

            x = cupy.ascontiguousarray(arrays[-1][0])
            arrays[-1] = (x, 0, 0)
        bias_at = f"bias[{per}]"
    first = ""
    if activation is not None and activation not in ACTIVATIONS:
        raise ValueError(f"activation={activation!r}; it must be one of {sorted(ACTIVATIONS)} or None")
    if activation is not None and glu is None:  # (a GLU's v is the pair's, alpha applied: statements on it)
        act = ACTIVATIONS[activation]
        first = f"{act}_ab(cumm_acc, cumm_al.a, {bias_at})" if bias is not None else f"{act}_a(cumm_acc, cumm_al.a)"
    else:
        if bias is not None:
            named.append(f"v += {bias_at};")
        if activation is not None:
            named.append(f"v = {ACTIVATIONS[activation]}(v);")
    if residual is not None:
        add("residual", residual, lambda x: _matrix_layout(x, "residual", M, N, batch))
        named.append("v += residual[(i64)row * ld_residual + col];")
    extra = dict(operands or {})
    if aux is not None:
        if "aux" in extra:
            raise ValueError("aux= and operands={'aux': ...} name the same operand: pass one")
        extra["aux"] = aux
    if extra and epilogue is None:
        raise ValueError(f"operands {sorted(extra)} are read only by an epilogue= snippet; pass one that uses them")
    for name, x in extra.items():
        if not isinstance(name, str) or not _IDENT.match(name) or name in _RESERVED or name.startswith("cumm"):
            raise ValueError(
                f"operand name {name!r} must be a C identifier, not one of {sorted(_RESERVED)} and not starting "
                "with 'cumm'"
            )
        if x is None:
            raise TypeError(f"operand {name!r} is None; pass a GPU array")

        def layout(x, name=name):
            if x.ndim == 1:
                if x.strides[0] != x.dtype.itemsize and x.size > 1:
                    import cupy

                    x = cupy.ascontiguousarray(x)
                return x, 0, 0
            if x.ndim == 2:
                return _matrix_layout(x, name, x.shape[0], x.shape[1], ())
            return _matrix_layout(x, name, x.shape[-2], x.shape[-1], batch)

        add(name, x, layout)
    if epilogue is not None:
        if not isinstance(epilogue, str) or not epilogue.strip():
            raise TypeError(f"epilogue must be a non-empty str of CUDA statements over v, row, col; got {epilogue!r}")
        if "\x00" in epilogue:
            raise ValueError("epilogue contains a NUL character")
    label = "+".join(
        p
        for p in (
            f"glu_{glu}" if glu is not None else "",
            "bias" if bias is not None else "",
            activation or "",
            "residual" if residual is not None else "",
            "snippet" if epilogue is not None else "",
        )
        if p
    )
    if fp8:  # the scale: the last operand (include/epilogue.cuh's cumm_epi_scale)
        if scale_result is None:
            raise TypeError("an FP8 C needs scale_result (a float32 one-element tensor; cumm.matmul passes 1)")
        s = as_cupy(scale_result, "scale_result")
        if s.dtype.name != "float32" or s.size != 1:
            raise TypeError(
                f"scale_result must be a float32 tensor of one element (one scale for the whole C, as "
                f"torch._scaled_mm's), got {s.dtype} of shape {tuple(s.shape)}: pass "
                "torch.tensor(s, dtype=torch.float32, device='cuda')"
            )
        add("scale_result", scale_result, lambda x: (x.reshape(1), 0, 0))
        ops[-1] = (SCALE_OPERAND, "float32")
        label = "+".join(p for p in (label, FP8_LABELS[fp8]) if p)
    reads_matrix = residual is not None or any(getattr(x, "ndim", 1) > 1 for x in extra.values())
    epi = Epilogue(
        " ".join(named), epilogue or "", tuple(ops), label, reads_matrix, ACTIVATIONS.get(glu, ""), first, fp8
    )
    return epi, tuple(arrays)


def pack(alpha: float, M: int, N: int, c_ptr: int, ldc: int, bsc: int, arrays) -> bytes:
    """The CummAlpha argument (include/epilogue.cuh) for ``arrays`` as build() gives them."""
    return pack_pointers(alpha, M, N, c_ptr, ldc, bsc, [(x.data.ptr, ld, bs) for x, ld, bs in arrays])


def pack_pointers(alpha: float, M: int, N: int, c_ptr: int, ldc: int, bsc: int, ptrs) -> bytes:
    """The CummAlpha argument: alpha, M, N, C's base, ldc, bsc, then each operand's (pointer, ld, batch stride)."""
    head = struct.pack("<fiiiQqq", alpha, M, N, 0, c_ptr, ldc, bsc)
    return head + (b"".join(struct.pack("<Qqq", *p) for p in ptrs) or bytes(_OP))


def check_glu_name(glu) -> None:
    """ValueError for a ``glu=`` that is not an activation's name (matmul's rule, and cumm check's / bench's)."""
    if glu not in ACTIVATIONS:
        raise ValueError(f"glu={glu!r}; it must be one of {sorted(ACTIVATIONS)} (the gate's activation) or None")


def with_flags(flags: tuple, epi: Epilogue | None):
    """The compile variant ``flags`` (a Variant, or a tuple of its first fields) with the epilogue ``epi``."""
    return variant(flags)._replace(epilogue=epi)
