// wgmma_pingpong: 14_wgmma_ws with its two consumer warpgroups on different tiles, taking turns on the tensor
// cores. What changes, and why it is faster where it is:
// - In 14 both consumer warpgroups share one tile (64 rows each), so both run the epilogue at once and the tensor
//   cores idle while they do: the conversion, the stores into the staging buffer and any fused epilogue (bias +
//   GELU's exp and reciprocal per element: +33 % at bf16 8192 x 14336 x 1024) all come between two mainloops.
// - Here warpgroup w owns every other tile of the block's walk (items w, w + 2, ...), a whole BM x BN tile in its
//   own accumulators. Named barriers 4 and 5 pass the turn: a warpgroup issues its tile's wgmma only after the
//   other has issued all of its tile's, and hands the turn on as soon as its last slab is issued; then it waits for
//   its wgmma, and runs its epilogue while the other's mainloop keeps the tensor cores busy. An epilogue shorter
//   than a mainloop costs nothing: products whose K is short beside the tile's stores (attention's q @ k^T, K =
//   128: two slabs a tile against 32 KB of C) and fused epilogues.
// - The turns also keep the stage ring in order: a warpgroup waits on a slab's full barrier only after every
//   earlier slab was waited on, so a parity wait never sees a phase two rounds old (each warpgroup consumes every
//   other tile's slabs: slab kt of item i sits at ring position i KT + kt).
// - The cost: a warpgroup's tile must fit its own registers, and 128 x 128 tiles read more of A and B from L2 per
//   FLOP than 14's 128 x 256 (at 4096^3 such tiles ran 0.88x in 14 itself). 128 x 192 tiles (192 accumulators a
//   thread: the consumers take 240 registers by setmaxnreg, the producer 24) read a quarter less per FLOP; the
//   spec takes them where their rounds of tiles cost no more (spec.py, _wide_tiles).
// Host: as 14 (maps for A: dims K x M, box 64 x BM; B: dims N x K, box 64 x 64; C: dims N x M, box 64 x 64, all
// 128-byte swizzle; transposed operands read in place through CUMM_TA / CUMM_TB's maps), CL = 1, whole tiles (no
// stream-K). Grid: min(tiles, multiprocessors) blocks of 384 threads (a producer and two consumer warpgroups).
// Dynamic shared memory STAGES (BM + BN) 128 + 1024 + 16 STAGES + 16, plus 32768 with EPI = 1 (a 64 x 128 staging
// buffer per warpgroup). Batched variant: 3-D maps, the batch's tiles one run, the batch count after the strides.

#define CUMM_C_STAGE (CUMM_EPI_TMA ? 2 * 64 * 128 * 2 : 0)  // per warpgroup: 64 rows x 128 columns of halves
#if CUMM_BATCHED
#define CUMM_PP_ARGS CUMM_GEMM16_ARGS, const int batch
#else
#define CUMM_PP_ARGS CUMM_GEMM16_ARGS
constexpr int batch = 1;
#endif

