"""Scratch buffers that kernels take as an argument (``KernelSpec.workspace``): one per device and stream.

Launches queued on one stream run one after another, so they may share a buffer; launches on two streams may run at
once, so each stream has its own. A buffer is zeroed when made and the kernels that use it leave their flags as
they found them (wgmma_ws's stream-K flags are lowered by the block that reads them), so it is never cleared again.
Every configuration on a stream shares it, so flags must sit where no configuration puts data: at the buffer's
start (wgmma_ws's did not, and a change of tile shape once read partial sums as raised flags). A buffer that is
outgrown is kept, not freed: a launch queued earlier may still be using it.
"""

from __future__ import annotations

import threading

import cupy

_buffers: dict[tuple[int, int], cupy.ndarray] = {}
_outgrown: list[cupy.ndarray] = []
_lock = threading.Lock()


def pointer(device_id: int, stream: int, nbytes: int) -> int:
    """The device address of at least ``nbytes`` zeroed-at-birth bytes for launches on ``stream`` (a handle,
    0 for the default stream) of device ``device_id``; 0 while ``stream`` is being captured into a CUDA graph and
    has no such buffer yet (making one zeroes it and waits for the device, which a capture does not allow): the
    kernels that take a scratch buffer read a null one as "none" (stream-K: whole tiles)."""
    buf = _buffers.get((device_id, stream))
    if buf is None or buf.nbytes < nbytes:
        if stream and cupy.cuda.runtime.streamIsCapturing(stream):
            return 0
        with _lock:
            buf = _buffers.get((device_id, stream))
            if buf is None or buf.nbytes < nbytes:
                if buf is not None:
                    _outgrown.append(buf)
                with cupy.cuda.Device(device_id):
                    # made and zeroed on the null stream, which waits for no stream and that every blocking
                    # stream waits for: the zeros are in place before the first launch on `stream` reads them
                    buf = cupy.zeros(-(-nbytes // 256) * 256, dtype=cupy.uint8)
                    cupy.cuda.runtime.deviceSynchronize()
                _buffers[(device_id, stream)] = buf
    return buf.data.ptr
