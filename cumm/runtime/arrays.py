"""GPU arrays of any library in, the same kind out: cupy arrays as they are, torch tensors and any object with
``__cuda_array_interface__`` or ``__dlpack__`` as zero-copy cupy views.

A call's inputs decide its *kind*: ``"cupy"``, ``"torch"`` or ``"other"`` (JAX, numba, ...: the result is a
cupy array, which every such library can take back through DLPack). The kind decides where a new result is
allocated (cupy's pool or torch's caching allocator) and on which stream the kernels are queued: torch's current
stream for torch tensors, CuPy's current stream otherwise. torch is never imported by cumm: a torch tensor is
recognised by its type's module.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import cupy
import numpy as np

from ..core.dtypes import FP8, SCALED_OUT

CUPY, TORCH, OTHER = "cupy", "torch", "other"


def kind(x) -> str:
    t = type(x)
    if t is cupy.ndarray:
        return CUPY
    if t.__module__.startswith("torch"):
        return TORCH
    return OTHER


def device_of(x) -> int:
    """The device holding GPU array ``x`` (one with ``__cuda_array_interface__``): a torch tensor's own, else the
    device of its data pointer (the current device for an empty array)."""
    if kind(x) == TORCH:
        return x.get_device()
    ptr = x.__cuda_array_interface__["data"][0]
    if not ptr:
        return cupy.cuda.runtime.getDevice()
    dev = cupy.cuda.runtime.pointerGetAttributes(ptr).device
    return dev if dev >= 0 else cupy.cuda.runtime.getDevice()  # (host or managed memory: no device of its own)


def describe(x) -> str:
    t = type(x)
    return f"{t.__module__}.{t.__name__}"


def as_cupy(x, name: str) -> cupy.ndarray:
    """A cupy view of GPU array ``x`` sharing its memory; TypeError naming ``name`` and what would work."""
    if type(x) is cupy.ndarray:
        return x
    if isinstance(x, cupy.ndarray):
        return x
    if kind(x) == TORCH:
        if not getattr(x, "is_cuda", True):
            raise TypeError(f"{name} must be a GPU array, got a torch tensor on the {x.device}: pass {name}.cuda()")
        view = _torch_view(x)
        if view is not None:
            return view
    if hasattr(x, "__cuda_array_interface__"):
        try:
            # The interface names no device, and cupy files the memory under the current one: view it under the
            # array's own device (a torch tensor on cuda:1 with device 0 current was taken for device 0's).
            with cupy.cuda.Device(device_of(x)):
                view = cupy.asarray(x)  # zero-copy through the interface
        except Exception as e:
            raise TypeError(f"{name} ({describe(x)}) could not be viewed as a GPU array: {e}") from None
        if view.dtype.kind == "V" and kind(x) == TORCH and str(x.dtype) == "torch.bfloat16":
            # torch describes bfloat16 to the interface as opaque 2-byte items ("|V2"): name them
            view = view.view(bfloat16())
        return view
    if hasattr(x, "__dlpack__") and not isinstance(x, np.ndarray):
        try:
            return cupy.from_dlpack(x)
        except Exception as e:
            raise TypeError(f"{name} ({describe(x)}) could not be taken through DLPack as a GPU array: {e}") from None
    host = isinstance(x, (np.ndarray, np.generic, list, tuple, int, float, complex))
    raise TypeError(
        f"{name} must be a GPU array (a cupy array, a torch CUDA tensor, or an object with __cuda_array_interface__ "
        f"or __dlpack__), got {describe(x)}"
        + (" (host data)" if host else "")
        + f"; move host data to the GPU first with cupy.asarray({name})"
    )


_TORCH_TO_NUMPY: dict = {}  # torch dtype -> numpy dtype, for the ones matmul takes (filled on first use)


def _torch_view(x) -> cupy.ndarray | None:
    """A cupy view of torch CUDA tensor ``x`` built from its pointer, shape and strides: what cupy.asarray makes of
    its ``__cuda_array_interface__``, without the interface (torch builds that dict in Python, and cupy reads it
    several times: about 30 us a tensor, which a call on transposed operands paid three times). None for a dtype
    matmul does not take or an empty tensor: the interface then speaks (and its errors name the problem)."""
    if not _TORCH_TO_NUMPY:
        import torch

        _TORCH_TO_NUMPY.update({torch.float32: np.dtype(np.float32), torch.float16: np.dtype(np.float16)})
        with contextlib.suppress(TypeError):  # without ml_dtypes: bfloat16 tensors take the interface
            _TORCH_TO_NUMPY[torch.bfloat16] = bfloat16()
    dt = _TORCH_TO_NUMPY.get(x.dtype)
    if dt is None or x.numel() == 0:
        return None
    item = dt.itemsize
    shape, strides = tuple(x.shape), tuple(s * item for s in x.stride())
    nbytes = sum((d - 1) * s for d, s in zip(shape, strides, strict=True)) + item
    dev = x.get_device()
    mem = cupy.cuda.UnownedMemory(x.data_ptr(), nbytes, x, dev)
    return cupy.ndarray(shape, dt, cupy.cuda.MemoryPointer(mem, 0), strides)


_fp8_codes: dict = {}  # torch dtype -> its FP8 code (0: not FP8), found once a dtype (every call with a torch `out`)


def fp8_code(x) -> int:
    """C's FP8 format code for a torch float8_e4m3fn (3) or float8_e5m2 (4) tensor (the FP8 rungs' OUT codes,
    cumm.core.dtypes.SCALED_OUT's indices), else 0. CuPy has no FP8 dtype: only a torch tensor (or a subclass,
    e.g. a Parameter) is one."""
    if x is None or not type(x).__module__.startswith("torch"):
        return 0
    dt = getattr(x, "dtype", None)
    code = _fp8_codes.get(dt)
    if code is None:
        name = str(dt).removeprefix("torch.")
        code = _fp8_codes[dt] = SCALED_OUT.index(name) if name in FP8 else 0
    return code


def byte_view(x, name: str) -> cupy.ndarray:
    """A cupy uint8 view of an FP8 torch tensor's memory (its shape and strides)."""
    import torch

    return as_cupy(x.view(torch.uint8), name)


