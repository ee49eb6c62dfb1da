// smem: shared-memory cache blocking. The block stages a BS x BS tile of A and of B in shared memory
// (one coalesced element per thread, zero beyond the matrix edges) and every thread reuses each staged
// value BS times, so global traffic falls by a factor of BS. The K loop walks the tiles.
extern "C" __global__ void __launch_bounds__(BS * BS) CUMM_KERNEL(CUMM_GEMM_ARGS) {
    CUMM_BATCH();  // a batched variant: this block's product of the batch (common.cuh)
    __shared__ float As[BS][BS];
    __shared__ float Bs[BS][BS];
    const int tx = threadIdx.x % BS, ty = threadIdx.x / BS;
    const int m = blockIdx.y * BS + ty;
    const int n = blockIdx.x * BS + tx;
    const float* a = A + (i64)min(m, M - 1) * lda;  // clamped: rows past M are never read
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += BS) {
        As[ty][tx] = (m < M && k0 + tx < K) ? a[k0 + tx] : 0.0f;
        Bs[ty][tx] = (k0 + ty < K && n < N) ? B[(i64)(k0 + ty) * ldb + n] : 0.0f;
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BS; ++k) acc += As[ty][k] * Bs[k][tx];
        __syncthreads();  // the next iteration overwrites the tiles
    }
    if (m < M && n < N) {
        float* c = C + (i64)m * ldc + n;
        *c = cumm_epilogue(acc, c, alpha, beta);
    }
}
