// splitk_reduce: the second step of split-K. W holds S partial products (S x M x N, contiguous), one per slice
// of K (see CUMM_SPLIT_K in common.cuh); this computes C = alpha * (W[0] + ... + W[S-1]) + beta * C for a
// row-major C with row stride ldc. The slices are summed in order by one thread per element: deterministic,
// no atomics. C is read only when beta != 0 (cumm_epilogue). Compiled after common.cuh, no #defines.
extern "C" __global__ void __launch_bounds__(256) cumm_splitk_reduce(const int M, const int N, const int S,
                                                                     const float* __restrict__ W, const float alpha,
                                                                     const float beta, float* __restrict__ C,
                                                                     const int ldc) {
    const i64 MN = (i64)M * N;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < MN; i += (i64)gridDim.x * blockDim.x) {
        float acc = 0.0f;
        for (int z = 0; z < S; ++z) acc += W[z * MN + i];  // consecutive threads: consecutive addresses
        float* c = C + (i / N) * ldc + i % N;
        *c = cumm_epilogue(acc, c, alpha, beta);
    }
}
