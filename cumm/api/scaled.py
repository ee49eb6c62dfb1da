"""cumm.scaled_matmul: C = (a @ b) scaled, for FP8 (float8_e4m3fn / float8_e5m2) torch CUDA tensors, FP32
accumulation, C bfloat16, float16, float32, or FP8 times scale_result (the FP8 rungs 17_fp8_wgmma and
18_fp8_block_scaled; an FP8 C through include/fp8_out.cuh).

Only torch tensors: CuPy has no FP8 dtype (ml_dtypes' float8 types are numpy dtypes CuPy cannot allocate or view),
so a CuPy array is refused with that reason. The decisions (formats, scale layout, rung, configuration, copies) are
cumm.plan.scaled's; this module checks the tensors, makes the copies the copy engine needs, the tensor maps, and
launches.
"""

from __future__ import annotations

from collections.abc import Mapping

import cupy

from ..core.dtypes import FP8
from ..ladder.common import scale_pitch
from ..plan import scaled as _plan
from ..plan import store as _store
from ..plan.auto import device_key
from ..plan.operands import compute_capability
from ..runtime import arrays as _arrays
from ..runtime.compile import device_kernel
from ..runtime.driver import multiprocessors as _sms
from ..runtime.launch import Launch
from ..runtime.render import ALIGNED


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


def _check_scale_result(s, dev: int) -> None:
    """scale_result as torch._scaled_mm takes it: a float32 tensor of one element on the operands' device."""
    fix = "pass torch.tensor(s, dtype=torch.float32, device='cuda') (one element)"
    if type(s).__module__.split(".")[0] != "torch" or not hasattr(s, "numel"):
        raise TypeError(f"scale_result must be a float32 one-element torch CUDA tensor, got {type(s).__name__}: {fix}")
    if not getattr(s, "is_cuda", False):
        raise TypeError(f"scale_result must be on a CUDA device, got one on {getattr(s, 'device', '?')}: pass .cuda()")
    if _dtype_name(s) != "float32":
        raise TypeError(f"scale_result must be float32, got {_dtype_name(s)}: pass scale_result.float()")
    if s.numel() != 1:
        raise ValueError(
            f"scale_result must have one element (one scale for the whole output, as torch._scaled_mm's), got shape "
            f"{tuple(s.shape)}: {fix}"
        )
    if s.get_device() != dev:
        raise ValueError(f"scale_result is on cuda:{s.get_device()} and the operands on cuda:{dev}: move it there")


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


_calls: dict = {}  # a call's key -> its _Call (every decision and the packed launch)
_CALLS_MAX = 1024
_store.on_change(_calls.clear)  # a tuned table changed: configurations are decided again


def _key(a, b, sa, sb, out, out_dtype, fast: bool, kernel: str, config, sr=None) -> tuple | None:
    """Everything the checks and decisions of a call depend on but its pointers (of which only the 16-byte
    alignment: whether the copy engine reads an operand in place, whether C is stored by TMA), or None when the
    call is not cached (not torch tensors, a missing scale, an unhashable argument: the checked path says why)."""
    try:
        parts = []
        for x in (a, b, sa, sb):
            if type(x).__module__ != "torch":
                return None
            parts += (x.dtype, x.shape, x.stride(), x.device, x.data_ptr() & 15)
        if out is not None:
            if type(out).__module__ != "torch":
                return None
            parts += (out.dtype, out.shape, out.stride(), out.device, out.data_ptr() & 15)
        if sr is not None:
            if type(sr).__module__ != "torch":
                return None
            parts += ("scale_result", sr.dtype, sr.shape, sr.device)
        key = (*parts, out is None, out_dtype, fast, kernel, None if config is None else tuple(sorted(config.items())))
        hash(key)
        return key
    except (AttributeError, TypeError):
        return None


