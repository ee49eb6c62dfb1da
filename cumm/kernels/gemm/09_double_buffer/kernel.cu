// double_buffer: warptiling with two shared-memory stages. The loads of slab k+1 go out to global
// memory (into registers) before the warps multiply slab k from one stage; after the FMAs the
// registers are stored into the other stage, and one barrier per slab publishes it. Global latency
// hides behind a whole slab of FMAs instead of stalling every warp before each barrier, and the
// barrier count halves (warptile needs one before and one after each slab's FMAs).
// Why registers and not cp.async: A is stored transposed, which cp.async can only do 4 bytes at a time
// (v2 of this kernel: ~300 M extra copy instructions at 4096^3, docs/ladder.md); a register stage keeps
// the 16-byte loads and costs BK*(BM+BN)/NUM_THREADS registers (12 at the default), which
// suits large register tiles. BK = 8 is cheap here because the loads of the next slab are already in
// flight when its barrier comes; single-buffered rungs need BK = 16 to amortize their two barriers.
// The rest is warptile.cu: conflict-free LDS.128 fragments, swizzled A, serpentine FMA order, edge warps
// skip the arithmetic. Default (H200 sweep, docs/ladder.md): 128 x 256 tiles, BK = 8, 64 x 64 warp tiles of
// 16 x 8 results per thread (238 registers, one block of 8 warps per SM): 45.6 TFLOP/s at 4096^3 against
// warptile's 42.6; at warptile's 128 x 128 tiles, held to 128 registers for two blocks per SM, it gives 37-38.
#define AS_COL(k, m) ((m) ^ ((((k) >> 2) % (BK / 4)) * (128 / BK)))

extern "C" __global__ void __launch_bounds__(NUM_THREADS, MINB) CUMM_KERNEL(CUMM_GEMM_ARGS) {
    CUMM_SPLIT_K(BK);  // gridDim.z: this block's slice of K, or (batched) its product of the batch (common.cuh)
    constexpr int NT = NUM_THREADS;
    constexpr int WMITER = (WM * WN) / (32 * TM * TN * WNITER);
    constexpr int WSUBM = WM / WMITER, WSUBN = WN / WNITER;
    constexpr int TCOLS = WSUBN / TN;
    constexpr int STAGE = BK * (BM + BN);  // floats per stage: As [BK][BM] (swizzled) then Bs [BK][BN]
    extern __shared__ float4 smem4[];
    float* const smem = reinterpret_cast<float*>(smem4);

    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int bm0 = blockIdx.y * BM, bn0 = blockIdx.x * BN;
    const int wrow = warp / (BN / WN), wcol = warp % (BN / WN);
    const int tm0 = wrow * WM + lane / TCOLS * TM;
    const int tn0 = wcol * WN + lane % TCOLS * TN;
    const bool active = bm0 + wrow * WM < M && bn0 + wcol * WN < N;

    cumm_tile_fetch<BM, BK, NT, VEC_A> fa;
    cumm_tile_fetch<BK, BN, NT, VEC_B> fb;
    // Registers -> stage st. Past K the fetch zero-fills, so the last (unneeded) stash is harmless.
    auto stash = [&](int st) {
        float* As = smem + st * STAGE;
        float* Bs = As + BK * BM;
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
    };

    float acc[WMITER * TM][WNITER * TN];
#pragma unroll
    for (int i = 0; i < WMITER * TM; ++i)
#pragma unroll
        for (int j = 0; j < WNITER * TN; ++j) acc[i][j] = 0.0f;

    fa.fetch(A, lda, bm0, M, 0, K, tid);
    fb.fetch(B, ldb, 0, K, bn0, N, tid);
    stash(0);
    __syncthreads();
    const int KT = (K + BK - 1) / BK;
    for (int kt = 0; kt < KT; ++kt) {
        const int k1 = (kt + 1) * BK;  // the next slab: its loads fly while this one is multiplied
        fa.fetch(A, lda, bm0, M, k1, K, tid);
        fb.fetch(B, ldb, k1, K, bn0, N, tid);
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
                    for (int jj = 0; jj < WNITER * TN; ++jj) {
                        const int j = (i & 1) ? WNITER * TN - 1 - jj : jj;  // serpentine, as in warptile.cu
                        acc[i][j] += regM[i] * regN[j];
                    }
            }
        }
        // The other stage was last read in iteration kt - 1, before the barrier that ended it.
        stash((kt + 1) & 1);
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
