// wgmma_swap_ab: 16_wgmma_cluster_split_k's producer, consumers and cluster sums for products of few rows (a few
// tokens through a weight), computed transposed: C^T = B^T A^T. What changes, and why it is faster there:
// - wgmma's M is 64 rows and its N as few as 8. With 16 tokens as wgmma's M (16's BM = 64 tiles), 48 of every 64
//   rows a slab multiplies are zeros: the tensor cores do four times the work and each stage carries 64 rows of
//   A. Here the weight's columns are wgmma's M (BN of them a tile, 64 a warpgroup's m64 block) and the tokens its
//   N (BM = 8 ... 128): a slab is BN x 64 of B and BM x 64 of A, all of it used, so a 16-token stage is 10 KB
//   (64 x 64 of B) and 16 or more stages stream B, the only operand that matters, with little tensor work.
// - The operands need no copy: B's row-major K x N tile is wgmma's A in M-major form (its 64-column boxes are
//   14's transposed-A boxes, imm-trans-a), A's rows are wgmma's B in K-major form (14's transposed-B boxes).
// - Whole K a block (KS = 1: no cluster, no sums) when the columns alone give enough blocks (16 x 6144 x 4096:
//   96 tiles of 16 x 64, as cuBLAS runs it), else K split over a cluster of KS as in 16.
// - The accumulators hold the tile transposed: thread (warp, g, t4) of a warpgroup has, of m64 block m, C's
//   columns 64 m + 16 warp + g (+ 8) at rows 8 j + 2 t4 (+ 1), so C is written one element at a time (the
//   outputs of a few-row product are few).
// Host: 16's maps (A: dims K x M, box 64 x BM; B: dims N x K, box 64 x 64; 128-byte swizzle). Grid: KS ceil(M /
// BM) ceil(N / BN) blocks in x, clusters of KS compiled in. NUM_THREADS = 128 (WGS + 1); dynamic shared memory
// STAGES (BM + BN) 128 + 1024 + 16 STAGES (with KS > 1 the ring holds the BM x BN FP32 partials). Batched
// variant: grid z is the batch, as 16's (batch16.cuh).

#define CUMM_NC (128 * WGS)  // consumer threads
#if KS > 1
#define CUMM_CLUSTER __cluster_dims__(KS, 1, 1)
#else
#define CUMM_CLUSTER
#endif

