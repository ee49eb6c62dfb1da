// double_buffer: warptiling with two shared-memory stages. While the warps multiply the slab of K in
// one stage, the next slab is already being copied into the other by cp.async (sm_80+), which moves
// global memory straight to shared memory: no staging registers, so the kernel keeps warptile's
// register budget and global latency hides behind a whole slab of FMAs.
// Per slab: wait for this slab's copies, one barrier (which also proves every warp has finished
// reading the other stage), issue the next slab's copies into the other stage, multiply.
// A is kept as it is in memory, As[m][k], so it too is copied in 16-byte chunks (no per-element
// transposition). The inner loop takes K four at a time: one LDS.128 brings k..k+3 of one row of A,
// so a lane's A fragment for four k-steps costs WMITER*TM loads, as many as the transposed layout.
// The 16-byte chunks of a row are XOR-swizzled by (m/4) so that the 8 rows a warp reads at once fall
// in distinct banks (conflict-free at BK = 32; 2-way at BK = 16). B is copied and read as in warptile.
#define A_CHUNK(m, kq) ((kq) ^ (((m) >> 2) % (BK / 4)))  // physical 16-byte chunk of (row m, k-quad kq)

extern "C" __global__ void __launch_bounds__(NUM_THREADS, MINB) CUMM_KERNEL(CUMM_GEMM_ARGS) {
    constexpr int NT = NUM_THREADS;
    constexpr int WMITER = (WM * WN) / (32 * TM * TN * WNITER);
    constexpr int WSUBM = WM / WMITER, WSUBN = WN / WNITER;
    constexpr int TCOLS = WSUBN / TN;
    constexpr int KQ = BK / 4;                // 16-byte chunks per row of the A tile
    constexpr int A_SLOTS = BM * KQ / NT;     // chunks of A per thread per slab
    constexpr int B_SLOTS = BK * BN / 4 / NT; // chunks of B per thread per slab
    constexpr int STAGE = BK * (BM + BN);     // floats per stage: As [BM][BK] then Bs [BK][BN]
    extern __shared__ float4 smem4[];
    float* const smem = reinterpret_cast<float*>(smem4);

    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int bm0 = blockIdx.y * BM, bn0 = blockIdx.x * BN;
    const int wrow = warp / (BN / WN), wcol = warp % (BN / WN);
    const int tm0 = wrow * WM + lane / TCOLS * TM;
    const int tn0 = wcol * WN + lane % TCOLS * TN;
    const bool active = bm0 + wrow * WM < M && bn0 + wcol * WN < N;

    auto issue = [&](int kt, int st) {  // start copying slab kt into stage st
        float* As = smem + st * STAGE;
        float* Bs = As + BK * BM;
        const int k0 = kt * BK;
#pragma unroll
        for (int s = 0; s < A_SLOTS; ++s) {
            const int idx = tid + s * NT, m = idx / KQ, kq = idx % KQ;
            const bool ok = bm0 + m < M;
            cumm_cp_async_chunk<VEC_A>(&As[m * BK + A_CHUNK(m, kq) * 4], A + (i64)(ok ? bm0 + m : 0) * lda,
                                       k0 + 4 * kq, K, ok);
        }
#pragma unroll
        for (int s = 0; s < B_SLOTS; ++s) {
            const int idx = tid + s * NT, r = idx / (BN / 4), c = idx % (BN / 4) * 4;
            const bool ok = k0 + r < K;
            cumm_cp_async_chunk<VEC_B>(&Bs[r * BN + c], B + (i64)(ok ? k0 + r : 0) * ldb, bn0 + c, N, ok);
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
#pragma unroll 1  // rolled: unrolled, ptxas hoists the next quad's A fragment and runs out of registers
            for (int kq = 0; kq < KQ; ++kq) {
                float a[WMITER * TM][4];  // a[i][kk]: row i of this lane, k = 4*kq + kk
#pragma unroll
                for (int i = 0; i < WMITER * TM; ++i) {
                    const int m = tm0 + i / TM * WSUBM + i % TM;
                    *reinterpret_cast<float4*>(a[i]) =
                        *reinterpret_cast<const float4*>(&As[m * BK + A_CHUNK(m, kq) * 4]);
                }
#pragma unroll
                for (int kk = 0; kk < 4; ++kk) {
                    const int k = 4 * kq + kk;
                    float regN[WNITER * TN];
#pragma unroll
                    for (int q = 0; q < WNITER * TN / 4; ++q)
                        *reinterpret_cast<float4*>(&regN[4 * q]) = *reinterpret_cast<const float4*>(
                            &Bs[k * BN + tn0 + q / (TN / 4) * WSUBN + q % (TN / 4) * 4]);
#pragma unroll
                    for (int i = 0; i < WMITER * TM; ++i)
#pragma unroll
                        for (int j = 0; j < WNITER * TN; ++j) acc[i][j] += a[i][kk] * regN[j];
                }
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
