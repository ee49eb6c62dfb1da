"""Host cost of fused3_wg's tensor maps (TMA = 1) at n = 512, against TMA = 0.

    PYTHONPATH=. python3 bench/probe_tma_host.py

Prints microseconds per operation (median of 7 rounds): a map encoded (cuTensorMapEncodeTiled), an address
replaced by the driver (cuTensorMapReplaceAddress), a map made by _chain._Maps from its first one, and the host
time of a whole call enqueued (no synchronization inside a round): one array set reused (every map known), 64
sets rotated, and arrays never seen (every map made)."""

from __future__ import annotations

import ctypes
import statistics
import time

import cupy

from cumm import _chain

ROUNDS = 7


def per_op(fn, count: int) -> float:
    """Median over ROUNDS of the host time of ``count`` calls of fn(i), in us per call."""
    out = []
    for _ in range(ROUNDS):
        t0 = time.perf_counter()
        for i in range(count):
            fn(i)
        out.append((time.perf_counter() - t0) / count * 1e6)
        cupy.cuda.Device().synchronize()
    return statistics.median(out)


def main() -> None:
    n, dev = 512, cupy.cuda.runtime.getDevice()
    sets = [[cupy.random.standard_normal((n, n), dtype=cupy.float32) for _ in range(3)] for _ in range(64)]
    e = cupy.empty((n, n), cupy.float32)
    base = dict(_chain.WG_CONFIGS["wg64x32"], TMA=0)
    spec = _chain.wg_maps(dict(base, TMA=1), (n,) * 9)[0]
    ptr = sets[0][0].data.ptr
    m = _chain._aligned_map()
    maps, arena = _chain._Maps(spec), _chain._arena
    replace_fn = _chain._tmap_fn("cuTensorMapReplaceAddress", [ctypes.c_void_p] * 2)
    m_addr = m.ctypes.data

    def encode(i):
        _chain._encode(ptr + 256 * i, spec, m)

    def replace(i):
        replace_fn(m_addr, ptr + 256 * i)

    def made(i):
        with arena.lock:
            maps.make(ptr + 256 * i)

    made(0)
    print(f"per map: encoded {per_op(encode, 200):.2f} us, "
          f"cuTensorMapReplaceAddress alone {per_op(replace, 200):.2f} us, made from the first "
          f"{per_op(made, 200):.2f} us")
    for tma in (0, 1):
        host_times(dict(base, TMA=tma), sets, e, dev)


def host_times(cfg, sets, e, dev: int) -> None:
    for x in sets:  # plan, compile, pack every set once
        _chain._fused3_wg(*x, e, cfg, dev)
    cupy.cuda.Device().synchronize()
    same = per_op(lambda i: _chain._fused3_wg(*sets[0], e, cfg, dev), 50)
    rotated = per_op(lambda i: _chain._fused3_wg(*sets[i % len(sets)], e, cfg, dev), 50)
    launch = next(v for k, v in _chain._launches.items() if k[0] == "fused3_wg" and dict(k[1]) == cfg)

    def fresh(i):  # a call on arrays never seen: the packed arguments and the maps made anew
        for _, _, known in launch.maps:
            known.known.clear()
        _chain._fused3_wg(*sets[i % len(sets)], e, cfg, dev)

    new = per_op(fresh, 50)
    print(f"TMA={cfg['TMA']}: call enqueued, one array set {same:.2f} us, 64 sets rotated {rotated:.2f} us, "
          f"arrays never seen {new:.2f} us")


if __name__ == "__main__":
    main()
