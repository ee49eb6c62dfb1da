// wgmma_cluster_split_k: 14_wgmma_ws's producer and consumers (sm90.cuh's stage ring and roles) for products with
// few tiles and a deep K (sm_90a). What changes, and why it is faster there:
// - A tile's K is split over a cluster of KS blocks: block r of the cluster multiplies slabs [KT r / KS,
//   KT (r + 1) / KS) of its tile. 1024 x 1024 x 8192 has 64 tiles of 128 x 128 for 132 multiprocessors; with
//   KS = 2 it runs 128 blocks of 64 slabs each instead of 64 blocks of 128 slabs (or 14's stream-K). Clusters of
//   two: on the H200 only 30 clusters of four such blocks fit at once (66 of two), so KS = 4 over 32 tiles of
//   128 x 256 ran in two waves.
// - The partial sums meet in distributed shared memory (the cluster's blocks can read and write each other's):
//   each block owns BN / KS of the tile's columns; every block writes its accumulators for block q's columns
//   into block q's stage ring (free once every block's wgmma are done: a cluster barrier), and after a second
//   cluster barrier each block adds the KS partials of its columns and stores them. All KS blocks add at once,
//   and nothing leaves the chip. 14's stream-K sends its partials through global memory instead: the blocks
//   whose piece does not end a tile write them, and the one that ends it reads them one after the other (a
//   quarter to a third of these shapes' time on the H200).
// - The sum's order is fixed (rank 0 + rank 1 + ...), so results are the same bits from run to run.
// - No persistence and no tile scheduler: one tile (one K range) a block; clusters are scheduled by the
//   hardware, KS blocks at once in one GPC.
// Host: as 13 (maps for A: dims K x M, box 64 x BM; B: dims N x K, box 64 x 64; 128-byte swizzle; 16-byte
// aligned A and B, lda, ldb % 8 == 0). Grid: KS ceil(M / BM) ceil(N / BN) blocks in x, clusters of KS compiled
// in (__cluster_dims__). NUM_THREADS = 128 (WGS + 1); dynamic shared memory STAGES (BM + BN) 128 + 1024 + 16
// STAGES, of which the ring must hold the BM x BN FP32 partials (BM BN 4 <= STAGES (BM + BN) 128).
// Batched variant (CUMM_BATCHED): grid z is the batch (a cluster's KS blocks share their z), A and B are read
// through 3-D maps (a broadcast operand's map holds one matrix) and C moves to product z (batch16.cuh).

#define CUMM_WG_STAGE_BYTES ((BM + BN) * 128)
#define CUMM_NC (128 * WGS)  // consumer threads

