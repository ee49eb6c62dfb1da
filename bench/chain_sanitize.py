"""Run cumm.multi_dot's kernels on odd chains, checking results, for compute-sanitizer.

    compute-sanitizer --tool memcheck python3 bench/chain_sanitize.py

CuPy's memory pool is off so each array is its own allocation and memcheck sees exact bounds (the persistent
kernels' per-stream scratch is dropped before each call, so it too is allocated at its exact size); the
16-byte paths (contiguous operands) and the scalar paths (views one float past a 16-byte boundary) run, each
multi_dot twice: checked, then by its fast path.
"""

from __future__ import annotations

import cupy
from sanitize import finish, record  # bench/ is this script's directory: the same checks and verdict

import cumm
from cumm import _chain

cupy.cuda.set_allocator(None)
# odd chains; the last two have every leading dimension a multiple of 4, so their "aligned" runs take the copy
# engine (TMA) where the configuration has it, with tails in every dimension
CHAINS = [(37, 45, 777, 600), (513, 129, 300, 70), (1, 1, 1, 1), (130, 3, 257, 5), (37, 44, 300, 72),
          (513, 128, 4, 8)]


def main() -> None:
    rng = cupy.random.default_rng(0)
    cc = int(cupy.cuda.Device().compute_capability)
    kernels = ["pairwise", *(["fused3"] if cc >= 90 else []), *(["fused3_tc"] if cc >= 80 else []),
               *(["fused3_wg"] if cc == 90 else [])]
    dev = cupy.cuda.runtime.getDevice()

    def run(kernel, mats, out):
        if kernel in _chain.WG_CONFIGS:  # each named fused3_wg configuration, whatever the rule picks
            _chain._fused3_wg(*mats, out, kernel, dev)
        else:
            cumm.multi_dot(mats, kernel=kernel, out=out)

    if cc == 90:
        kernels += sorted(_chain.WG_CONFIGS)
    worst = 0.0
    for dims in CHAINS:
        for aligned in (True, False):
            mats = []
            for i in range(3):
                r, c = dims[i], dims[i + 1]
                x = rng.standard_normal((r, c + (0 if aligned else 1)), dtype=cupy.float32)
                mats.append(x if aligned else x[:, 1:])
            ref = mats[0].astype(cupy.float64) @ mats[1].astype(cupy.float64) @ mats[2].astype(cupy.float64)
            for kernel in kernels:
                for call in ("first", "again"):  # again: multi_dot's fast path (a new out, the same key)
                    if call == "again" and kernel in _chain.WG_CONFIGS:
                        continue
                    out = cupy.full((dims[0], dims[3]), cupy.nan, dtype=cupy.float32)
                    cupy.cuda.Device().synchronize()
                    _chain._streams.clear()
                    run(kernel, mats, out)
                    shape = "x".join(map(str, dims))
                    worst = record(f"{kernel:10s} {shape:18s} {'aligned' if aligned else 'scalar':8s} {call}", out,
                                   ref, worst)
    finish(worst)


if __name__ == "__main__":
    main()
