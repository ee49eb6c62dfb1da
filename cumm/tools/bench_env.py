"""The machine and host around a benchmark: the device's description, the checks that the cuBLAS float32 baseline
really is FP32 (no TF32 through the environment or CuPy's compute type), and the host time of a cached call."""

from __future__ import annotations

import os
from collections.abc import Mapping

from ..runtime.timing import host_us
from .bench_calls import BenchError

TF32_VARS = ("CUPY_TF32", "NVIDIA_TF32_OVERRIDE")
HOST_OVERHEAD_SHAPE = (64, 64, 64)


def check_tf32(environ: Mapping[str, str] | None = None) -> None:
    """Raise BenchError if the environment would let cuBLAS compute the FP32 baseline in TF32."""
    env = os.environ if environ is None else environ
    for var in TF32_VARS:
        val = env.get(var, "").strip()
        try:
            off = val == "" or int(val) == 0
        except ValueError:
            off = False  # a value we cannot read might mean "on": refuse rather than publish a TF32 baseline
        if not off:
            raise BenchError(
                f"{var}={val!r} is set: cuBLAS would compute the float32 baseline in TF32 (10-bit mantissa), "
                f"so the comparison would be unfair; unset {var} (or set it to 0) and run again"
            )


def device_info() -> dict[str, str]:
    import cupy

    dev = cupy.cuda.Device()
    props = cupy.cuda.runtime.getDeviceProperties(dev.id)
    name = props["name"]
    cc = dev.compute_capability  # "90"
    rt = cupy.cuda.runtime.runtimeGetVersion()  # 13000
    return {
        "device": name.decode() if isinstance(name, bytes) else str(name),
        "cc": f"{cc[:-1]}.{cc[-1]}",
        "cupy": cupy.__version__,
        "cuda": f"{rt // 1000}.{rt % 1000 // 10}",
    }


def check_cupy_compute_type() -> None:
    """Refuse if this process already switched CuPy's float32 products to TF32 (cupy._core.set_compute_type)."""
    try:
        import numpy as np
        from cupy._core import _routines_linalg as rl

        tf32 = rl.get_compute_type(np.dtype(np.float32)) == rl.COMPUTE_TYPE_TF32
    except (ImportError, AttributeError):  # private API moved: the environment check still holds
        return
    if tf32:
        raise BenchError("CuPy's float32 compute type is TF32 in this process; the cuBLAS baseline would not be FP32")


def host_overhead(calls: int = 2000, warmup: int = 200) -> dict:
    """Wall-clock host time per call of cumm.matmul (a cached call) beside cupy.matmul and, when torch is
    importable, torch.matmul, on a tiny product, where the kernels take a few microseconds and the
    Python/launch path dominates. Each allocates its result, as a user's call does."""
    import cupy

    from ..api import matmul as _api

    M, N, K = HOST_OVERHEAD_SHAPE
    rng = cupy.random.default_rng()
    a = rng.standard_normal((M, K), dtype=cupy.float32)
    b = rng.standard_normal((K, N), dtype=cupy.float32)
    cumm_us = host_us(lambda: _api.matmul(a, b), calls, warmup)
    cupy_us = host_us(lambda: cupy.matmul(a, b), calls, warmup)
    doc = {"shape": [M, N, K], "calls": calls, "cumm_us": cumm_us, "cupy_us": cupy_us, "ratio": cumm_us / cupy_us}
    try:
        import torch
    except ImportError:
        return doc
    ta, tb = torch.as_tensor(a, device="cuda"), torch.as_tensor(b, device="cuda")
    doc["torch_us"] = host_us(lambda: torch.matmul(ta, tb), calls, warmup)
    doc["cumm_torch_us"] = host_us(lambda: _api.matmul(ta, tb), calls, warmup)  # torch tensors in and out
    return doc
