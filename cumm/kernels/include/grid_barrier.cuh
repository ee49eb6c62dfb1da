// grid_barrier.cuh: what the persistent chain kernels (fused3_tc.cu, fused3_wg.cu) need beyond their tiles:
// the start of a programmatic dependent launch and the one grid-wide barrier.

// The persistent kernels' arguments: row-major A (m x k), B (k x p), C (p x n), E (m x n), the scratch T
// (m x p, ldt) and the stream's barrier word; cumm/_chain/launch.py's layout packs them in this order.
#define CUMM_CHAIN_ARGS                                                                                      \
    const int m, const int k, const int p, const int n, const float* __restrict__ A, const int lda,         \
        const float* __restrict__ B, const int ldb, const float* __restrict__ C, const int ldc,             \
        float* __restrict__ E, const int lde, float* __restrict__ T, const int ldt, unsigned* bar

// First statement of a persistent kernel. On sm_90 the host launches it with programmatic stream
// serialization (PDL), so it may start while the previous kernel in the stream is still finishing: wait
// here until that kernel has completed and its writes are visible (nothing global is touched before: not
// the barrier word, not the scratch T the previous launch may still read), then let the next launch in
// the stream start its own setup. Without PDL both instructions return at once. On the H200 this hides
// ~1 us of the gap between back-to-back chain launches (docs/chain.md).
__device__ __forceinline__ void cumm_grid_dependency_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// The barrier's fences: a release fence before the arrival atomic, and in the last block to arrive an acquire
// fence after it (PTX's release and acquire patterns; the atomics themselves are relaxed; the other blocks
// acquire by their loads of the word, cumm_grid_spin). __threadfence() is fence.sc.gpu,
// stronger than they need: with fence.acq_rel.gpu wg128x64 at n = 1024 takes 0.45 us less per call
// (docs/chain.md).
__device__ __forceinline__ void cumm_fence_gpu() { asm volatile("fence.acq_rel.gpu;\n" ::: "memory"); }

// Thread 0's wait for the release of the barrier it arrived at with `old` (its arrival atomic's value). Every
// read of the word is an acquire load (ld.acquire.gpu): the one that sees the release synchronizes with every
// block's arrival (the arrivals are atomics on the word, so each one's release heads a sequence that the
// release's value ends), so no fence follows. (A relaxed poll, a nanosleep and then fence.acq_rel.gpu cost
// kw64x32 ~0.2 us more per call at n = 512, wg64x32 ~0.3 at 768; the nanosleep alone made no difference:
// docs/chain.md.)
__device__ __forceinline__ unsigned long long cumm_grid_load(const unsigned* bar) {
    unsigned long long v;
    asm volatile("ld.acquire.gpu.global.u64 %0, [%1];\n" : "=l"(v) : "l"(bar) : "memory");
    return v;
}

__device__ __forceinline__ void cumm_grid_spin(unsigned* bar, const unsigned long long old) {
    // A grid that cannot be resident at once (e.g. an MPS client limited to part of the SMs, which the
    // occupancy API does not see) would wait forever: after ~4 s, trap instead, so the call fails with a
    // launch error rather than hanging.
    const unsigned g = static_cast<unsigned>(old >> 32), n = gridDim.x;
    const long long t0 = clock64();
    for (unsigned long long v = cumm_grid_load(bar);
         static_cast<unsigned>(v >> 32) == g && static_cast<unsigned>(v) != n; v = cumm_grid_load(bar)) {
        if (clock64() - t0 > 8000000000LL) __trap();
    }
}

// Thread 0's arrival: a release fence, then the arrival atomic; its value (old) goes to the wait.
__device__ __forceinline__ unsigned long long cumm_grid_count(unsigned* bar) {
    cumm_fence_gpu();  // this block's T is visible device-wide before it counts as arrived
    return atomicAdd(reinterpret_cast<unsigned long long*>(bar), 1ull);
}

// Whether the arrival that returned `old` was the last; that one releases the barrier (cumm_grid_release) and,
// having read the other arrivals' count with a relaxed atomic, acquires with a fence.
__device__ __forceinline__ bool cumm_grid_last(const unsigned long long old) {
    return static_cast<unsigned>(old) == gridDim.x - 1;
}

__device__ __forceinline__ void cumm_grid_release(unsigned* bar) {
    atomicAdd(reinterpret_cast<unsigned long long*>(bar), (1ull << 32) - gridDim.x);
}

// bar points to one 8-byte aligned 64-bit word, zeroed once: arrivals in its low half, a generation in its
// high half. Each block adds 1 and learns the generation from the same atomic; the last to arrive moves
// the count back to 0 and the generation on by one with a single atomic add of 2^32 - gridDim.x, so the
// word serves every later launch on the stream and the release costs one atomic, not a reset, a fence and
// a second atomic. A waiter leaves on either sign: the new generation, or the count at gridDim.x, which the
// last arrival's own atomic leaves in memory until that reset lands (one round trip earlier; the arrivals
// are atomics on one word, so seeing the last one's value acquires every block's release). The barrier
// needs every block resident at once: the caller sizes the grid by the occupancy API (and a waiter that sees
// no release for ~4 s traps rather than hang).
__device__ __forceinline__ void cumm_grid_barrier(unsigned* bar) {
    __syncthreads();  // this block's stores to T are issued
    if (threadIdx.x == 0) {
        const unsigned long long old = cumm_grid_count(bar);
        if (cumm_grid_last(old)) {
            cumm_grid_release(bar);
            cumm_fence_gpu();
        } else {
            cumm_grid_spin(bar, old);
        }
    }
    __syncthreads();
}

// The barrier in two halves, so that a block can work between its arrival and its wait on what does not
// depend on the other blocks (fused3_wg's PC = 1): cumm_grid_arrive's value (thread 0's arrival atomic) goes
// to cumm_grid_wait; the last block to arrive has released the barrier before it returns. (cumm_grid_barrier
// is not written as the two: the kernels that use it then compile differently, and fused3_wg slower.)
__device__ __forceinline__ unsigned long long cumm_grid_arrive(unsigned* bar) {
    __syncthreads();  // this block's stores to T are issued
    unsigned long long old = 0;
    if (threadIdx.x == 0) {
        old = cumm_grid_count(bar);
        if (cumm_grid_last(old)) cumm_grid_release(bar);
    }
    return old;
}

__device__ __forceinline__ void cumm_grid_wait(unsigned* bar, const unsigned long long old) {
    if (threadIdx.x == 0) {
        if (cumm_grid_last(old)) {
            cumm_fence_gpu();
        } else {
            cumm_grid_spin(bar, old);
        }
    }
    __syncthreads();
}
