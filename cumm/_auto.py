"""``kernel="auto"``: which kernel and configuration to run for a shape.

Until tuned tables exist for a device this is a heuristic: the top rung with its default tiles when the
grid fills the GPU, smaller 64 x 64 tiles when 128 x 128 tiles would leave multiprocessors idle.
"""

from __future__ import annotations

from collections.abc import Mapping

from ._spec import cdiv

TOP = "double_buffer"
SMALL_TILES = dict(BM=64, BN=64, BK=16, WM=32, WN=32, WNITER=2, TM=4, TN=4, NUM_THREADS=128, MINB=2)
_sm_count: dict[int, int] = {}


def _sms(device_id: int) -> int:
    n = _sm_count.get(device_id)
    if n is None:
        import cupy

        n = _sm_count[device_id] = cupy.cuda.Device(device_id).attributes["MultiProcessorCount"]
    return n


def select(M: int, N: int, K: int, device_id: int, config: Mapping[str, int] | None = None):
    if config is not None:
        return TOP, config
    if cdiv(M, 128) * cdiv(N, 128) < 2 * _sms(device_id):
        return TOP, SMALL_TILES
    return TOP, None
