"""Where cumm.matmul's host time goes (per call, host only, best of 9 bursts of 200; then cProfile), for the
products that multi_dot's pairwise path runs: n x n x n, and the 4096x64 . 64x4096 . 4096x64 chain's two.

    PYTHONPATH=. python3 bench/probe_matmul_host.py
"""

from __future__ import annotations

import cProfile
import io
import pstats

import cupy
from probe_chain import host_us  # bench/ is this script's directory

import cumm

ITERS = 200


def main() -> None:
    f32 = cupy.float32
    rng = cupy.random.default_rng(0)
    cases = {}
    for m, k, n in ((512, 512, 512), (64, 4096, 64), (4096, 64, 64)):
        a, b = rng.standard_normal((m, k), dtype=f32), rng.standard_normal((k, n), dtype=f32)
        out = cupy.empty((m, n), f32)
        cases[f"matmul {m}x{k} @ {k}x{n} (out=)"] = (lambda a=a, b=b, out=out: cumm.matmul(a, b, out=out))
        cases[f"cupy.matmul {m}x{k} @ {k}x{n} (out=)"] = (lambda a=a, b=b, out=out: cupy.matmul(a, b, out=out))
    x = [rng.standard_normal(s, dtype=f32) for s in ((4096, 64), (64, 4096), (4096, 64))]
    e = cupy.empty((4096, 64), f32)
    cases["multi_dot 4096x64 chain (out=)"] = lambda: cumm.multi_dot(x, out=e)
    sets = [([rng.standard_normal(s, dtype=f32) for s in ((4096, 64), (64, 4096), (4096, 64))],
             cupy.empty((4096, 64), f32)) for _ in range(40)]  # as bench/chain.py rotates them
    turn = iter(range(1 << 62))

    def rotating(kernel="auto"):
        xs, es = sets[next(turn) % len(sets)]
        cumm.multi_dot(xs, kernel=kernel, out=es)

    cases["multi_dot 4096x64 chain, 40 rotating sets"] = rotating
    cases["multi_dot(kernel='pairwise') 4096x64, rotating"] = lambda: rotating("pairwise")
    for name, fn in cases.items():
        print(f"  {name:44s} {host_us(fn, ITERS):8.2f} us/call")
    for name in ("matmul 64x4096 @ 4096x64 (out=)", "multi_dot 4096x64 chain, 40 rotating sets"):
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(ITERS):
            cases[name]()
        pr.disable()
        cupy.cuda.Device().synchronize()
        s = io.StringIO()
        pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(22)
        print(name)
        print(s.getvalue())


if __name__ == "__main__":
    main()
