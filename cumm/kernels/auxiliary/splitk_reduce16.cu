// splitk_reduce16: splitk_reduce for a 16-bit C (tc16.cuh: CUMM_BF16 = 1 bfloat16, 0 float16). A half product's
// split-K runs its S slices of K as a batch whose float32 partials fill W (S x M x N, contiguous); this computes
// C = alpha * (W[0] + ... + W[S-1]) + beta * C in FP32 and rounds once to C's type. The slices are summed in
// order by one thread per element: deterministic, no atomics. C is read only when beta != 0.
extern "C" __global__ void __launch_bounds__(256) cumm_splitk_reduce16(const int M, const int N, const int S,
                                                                       const float* __restrict__ W, const float alpha,
                                                                       const float beta, cumm_h16* __restrict__ C,
                                                                       const int ldc) {
    const i64 MN = (i64)M * N;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < MN; i += (i64)gridDim.x * blockDim.x) {
        float acc = 0.0f;
        for (int z = 0; z < S; ++z) acc += W[z * MN + i];  // consecutive threads: consecutive addresses
        cumm_h16* const c = C + (i / N) * ldc + i % N;
        float v = alpha * acc;
        if (beta != 0.0f) v += beta * cumm_h2f(*c);
        *c = cumm_f2h(v);
    }
}
