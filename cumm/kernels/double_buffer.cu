// double_buffer: warptiling with two shared-memory stages. While the warps multiply the slab of K in
// one stage, the next slab's global loads are already in flight into registers; after the arithmetic
// they are written to the other stage. Global latency hides behind the FMAs instead of stalling the
// block at every slab, and one barrier per slab suffices: a stage is rewritten only after the barrier
// that ends the slab which read it. The rest is warptile.cu (swizzled transposed A, conflict-free
// LDS.128, edge warps skip the arithmetic); shared memory is 2 * BK * (BM + BN) floats, dynamic.
#define AS_COL(k, m) ((m) ^ ((((k) >> 2) % (BK / 4)) * (128 / BK)))

extern "C" __global__ void __launch_bounds__(NUM_THREADS, MINB) CUMM_KERNEL(CUMM_GEMM_ARGS) {
    constexpr int NT = NUM_THREADS;
    constexpr int WMITER = (WM * WN) / (32 * TM * TN * WNITER);
    constexpr int WSUBM = WM / WMITER, WSUBN = WN / WNITER;
    constexpr int TCOLS = WSUBN / TN;  // lanes across a warp sub-tile
    extern __shared__ float4 smem4[];
    // stage s: As at smem + s * STAGE ([BK][BM], swizzled), Bs right after it ([BK][BN])
    constexpr int STAGE = BK * (BM + BN);
    float* const smem = reinterpret_cast<float*>(smem4);

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
    auto stage_in = [&](int stage) {  // registers -> shared memory stage `stage`
        float* As = smem + stage * STAGE;
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
    const int KT = (K + BK - 1) / BK;
    fa.fetch(A, lda, bm0, M, 0, K, tid);
    fb.fetch(B, ldb, 0, K, bn0, N, tid);
    stage_in(0);
    __syncthreads();
    for (int kt = 0; kt < KT; ++kt) {
        const int cur = kt & 1;
        const bool more = kt + 1 < KT;
        if (more) {  // issue the next slab's loads now; they land while this slab is multiplied
            fa.fetch(A, lda, bm0, M, (kt + 1) * BK, K, tid);
            fb.fetch(B, ldb, (kt + 1) * BK, K, bn0, N, tid);
        }
        if (active) {
            const float* As = smem + cur * STAGE;
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
        if (more) stage_in(cur ^ 1);
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
