// mma_swizzled_pipeline: 11_mma with its two stalls removed.
// 1. Bank conflicts. ldmatrix reads 8 rows of 16 bytes per phase; in 11's unpadded tiles those rows are 64
//    (A) or 256 (B) bytes apart and land in the same banks (4- and 8-way conflicts). Here the 16-byte chunk c
//    of row r is stored at chunk c ^ (r % 8) (rows of >= 8 chunks; 4-chunk rows, two to a 128-byte line, use
//    c ^ ((r / 2) % 4)): the 8 rows of every ldmatrix phase, and the 8 chunks of every copy phase, hit 8
//    different 16-byte bank groups. Same bytes, no padding, no conflicts.
// 2. Latency. Slabs are copied by cp.async straight into a STAGES-deep ring of shared buffers (no registers,
//    no store instructions), STAGES - 1 slabs ahead of the mma, with one barrier per slab instead of two.
// Unaligned operands (VEC_A / VEC_B = 0) are fetched element-wise into registers and stored (synchronously)
// into the same ring, so the pipeline is the same. Any M, N, K >= 1 (zero-filled tails). sm_80+.
// Parameters: BM, BN, BK (32 or a multiple of 64), WM (% 16), WN (% 16), STAGES (>= 2); BN % 64 == 0;
// NUM_THREADS = 32 (BM / WM) (BN / WN); dynamic shared memory STAGES (BM BK + BK BN) 2 bytes.

// Chunk index (16 bytes) of logical chunk c of row r in a tile of CPR chunks a row.
template <int CPR>
__device__ __forceinline__ int cumm_swz(int r, int c) {
    static_assert(CPR == 4 || CPR % 8 == 0, "rows of 4 or a multiple of 8 chunks");
    return CPR == 4 ? r * 4 + (c ^ ((r >> 1) & 3)) : r * CPR + (c ^ (r & 7));
}

extern "C" __global__ void __launch_bounds__(NUM_THREADS) CUMM_KERNEL(CUMM_GEMM16_ARGS) {
    CUMM_BATCH();  // a batched variant: this block's product of the batch (grid z; batch16.cuh, common.cuh)
    constexpr int WARPS_N = BN / WN, MI = WM / 16, NI = WN / 8;
    constexpr int CPR_A = BK / 8, CPR_B = BN / 8;
    constexpr int A_CH = BM * BK / 8, B_CH = BK * BN / 8;  // 16-byte chunks of a slab
    constexpr int A_PT = (A_CH + NUM_THREADS - 1) / NUM_THREADS, B_PT = (B_CH + NUM_THREADS - 1) / NUM_THREADS;
    constexpr int STAGE_BYTES = 2 * (BM * BK + BK * BN);
    static_assert(BK % 16 == 0 && WM % 16 == 0 && WN % 16 == 0 && STAGES >= 2, "tile sizes");
    extern __shared__ uint4 smem16[];
    const unsigned sbase = cumm_smem_u32(smem16);

    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const int g = lane / 4, t = lane % 4;
    const int bm0 = blockIdx.y * BM, bn0 = blockIdx.x * BN;
    const int wm0 = warp / WARPS_N * WM, wn0 = warp % WARPS_N * WN;

    auto issue = [&](int kt, int st) {  // slab kt into stage st, zero-filled past M, N, K
        const unsigned as = sbase + st * STAGE_BYTES, bs = as + 2 * BM * BK;
        uint4* const a16 = smem16 + st * (STAGE_BYTES / 16);
        uint4* const b16 = a16 + BM * BK / 8;
        const int k0 = kt * BK;
#pragma unroll
        for (int s = 0; s < A_PT; ++s) {
            const int i = tid + s * NUM_THREADS, r = i / CPR_A, c = i % CPR_A;
            if (A_CH % NUM_THREADS != 0 && i >= A_CH) continue;
            const bool ok = bm0 + r < M;
            const cumm_h16* row = A + (i64)(ok ? bm0 + r : 0) * lda + k0;
            if (VEC_A) {
                const int bytes = ok ? 2 * max(0, min(8, K - k0 - 8 * c)) : 0;
                cumm_cp_async16_s(as + 16 * cumm_swz<CPR_A>(r, c), bytes ? row + 8 * c : A, bytes);
            } else {
                a16[cumm_swz<CPR_A>(r, c)] = cumm_load8<0>(row, 8 * c, K - k0, ok);
            }
        }
#pragma unroll
        for (int s = 0; s < B_PT; ++s) {
            const int i = tid + s * NUM_THREADS, r = i / CPR_B, c = i % CPR_B;
            if (B_CH % NUM_THREADS != 0 && i >= B_CH) continue;
            const bool ok = k0 + r < K;
            const cumm_h16* row = B + (i64)(ok ? k0 + r : 0) * ldb + bn0;
            if (VEC_B) {
                const int bytes = ok ? 2 * max(0, min(8, N - bn0 - 8 * c)) : 0;
                cumm_cp_async16_s(bs + 16 * cumm_swz<CPR_B>(r, c), bytes ? row + 8 * c : B, bytes);
            } else {
                b16[cumm_swz<CPR_B>(r, c)] = cumm_load8<0>(row, 8 * c, N - bn0, ok);
            }
        }
    };

    float acc[MI][NI][4];
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int j = 0; j < NI; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

    const int KT = (K + BK - 1) / BK;
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < KT) issue(s, s);
        cumm_cp_async_commit_s();  // empty groups keep the count uniform
    }
    for (int kt = 0; kt < KT; ++kt) {
        cumm_cp_async_wait_s<STAGES - 2>();  // slab kt has landed (ours)
        __syncthreads();  // everyone's part has; everyone is done with the stage refilled next
        if (kt + STAGES - 1 < KT) issue(kt + STAGES - 1, (kt + STAGES - 1) % STAGES);
        cumm_cp_async_commit_s();
        const unsigned as = sbase + kt % STAGES * STAGE_BYTES, bs = as + 2 * BM * BK;
#pragma unroll
        for (int kk = 0; kk < BK / 16; ++kk) {
            unsigned af[MI][4], bf[NI / 2][4];
#pragma unroll
            for (int i = 0; i < MI; ++i)
                cumm_ldsm_x4(af[i], as + 16 * cumm_swz<CPR_A>(wm0 + i * 16 + lane % 16, 2 * kk + lane / 16));
#pragma unroll
            for (int j = 0; j < NI / 2; ++j)
                cumm_ldsm_x4_t(bf[j], bs + 16 * cumm_swz<CPR_B>(16 * kk + lane % 16, (wn0 + j * 16) / 8 + lane / 16));
#pragma unroll
            for (int i = 0; i < MI; ++i)
#pragma unroll
                for (int j = 0; j < NI; ++j) cumm_mma16816(acc[i][j], af[i], bf[j / 2][j % 2 * 2], bf[j / 2][j % 2 * 2 + 1]);
        }
    }
    cumm_cp_async_wait_s<0>();

#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int row = bm0 + wm0 + i * 16 + g + 8 * h;
            if (row >= M) continue;
            cumm_out_t* crow = C + (i64)row * ldc;
#pragma unroll
            for (int j = 0; j < NI; ++j)
                cumm_store_pair<VEC_C>(crow, bn0 + wn0 + j * 8 + 2 * t, N, acc[i][j][2 * h], acc[i][j][2 * h + 1],
                                       alpha, beta);
        }
}
