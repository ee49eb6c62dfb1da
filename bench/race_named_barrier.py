"""Does compute-sanitizer racecheck follow named barriers with a thread count (bar.sync id, 128)? A minimal
kernel, no cumm code: two groups of 128 threads each fill their own half of shared memory (plain stores or
cp.async from global), synchronize within the group, then each thread reads another thread's element of its
own group; mode 2 synchronizes the whole block instead (the control). Correct in every mode (checked).

    compute-sanitizer --tool racecheck python3 bench/race_named_barrier.py MODE    # 0: st + bar.sync id, 128
                                                                                   # 1: cp.async + bar.sync id, 128
                                                                                   # 2: cp.async + __syncthreads
"""

from __future__ import annotations

import sys

import cupy
import numpy as np

SRC = r"""
extern "C" __global__ void k(const float* __restrict__ x, float* __restrict__ y, int mode) {
    __shared__ __align__(16) float s[2][128 * 4];
    const int g = threadIdx.x / 128, t = threadIdx.x % 128;
    for (int round = 0; round < 4; ++round) {
        const float* src = x + (blockIdx.x * 4 + round) * 1024 + g * 512 + t * 4;
        if (mode == 0) {
            *reinterpret_cast<float4*>(&s[g][t * 4]) = *reinterpret_cast<const float4*>(src);
        } else {
            const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(&s[g][t * 4]));
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src));
            asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;\n" ::: "memory");
        }
        if (mode == 2) __syncthreads();
        else asm volatile("bar.sync %0, 128;\n" ::"r"(1 + g) : "memory");
        y[(blockIdx.x * 4 + round) * 256 + threadIdx.x] = s[g][(t * 4 + 37) % 512];
        if (mode == 2) __syncthreads();
        else asm volatile("bar.sync %0, 128;\n" ::"r"(1 + g) : "memory");
    }
}
"""


def main() -> None:
    mode = int(sys.argv[1])
    k = cupy.RawKernel(SRC, "k")
    x = cupy.random.default_rng(0).standard_normal(8 * 4 * 1024, dtype=cupy.float32)
    y = cupy.empty(8 * 4 * 256, cupy.float32)
    k((8,), (256,), (x, y, np.int32(mode)))
    xs = x.reshape(8 * 4, 2, 512).get()
    want = np.stack([xs[:, g, (np.arange(128) * 4 + 37) % 512] for g in range(2)], axis=1).reshape(-1)
    print(f"mode {mode}: {'correct' if np.array_equal(y.get(), want) else 'WRONG'}")


if __name__ == "__main__":
    main()
