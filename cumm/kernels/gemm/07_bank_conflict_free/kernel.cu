// bank_conflict_free: the vectorized kernel with a shared-memory layout for A whose transposed stores
// do not collide. In `vectorized`, a warp's 32 threads fetch 32/(BK/4) consecutive rows of A, each
// thread a float4 along K, and store its four values to As[k][m]: rows BM words apart, so every k
// group lands in the same banks, a (BK/4)-way conflict on each of the four stores.
//   SWIZZLE=1: the column of (k, m) is m XOR ((k/4) * 128/BK). Each k group of the warp moves to
//   its own 32/(BK/4)-wide band of banks, so the stores are conflict-free; the XOR keeps float4 groups
//   intact and, uniform across a warp for one k, leaves the LDS.128 reads conflict-free too.
//   SWIZZLE=0: rows padded by PAD floats. PAD = 4 with BK = 8 moves the second k group by 16 banks
//   (conflict-free); at BK = 16 it still leaves 2-way conflicts, which is why swizzling is the default.
// Verified on the H200 with ncu's l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st counter
// (docs/ladder.md has the counts of vectorized against this kernel).
#if SWIZZLE
#define AS_COL(k, m) ((m) ^ ((((k) >> 2) % (BK / 4)) * (128 / BK)))
#define AS_LD BM
#else
#define AS_COL(k, m) (m)
#define AS_LD (BM + PAD)
#endif

extern "C" __global__ void __launch_bounds__((BM / TM) * (BN / TN)) CUMM_KERNEL(CUMM_GEMM_ARGS) {
    CUMM_BATCH();  // a batched variant: this block's product of the batch (common.cuh)
    constexpr int TCOLS = BN / TN;
    constexpr int NT = (BM / TM) * TCOLS;
    constexpr int RS = BM * 4 / TM, CS = BN * 4 / TN;
    __shared__ __align__(16) float As[BK][AS_LD];
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
            As[c + 0][AS_COL(c + 0, r)] = fa.v[s].x;
            As[c + 1][AS_COL(c + 1, r)] = fa.v[s].y;
            As[c + 2][AS_COL(c + 2, r)] = fa.v[s].z;
            As[c + 3][AS_COL(c + 3, r)] = fa.v[s].w;
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
                        *reinterpret_cast<const float4*>(&As[k][AS_COL(k, g * RS + trow * 4)]);
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
