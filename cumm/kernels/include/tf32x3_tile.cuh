// tf32x3_tile.cuh: the tile engine of the tensor-core kernels (tf32x3.cu, fused3_tc.cu), rendered after
// common.cuh. Needs the configuration's BM, BN, BK, WM, WN, STAGES, NUM_THREADS, and optionally KS. See
// tf32x3.cu for why the operands are split in two and why each slab is summed apart.
//
// KS > 1 (fused3_tc): the block has KS slices of NUM_THREADS threads. Every slice tiles the block tile the
// same way, and slice s multiplies the s-th 1/KS of each slab's k-steps; the slices' sums are added in shared
// memory at the end. A small tile (one per multiprocessor in a small chain) then has KS times the warps, and
// independent mma chains, to hide latency with. KS = 1 compiles to what it was without.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "the TF32 tensor-core kernels need compute capability 8.0 or newer (mma.sync with TF32 operands)"
#endif

#ifdef KS
#define CUMM_KS KS  // k-slices (fused3_tc's parameter)
#else
#define CUMM_KS 1
#endif
#define LDA_S (BK + 4)  // shared row stride of A, floats
#define LDB_S (BN + 8)  // shared row stride of B, floats
#define CUMM_TF32X3_STAGE (BM * LDA_S + BK * LDB_S)  // floats per pipeline stage