class _Call:
    """A scaled_matmul call's decisions for one key and its launch (runtime.launch.Launch: the arguments packed
    once, the maps kept per pointer in the tensor-map arena); a call with the same key only launches."""

    __slots__ = ("launch", "M", "N", "K", "dev", "out_dtype", "device", "copy_a", "copy_b", "copy_s", "one", "ran")

    def __init__(
        self, launch: Launch, dims, dev: int, out_dtype, device, copy_a: bool, copy_b: bool, copy_s: bool, one=None
    ):
        self.launch, (self.M, self.N, self.K), self.dev = launch, dims, dev
        self.out_dtype, self.device, self.copy_a, self.copy_b = out_dtype, device, copy_a, copy_b
        self.copy_s = copy_s  # block scales of A not stored K-block-major as the copy engine reads them: a copy
        self.one = one  # an FP8 C's scale_result when the call gives none (a float32 1), else None
        self.ran = ""  # what runs, for cumm.api.decision.scaled_decision: rung, parameters, where they came from

    def __call__(self, a, b, sa, sb, sr, out):
        import torch

        M, N, K = self.M, self.N, self.K
        if out is None:
            out = torch.empty((M, N), dtype=self.out_dtype, device=self.device)
        a_ = b_ = None
        if self.copy_a:
            a_, pa, _ = _k_major(a, M, K, a.data_ptr(), a.stride(0), a.stride(1))
        else:
            pa = a.data_ptr()
        if self.copy_b:
            bt = b.t()
            b_, pb, _ = _k_major(bt, N, K, bt.data_ptr(), bt.stride(0), bt.stride(1))
        else:
            pb = b.data_ptr()  # (b.t()'s pointer: the same)
        if self.copy_s:
            sa = k_block_major(sa, M)
        stream = torch.cuda.current_stream(self.dev).cuda_stream
        # (the sixth pointer, scale_result's, is read by FP8-out kernels only)
        pr = sr.data_ptr() if sr is not None else self.one.data_ptr() if self.one is not None else 0
        ps = (pa, pb, out.data_ptr(), sa.data_ptr(), sb.data_ptr(), pr)
        if cupy.cuda.runtime.getDevice() != self.dev:
            with cupy.cuda.Device(self.dev):
                self.launch(ps, stream)
        else:
            self.launch(ps, stream)
        del a_, b_, sa  # (the copies live on the stream's allocator until the kernel has read them)
        return out


def scaled_matmul(
    a,
    b,
    scale_a=None,
    scale_b=None,
    *,
    out_dtype=None,
    out=None,
    scale_result=None,
    use_fast_accum: bool = False,
    kernel: str = "auto",
    config: Mapping[str, int] | None = None,
):
    """C = (a @ b) * scales for FP8 torch CUDA tensors ``a`` (M x K) and ``b`` (K x N), as torch._scaled_mm.

    Scales (float32 tensors, both required): one element each (per-tensor), ``scale_a`` (M, 1) and ``scale_b`` (1,
    N) (per row of a, per column of b; either may also be one element), or DeepSeek-V3's block scales: ``scale_a``
    (M, ceil(K/128)) per 1 x 128 block of a, ``scale_b`` (ceil(N/128), ceil(K/128)) per 128 x 128 block of b (any
    strides; ``scale_a`` stored K-block-major, strides (1, P) with P = M rounded up to 4, is read in place, any
    other layout copied so on each call). ``out_dtype``: torch.bfloat16 (default), torch.float16, torch.float32,
    or FP8 (torch.float8_e4m3fn / torch.float8_e5m2: one byte an element, the next FP8 layer's input) with
    ``scale_result`` (a float32 one-element CUDA tensor; none: 1, as torch._scaled_mm's) by which the FP32 result
    is multiplied before its cast, rounded to nearest even and saturated to the format's largest finite value (448,
    57344; cvt.rn.satfinite); NaN stays NaN. scale_result with a 16- or 32-bit out_dtype is an error (torch ignores
    it). ``out``: a row-major (M, N) tensor of out_dtype to write. ``use_fast_accum``: keep the whole K in the tensor
    core's FP8 accumulators (faster, less accurate) instead of promoting every 128-deep block into FP32 registers
    (per-tensor scales only; block scales always promote). Formats: e4m3 or e5m2 for each operand, all four pairs
    (torch._scaled_mm refuses e5m2 @ e5m2; Hopper's wgmma has it).

    The tensor cores read both operands K-major: ``a`` row-major and ``b`` as the (K, N) column-major view w.t()
    of an (N, K) weight are read in place; any other layout, a K that is not a multiple of 16 or a row not on 16
    bytes is first copied into a zero-padded K-major buffer (one read and write of the operand; for b (K, N)
    row-major, a transposed copy).

    The first call with a given key (dtypes, shapes, strides, devices, 16-byte alignment of every tensor,
    out_dtype, use_fast_accum, kernel, config) runs every check and decision; later ones launch (a few us).
    """
    key = _key(a, b, scale_a, scale_b, out, out_dtype, use_fast_accum, kernel, config, scale_result)
    call = _calls.get(key) if key is not None else None
    if call is None:
        call = _checked(a, b, scale_a, scale_b, out_dtype, out, use_fast_accum, kernel, config, scale_result)
        if key is not None:
            if len(_calls) >= _CALLS_MAX:
                _calls.clear()
            _calls[key] = call
    return call(a, b, scale_a, scale_b, scale_result, out)