_ones: dict = {}  # device -> a float32 torch tensor holding 1 there


def torch_one(device_id: int):
    """A float32 one-element torch tensor holding 1 on ``device_id`` (an FP8 C's scale when none is given, as
    torch._scaled_mm's default), made once a device."""
    one = _ones.get(device_id)
    if one is None:
        import torch

        one = _ones[device_id] = torch.ones((), dtype=torch.float32, device=torch.device("cuda", device_id))
    return one


_raw_stream: list = []  # torch's fastest way to its current stream's handle, found once


def torch_stream(device_id: int) -> int:
    """torch's current stream on ``device_id`` (its handle)."""
    if not _raw_stream:
        import torch

        fast = getattr(torch._C, "_cuda_getCurrentRawStream", None)  # (what torch's own C++ launches read)
        _raw_stream.append(fast or (lambda d: torch.cuda.current_stream(d).cuda_stream))
    return _raw_stream[0](device_id)


class _StreamHandle:
    """A raw stream handle offered through the CUDA stream protocol, which ``cupy.cuda.Stream.from_external`` takes
    (CuPy 14 deprecates ``cupy.cuda.ExternalStream``, which took the handle itself)."""

    __slots__ = ("ptr",)

    def __init__(self, ptr: int) -> None:
        self.ptr = ptr

    def __cuda_stream__(self) -> tuple[int, int]:
        return (0, self.ptr)  # (protocol version, handle)


@contextlib.contextmanager
def on_stream(ptr: int, device_id: int) -> Iterator[None]:
    """cupy work inside runs on the foreign stream ``ptr`` (torch's) of device ``device_id``, that device current:
    the stream object carries no device of its own, so the device is made current for it."""
    with cupy.cuda.Device(device_id), cupy.cuda.Stream.from_external(_StreamHandle(ptr)):
        yield


def torch_empty(shape: tuple[int, ...], dtype, device_id: int):
    """A function making new torch tensors of ``shape`` and ``dtype`` (a numpy dtype) on ``device_id``."""
    import functools

    import torch

    return functools.partial(
        torch.empty, shape, dtype=_TORCH_DTYPES[np.dtype(dtype).name](), device=torch.device("cuda", device_id)
    )


def empty(kind_: str, shape: tuple[int, ...], dtype: np.dtype, device_id: int):
    """A new array of ``kind_`` (torch for torch inputs, else cupy) on ``device_id``."""
    if kind_ == TORCH:
        import torch

        return torch.empty(shape, dtype=_TORCH_DTYPES[np.dtype(dtype).name](), device=f"cuda:{device_id}")
    if device_id != cupy.cuda.runtime.getDevice():
        with cupy.cuda.Device(device_id):
            return cupy.empty(shape, dtype=dtype)
    return cupy.empty(shape, dtype=dtype)


def bfloat16() -> np.dtype:
    """numpy's (and CuPy's) bfloat16 dtype, from ml_dtypes (installed with cumm's cuda extras)."""
    try:
        import ml_dtypes
    except ImportError:
        raise TypeError("bfloat16 arrays need the ml_dtypes package: pip install ml_dtypes") from None
    return np.dtype(ml_dtypes.bfloat16)


def _torch_dtype(name: str):
    import torch

    return getattr(torch, name)


_TORCH_DTYPES = {
    "float32": lambda: _torch_dtype("float32"),
    "float16": lambda: _torch_dtype("float16"),
    "bfloat16": lambda: _torch_dtype("bfloat16"),
    "float64": lambda: _torch_dtype("float64"),
    "uint8": lambda: _torch_dtype("uint8"),  # (byte buffers: cumm/plan/pieces.py's)
}


CUDA_ERROR_INVALID_CONTEXT = 201


def retry_without_context(err: Exception) -> bool:
    """After a driver-API launch (cuLaunchKernel) failed: whether it failed for want of a current CUDA context, in
    which case one is now made current and the caller launches again. A thread whose first CUDA call is cumm's
    cached launch has none (found with one thread per GPU, the calls cached by another thread); cudaFree(0)
    initializes the runtime on the current device's primary context. Checked only on failure: no cost per call."""
    if getattr(err, "status", None) != CUDA_ERROR_INVALID_CONTEXT:
        return False
    cupy.cuda.runtime.free(0)
    return True
