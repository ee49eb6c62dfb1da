"""``kernel="auto"``: which kernel and configuration to run for a shape.

1. A configuration passed by the caller runs on ``TOP``, as given.
2. Otherwise the tuned tables (``cumm/tuned/*.json`` shipped with the package, then the user's
   ``tuned.json`` in the cache dir, which wins) are searched for this GPU (name and compute capability)
   and dtype; the entry whose shape bucket is nearest in log2 space (within ``_tune.MAX_DISTANCE``) gives
   the kernel and its configuration. See ``_tune`` for the format and for how entries are made.
3. Otherwise a heuristic: ``TOP`` with its default tiles when the grid fills the GPU, smaller
   64 x 64 tiles when 128 x 128 tiles would give fewer than two blocks per multiprocessor.

The answer of step 2 is memoized per (device, shape bucket), so the per-call path reads no file and scans
no table after the first call for a bucket; ``clear_cache()`` forgets it (``_tune`` calls it after saving).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping

from ._spec import cdiv

TOP = "warptile"  # fastest default on the H200 (bench/NOTES.md); tuned entries override
SMALL_TILES = dict(BM=64, BN=64, BK=16, WM=32, WN=32, WNITER=2, TM=4, TN=4, NUM_THREADS=128, MINB=2)
DTYPE = "float32"  # the only dtype matmul supports

_sm_count: dict[int, int] = {}
_device_keys: dict[int, tuple[str, int]] = {}
_tuned: dict[tuple[int, int, int, int], tuple[str, dict[str, int]] | None] = {}  # (device, *bucket) -> answer
_MISS = object()


def bucket_dim(x: int) -> int:
    """``x`` rounded to the nearest power of two in log space (1 for x <= 1); exact integer arithmetic."""
    if x <= 1:
        return 1
    p = 1 << (x.bit_length() - 1)  # p <= x < 2p; round up when log2(x) - log2(p) > 1/2, i.e. x*x > 2*p*p
    return 2 * p if x * x > 2 * p * p else p


def bucket(M: int, N: int, K: int) -> tuple[int, int, int]:
    return bucket_dim(M), bucket_dim(N), bucket_dim(K)


def _sms(device_id: int) -> int:
    n = _sm_count.get(device_id)
    if n is None:
        import cupy

        n = _sm_count[device_id] = cupy.cuda.Device(device_id).attributes["MultiProcessorCount"]
    return n


def _device_key(device_id: int) -> tuple[str, int]:
    """(GPU name, compute capability as an int such as 90) of ``device_id``; memoized."""
    key = _device_keys.get(device_id)
    if key is None:
        import cupy

        name = cupy.cuda.runtime.getDeviceProperties(device_id)["name"]
        name = name.decode() if isinstance(name, bytes) else str(name)
        key = _device_keys[device_id] = (name, int(cupy.cuda.Device(device_id).compute_capability))
    return key


def _lookup(device_id: int, b: tuple[int, int, int]) -> tuple[str, dict[str, int]] | None:
    from . import _tune

    try:
        gpu, cc = _device_key(device_id)
        entry = _tune.lookup(gpu, cc, DTYPE, *b)
    except Exception as e:  # a broken table must never break matmul: fall back to the heuristic
        warnings.warn(f"cumm: tuned-table lookup failed ({type(e).__name__}: {e}); using the heuristic",
                      RuntimeWarning, stacklevel=3)
        return None
    return None if entry is None else (entry["kernel"], dict(entry["config"]))


def select(M: int, N: int, K: int, device_id: int, config: Mapping[str, int] | None = None):
    """(kernel name, configuration or None for the kernel's defaults) for an M x N x K product."""
    if config is not None:
        return TOP, config
    b = bucket(M, N, K)
    key = (device_id, *b)
    hit = _tuned.get(key, _MISS)
    if hit is _MISS:
        hit = _tuned[key] = _lookup(device_id, b)
    if hit is not None:
        return hit
    if cdiv(M, 128) * cdiv(N, 128) < 2 * _sms(device_id):
        return TOP, SMALL_TILES
    return TOP, None


def clear_cache() -> None:
    """Forget memoized tuned answers (after a table changed); device facts stay cached."""
    _tuned.clear()
