"""cumm.scaled_matmul: C = (a @ b) scaled, for FP8 (float8_e4m3fn / float8_e5m2) torch CUDA tensors, FP32
accumulation, C bfloat16, float16 or float32 (the FP8 rungs 17_fp8_wgmma and 18_fp8_block_scaled).

Only torch tensors: CuPy has no FP8 dtype (ml_dtypes' float8 types are numpy dtypes CuPy cannot allocate or view),
so a CuPy array is refused with that reason. The decisions (formats, scale layout, rung, configuration, copies) are
cumm.plan.scaled's; this module checks the tensors, makes the copies the copy engine needs, the tensor maps, and
launches.
"""

from __future__ import annotations

from collections.abc import Mapping

import cupy
import numpy as np
from cupy_backends.cuda.api import driver as _driver

from ..plan import scaled as _plan
from ..plan.operands import compute_capability
from ..runtime import tmaps
from ..runtime.compile import device_kernel
from ..runtime.driver import multiprocessors as _sms
from ..runtime.render import ALIGNED

_ZERO_MAP = tmaps.aligned_map()  # C's map when the kernel stores directly (never read)
_maps: dict = {}  # MapSpec -> tmaps.Maps (its maps by pointer)


def _dtype_name(x) -> str:
    return str(getattr(x, "dtype", type(x).__name__)).removeprefix("torch.")


def _check_tensor(x, name: str) -> None:
    if isinstance(x, cupy.ndarray):
        raise TypeError(
            f"{name} is a cupy array ({x.dtype}); CuPy has no FP8 dtype, so scaled_matmul takes torch CUDA tensors "
            f"of dtype float8_e4m3fn or float8_e5m2 (torch.from_dlpack can wrap CuPy memory as uint8, then "
            f".view(torch.float8_e4m3fn))"
        )
    if type(x).__module__.split(".")[0] != "torch" and not hasattr(x, "data_ptr"):
        raise TypeError(f"{name} must be a torch CUDA tensor, got {type(x).__module__}.{type(x).__name__}")
    if not getattr(x, "is_cuda", False):
        raise TypeError(f"{name} must be on a CUDA device, got one on {getattr(x, 'device', '?')}: pass {name}.cuda()")


def _check_scale(s, name: str, dev: int) -> None:
    if s is None:
        raise TypeError(
            f"{name} is missing: FP8 products need a float32 scale for each operand (torch.ones((), "
            "device='cuda') for none)"
        )
    _check_tensor(s, name)
    if _dtype_name(s) != "float32":
        raise TypeError(f"{name} must be float32, got {_dtype_name(s)}: pass {name}.float()")
    if s.get_device() != dev:
        raise ValueError(f"{name} is on cuda:{s.get_device()} and the operands on cuda:{dev}")


