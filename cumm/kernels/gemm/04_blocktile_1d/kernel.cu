// blocktile_1d: each thread computes TM results down one column of C instead of one. A block stages
// a BM x BK tile of A and a BK x BN tile of B; per step of the dot product a thread reads one value of
// B from shared memory into a register and reuses it TM times against TM values of A, so shared-memory
// loads per FMA fall from 2 to about (1 + TM) / TM and the arithmetic finally outweighs the loads.
extern "C" __global__ void __launch_bounds__(BM * BN / TM) CUMM_KERNEL(CUMM_GEMM_ARGS) {
    CUMM_BATCH();  // a batched variant: this block's product of the batch (common.cuh)
    constexpr int NT = BM * BN / TM;
    __shared__ float As[BM][BK];
    __shared__ float Bs[BK][BN];
    const int tid = threadIdx.x;
    const int bm0 = blockIdx.y * BM, bn0 = blockIdx.x * BN;
    const int tcol = tid % BN, trow = tid / BN;  // this thread: rows trow*TM .. +TM-1, column tcol
    float acc[TM];
#pragma unroll
    for (int i = 0; i < TM; ++i) acc[i] = 0.0f;

    for (int k0 = 0; k0 < K; k0 += BK) {
#pragma unroll
        for (int s = 0; s < (BM * BK + NT - 1) / NT; ++s) {  // compile-time trip count
            const int i = tid + s * NT;
            if ((BM * BK) % NT != 0 && i >= BM * BK) break;
            const int r = i / BK, c = i % BK;
            As[r][c] = (bm0 + r < M && k0 + c < K) ? A[(i64)(bm0 + r) * lda + k0 + c] : 0.0f;
        }
#pragma unroll
        for (int s = 0; s < (BK * BN + NT - 1) / NT; ++s) {
            const int i = tid + s * NT;
            if ((BK * BN) % NT != 0 && i >= BK * BN) break;
            const int r = i / BN, c = i % BN;
            Bs[r][c] = (k0 + r < K && bn0 + c < N) ? B[(i64)(k0 + r) * ldb + bn0 + c] : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            const float b = Bs[k][tcol];
#pragma unroll
            for (int i = 0; i < TM; ++i) acc[i] += As[trow * TM + i][k] * b;
        }
        __syncthreads();
    }
    const int n = bn0 + tcol;
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int m = bm0 + trow * TM + i;
        if (m < M && n < N) {
            float* c = C + (i64)m * ldc + n;
            *c = cumm_epilogue(acc[i], c, alpha, beta);
        }
    }
}
