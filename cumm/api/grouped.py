"""``cumm.grouped_matmul``: G products that share N and K and differ in M, in one launch (mixture-of-experts).

Two layouts, as the libraries users have (torch._grouped_mm, DeepGEMM):

* contiguous: ``a`` (total_tokens, K), the rows of group g at ``offs[g-1]:offs[g]`` (``offs``: G cumulative row
  ends, a host sequence or a device int32 array); ``b`` (G, K, N), or the (G, N, K) weights' transposed view;
  the result is (total_tokens, N).
* masked: ``a`` (G, max_m, K) with ``masked_m``, G valid-row counts (a device int32 array: the layout and the
  launch stay fixed under CUDA-graph capture while the counts change); the result is (G, max_m, N).

The checks and decisions are in :mod:`cumm.plan.grouped`; this module takes the arrays and raises the errors.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence

import cupy
import numpy as np

from ..core.dtypes import HALF
from ..ladder import get_spec
from ..plan import grouped as _plan
from ..plan.operands import INT32_MAX, compute_capability
from ..runtime import arrays as _arrays


def _host_offsets(offs: Sequence, G: int, rows: int) -> np.ndarray:
    vals = []
    for i, v in enumerate(offs):
        if isinstance(v, bool) or not isinstance(v, numbers.Integral):
            raise TypeError(f"offs[{i}] must be an int (a cumulative row end), got {v!r}")
        vals.append(int(v))
    if len(vals) != G:
        raise ValueError(f"offs must hold one cumulative row end per group: b has {G} groups, offs has {len(vals)}")
    prev = 0
    for i, v in enumerate(vals):
        if v < prev:
            raise ValueError(
                f"offs must not decrease (offs[g] is group g's end row, offs[g-1] its start): offs[{i}] = {v} < "
                + (f"offs[{i - 1}] = {prev}" if i else "0")
            )
        prev = v
    if prev > rows:
        raise ValueError(f"offs[-1] = {prev} is past the end of a, which has {rows} rows: offs[-1] <= {rows}")
    return np.asarray(vals, dtype=np.int32)


def _device_counts(x, name: str, G: int, dev: int) -> cupy.ndarray:
    v = _arrays.as_cupy(x, name)
    if v.dtype != np.int32:
        raise TypeError(f"{name} must be int32 on the device (as torch._grouped_mm's offs), got {v.dtype}")
    if v.shape != (G,):
        raise ValueError(f"{name} must have shape ({G},), one entry per group of b; got {v.shape}")
    if v.data.device_id != dev:
        raise ValueError(f"{name} is on device {v.data.device_id}, a on device {dev}: put them on one device")
    return v if v.strides == (4,) else cupy.ascontiguousarray(v)


def grouped_matmul(
    a,
    b,
    offs=None,
    *,
    masked_m=None,
    out=None,
    config: Mapping[str, int] | None = None,
):
    """Products of the groups of ``a``'s rows with their matrices of ``b``, in one launch.

    Contiguous layout (``offs``): ``a`` (T, K), ``b`` (G, K, N) (or ``w.transpose(1, 2)`` of (G, N, K) weights,
    read in place), ``offs`` G non-decreasing cumulative row ends (group g: rows ``offs[g-1]:offs[g]``, group 0
    from row 0; empty groups allowed): a list/tuple of ints (checked here) or a device int32 array (not read by
    the host: the kernel clamps each end to [previous end, T], so bad values give empty or shortened groups,
    never an access out of bounds). Returns (T, N); rows past ``offs[-1]`` are not written.

    Masked layout (``masked_m``): ``a`` (G, max_m, K), ``masked_m`` G valid-row counts (device int32, or a host
    sequence), clamped by the kernel to [0, max_m]. Returns (G, max_m, N); rows ``masked_m[g]:`` of group g are
    left untouched (not written: with ``out=`` they keep what they held).

    float16 or bfloat16 (FP32 accumulation, the result in the inputs' dtype); cupy arrays or torch CUDA tensors
    (the result of the inputs' kind, on their stream); ``out=`` an array of the result's shape and dtype with
    contiguous rows. Operands whose rows or groups are off 16 bytes (K or N not a multiple of 8, views) are
    copied into padded buffers first. Needs compute capability 9.0 (sm_90a).
    """
    if (offs is None) == (masked_m is None):
        raise TypeError(
            "give exactly one of offs= (contiguous layout: a is (T, K)) and masked_m= (masked: a is (G, max_m, K))"
        )
    masked = masked_m is not None
    _plan.check_config(config)
    layout = _plan.MASKED if masked else _plan.CONTIGUOUS
    akind = _arrays.kind(a)
    for name, x in (("b", b), ("out", out)):
        if x is not None and _arrays.kind(x) != akind:
            raise TypeError(
                f"a and {name} must be arrays of one library, got {_arrays.describe(a)} and {_arrays.describe(x)}"
            )
    ca, cb = _arrays.as_cupy(a, "a"), _arrays.as_cupy(b, "b")
    for name, x in (("a", ca), ("b", cb)):
        if x.dtype.name not in HALF:
            raise TypeError(f"{name} must be float16 or bfloat16 (grouped_matmul's dtypes), got {x.dtype.name}")
    if ca.dtype != cb.dtype:
        raise TypeError(f"a and b must have one dtype, got {ca.dtype.name} and {cb.dtype.name}")
    if cb.ndim != 3:
        raise ValueError(f"b must be 3-D, (G, K, N): one K x N matrix per group; got shape {cb.shape}")
    G, K, N = cb.shape
    want = 3 if masked else 2
    if ca.ndim != want:
        shape = "(G, max_m, K) with masked_m" if masked else "(total_tokens, K) with offs"
        raise ValueError(f"a must be {want}-D, {shape}; got shape {ca.shape}")
    if ca.shape[-1] != K:
        raise ValueError(
            f"a's K ({ca.shape[-1]}, its last dimension) must match b's ({K}, b.shape[1]); a {ca.shape}, b {cb.shape}"
        )
    if masked and ca.shape[0] != G:
        raise ValueError(f"a has {ca.shape[0]} groups and b {G}: a (G, max_m, K) and b (G, K, N) must agree on G")
    if G < 1:
        raise ValueError("b must hold at least one group (G >= 1)")
    if G > _plan.gmax():
        raise ValueError(f"at most {_plan.gmax()} groups (the kernel's shared table), got G = {G}")
    if K < 1:
        raise ValueError(f"K must be at least 1 (a {ca.shape}, b {cb.shape})")
    rows = ca.shape[-2]
    if max(rows, N, K, G * rows) > INT32_MAX:
        raise ValueError(f"dimensions must be below 2**31, got rows={rows}, N={N}, K={K}")
    dev = ca.data.device_id
    if cb.data.device_id != dev:
        raise ValueError(f"a is on device {dev}, b on device {cb.data.device_id}: put them on one device")
    spec = get_spec(_plan.KERNEL)
    spec.check_cc(compute_capability(dev), f"device {dev}", "grouped_matmul needs an H100/H200-class GPU")
    out_shape = (G, rows, N) if masked else (rows, N)
    counts = masked_m if masked else offs
    cname = "masked_m" if masked else "offs"
    host = isinstance(counts, (list, tuple, range, np.ndarray))
    if host:
        if masked:
            vals = np.asarray(counts)
            if vals.shape != (G,) or vals.dtype.kind not in "iu":
                raise ValueError(f"masked_m must hold G = {G} ints, got {counts!r}")
            if (vals < 0).any() or (vals > rows).any():
                raise ValueError(f"masked_m's counts must lie in [0, max_m = {rows}], got {vals.tolist()}")
            hvals = vals.astype(np.int32)
        else:
            hvals = _host_offsets(counts, G, rows)
    if out is not None:
        co = _arrays.as_cupy(out, "out")
        if co.shape != out_shape or co.dtype != ca.dtype:
            raise ValueError(
                f"out must have shape {out_shape} and dtype {ca.dtype.name}, got {co.shape} {co.dtype.name}"
            )
        if co.data.device_id != dev:
            raise ValueError(f"out is on device {co.data.device_id}, a on device {dev}")
        if co.strides[-1] != co.itemsize or any(s <= 0 or s % co.itemsize for s in co.strides[:-1]):
            raise ValueError(f"out's rows must be contiguous (unit stride along N), got strides {co.strides}")
    stream = _arrays.torch_stream(dev) if akind == _arrays.TORCH else None
    with _arrays.on_stream(stream, dev) if stream is not None else cupy.cuda.Device(dev):
        result = out if out is not None else _arrays.empty(akind, out_shape, ca.dtype, dev)
        co = _arrays.as_cupy(result, "out") if out is None else co
        if rows == 0 or N == 0:
            return result
        dcounts = cupy.asarray(hvals) if host else _device_counts(counts, cname, G, dev)
        ka, kb, lay = _plan.operands(ca, cb)
        call = _plan.grouped_call(layout, G, rows, N, K, ka, kb, lay, co, dev, config)
        sptr = stream if stream is not None else cupy.cuda.get_current_stream().ptr
        call.launch(ka.data.ptr, kb.data.ptr, dcounts.data.ptr, co.data.ptr, sptr)
    return result