def _k_major(x, rows: int, K: int, ptr: int, ld: int, inner: int):
    """x's rows (rows x K, K-major) as the copy engine reads them: (tensor, pointer, pitch) in place when
    plan.readable, else a zero-padded copy (rows x round_up(K, 16) bytes; zeros add nothing)."""
    if _plan.readable(ptr, ld, inner, K):
        return x, ptr, ld
    import torch

    kp = -(-K // _plan.TMA_ALIGN) * _plan.TMA_ALIGN
    buf = torch.zeros((rows, kp), dtype=torch.uint8, device=x.device)
    buf[:, :K].copy_(x.view(torch.uint8))
    return buf, buf.data_ptr(), kp


def _map(spec: tmaps.MapSpec, ptr: int) -> int:
    m = _maps.get(spec)
    if m is None:
        m = _maps[spec] = tmaps.Maps(spec)
    return m.known.get(ptr) or m.make(ptr)


def scaled_matmul(
    a,
    b,
    scale_a=None,
    scale_b=None,
    *,
    out_dtype=None,
    out=None,
    use_fast_accum: bool = False,
    kernel: str = "auto",
    config: Mapping[str, int] | None = None,
):
    """C = (a @ b) * scales for FP8 torch CUDA tensors ``a`` (M x K) and ``b`` (K x N), as torch._scaled_mm.

    Scales (float32 tensors, both required): one element each (per-tensor), ``scale_a`` (M, 1) and ``scale_b``
    (1, N) (per row of a, per column of b; either may also be one element), or DeepSeek-V3's block scales:
    ``scale_a`` (M, ceil(K/128)) per 1 x 128 block of a, ``scale_b`` (ceil(N/128), ceil(K/128)) per 128 x 128 block
    of b (any strides). ``out_dtype``: torch.bfloat16 (default), torch.float16 or torch.float32; ``out``: a
    row-major (M, N) tensor of that dtype to write. ``use_fast_accum``: keep the whole K in the tensor core's FP8
    accumulators (faster, less accurate) instead of promoting every 128-deep block into FP32 registers
    (per-tensor scales only; block scales always promote). Formats: e4m3 or e5m2 for each operand, all four
    pairs (torch._scaled_mm refuses e5m2 @ e5m2; Hopper's wgmma has it).

    The tensor cores read both operands K-major: ``a`` row-major and ``b`` as the (K, N) column-major view w.t()
    of an (N, K) weight are read in place; any other layout, a K that is not a multiple of 16 or a row not on 16
    bytes is first copied into a zero-padded K-major buffer (one read and write of the operand; for b (K, N)
    row-major, a transposed copy).
    """
    _check_tensor(a, "a")
    _check_tensor(b, "b")
    da, db = _dtype_name(a), _dtype_name(b)
    _plan.check_formats(da, db)
    if a.dim() != 2 or b.dim() != 2:
        raise ValueError(f"a and b must be 2-D, got shapes {tuple(a.shape)} and {tuple(b.shape)}")
    (M, K), (K2, N) = a.shape, b.shape
    if K != K2:
        raise ValueError(f"a is {M} x {K} and b is {K2} x {N}: a's columns must equal b's rows")
    if min(M, N, K) < 1:
        raise ValueError(f"empty product {M} x {K} @ {K2} x {N}: every dimension must be at least 1")
    dev = a.get_device()
    if b.get_device() != dev:
        raise ValueError(f"a is on cuda:{dev} and b on cuda:{b.get_device()}: put both on one device")
    _check_scale(scale_a, "scale_a", dev)
    _check_scale(scale_b, "scale_b", dev)
    layout = _plan.scale_layout(M, N, K, tuple(scale_a.shape), tuple(scale_b.shape))
    if use_fast_accum and layout == "block":
        raise ValueError("use_fast_accum applies to per-tensor / row / column scales; block scales always promote")
    on = _plan.out_name(None if out_dtype is None else _dtype_name_of(out_dtype))
    if out is not None:
        _check_tensor(out, "out")
        if _dtype_name(out) != on or tuple(out.shape) != (M, N) or out.stride(1) != 1 or out.get_device() != dev:
            raise ValueError(
                f"out must be a row-major (unit column stride) ({M}, {N}) {on} tensor on cuda:{dev}, got "
                f"{_dtype_name(out)} of shape {tuple(out.shape)}, strides {tuple(out.stride())} on "
                f"cuda:{out.get_device()}"
            )
    spec = _plan.choose(kernel, da, db, layout)
    cc = compute_capability(dev)
    spec.check_cc(cc, f"device {dev}")
    import torch

    with cupy.cuda.Device(dev):
        sms = _sms(dev)
        cfg = _plan.configure(spec, da, db, on, M, N, use_fast_accum, sms, config)
        if out is None:
            out = torch.empty((M, N), dtype=getattr(torch, on), device=a.device)
        a_, pa, lda = _k_major(a, M, K, a.data_ptr(), a.stride(0), a.stride(1))
        bt = b.t()  # its N x K rows
        b_, pb, ldb = _k_major(bt, N, K, bt.data_ptr(), bt.stride(0), bt.stride(1))
        pc, ldc, item = out.data_ptr(), out.stride(0), out.element_size()
        vec_c = int(pc % 16 == 0 and (ldc * item) % 16 == 0)
        c_map = vec_c and item == 2
        kern = device_kernel(spec, cfg, (*ALIGNED[:2], vec_c), dev)
        ma, mb, mc = spec.tensor_maps(cfg, M, N, K, lda, ldb, ldc, c_map)
        i32, u64 = np.int32, np.uint64
        sa, sb = scale_a, scale_b
        if layout == "tensor":  # a step of 0: one scale; 1: one per row (a) or column (b)
            step_a = 0 if sa.numel() == 1 else sa.stride(0)
            step_b = 0 if sb.numel() == 1 else sb.stride(1)
            scal = [sa.data_ptr(), i32(step_a), sb.data_ptr(), i32(step_b)]
        else:
            scal = [sa.data_ptr(), i32(sa.stride(0)), i32(sa.stride(1)), sb.data_ptr(), i32(sb.stride(0))]
            scal.append(i32(sb.stride(1)))
        args = [i32(M), i32(N), i32(K), pc, i32(ldc), *scal]
        slots = np.zeros(len(args), dtype=u64)
        for i, v in enumerate(args):
            slots[i] = int(v) & 0xFFFFFFFF if isinstance(v, np.int32) else int(v)
        grid = min(spec.grid(cfg, M, N, K)[0], sms)
        stream = torch.cuda.current_stream(dev).cuda_stream
        with tmaps.arena.lock:  # a map's arena row is not handed on before the launch has copied it
            ptrs = [slots.ctypes.data + 8 * i for i in range(len(args))]
            ptrs += [_map(ma, pa), _map(mb, pb), _map(mc, pc) if mc is not None else _ZERO_MAP.ctypes.data]
            params = np.array(ptrs, dtype=u64)
            _driver.launchKernel(
                kern.kernel.ptr, grid, 1, 1, spec.threads(cfg), 1, 1, spec.smem(cfg), stream, params.ctypes.data, 0
            )
        del a_, b_  # (the copies live on the stream's allocator until the kernel has read them)
    return out


def _dtype_name_of(dtype) -> str:
    """A torch dtype or a name ("bfloat16") as a name."""
    return dtype if isinstance(dtype, str) else str(dtype).removeprefix("torch.")
