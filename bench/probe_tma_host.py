"""Host cost of fused3_wg's tensor maps (TMA = 1) at n = 512, against TMA = 0.

    PYTHONPATH=. python3 bench/probe_tma_host.py

Prints microseconds per operation (median of 7 rounds): a map encoded (cuTensorMapEncodeTiled), a map made by
copying a template and replacing its address (cuTensorMapReplaceAddress), a launch's arguments packed for a new
set of pointers (maps already made), and the host time of a whole call enqueued (no synchronization inside a
round), for one array set reused (every map cached) and for a new set each call (maps made from templates)."""

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
    base = dict(_chain.WG_CONFIGS["wg128x32"], TMA=0)
    spec = _chain.wg_maps(dict(base, TMA=1), (1, 1, 1), (n,) * 9)[0]
    ptr = sets[0][0].data.ptr
    _chain._tensor_map(ptr, spec)  # the template

    def encode(i):
        _chain._encode(ptr + 256 * i, spec)

    m = _chain._new_map()
    replace_fn = _chain._tmap_fn("cuTensorMapReplaceAddress", [ctypes.c_void_p] * 2)
    m_addr = m.ctypes.data

    def replace(i):
        replace_fn(m_addr, ptr + 256 * i)

    def patched(i):
        _chain._maps.clear()
        _chain._tensor_map(ptr + 256 * i, spec)

    print(f"address field {_chain._templates[spec][2]}; per map: encoded {per_op(encode, 200):.2f} us, "
          f"cuTensorMapReplaceAddress alone {per_op(replace, 200):.2f} us, made from the template "
          f"{per_op(patched, 200):.2f} us")
    _chain._tensor_map(ptr, spec)
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
        if cfg["TMA"]:
            launch.packed.clear()
            _chain._maps.clear()
        _chain._fused3_wg(*sets[i % len(sets)], e, cfg, dev)

    new = per_op(fresh, 50)
    print(f"TMA={cfg['TMA']}: call enqueued, one array set {same:.2f} us, 64 sets rotated {rotated:.2f} us, "
          f"arrays never seen {new:.2f} us")


if __name__ == "__main__":
    main()
