// naive: one thread per element of C, the dot product of a row of A and a column of B read straight
// from global memory. threadIdx.x runs down a column of C, so the 32 threads of a warp read 32 rows
// of A (lda apart) and write 32 rows of C: each access is its own transaction. The baseline.
extern "C" __global__ void __launch_bounds__(BS * BS) CUMM_KERNEL(CUMM_GEMM_ARGS) {
    CUMM_BATCH();  // a batched variant: this block's product of the batch (common.cuh)
    const int m = blockIdx.x * BS + threadIdx.x;
    const int n = blockIdx.y * BS + threadIdx.y;
    if (m >= M || n >= N) return;
    const float* a = A + (i64)m * lda;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += a[k] * B[(i64)k * ldb + n];
    float* c = C + (i64)m * ldc + n;
    *c = cumm_epilogue(acc, c, alpha, beta);
}
