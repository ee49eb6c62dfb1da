// double_buffer: warptiling with two shared-memory stages. While the warps multiply the slab of K in
// one stage, the next slab is already being copied into the other by cp.async (sm_80+), which moves
// global memory straight to shared memory: no staging registers, so the kernel keeps warptile's
// register budget (two blocks per SM) and global latency hides behind a whole slab of FMAs.
// Per slab: wait for this slab's copies, one barrier (which also proves every warp is done reading
// the other stage), issue the next slab's copies into the other stage, multiply. One barrier per slab.
// A is copied element by element (4-byte cp.async) into its transposed, swizzled place: a warp's 32
// copies cover RPL = 32/(BK/4) rows x BK/4 k-groups, which the swizzle sends to 32 distinct banks.
// B is copied as 16-byte chunks when aligned (partial chunks zero-fill), else element by element.
// The rest is warptile.cu: conflict-free LDS.128 fragments, edge warps skip the arithmetic.
// Measured on the H200 (bench/NOTES.md): the default takes 128 x 256 tiles and 255 registers (one
// block of 8 warps per SM), where overlapping copies with FMAs matters most; at warptile's 128 x 128
// tiles with two blocks per SM, the second block already hides the latency and the 4-byte copies
// of A cost more than they save.
#define AS_COL(k, m) ((m) ^ ((((k) >> 2) % (BK / 4)) * (128 / BK)))

extern "C" __global__ void __launch_bounds__(NUM_THREADS, MINB) CUMM_KERNEL(CUMM_GEMM_ARGS) {
    CUMM_SPLIT_K(BK);  // gridDim.z > 1: this block computes one slice of K (common.cuh)
    constexpr int NT = NUM_THREADS;
    constexpr int WMITER = (WM * WN) / (32 * TM * TN * WNITER);
    constexpr int WSUBM = WM / WMITER, WSUBN = WN / WNITER;
    constexpr int TCOLS = WSUBN / TN;
    constexpr int RPL = 32 / (BK / 4);        // rows of A covered by one warp-wide copy
    constexpr int A_SLOTS = BM * BK / NT;     // 4-byte copies of A per thread per slab
    constexpr int B_SLOTS = BK * BN / 4 / NT; // 16-byte chunks of B per thread per slab
    constexpr int STAGE = BK * (BM + BN);     // floats per stage: As [BK][BM] then Bs [BK][BN]
    extern __shared__ float4 smem4[];
    float* const smem = reinterpret_cast<float*>(smem4);

    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int bm0 = blockIdx.y * BM, bn0 = blockIdx.x * BN;
    const int wrow = warp / (BN / WN), wcol = warp % (BN / WN);
    const int tm0 = wrow * WM + lane / TCOLS * TM;
    const int tn0 = wcol * WN + lane % TCOLS * TN;
    const bool active = bm0 + wrow * WM < M && bn0 + wcol * WN < N;

    // Each thread's copy sources are fixed over the K loop but for the slab offset: set them up once.
    const int a_k = lane / RPL * 4;  // + kk: this lane's k within the slab
    const float* a_src[A_SLOTS / 4];
    bool a_ok[A_SLOTS / 4];
#pragma unroll
    for (int j = 0; j < A_SLOTS / 4; ++j) {
        const int m = bm0 + (warp + NT / 32 * j) * RPL + lane % RPL;
        a_ok[j] = m < M;
        a_src[j] = A + (i64)(a_ok[j] ? m : 0) * lda + a_k;
    }
    const int b_c = tid % (BN / 4) * 4, b_col = bn0 + b_c;     // the same column for every slot
    const int b_bytes = 4 * max(0, min(4, N - b_col));          // of a full-height 16-byte chunk
    const float* b_src = B + (b_bytes ? b_col : 0);

    // Issue the copies of slab `kt` into stage `st` (not waited for here).
    auto issue = [&](int kt, int st) {
        float* As = smem + st * STAGE;
        float* Bs = As + BK * BM;
        const int k0 = kt * BK;
#pragma unroll
        for (int s = 0; s < A_SLOTS; ++s) {
            const int kk = s % 4, j = s / 4;  // four passes cover k = a_k + kk
            const int m = (warp + NT / 32 * j) * RPL + lane % RPL, k = a_k + kk;
            const bool ok = a_ok[j] && k0 + k < K;
            cumm_cp_async4(&As[k * BM + AS_COL(k, m)], ok ? a_src[j] + k0 + kk : A, ok);
        }
#pragma unroll
        for (int s = 0; s < B_SLOTS; ++s) {
            const int r = (tid + s * NT) / (BN / 4);
            const bool row_ok = k0 + r < K;
            const float* src = b_src + (i64)(row_ok ? k0 + r : 0) * ldb;
            float* dst = &Bs[r * BN + b_c];
            if (VEC_B) {
                cumm_cp_async16(dst, row_ok && b_bytes ? src : B, row_ok ? b_bytes : 0);
            } else {
#pragma unroll
                for (int i = 0; i < 4; ++i) {
                    const bool ok = row_ok && b_col + i < N;
                    cumm_cp_async4(dst + i, ok ? src + i : B, ok);
                }
            }
        }
        cumm_cp_async_commit();
    };

    float acc[WMITER * TM][WNITER * TN];
#pragma unroll
    for (int i = 0; i < WMITER * TM; ++i)
#pragma unroll
        for (int j = 0; j < WNITER * TN; ++j) acc[i][j] = 0.0f;

    const int KT = (K + BK - 1) / BK;
    issue(0, 0);
    for (int kt = 0; kt < KT; ++kt) {
        cumm_cp_async_wait_all();  // this thread's copies of slab kt have landed
        __syncthreads();           // everyone's have; and everyone finished reading the other stage
        if (kt + 1 < KT) issue(kt + 1, (kt + 1) & 1);
        if (active) {
            const float* As = smem + (kt & 1) * STAGE;
            const float* Bs = As + BK * BM;
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
                    for (int j = 0; j < WNITER * TN; ++j) acc[i][j] += regM[i] * regN[j];
            }
        }
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
