"""Five launches of fused3_wg at n = 512 (wg64x32, or the named configuration base="...", with the overrides given
as a dict literal), for ncu to profile one of them (bench/ncu_wg.sh, bench/ncu_source.sh).

    PYTHONPATH=. python3 bench/ncu_launch.py "dict(TMA=0)"
"""

from __future__ import annotations

import sys

import cupy

from cumm import _chain


def main() -> None:
    over = eval(sys.argv[1] if len(sys.argv) > 1 else "dict()", {"dict": dict})
    n = 512
    x = [cupy.random.standard_normal((n, n), dtype=cupy.float32) for _ in range(3)]
    e = cupy.empty((n, n), cupy.float32)
    base = over.pop("base", "wg64x32")
    cfg = dict(_chain.WG_CONFIGS[base], **over)
    for _ in range(5):
        _chain._fused3_wg(*x, e, cfg, cupy.cuda.runtime.getDevice())
    cupy.cuda.Device().synchronize()


if __name__ == "__main__":
    main()