// d += a @ b for one m16n8k8 tile: a row-major 16x8 (4 registers), b column-major 8x8 (2), d 16x8 (4).
__device__ __forceinline__ void cumm_mma_tf32(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// One BM x BN tile of C = alpha * A @ B + beta * C at (bm0, bn0), computed by the whole block through the
// STAGES-deep pipeline in `smem` (STAGE_FLOATS * STAGES floats). VA / VB / VC: 16-byte accesses to A / B / C
// are legal (see common.cuh). Ends with a barrier, so the caller may start another tile in the same smem.
template <int VA, int VB, int VC>
__device__ __forceinline__ void cumm_tf32x3_tile(const int M, const int N, const int K, const float alpha,
                                                 const float* __restrict__ A, const int lda,
                                                 const float* __restrict__ B, const int ldb, const float beta,
                                                 float* __restrict__ C, const int ldc, const int bm0, const int bn0,
                                                 float* const smem) {
    constexpr int MI = WM / 16, NI = WN / 8;  // mma tiles per warp
    constexpr int STAGE = CUMM_TF32X3_STAGE;
    constexpr int THREADS = NUM_THREADS * CUMM_KS;  // the block: CUMM_KS slices
    constexpr int A_ALL = BM * BK / 4, B_ALL = BK * BN / 4;  // 16-byte chunks of a slab
    constexpr int A_CHUNKS = (A_ALL + THREADS - 1) / THREADS, B_CHUNKS = (B_ALL + THREADS - 1) / THREADS;
    const int tid = threadIdx.x, lane = tid % 32;
    const int slice = CUMM_KS == 1 ? 0 : tid / NUM_THREADS, warp = CUMM_KS == 1 ? tid / 32 : tid % NUM_THREADS / 32;
    const int g = lane / 4, t = lane % 4;  // mma fragment coordinates
    const int wm0 = warp / (BN / WN) * WM, wn0 = warp % (BN / WN) * WN;
    const bool active = bm0 + wm0 < M && bn0 + wn0 < N;  // warps wholly past an edge skip the mma

    // Copy slab kt of A and B into stage st (cp.async; zero-filled past M, N, K).
    auto issue = [&](int kt, int st) {
        float* As = smem + st * STAGE;
        float* Bs = As + BM * LDA_S;
        const int k0 = kt * BK;
#pragma unroll
        for (int s = 0; s < A_CHUNKS; ++s) {
            const int i = tid + s * THREADS, r = i / (BK / 4), c = i % (BK / 4) * 4;
            const bool ok = bm0 + r < M;
            if (A_ALL % THREADS == 0 || i < A_ALL)
                cumm_cp_async_chunk<VA>(&As[r * LDA_S + c], A + (i64)(ok ? bm0 + r : 0) * lda + k0, c, K - k0, ok);
        }
#pragma unroll
        for (int s = 0; s < B_CHUNKS; ++s) {
            const int i = tid + s * THREADS, r = i / (BN / 4), c = i % (BN / 4) * 4;
            const bool ok = k0 + r < K;
            if (B_ALL % THREADS == 0 || i < B_ALL)
                cumm_cp_async_chunk<VB>(&Bs[r * LDB_S + c], B + (i64)(ok ? k0 + r : 0) * ldb + bn0, c, N - bn0, ok);
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
        cumm_cp_async_commit();  // empty groups keep the group count uniform for wait_group below
    }
    for (int kt = 0; kt < KT; ++kt) {
        asm volatile("cp.async.wait_group %0;\n" ::"n"(STAGES - 2));  // slab kt has landed (this thread's part)
        __syncthreads();  // everyone's part has; and everyone is done with the stage refilled next
        if (kt + STAGES - 1 < KT) issue(kt + STAGES - 1, (kt + STAGES - 1) % STAGES);
        cumm_cp_async_commit();
        if (!active) continue;
        // This slab's sum, kept apart from acc (see tf32x3.cu). Small warp tiles (<= 8 mma tiles) keep one
        // accumulator set per product, so each set's dependent chain is BK/8 mma deep instead of 3 BK/8 and
        // the small terms are summed apart from the big one. On the H200 that left fused3_tc's time at
        // n = 512 unchanged (docs/chain.md) but lowered its error from 4.5e-7 to 2.5e-7; big tiles have
        // no registers to spare for it.
        constexpr int NSET = MI * NI <= 8 ? 3 : 1;
        float part[NSET][MI][NI][4];
#pragma unroll
        for (int q = 0; q < NSET; ++q)
#pragma unroll
            for (int i = 0; i < MI; ++i)
#pragma unroll
                for (int j = 0; j < NI; ++j)
#pragma unroll
                    for (int e = 0; e < 4; ++e) part[q][i][j][e] = 0.0f;
        const float* As = smem + kt % STAGES * STAGE + wm0 * LDA_S;
        const float* Bs = smem + kt % STAGES * STAGE + BM * LDA_S + wn0;
#pragma unroll
        for (int k8 = slice * (BK / CUMM_KS); k8 < (slice + 1) * (BK / CUMM_KS); k8 += 8) {  // this slice's k-steps
            unsigned ab[MI][4], as[MI][4], bb[NI][2], bs[NI][2];
#pragma unroll
            for (int i = 0; i < MI; ++i) {
                const float* p = As + (i * 16 + g) * LDA_S + k8 + t;
                cumm_split_tf32(p[0], ab[i][0], as[i][0]);
                cumm_split_tf32(p[8 * LDA_S], ab[i][1], as[i][1]);
                cumm_split_tf32(p[4], ab[i][2], as[i][2]);
                cumm_split_tf32(p[8 * LDA_S + 4], ab[i][3], as[i][3]);
            }
#pragma unroll
            for (int j = 0; j < NI; ++j) {
                const float* q = Bs + (k8 + t) * LDB_S + j * 8 + g;
                cumm_split_tf32(q[0], bb[j][0], bs[j][0]);
                cumm_split_tf32(q[4 * LDB_S], bb[j][1], bs[j][1]);
            }
            // Small terms first, so they are not lost against an already large partial sum.
#pragma unroll
            for (int i = 0; i < MI; ++i)
#pragma unroll
                for (int j = 0; j < NI; ++j) cumm_mma_tf32(part[0][i][j], as[i], bb[j]);
#pragma unroll
            for (int i = 0; i < MI; ++i)
#pragma unroll
                for (int j = 0; j < NI; ++j) cumm_mma_tf32(part[1 % NSET][i][j], ab[i], bs[j]);
#pragma unroll
            for (int i = 0; i < MI; ++i)
#pragma unroll
                for (int j = 0; j < NI; ++j) cumm_mma_tf32(part[2 % NSET][i][j], ab[i], bb[j]);
        }
#pragma unroll
        for (int i = 0; i < MI; ++i)
#pragma unroll
            for (int j = 0; j < NI; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e)  // small terms first, then the big one; rounded to nearest
                    acc[i][j][e] += NSET == 3 ? part[NSET - 1][i][j][e] + (part[0][i][j][e] + part[1 % NSET][i][j][e])
                                              : part[0][i][j][e];
    }
    cumm_cp_async_wait_all();  // (only empty groups can be pending here: the last slab was waited for)
    __syncthreads();           // every warp is done with smem before the caller reuses it
    if constexpr (CUMM_KS > 1) {    // slices 1.. leave their sums in smem; slice 0 adds them, in order
        float* const part = smem + warp * 32 + lane;  // [slice - 1][i][j][e][thread of the slice]: conflict-free
        if (slice > 0) {
#pragma unroll
            for (int i = 0; i < MI; ++i)
#pragma unroll
                for (int j = 0; j < NI; ++j)
#pragma unroll
                    for (int e = 0; e < 4; ++e)
                        part[(((slice - 1) * MI + i) * NI * 4 + j * 4 + e) * NUM_THREADS] = acc[i][j][e];
        }
        __syncthreads();
        if (slice == 0) {
#pragma unroll
            for (int q = 0; q < CUMM_KS - 1; ++q)
#pragma unroll
                for (int i = 0; i < MI; ++i)
#pragma unroll
                    for (int j = 0; j < NI; ++j)
#pragma unroll
                        for (int e = 0; e < 4; ++e) acc[i][j][e] += part[((q * MI + i) * NI * 4 + j * 4 + e) * NUM_THREADS];
        }
        __syncthreads();  // smem is free again
        if (slice > 0) return;
    }

    if (!active) return;
#pragma unroll
    for (int i = 0; i < MI; ++i) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {  // fragment rows g and g + 8
            const int m = bm0 + wm0 + i * 16 + g + 8 * h;
            if (m >= M) continue;
#pragma unroll
            for (int j = 0; j < NI; ++j)
                cumm_store2<VC>(C + (i64)m * ldc, bn0 + wn0 + j * 8 + 2 * t, N, acc[i][j][2 * h], acc[i][j][2 * h + 1],
                            alpha, beta);
        }
    }
}
