"""The CUDA driver calls CuPy does not wrap, through ctypes, defined once: kernel attributes, cluster occupancy,
cuLaunchKernelEx with launch attributes (programmatic dependent launch), and the lookup they share.
"""

from __future__ import annotations

import ctypes
import os

_sm_count: dict[int, int] = {}


def multiprocessors(device_id: int) -> int:
    """The multiprocessors of ``device_id`` (memoized): a wave of one-block-per-SM kernels, the persistent grid."""
    n = _sm_count.get(device_id)
    if n is None:
        import cupy

        n = _sm_count[device_id] = cupy.cuda.Device(device_id).attributes["MultiProcessorCount"]
    return n


_driver_fns: dict[str, object] = {}  # the driver functions below (tensor maps, cluster queries), looked up once


def driver_fn(name: str, argtypes: list):
    """A driver function through ctypes, for those CuPy does not wrap (tensor maps, cluster occupancy)."""
    fn = _driver_fns.get(name)
    if fn is None:
        fn = getattr(ctypes.CDLL("libcuda.so.1"), name)  # already loaded by CuPy
        fn.argtypes = argtypes
        fn.restype = ctypes.c_int
        _driver_fns[name] = fn
    return fn


CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH = 11


def cluster_width(func: int) -> int:
    """The cluster width a kernel was compiled with (``__cluster_dims__``), 1 for none (CUfunction ``func``)."""
    fn = driver_fn("cuFuncGetAttribute", [ctypes.POINTER(ctypes.c_int), ctypes.c_int, ctypes.c_void_p])
    width = ctypes.c_int(0)
    rc = fn(ctypes.byref(width), CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH, func)
    if rc:
        raise RuntimeError(f"cuFuncGetAttribute(REQUIRED_CLUSTER_WIDTH) failed (CUresult {rc})")
    return max(1, width.value)


def max_active_clusters(func: int, width: int, threads: int, smem: int) -> int:
    """Clusters of ``width`` blocks (``threads`` each, ``smem`` bytes of dynamic shared memory) of kernel ``func``
    (compiled with those cluster dimensions) that the current device holds at once (cuOccupancyMaxActiveClusters)."""
    fn = driver_fn("cuOccupancyMaxActiveClusters", [ctypes.POINTER(ctypes.c_int), ctypes.c_void_p, ctypes.c_void_p])
    cfg = LaunchConfig((width, 1, 1), (threads, 1, 1), smem, None, None, 0)
    n = ctypes.c_int(0)
    rc = fn(ctypes.byref(n), func, ctypes.byref(cfg))
    if rc or n.value < 1:
        raise RuntimeError(f"cuOccupancyMaxActiveClusters gave {n.value} (CUresult {rc}) for clusters of {width}")
    return n.value


class LaunchConfig(ctypes.Structure):  # CUlaunchConfig (cuda.h)
    _fields_ = [
        ("grid", ctypes.c_uint * 3),
        ("block", ctypes.c_uint * 3),
        ("smem", ctypes.c_uint),
        ("stream", ctypes.c_void_p),
        ("attrs", ctypes.c_void_p),
        ("num_attrs", ctypes.c_uint),
    ]


class LaunchAttribute(ctypes.Structure):  # CUlaunchAttribute (cuda.h): an id, padding, a 64-byte value union
    _fields_ = [("id", ctypes.c_uint), ("pad", ctypes.c_uint), ("value", ctypes.c_int * 16)]


PROGRAMMATIC_STREAM_SERIALIZATION = 6  # CU_LAUNCH_ATTRIBUTEPROGRAMMATIC_STREAM_SERIALIZATION
# Programmatic dependent launch of the persistent kernels on compute capability 9.0+; CUMM_PDL=0 (read at import)
# turns it off. A shape's launch takes the value this has when the shape is first planned.
PDL = os.environ.get("CUMM_PDL", "1") != "0"
_ex: list = []  # [cuLaunchKernelEx or None], looked up once


def launch_kernel_ex():
    """The driver's cuLaunchKernelEx (CUDA 12.0+) through ctypes, or None where the driver has none; CuPy does
    not wrap it."""
    if not _ex:
        fn = getattr(ctypes.CDLL("libcuda.so.1"), "cuLaunchKernelEx", None)  # already loaded by CuPy
        if fn is not None:
            fn.argtypes = [ctypes.c_void_p] * 4
            fn.restype = ctypes.c_int
        _ex.append(fn)
    return _ex[0]