extern "C" __global__ void __launch_bounds__(384, 1)
    CUMM_KERNEL(CUMM_PP_ARGS, const __grid_constant__ CummTmap tmA, const __grid_constant__ CummTmap tmB,
                const __grid_constant__ CummTmap tmC) {
    constexpr int MT = BM / 64, SB = (BM + BN) * 128;  // m64 blocks of a tile (all one warpgroup's); stage bytes
    static_assert(MT * 64 == BM && BN % 64 == 0 && BM * BN <= 128 * 192, "a warpgroup's tile in its registers");
    constexpr bool BIG = BM * BN > 128 * 128;  // 192 accumulators a thread: 240 registers, the producer 24
    extern __shared__ unsigned char smem_raw[];
    const unsigned raw = cumm_smem_u32(smem_raw), base = (raw + 1023) & ~1023u;  // swizzle atoms: 1024-aligned
    unsigned char* const sm = smem_raw + (base - raw);
    unsigned long long* const bars = reinterpret_cast<unsigned long long*>(sm + STAGES * SB + CUMM_C_STAGE);
    const CummRing<STAGES> ring{bars, bars + STAGES};
    unsigned long long* const cbar = bars + 2 * STAGES;  // beta != 0: a chunk of C landed for warpgroup w

    const int tid = threadIdx.x;
    const int ntm = (M + BM - 1) / BM, ntn = (N + BN - 1) / BN, per = ntm * ntn, KT = (K + 63) / 64;
    const CummTileWalk<0> walk(per * batch, KT, blockIdx.x, gridDim.x, false);
    auto origin = [&](int t) {  // tile t's first row and column
        const int2 tc = cumm_tile_coord(t % per, ntm, ntn, GM);
        return make_int2(tc.x * BM, tc.y * BN);
    };

    if (tid == 0) {
        cumm_prefetch_tmap(&tmA);
        cumm_prefetch_tmap(&tmB);
        ring.init<4>();  // a slab is one warpgroup's: one arrival per warp of it
        if (CUMM_EPI_TMA) {
            cumm_mbar_init<1>(&cbar[0]);
            cumm_mbar_init<1>(&cbar[1]);
        }
        cumm_mbar_init_fence();
    }
    __syncthreads();

    if (cumm_ws_producer<BIG ? 24 : 40, BIG ? 240 : 232>(tid)) {
        if (tid == 0) {
            int it = 0;  // slabs issued, over all the block's tiles
            int t, k0, k1;
            for (int j = 0; walk.next(j, t, k0, k1); ++j) {
                const int2 o = origin(t);
                const int za = bsa ? t / per : 0, zb = bsb ? t / per : 0;  // a broadcast operand: matrix 0
                for (int kt = k0; kt < k1; ++kt, ++it) {
                    const int kc = walk.slab(j, kt);
                    const int s = ring.acquire(it, SB);
                    cumm_load_slab16<BM, BN, CUMM_TA, CUMM_TB, CUMM_BATCHED>(sm + s * SB, &tmA, &tmB, o.x, o.y, kc, za,
                                                                            zb, &ring.full[s]);
                }
            }
        }
        return;
    }

    const int wg = tid / 128 - 1, warp = tid % 128 / 32, lane = tid % 32, g = lane / 4, t4 = lane % 4;
    CummTmaEpilogue<MT, BN, CUMM_BATCHED> epi{sm + STAGES * SB + wg * 64 * 128 * 2, &tmC, &cbar[wg], 1 + wg,
                                              tid % 128, warp, g, t4, 0};
    int t, k0, k1;
    for (int i = wg; walk.next(i, t, k0, k1); i += 2) {
        const int2 o = origin(t);
        const int z = CUMM_BATCHED ? t / per : 0;  // the tile's product
        // the TMA store takes tiles whose columns end on a 16-byte boundary (as in 14)
        const bool ctma = CUMM_EPI_TMA && (N % 8 == 0 || o.y + BN <= N);
        if (ctma && beta != 0.0f && tid % 128 == 0) epi.prefetch(o.y, o.x, z);
        float d[MT][BN / 2];
#pragma unroll
        for (int m = 0; m < MT; ++m)
#pragma unroll
            for (int e = 0; e < BN / 2; ++e) d[m][e] = 0.0f;
        if (i > 0) cumm_bar_sync<256>(4 + wg);  // the other warpgroup has issued its tile: our turn
        unsigned it = i * KT;  // item i's first slab in the ring (whole tiles: KT slabs each; unsigned: % a mask)
        for (int kt = k0; kt < k1; ++kt, ++it) {
            const int s = ring.wait(it);
            const unsigned a0 = base + s * SB, b0 = a0 + BM * 128;
            cumm_wgmma_slab16<MT, BN, CUMM_TA, CUMM_TB, 1>(d, a0, b0);
            cumm_wgmma_wait<1>();  // the previous slab's wgmma are done: hand its stage back
            if (kt > k0) ring.release<1>((it - 1) % STAGES, lane, 0);
        }
        if (i + 1 < walk.whole) cumm_bar_arrive<256>(5 - wg);  // every slab issued: the other's turn
        cumm_wgmma_wait<0>();
        ring.release<1>((it - 1) % STAGES, lane, 0);
#pragma unroll
        for (int m = 0; m < MT; ++m) cumm_wgmma_pin(d[m]);
        if (ctma) {
            epi.store(d, o.y, o.x, z, alpha, beta);
            continue;
        }
        cumm_store_tile<MT, BN / 2, VEC_C>(d, C, z * bsc, ldc, M, N, o.x, o.y, warp, g, t4, alpha, beta);
    }
    if (CUMM_EPI_TMA && tid % 128 == 0) cumm_tma_store_wait_all();
}