extern "C" __global__ void __launch_bounds__(NUM_THREADS, 1) __cluster_dims__(KS, 1, 1)
    CUMM_KERNEL(CUMM_GEMM16_ARGS, const __grid_constant__ CummTmap tmA, const __grid_constant__ CummTmap tmB) {
    constexpr int MT = BM / 64 / WGS, SB = CUMM_WG_STAGE_BYTES;
    constexpr int E = BN / 2 / KS;  // accumulators of a thread's m64 row block in one rank's columns
    static_assert(MT * 64 * WGS == BM && BN % 64 == 0 && BN <= 256 && NUM_THREADS == 128 * (WGS + 1), "tile shape");
    static_assert(KS >= 2 && E % 4 == 0, "each rank's columns are whole float4s of every thread's accumulators");
    static_assert(BM * BN * 4 <= STAGES * SB, "the stage ring holds the tile's partial sums");
    extern __shared__ unsigned char smem_raw[];
    const unsigned raw = cumm_smem_u32(smem_raw), base = (raw + 1023) & ~1023u;
    unsigned char* const sm = smem_raw + (base - raw);
    unsigned long long* const bars = reinterpret_cast<unsigned long long*>(sm + STAGES * SB);
    const CummRing<STAGES> ring{bars, bars + STAGES};

    CUMM_BATCH();  // a batched variant: C moves to product blockIdx.z (A and B are read through 3-D maps)
    const int za = CUMM_BATCH_Z(bsa), zb = CUMM_BATCH_Z(bsb);  // their matrices in the maps (batch16.cuh)
    const int tid = threadIdx.x;
    const unsigned rank = cumm_cluster_ctarank();
    const int2 tc = cumm_tile_coord(blockIdx.x / KS, (M + BM - 1) / BM, (N + BN - 1) / BN, GM);
    const int bm0 = tc.x * BM, bn0 = tc.y * BN;
    const int KT = (K + 63) / 64, k0 = KT * rank / KS, k1 = KT * (rank + 1) / KS;  // may be empty when KT < KS

    ring.start<4 * WGS>(tid, &tmA, &tmB);  // one arrival per consumer warp

    if (cumm_ws_producer<40, 232>(tid)) {  // producer warpgroup: one thread issues the copies
        if (tid == 0)
            for (int kt = k0; kt < k1; ++kt) {
                const int s = ring.acquire(kt - k0, SB);
                unsigned char* const st = sm + s * SB;
                cumm_tma_load_z<CUMM_BATCHED>(st, &tmA, kt * 64, bm0, za, &ring.full[s]);
#pragma unroll
                for (int j = 0; j < BN / 64; ++j)
                    cumm_tma_load_z<CUMM_BATCHED>(st + BM * 128 + j * 8192, &tmB, bn0 + 64 * j, kt * 64, zb,
                                                   &ring.full[s]);
            }
        __syncwarp();
        // the cluster barriers count every thread of the cluster: the producers pass both with the consumers
        cumm_cluster_sync();
        cumm_cluster_sync();
        return;
    }

    // the warpgroup index through a shuffle, known warp-uniform (A's descriptors in uniform registers)
    const int ct = tid - 128, wg = __shfl_sync(~0u, ct / 128, 0), warp = ct % 128 / 32, lane = tid % 32;
    const int g = lane / 4, t4 = lane % 4;
    float d[MT][BN / 2];
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int e = 0; e < BN / 2; ++e) d[m][e] = 0.0f;
    for (int kt = k0; kt < k1; ++kt) {
        const unsigned i = kt - k0;  // unsigned: the ring's % and / a mask and a shift
        const int s = ring.wait(i);
        const unsigned a0 = base + s * SB + wg * MT * 64 * 128, b0 = base + s * SB + BM * 128;
        cumm_wgmma_slab16<MT, BN, 0, 0, 1>(d, a0, b0);
        cumm_wgmma_wait<1>();  // the previous slab's wgmma are done: hand its stage back
        if (i > 0) ring.release<1>((i - 1) % STAGES, lane, 0);
    }
    cumm_wgmma_wait<0>();
#pragma unroll
    for (int m = 0; m < MT; ++m) cumm_wgmma_pin(d[m]);

    float s[MT][E];  // this rank's share of the tile's sums
    cumm_cluster_sum<KS, CUMM_NC>(d, base, sm, rank, ct, [&](int m, int x, float4 a) {
        s[m][x] = a.x, s[m][x + 1] = a.y, s[m][x + 2] = a.z, s[m][x + 3] = a.w;
    });

    // this rank's BN / KS columns: accumulator pair (4 j + 2 h, + 1) of a thread is row warp * 16 + g + 8 h,
    // columns 8 j + 2 t4, + 1 of its m64 block
    const int c0 = bn0 + rank * (BN / KS);
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int row = bm0 + (wg * MT + m) * 64 + warp * 16 + g + 8 * h;
            if (row >= M) continue;
            cumm_out_t* crow = C + (i64)row * ldc;
#pragma unroll
            for (int j = 0; j < E / 4; ++j)
                cumm_store_pair<VEC_C>(crow, c0 + 8 * j + 2 * t4, N, s[m][4 * j + 2 * h], s[m][4 * j + 2 * h + 1], alpha,
                                       beta);
        }
}
