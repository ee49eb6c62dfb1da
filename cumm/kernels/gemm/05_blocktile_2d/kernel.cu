// blocktile_2d: each thread computes a TM x TN tile of C as a sum of outer products. Per step of the
// dot product it loads TM values of A and TN values of B from shared memory into registers and does
// TM * TN FMAs with them: (TM + TN) / (TM * TN) loads per FMA, a quarter of blocktile_1d's at 8 x 8.
// A thread's TN columns are BN / TN apart (not adjacent), so a warp reads consecutive words of Bs
// (no bank conflicts) and writes consecutive floats of C. A's rows are padded by one word so the two
// rows of thread-rows in a warp fall in different banks. Warps whose rows all lie past M (the edge
// tiles of shapes off the tile grid) skip the arithmetic, so a ragged edge costs little.
extern "C" __global__ void __launch_bounds__((BM / TM) * (BN / TN)) CUMM_KERNEL(CUMM_GEMM_ARGS) {
    CUMM_BATCH();  // a batched variant: this block's product of the batch (common.cuh)
    constexpr int TCOLS = BN / TN;  // threads across the tile
    constexpr int NT = (BM / TM) * TCOLS;
    __shared__ float As[BM][BK + 1];
    __shared__ float Bs[BK][BN];
    const int tid = threadIdx.x;
    const int bm0 = blockIdx.y * BM, bn0 = blockIdx.x * BN;
    const int tcol = tid % TCOLS, trow = tid / TCOLS;
    const bool active = bm0 + (tid & ~31) / TCOLS * TM < M;  // lane 0 holds the warp's first row

    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;
    float regM[TM], regN[TN];

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
        if (active) {
#pragma unroll
            for (int k = 0; k < BK; ++k) {
#pragma unroll
                for (int i = 0; i < TM; ++i) regM[i] = As[trow * TM + i][k];
#pragma unroll
                for (int j = 0; j < TN; ++j) regN[j] = Bs[k][tcol + j * TCOLS];
#pragma unroll
                for (int i = 0; i < TM; ++i)
#pragma unroll
                    for (int j = 0; j < TN; ++j) acc[i][j] += regM[i] * regN[j];
            }
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int m = bm0 + trow * TM + i;
        if (m >= M) continue;
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            const int n = bn0 + tcol + j * TCOLS;
            if (n < N) {
                float* c = C + (i64)m * ldc + n;
                *c = cumm_epilogue(acc[i][j], c, alpha, beta);
            }
        }
    }
}
