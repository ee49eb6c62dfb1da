// grid_barrier.cuh: the one grid-wide barrier of the persistent chain kernels (fused3_tc.cu, fused3_wg.cu).
//
// The barrier counts arrivals in bar[0] and releases waiters by bumping a generation in bar[1]; the last
// block to arrive resets bar[0], so the two words (zeroed once) serve every later launch on the stream.
// It needs every block resident at once: the caller sizes the grid by the occupancy API (and a waiter
// that sees no release for ~4 s traps rather than hang).

__device__ __forceinline__ void cumm_grid_barrier(unsigned* bar) {
    __syncthreads();  // this block's stores to T are issued
    if (threadIdx.x == 0) {
        volatile unsigned* gen = bar + 1;
        const unsigned g = *gen;  // read before arriving: the last arrival may bump it right after
        __threadfence();          // this block's T is visible device-wide before it counts as arrived
        if (atomicAdd(bar, 1u) == gridDim.x - 1) {
            atomicExch(bar, 0u);
            __threadfence();
            atomicAdd(bar + 1, 1u);
        } else {
            // A grid that cannot be resident at once (e.g. an MPS client limited to part of the SMs,
            // which the occupancy API does not see) would wait forever: after ~4 s, trap instead, so the
            // call fails with a launch error rather than hanging.
            const long long t0 = clock64();
            while (*gen == g) {
                __nanosleep(64);
                if (clock64() - t0 > 8000000000LL) __trap();
            }
        }
        __threadfence();
    }
    __syncthreads();
}
