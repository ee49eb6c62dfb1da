"""Run cumm.multi_dot's kernels on odd chains, checking results, for compute-sanitizer.

    compute-sanitizer --tool memcheck python3 bench/chain_sanitize.py

CuPy's memory pool is off so each array is its own allocation and memcheck sees exact bounds (the persistent
kernels' per-stream scratch is dropped before each call, so it too is allocated at its exact size); the
16-byte paths (contiguous operands) and the scalar paths (views one float past a 16-byte boundary) run, each
multi_dot twice: checked, then by its fast path; then each named configuration of every chain kernel the device
runs (``cumm.kernel_spec(k).configs``), whichever the size rules would pick, through ``cumm.plan.chain_plans.fused``.
"""

from __future__ import annotations

import cupy
from sanitize import finish, record  # bench/ is this script's directory: the same checks and verdict

import cumm
from cumm.plan import chain_plans as plans

cupy.cuda.set_allocator(None)
# odd chains; the last two have every leading dimension a multiple of 4, so their "aligned" runs take the copy
# engine (TMA) where the configuration has it, with tails in every dimension
CHAINS = [(37, 45, 777, 600), (513, 129, 300, 70), (1, 1, 1, 1), (130, 3, 257, 5), (37, 44, 300, 72), (513, 128, 4, 8)]


def main() -> None:
    rng = cupy.random.default_rng(0)
    cc = int(cupy.cuda.Device().compute_capability)
    dev = cupy.cuda.runtime.getDevice()
    chain = [k for k in cumm.kernels("chain") if cumm.kernel_spec(k).supports(cc)]
    # (kernel, named configuration or None for multi_dot's own choice)
    runs = [("pairwise", None), *((k, None) for k in chain)]
    runs += [(k, name) for k in chain for name in cumm.kernel_spec(k).configs]

    def run(kernel, config, mats, out):
        if config is None:
            cumm.multi_dot(mats, kernel=kernel, out=out)
        else:
            plans.fused(*mats, out, kernel, config, dev)

    worst = 0.0
    for dims in CHAINS:
        for aligned in (True, False):
            mats = []
            for i in range(3):
                r, c = dims[i], dims[i + 1]
                x = rng.standard_normal((r, c + (0 if aligned else 1)), dtype=cupy.float32)
                mats.append(x if aligned else x[:, 1:])
            ref = mats[0].astype(cupy.float64) @ mats[1].astype(cupy.float64) @ mats[2].astype(cupy.float64)
            for kernel, config in runs:
                for call in ("first", "again") if config is None else ("first",):  # again: the fast path
                    out = cupy.full((dims[0], dims[3]), cupy.nan, dtype=cupy.float32)
                    cupy.cuda.Device().synchronize()
                    plans._streams.clear()  # the persistent kernels' scratch: allocated anew at its exact size
                    run(kernel, config, mats, out)
                    shape = "x".join(map(str, dims))
                    label = f"{kernel}:{config}" if config else kernel
                    path = "aligned" if aligned else "scalar"
                    worst = record(f"{label:20s} {shape:18s} {path:8s} {call}", out, ref, worst)
    finish(worst)


if __name__ == "__main__":
    main()