def _checked(
    a, b, scale_a, scale_b, out_dtype, out, use_fast_accum: bool, kernel: str, config, scale_result=None
) -> _Call:
    """Every check and decision of a call: its _Call."""
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
    _plan.check_scale_result(on, scale_result is not None)
    if scale_result is not None:
        _check_scale_result(scale_result, dev)
    if out is not None:
        _check_tensor(out, "out")
        if _dtype_name(out) != on or tuple(out.shape) != (M, N) or out.stride(1) != 1 or out.get_device() != dev:
            fix = ""
            if _dtype_name(out) != on:
                fix = f": out_dtype is {on} ({'the default' if out_dtype is None else 'given'}); pass an out of {on}"
                if _dtype_name(out) in _plan.SCALED_OUT:
                    fix += f" or out_dtype=torch.{_dtype_name(out)}"
            raise ValueError(
                f"out must be a row-major (unit column stride) ({M}, {N}) {on} tensor on cuda:{dev}, got "
                f"{_dtype_name(out)} of shape {tuple(out.shape)}, strides {tuple(out.stride())} on "
                f"cuda:{out.get_device()}{fix}"
            )
    spec = _plan.choose(kernel, da, db, layout)
    cc = compute_capability(dev)
    spec.check_cc(cc, f"device {dev}")
    import torch

    with cupy.cuda.Device(dev):
        sms = _sms(dev)
        cfg, why = _plan.configure(spec, da, db, on, M, N, use_fast_accum, sms, config, K=K, device=device_key(dev))
        item = torch.empty((), dtype=getattr(torch, on)).element_size()
        # C: the caller's out, or a fresh row-major one (the caching allocator's blocks are 512-byte aligned)
        pc16, ldc = (out.data_ptr() % 16, out.stride(0)) if out is not None else (0, N)
        vec_c = int(pc16 == 0 and (ldc * item) % 16 == 0)
        copy_a = not _plan.readable(a.data_ptr(), a.stride(0), a.stride(1), K)
        copy_b = not _plan.readable(b.data_ptr(), b.stride(1), b.stride(0), K)
        kp = -(-K // _plan.TMA_ALIGN) * _plan.TMA_ALIGN  # a copy's pitch
        lda, ldb = kp if copy_a else a.stride(0), kp if copy_b else b.stride(1)
        kern = device_kernel(spec, cfg, (*ALIGNED[:2], vec_c), dev)
        maps = spec.tensor_maps(cfg, M, N, K, lda, ldb, ldc, vec_c and item == 2)
        sa, sb = scale_a, scale_b
        copy_s = False
        if layout == "tensor":  # a step of 0: one scale; 1: one per row (a) or column (b)
            steps: tuple[int, ...] = (0 if sa.numel() == 1 else sa.stride(0),)
            steps_b: tuple[int, ...] = (0 if sb.numel() == 1 else sb.stride(1),)
        else:  # A's scales as the copy engine reads them (rung 18's map): K-block-major rows of scale_pitch(M)
            pitch = scale_pitch(M)
            copy_s = not (sa.stride(0) == 1 and sa.stride(1) == pitch and sa.data_ptr() % _plan.TMA_ALIGN == 0)
            steps, steps_b = (1, pitch), (sb.stride(0), sb.stride(1))
        # M N K C ldc sa (steps) sb (steps), then the maps of A, B, C; the call's pointers: A, B, C, sa, sb, and
        # scale_result, which an FP8 C's kernel takes first (include/fp8_out.cuh)
        lay = (M, N, K, None, ldc, None, *steps, None, *steps_b)
        order = (2, 3, 4)
        one = None
        if on in FP8:
            lay, order = (None, *lay), (5, *order)
            if scale_result is None:  # (torch's default: 1)
                one = _arrays.torch_one(dev)
        grid = min(spec.grid(cfg, M, N, K)[0], sms)
        launch = Launch(kern, grid, spec.threads(cfg), spec.smem(cfg), lay, maps=tuple(maps), order=order)
    call = _Call(launch, (M, N, K), dev, getattr(torch, on), a.device, copy_a, copy_b, copy_s, one)
    base = spec.default_config(cc)
    diff = " ".join(f"{k}={v}" for k, v in cfg.items() if base.get(k) != v)
    call.ran = " ".join(x for x in (spec.name, diff, f"({why})") if x)
    return call


def k_block_major(sa, M: int):
    """Block scales of A (M x kb, any strides) copied K-block-major: kb rows of scale_pitch(M) floats (one
    allocation and one copy: this runs on every call)."""
    import torch

    out = torch.empty_strided(tuple(sa.shape), (1, scale_pitch(M)), dtype=torch.float32, device=sa.device)
    return out.copy_(sa)


def _dtype_name_of(dtype) -> str:
    """A torch dtype or a name ("bfloat16") as a name."""
    return dtype if isinstance(dtype, str) else str(dtype).removeprefix("torch.")
