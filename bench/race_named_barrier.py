"""Does compute-sanitizer racecheck follow named barriers with a thread count (bar.sync id, 128)? A minimal
kernel, no cumm code: two groups of 128 threads each fill their own half of shared memory (plain stores or
cp.async from global), synchronize within the group, then each thread reads another thread's element of its
own group; mode 2 synchronizes the whole block instead (the control). Correct in every mode (checked).

    compute-sanitizer --tool racecheck python3 bench/race_named_barrier.py MODE    # 0: st + bar.sync id, 128
                                                                                   # 1: cp.async + bar.sync id, 128
                                                                                   # 2: cp.async + __syncthreads
                                                                                   # 3: cp.async ring + bar.sync id
                                                                                   # 4: cp.async ring + __syncthreads
                                                                                   # 5: 3, unequal rounds + exchange
                                                                                   # 6: 5 with plain stores
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

// Modes 3 (bar.sync id, 128) and 4 (__syncthreads): a 4-stage cp.async ring per group as fused3_wg's k-loop
// runs it: 3 chunks in flight, wait_group 2, a barrier, reads of another thread's element of the chunk, and the
// next chunk issued into the stage read in the round before (every thread passed this round's barrier after
// reading it).
extern "C" __global__ void ring(const float* __restrict__ x, float* __restrict__ y, int mode, int rounds) {
    __shared__ __align__(16) float s[2][4][128 * 4];
    const int g = threadIdx.x / 128, t = threadIdx.x % 128;
    auto issue = [&](int r) {
        if (r < rounds) {
            const float* src = x + ((blockIdx.x * rounds + r) * 2 + g) * 512 + t * 4;
            const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(&s[g][r % 4][t * 4]));
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src));
        }
        asm volatile("cp.async.commit_group;\n" ::: "memory");
    };
    if (mode != 6)
        for (int r = 0; r < 3; ++r) issue(r);
    // mode 5: group 1 runs one round fewer (as fused3_wg's K groups may), then the block exchanges a value
    // across the groups between two block barriers (as its partial tiles)
    // mode 6: the same with plain stores instead of cp.async (as fused3_wg's copy-engine path, whose writes
    // racecheck does not see): each round stores its chunk, synchronizes the group, reads
    const int mine = mode >= 5 && g == 1 ? rounds - 1 : rounds;
    for (int r = 0; r < mine; ++r) {
        if (mode == 6) {
            *reinterpret_cast<float4*>(&s[g][r % 4][t * 4]) =
                *reinterpret_cast<const float4*>(x + ((blockIdx.x * rounds + r) * 2 + g) * 512 + t * 4);
        }
        asm volatile("cp.async.wait_group 2;\n" ::: "memory");
        if (mode == 4) __syncthreads();
        else asm volatile("bar.sync %0, 128;\n" ::"r"(1 + g) : "memory");
        if (mode != 6) issue(r + 3);
        y[((blockIdx.x * rounds + r) * 2 + g) * 128 + t] = s[g][r % 4][(t * 4 + 37) % 512];
        if (mode == 6) asm volatile("bar.sync %0, 128;\n" ::"r"(1 + g) : "memory");  // reads before next stores
    }
    if (mode >= 5) {
        asm volatile("cp.async.wait_group 0;\n" ::: "memory");
        __syncthreads();
        s[g][0][t] = static_cast<float>(threadIdx.x);
        __syncthreads();
        if (g == 1) y[((blockIdx.x * rounds + rounds - 1) * 2 + 1) * 128 + t] = s[0][0][(t + 5) % 128];
        __syncthreads();
    }
}
"""


def ring(mode: int) -> None:
    k = cupy.RawKernel(SRC, "ring")
    rounds = 16
    x = cupy.random.default_rng(0).standard_normal(8 * rounds * 1024, dtype=cupy.float32)
    y = cupy.empty(8 * rounds * 256, cupy.float32)
    k((8,), (256,), (x, y, np.int32(mode), np.int32(rounds)))
    xs = x.reshape(8 * rounds * 2, 512).get()
    want = xs[:, (np.arange(128) * 4 + 37) % 512]
    if mode >= 5:  # group 1's last round: group 0's thread ids
        want = want.reshape(8, rounds, 2, 128)
        want[:, rounds - 1, 1] = (np.arange(128) + 5) % 128
    want = want.reshape(-1)
    print(f"mode {mode}: {'correct' if np.array_equal(y.get(), want) else 'WRONG'}")


def main() -> None:
    mode = int(sys.argv[1])
    if mode >= 3:
        ring(mode)
        return
    k = cupy.RawKernel(SRC, "k")
    x = cupy.random.default_rng(0).standard_normal(8 * 4 * 1024, dtype=cupy.float32)
    y = cupy.empty(8 * 4 * 256, cupy.float32)
    k((8,), (256,), (x, y, np.int32(mode)))
    xs = x.reshape(8 * 4, 2, 512).get()
    want = np.stack([xs[:, g, (np.arange(128) * 4 + 37) % 512] for g in range(2)], axis=1).reshape(-1)
    print(f"mode {mode}: {'correct' if np.array_equal(y.get(), want) else 'WRONG'}")


if __name__ == "__main__":
    main()
