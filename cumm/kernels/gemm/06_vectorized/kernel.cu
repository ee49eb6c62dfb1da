// vectorized: blocktile_2d with 16-byte accesses. Global loads of A and B and stores of C move float4s
// (when the operand's alignment allows; a predicated scalar path otherwise), and A is stored
// transposed in shared memory, As[k][m], so that for one k a thread's TM values of A are contiguous
// and, like B's, come in through 16-byte shared loads (LDS.128): a quarter of the load instructions.
// A thread's tile is (TM/4) x (TN/4) blocks of 4 x 4, BM*4/TM rows and BN*4/TN columns apart.
// The transposed stores into As are 4-byte and collide in shared-memory banks; the next rung fixes that.
extern "C" __global__ void __launch_bounds__((BM / TM) * (BN / TN)) CUMM_KERNEL(CUMM_GEMM_ARGS) {
    CUMM_BATCH();  // a batched variant: this block's product of the batch (common.cuh)
    constexpr int TCOLS = BN / TN;
    constexpr int NT = (BM / TM) * TCOLS;
    constexpr int RS = BM * 4 / TM, CS = BN * 4 / TN;  // distance between a thread's 4 x 4 blocks
    __shared__ __align__(16) float As[BK][BM];
    __shared__ __align__(16) float Bs[BK][BN];
    const int tid = threadIdx.x;
    const int bm0 = blockIdx.y * BM, bn0 = blockIdx.x * BN;
    const int tcol = tid % TCOLS, trow = tid / TCOLS;
    const bool active = bm0 + (tid & ~31) / TCOLS * 4 < M;

    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

    cumm_tile_fetch<BM, BK, NT, VEC_A> fa;
    cumm_tile_fetch<BK, BN, NT, VEC_B> fb;
    for (int k0 = 0; k0 < K; k0 += BK) {
        fa.fetch(A, lda, bm0, M, k0, K, tid);
        fb.fetch(B, ldb, k0, K, bn0, N, tid);
#pragma unroll
        for (int s = 0; s < fa.SLOTS; ++s) {
            const int r = fa.row(s, tid), c = fa.col(s, tid);
            As[c + 0][r] = fa.v[s].x;
            As[c + 1][r] = fa.v[s].y;
            As[c + 2][r] = fa.v[s].z;
            As[c + 3][r] = fa.v[s].w;
        }
#pragma unroll
        for (int s = 0; s < fb.SLOTS; ++s)
            *reinterpret_cast<float4*>(&Bs[fb.row(s, tid)][fb.col(s, tid)]) = fb.v[s];
        __syncthreads();
        if (active) {
#pragma unroll
            for (int k = 0; k < BK; ++k) {
                float regM[TM], regN[TN];
#pragma unroll
                for (int g = 0; g < TM / 4; ++g)
                    *reinterpret_cast<float4*>(&regM[4 * g]) =
                        *reinterpret_cast<const float4*>(&As[k][g * RS + trow * 4]);
#pragma unroll
                for (int h = 0; h < TN / 4; ++h)
                    *reinterpret_cast<float4*>(&regN[4 * h]) =
                        *reinterpret_cast<const float4*>(&Bs[k][h * CS + tcol * 4]);
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
        const int m = bm0 + (i / 4) * RS + trow * 4 + i % 4;
        if (m >= M) continue;
#pragma unroll
        for (int h = 0; h < TN / 4; ++h)
            cumm_store4<VEC_C>(C + (i64)m * ldc, bn0 + h * CS + tcol * 4, N,
                               make_float4(acc[i][4 * h], acc[i][4 * h + 1], acc[i][4 * h + 2], acc[i][4 * h + 3]),
                               alpha, beta);
    }
}
