// coalesced: the naive kernel with consecutive threads along a row of C instead of down a column.
// A warp now reads 32 consecutive floats of a row of B and writes 32 consecutive floats of C (one
// 128-byte transaction each), while all its threads read the same element of A (a broadcast).
extern "C" __global__ void __launch_bounds__(BS * BS) CUMM_KERNEL(CUMM_GEMM_ARGS) {
    CUMM_BATCH();  // a batched variant: this block's product of the batch (common.cuh)
    const int n = blockIdx.x * BS + threadIdx.x % BS;
    const int m = blockIdx.y * BS + threadIdx.x / BS;
    if (m >= M || n >= N) return;
    const float* a = A + (i64)m * lda;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += a[k] * B[(i64)k * ldb + n];
    float* c = C + (i64)m * ldc + n;
    *c = cumm_epilogue(acc, c, alpha, beta);
}
