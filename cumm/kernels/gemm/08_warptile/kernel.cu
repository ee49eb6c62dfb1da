// warptile: a level of tiling between the block and the thread. The block tile (BM x BN) is split
// among warps (WM x WN each); a warp walks its tile in WMITER x WNITER sub-tiles, inside each of which
// its 32 lanes own TM x TN outputs. For one k, a warp's lanes read TM-wide and TN-wide float4 slices
// that are contiguous across lanes, so the LDS.128 reads are conflict-free and mostly broadcast, and
// each lane's registers hold (WMITER*TM) x (WNITER*TN) results laid out as the warp's sub-tiles.
// Warps map onto the scheduler's partitions, so this also gives each partition an independent tile.
// A is staged transposed and swizzled (see bank_conflict_free.cu). Shared memory is dynamic so large
// tiles can opt in past 48 KB. Warps whose tile lies wholly past M or N skip the arithmetic.
// The FMAs of one k run serpentine: odd rows of the register tile right to left, so the FMA that turns a
// row reuses the previous one's regN operand as well. The compiler then allocates fewer registers (121
// against 127) and schedules the stream better: +3 % on the H200 at 4096^3 (41.2 -> 42.6 TFLOP/s, docs/ladder.md).
#define AS_COL(k, m) ((m) ^ ((((k) >> 2) % (BK / 4)) * (128 / BK)))

extern "C" __global__ void __launch_bounds__(NUM_THREADS, MINB) CUMM_KERNEL(CUMM_GEMM_ARGS) {
    CUMM_SPLIT_K(BK);  // gridDim.z: this block's slice of K, or (batched) its product of the batch (common.cuh)
    constexpr int NT = NUM_THREADS;
    constexpr int WMITER = (WM * WN) / (32 * TM * TN * WNITER);
    constexpr int WSUBM = WM / WMITER, WSUBN = WN / WNITER;
    constexpr int TCOLS = WSUBN / TN;  // lanes across a warp sub-tile
    extern __shared__ float4 smem4[];
    float* As = reinterpret_cast<float*>(smem4);  // [BK][BM], swizzled
    float* Bs = As + BK * BM;                     // [BK][BN]

    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int bm0 = blockIdx.y * BM, bn0 = blockIdx.x * BN;
    const int wrow = warp / (BN / WN), wcol = warp % (BN / WN);
    const int tm0 = wrow * WM + lane / TCOLS * TM;  // first row of this lane's tile, in the block
    const int tn0 = wcol * WN + lane % TCOLS * TN;
    const bool active = bm0 + wrow * WM < M && bn0 + wcol * WN < N;

    float acc[WMITER * TM][WNITER * TN];
#pragma unroll
    for (int i = 0; i < WMITER * TM; ++i)
#pragma unroll
        for (int j = 0; j < WNITER * TN; ++j) acc[i][j] = 0.0f;

    cumm_tile_fetch<BM, BK, NT, VEC_A> fa;
    cumm_tile_fetch<BK, BN, NT, VEC_B> fb;
    for (int k0 = 0; k0 < K; k0 += BK) {
        fa.fetch(A, lda, bm0, M, k0, K, tid);
        fb.fetch(B, ldb, k0, K, bn0, N, tid);
#pragma unroll
        for (int s = 0; s < fa.SLOTS; ++s) {
            const int r = fa.row(s, tid), c = fa.col(s, tid);
            As[(c + 0) * BM + AS_COL(c + 0, r)] = fa.v[s].x;
            As[(c + 1) * BM + AS_COL(c + 1, r)] = fa.v[s].y;
            As[(c + 2) * BM + AS_COL(c + 2, r)] = fa.v[s].z;
            As[(c + 3) * BM + AS_COL(c + 3, r)] = fa.v[s].w;
        }
#pragma unroll
        for (int s = 0; s < fb.SLOTS; ++s)
            *reinterpret_cast<float4*>(&Bs[fb.row(s, tid) * BN + fb.col(s, tid)]) = fb.v[s];
        __syncthreads();
        if (active) {
#pragma unroll
            for (int k = 0; k < BK; ++k) {
                float regM[WMITER * TM], regN[WNITER * TN];
#pragma unroll
                for (int q = 0; q < WMITER * TM / 4; ++q)
                    *reinterpret_cast<float4*>(&regM[4 * q]) = *reinterpret_cast<const float4*>(
                        &As[k * BM + AS_COL(k, tm0 + q / (TM / 4) * WSUBM + q % (TM / 4) * 4)]);
#pragma unroll
                for (int q = 0; q < WNITER * TN / 4; ++q)
                    *reinterpret_cast<float4*>(&regN[4 * q]) = *reinterpret_cast<const float4*>(
                        &Bs[k * BN + tn0 + q / (TN / 4) * WSUBN + q % (TN / 4) * 4]);
#pragma unroll
                for (int i = 0; i < WMITER * TM; ++i)
#pragma unroll
                    for (int jj = 0; jj < WNITER * TN; ++jj) {
                        const int j = (i & 1) ? WNITER * TN - 1 - jj : jj;  // serpentine (see the header)
                        acc[i][j] += regM[i] * regN[j];
                    }
            }
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < WMITER * TM; ++i) {
        const int m = bm0 + tm0 + i / TM * WSUBM + i % TM;
        if (m >= M) continue;
#pragma unroll
        for (int q = 0; q < WNITER * TN / 4; ++q)
            cumm_store4<VEC_C>(C + (i64)m * ldc, bn0 + tn0 + q / (TN / 4) * WSUBN + q % (TN / 4) * 4, N,
                               make_float4(acc[i][4 * q], acc[i][4 * q + 1], acc[i][4 * q + 2], acc[i][4 * q + 3]),
                               alpha, beta);
    }
}