extern "C" __global__ void __launch_bounds__(NUM_THREADS, 1) CUMM_CLUSTER
    CUMM_KERNEL(CUMM_GEMM16_ARGS, const __grid_constant__ CummTmap tmA, const __grid_constant__ CummTmap tmB) {
    constexpr int MT = BN / 64 / WGS, SB = (BM + BN) * 128;  // m64 blocks (64 columns of C) a warpgroup; stage bytes
    constexpr int R = BM / 2, E = R / KS;  // accumulators a thread holds of an m64 block; of one rank's share
    static_assert(MT * 64 * WGS == BN && BN <= 256 && NUM_THREADS == 128 * (WGS + 1), "tile shape");
    static_assert(BM == 8 || BM == 16 || BM == 32 || BM == 64 || BM == 128, "the tile's rows are wgmma's N");
    static_assert(KS == 1 || (E % 4 == 0 && BM * BN * 4 <= STAGES * SB), "partials: whole float4s, in the ring");
    extern __shared__ unsigned char smem_raw[];
    const unsigned raw = cumm_smem_u32(smem_raw), base = (raw + 1023) & ~1023u;  // swizzle atoms: 1024-aligned
    unsigned char* const sm = smem_raw + (base - raw);
    unsigned long long* const bars = reinterpret_cast<unsigned long long*>(sm + STAGES * SB);
    const CummRing<STAGES> ring{bars, bars + STAGES};

    CUMM_BATCH();  // a batched variant: C moves to product blockIdx.z (A and B are read through 3-D maps)
    const int za = CUMM_BATCH_Z(bsa), zb = CUMM_BATCH_Z(bsb);
    const int tid = threadIdx.x;
    const unsigned rank = KS == 1 ? 0u : cumm_cluster_ctarank();
    const int2 tc = cumm_tile_coord(blockIdx.x / KS, (M + BM - 1) / BM, (N + BN - 1) / BN, GM);
    const int bm0 = tc.x * BM, bn0 = tc.y * BN;
    const int KT = (K + 63) / 64, k0 = KT * rank / KS, k1 = KT * (rank + 1) / KS;  // may be empty when KT < KS

    ring.start<4 * WGS>(tid, &tmA, &tmB);  // one arrival per consumer warp

    if (cumm_ws_producer<40, 232>(tid)) {  // producer warpgroup: one thread issues the copies
        if (tid == 0)
            for (int kt = k0; kt < k1; ++kt) {
                const int s = ring.acquire(kt - k0, SB);
                unsigned char* const st = sm + s * SB;
                cumm_tma_load_z<CUMM_BATCHED>(st, &tmA, kt * 64, bm0, za, &ring.full[s]);  // BM rows of A
#pragma unroll
                for (int j = 0; j < BN / 64; ++j)  // B: BN / 64 boxes of 64 columns by 64 k
                    cumm_tma_load_z<CUMM_BATCHED>(st + BM * 128 + j * 8192, &tmB, bn0 + 64 * j, kt * 64, zb,
                                                   &ring.full[s]);
            }
        if (KS > 1) {  // the cluster barriers count every thread of the cluster
            __syncwarp();
            cumm_cluster_sync();
            cumm_cluster_sync();
        }
        return;
    }

    // the warpgroup index through a shuffle, known warp-uniform: A's descriptors stay in uniform registers
    const int ct = tid - 128, wg = __shfl_sync(~0u, ct / 128, 0), warp = ct % 128 / 32;
    const int lane = tid % 32;
    const int g = lane / 4, t4 = lane % 4;
    float d[MT][R];
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int e = 0; e < R; ++e) d[m][e] = 0.0f;
    for (int kt = k0; kt < k1; ++kt) {
        const unsigned i = kt - k0;  // unsigned: its % a mask
        const int s = ring.wait(i);
        const unsigned b0 = base + s * SB, a0 = b0 + BM * 128 + wg * MT * 8192;
        // wgmma's A: 64 columns of B (M-major boxes, TA); its B: the BM rows of A (K-major, TB)
        cumm_wgmma_slab16<MT, BM, 1, 1, 1>(d, a0, b0);
        cumm_wgmma_wait<1>();  // the previous slab's wgmma are done: hand its stage back
        if (i > 0) ring.release<1>((i - 1) % STAGES, lane, 0);
    }
    cumm_wgmma_wait<0>();
#pragma unroll
    for (int m = 0; m < MT; ++m) cumm_wgmma_pin(d[m]);

    // accumulator x of m64 block m: C's row bm0 + 8 (x / 4) + 2 t4 + x % 2, column bn0 + 64 (wg MT + m) + 16 warp
    // + g + 8 (x % 4 / 2)
    auto put = [&](int m, int x, float v) {
        const int row = bm0 + 8 * (x / 4) + 2 * t4 + x % 2, col = bn0 + (wg * MT + m) * 64 + warp * 16 + g + 8 * (x % 4 / 2);
        if (row < M && col < N) cumm_store_one(C + (i64)row * ldc, col, v, alpha, beta);
    };
#if KS == 1
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int x = 0; x < R; ++x) put(m, x, d[m][x]);
#else
    cumm_cluster_sum<KS, CUMM_NC>(d, base, sm, rank, ct, [&](int m, int x, float4 a) {  // 16's sums (sm90.cuh)
        const int y = rank * E + x;
        put(m, y, a.x), put(m, y + 1, a.y), put(m, y + 2, a.z), put(m, y + 3, a.w);
    });
#endif
}
