"""Time a list of (kernel, config) candidates beside cuBLAS: the developer's tool for choosing defaults.

    PYTHONPATH=. python3 bench/sweep.py --sizes 4096,4095,4097 [--only double_buffer]

CUDA events (cumm.runtime.timing.sample_ms), warm-up excluded, median of --repeat runs, inputs rotated over enough
sets to exceed L2. Its findings are in docs/ladder.md; `python -m cumm bench` is the user-facing benchmark.
"""

from __future__ import annotations

import argparse
import itertools
import statistics

import cupy

import cumm
from cumm.runtime import timing as _timing

W = dict(BM=128, BN=128, BK=16, WM=64, WN=32, WNITER=2, TM=4, TN=4, NUM_THREADS=256, MINB=2)
CANDIDATES = {
    "blocktile_2d": [{}, dict(BK=16), dict(BK=32)],
    "vectorized": [{}, dict(BK=16)],
    "bank_conflict_free": [{}, dict(BK=16), dict(BK=16, SWIZZLE=0, PAD=4)],
    "warptile": [
        {},
        dict(BK=8),
        dict(W, WM=32, WN=64, WNITER=4),
        dict(W, WNITER=1),
        dict(W, WNITER=4),
        dict(W, WM=128, WN=16, WNITER=1),
        dict(W, BK=32, MINB=1),
    ],
    "double_buffer": [
        {},
        dict(W, BK=8),
        dict(W, BK=16),
        dict(W, BK=8, WM=32, WN=64, WNITER=4),
        dict(W, BK=8, BN=256, WN=64, WNITER=4, MINB=1),
        dict(W, BK=8, BM=256, WN=64, TM=8, MINB=1),
        dict(W, BK=8, BN=256, WN=64, TN=8, MINB=1),
        dict(W, BK=16, BN=256, WN=64, TM=8, MINB=1),
        dict(W, BK=8, BN=256, WM=32, WN=128, TM=8, MINB=1),
        dict(W, BK=8, WN=64, TM=8, NUM_THREADS=128),
    ],
    "tf32x3": [
        {},
        dict(STAGES=4),
        dict(BK=16, STAGES=4),
        dict(BK=64),
        dict(WM=32, WN=64),
        dict(BN=64, NUM_THREADS=128),
        dict(BM=64, NUM_THREADS=128),
        dict(BN=64, NUM_THREADS=128, STAGES=4),
        dict(BM=64, BN=256, WM=32, WN=64),
        dict(BN=256, BM=64, WM=64, WN=32),
    ],
}


def timed(fn, sets, repeat: int) -> float:
    """Median ms of ``fn`` over ``repeat`` CUDA-event timed calls (cumm.runtime.timing.sample_ms), rotating the sets."""
    it = itertools.cycle(sets)
    return statistics.median(_timing.sample_ms(lambda: fn(*next(it)), warmup=3, repeat=repeat))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", default="4096")
    p.add_argument("--only", default="")
    p.add_argument("--repeat", type=int, default=20)
    a = p.parse_args()
    rng = cupy.random.default_rng(0)
    sizes = [int(x) for x in a.sizes.split(",")]
    for n in sizes:
        l2 = cupy.cuda.Device().attributes.get("L2CacheSize") or 60 * 2**20
        nsets = max(2, _timing.rotation_sets(2 * n * n * 4, l2))
        sets = [
            (rng.standard_normal((n, n), dtype=cupy.float32), rng.standard_normal((n, n), dtype=cupy.float32))
            for _ in range(nsets)
        ]
        flops = 2.0 * n**3
        ref = sets[0][0].astype(cupy.float64) @ sets[0][1].astype(cupy.float64)
        cublas = timed(lambda x, y: cupy.matmul(x, y), sets, a.repeat)
        out = cupy.matmul(*sets[0])
        err = float(cupy.linalg.norm(out - ref) / cupy.linalg.norm(ref))
        print(f"n={n} cuBLAS {cublas:.3f} ms {flops / cublas / 1e9:.1f} TFLOP/s err {err:.1e}", flush=True)
        for kernel, configs in CANDIDATES.items():
            if a.only and kernel not in a.only.split(","):
                continue
            for cfg in configs if n == sizes[0] else [{}]:  # off-grid sizes: the defaults only
                try:
                    out = cumm.matmul(*sets[0], kernel=kernel, config=cfg or None)
                    err = float(cupy.linalg.norm(out - ref) / cupy.linalg.norm(ref))
                    ms = timed(
                        lambda x, y, k=kernel, c=cfg: cumm.matmul(x, y, kernel=k, config=c or None), sets, a.repeat
                    )
                    r = cumm.compile(kernel, cfg or None, "sm_90")
                    print(
                        f"  {kernel:18s} {ms:8.3f} ms {flops / ms / 1e9:6.1f} TFLOP/s {cublas / ms:6.1%} "
                        f"err {err:.1e} regs {r.registers} spill {r.spill_bytes}  {cfg}",
                        flush=True,
                    )
                except Exception as e:  # report and go on: one bad candidate must not end the sweep
                    print(f"  {kernel:18s} ERROR {type(e).__name__}: {str(e)[:200]}  {cfg}", flush=True)


if __name__ == "__main__":
    main()
