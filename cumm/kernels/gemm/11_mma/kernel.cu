// mma: the first half-precision tensor-core rung (float16 or bfloat16 inputs, CUMM_BF16; FP32 accumulation).
// Below it, every multiply-add of the SIMT rungs is one FFMA per thread; here one warp instruction,
// mma.sync m16n8k16, does 16 x 8 x 16 = 2048 of them on the tensor cores, so arithmetic stops being the limit
// and feeding the tensor cores becomes it. Each slab of A (BM x BK) and B (BK x BN) is fetched into registers
// 16 bytes at a time, stored to shared memory, and read back with ldmatrix, which hands every lane its part
// of four 8x8 fragments in one instruction (.trans turns row-major B into the column-major fragment mma
// wants). The next slab's global loads are issued before the current slab's mma, so their latency overlaps
// the math. Deliberately plain: unpadded shared rows make ldmatrix's 8-row reads collide in the banks (rows
// BK * 2 bytes apart), and one buffer means two barriers a slab; 12_mma_swizzled_pipeline removes both.
// Any M, N, K >= 1: rows, columns and K past the edges are fetched as zeros and never stored. VEC_A / VEC_B /
// VEC_C: pointer 16-byte aligned and leading dimension % 8 == 0 (else element-wise accesses). sm_80+.
// Parameters: BM, BN, BK (% 16), WM (% 16), WN (% 16); NUM_THREADS = 32 (BM / WM) (BN / WN).

extern "C" __global__ void __launch_bounds__(NUM_THREADS) CUMM_KERNEL(CUMM_GEMM16_ARGS) {
    CUMM_BATCH();  // a batched variant: this block's product of the batch (grid z; batch16.cuh, common.cuh)
    constexpr int WARPS_N = BN / WN, MI = WM / 16, NI = WN / 8;
    constexpr int A_CH = BM * BK / 8, B_CH = BK * BN / 8;  // 16-byte chunks of a slab
    constexpr int A_PT = (A_CH + NUM_THREADS - 1) / NUM_THREADS, B_PT = (B_CH + NUM_THREADS - 1) / NUM_THREADS;
    static_assert(BK % 16 == 0 && WM % 16 == 0 && WN % 16 == 0, "tile sizes");
    __shared__ __align__(16) cumm_h16 As[BM * BK];  // row-major, rows BK halves apart
    __shared__ __align__(16) cumm_h16 Bs[BK * BN];  // row-major, rows BN halves apart

    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const int g = lane / 4, t = lane % 4;
    const int bm0 = blockIdx.y * BM, bn0 = blockIdx.x * BN;
    const int wm0 = warp / WARPS_N * WM, wn0 = warp % WARPS_N * WN;

    uint4 ra[A_PT], rb[B_PT];
    auto fetch = [&](int k0) {  // slab at k0 into registers (zeros past M, N, K)
#pragma unroll
        for (int s = 0; s < A_PT; ++s) {
            const int i = tid + s * NUM_THREADS, r = i / (BK / 8), c = i % (BK / 8) * 8;
            const bool ok = (A_CH % NUM_THREADS == 0 || i < A_CH) && bm0 + r < M;
            ra[s] = cumm_load8<VEC_A>(A + (i64)(ok ? bm0 + r : 0) * lda + k0, c, K - k0, ok);
        }
#pragma unroll
        for (int s = 0; s < B_PT; ++s) {
            const int i = tid + s * NUM_THREADS, r = i / (BN / 8), c = i % (BN / 8) * 8;
            const bool ok = (B_CH % NUM_THREADS == 0 || i < B_CH) && k0 + r < K;
            rb[s] = cumm_load8<VEC_B>(B + (i64)(ok ? k0 + r : 0) * ldb + bn0, c, N - bn0, ok);
        }
    };

    float acc[MI][NI][4];
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int j = 0; j < NI; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

    const unsigned as = cumm_smem_u32(As), bs = cumm_smem_u32(Bs);
    fetch(0);
    for (int k0 = 0; k0 < K; k0 += BK) {
#pragma unroll
        for (int s = 0; s < A_PT; ++s) {
            const int i = tid + s * NUM_THREADS;
            if (A_CH % NUM_THREADS == 0 || i < A_CH) *reinterpret_cast<uint4*>(&As[i * 8]) = ra[s];
        }
#pragma unroll
        for (int s = 0; s < B_PT; ++s) {
            const int i = tid + s * NUM_THREADS;
            if (B_CH % NUM_THREADS == 0 || i < B_CH) *reinterpret_cast<uint4*>(&Bs[i * 8]) = rb[s];
        }
        __syncthreads();
        if (k0 + BK < K) fetch(k0 + BK);  // in flight during this slab's mma
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
            unsigned af[MI][4], bf[NI / 2][4];
            // lane l addresses row l % 16, columns (l / 16) * 8 .. + 7 of a 16 x 16 block: four 8x8 matrices
#pragma unroll
            for (int i = 0; i < MI; ++i)
                cumm_ldsm_x4(af[i], as + 2 * ((wm0 + i * 16 + lane % 16) * BK + kk + lane / 16 * 8));
#pragma unroll
            for (int j = 0; j < NI / 2; ++j)
                cumm_ldsm_x4_t(bf[j], bs + 2 * ((kk + lane % 16) * BN + wn0 + j * 16 + lane / 16 * 8));
#pragma unroll
            for (int i = 0; i < MI; ++i)
#pragma unroll
                for (int j = 0; j < NI; ++j) cumm_mma16816(acc[i][j], af[i], bf[j / 2][j % 2 * 2], bf[j / 2][j % 2 * 2 + 1]);
        }
        __syncthreads();
    }

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
