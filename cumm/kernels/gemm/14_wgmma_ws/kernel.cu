// wgmma_ws: 13_wgmma, warp-specialized and persistent (sm_90a), on sm90.cuh's Hopper skeleton (the stage ring, the
// tile walk, the producer / consumer split, stream-K's partials, the epilogues). What changes, and why it is faster:
// - A producer warpgroup (one thread issues the copies) fills the stage ring (CummRing); WGS consumer warpgroups
//   only wait on "full" barriers and issue wgmma. In 13, thread 0 refilled a stage between its own wgmma and
//   waited there for every warp to release it, so all consumers ran in lockstep with the refill.
// - setmaxnreg (cumm_ws_producer): the producer keeps 40 registers a thread and the consumers take 232, so the
//   BM x BN accumulators (BN / 2 FP32 per thread and m64 tile) fit beside the addressing.
// - Persistent grid (CummTileWalk): one block per multiprocessor walks the tiles in grouped order (groups of GM
//   tile rows column by column: the blocks running at once share A and B panels in L2), every other tile's K
//   backwards (the next round starts on the slabs still in L2: DRAM reads 186 -> 127 MB at 4096^3, cuBLAS 149);
//   the ring runs on across tiles, so the next tile's first slabs load while the consumers store this one.
// - EPI = 1, TMA-store epilogue (CummTmaEpilogue): the tile goes to C through a swizzled shared staging buffer
//   and the copy engine, so the consumers start the next tile's wgmma while the stores drain (128 columns at a
//   time, a last 64 for BN = 192: the host takes 128 x 192 tiles where 128 x 256 ones would leave
//   multiprocessors idle in their last round, the spec's shape_config); with beta != 0 it reads C the same way.
// - SK > 0, stream-K tail: when the tiles are not a whole number of waves (4096^3: 512 tiles of 128 x 256 on 132
//   blocks, 3.88 waves), the last tiles % blocks tiles are shared out as equal k-ranges (a tile over at most
//   SK + 1 blocks) instead of a last round in which 116 of 132 multiprocessors idle. A piece that does not end
//   its tile writes its partial sums to the workspace (cumm's per-stream scratch buffer, `skw`) and raises its
//   flag; the block with the tile's last slab adds them and stores the tile (cumm_sk_put, cumm_sk_add).
// - CL = 2: clusters of two blocks own two vertically adjacent tiles (same B column panel); each block loads its
//   own A and half of the B boxes, multicast into both blocks' shared memory: 2/3 of the L2 -> SM traffic of
//   CL = 1 for 128 x 256 tiles. A stage is refilled only when both blocks' consumers have released it. On row
//   pitches that are multiples of 32 bytes it measured no faster than CL = 1; where B's rows start off 32 bytes
//   (a pitch of 8 mod 16 halves) the copy engine splits each box row into small requests, and halving a block's
//   requests pays (the spec's pitch_config). With stream-K, a cluster takes each k-range, a block per tile.
// - WGS = 1: one consumer warpgroup and 64-row tiles (256 threads), twice the tiles of 128-row ones for products
//   with few tiles (bf16 256 x 8192 x 8192: 128 whole tiles of 64 x 256 instead of 64 of 128 x 256 shared out by
//   stream-K, 60.6 against 68.4 us). Whole tiles only (SK = 0): with stream-K the producer spills under 40 registers.
// - WGS = 3: three consumer warpgroups of 64 rows (512 threads, 152 registers each under setmaxnreg), for 192-row
//   tiles: 192 x 128 tiles fill a round where 128 x 256 ones leave multiprocessors idle (3072 x 1024: 128 tiles
//   against 96), and 192 x 192 ones (three stages) do one round's work where 128 x 256 ones need two (1536 x
//   3072: 128 tiles against 144). Whole tiles only (SK = 0). ptxas fits the consumers in the 128 registers a
//   thread of 512 at launch (192 x 192: 96 accumulators); the setmaxnreg values only share the register file out
//   as for WGS <= 2.
// - Batched variant (CUMM_BATCHED): the tiles of every product of the batch form one run that the persistent
//   blocks walk, so a batch of small products fills the GPU as one large product would (with a grid z over the
//   batch, 132 multiprocessors split between 96 products left 36 idle). Whole tiles only (no stream-K).
// (Ping-pong consumers, each warpgroup owning whole tiles and the two taking turns on the mainloop, measured
// 0.85-0.87x these cooperative ones at 4096^3 on the H200: docs/rejected.md.)
// Operands given transposed (column-major: x.T, w.T) are read in place: TA, A's map has dims M x K and boxes of 64
// rows of M by 64 k (descriptors M-major, imm-trans-a 1); TB, B's map has dims K x N and boxes of 64 rows of N by
// 64 k (K-major, as A's rows, imm-trans-b 0). The wgmma reads either layout from shared memory at the same rate.
// Host: as 13 (maps for A: dims K x M, box 64 x BM; B: dims N x K, box 64 x 64; 128-byte swizzle; 16-byte
// aligned A and B, lda, ldb % 8 == 0), and a third map for C (dims N x M, box 64 x 64, 128-byte swizzle, 16-bit;
// used only with EPI = 1, VEC_C (C 16-byte aligned, ldc % 8 == 0) and 16-bit output, else any 64-byte-aligned
// 128 bytes). Grid: CL = 1: min(tiles, multiprocessors) blocks, all multiprocessors when stream-K takes fewer
// tiles than that; CL = 2: 2 min(tile pairs, resident clusters (cuOccupancyMaxActiveClusters)) blocks, cluster
// dims compiled in (__cluster_dims__). NUM_THREADS = 128 (WGS + 1); dynamic shared memory STAGES (BM + BN) 128 +
// 1024 + 16 STAGES + 32 (mbarriers; 40 for WGS = 3), plus 16384 WGS with EPI = 1. Batched variant: the three maps
// get the batch as a third dimension (batch strides bsa, bsb, bsc; a broadcast operand is a batch of one), the
// batch count follows bsc, the grid is min(batch x tiles, multiprocessors) blocks and skw is null.
// skw (last argument): with SK > 0 and a mostly empty last wave (the spec's workspace function decides), a
// workspace of CUMM_SK_FLAGS int flags, zero at launch and left so, then blocks x BM x BN floats; else null. The
// flags sit at a fixed place whatever the tile shape: one buffer serves every configuration on a stream (flags
// placed after the partials read another shape's partial sums as raised flags).

#define CUMM_SK_FLAGS 4096  // stream-K flags at the workspace's start (the host gives stream-K at most this many blocks)
#define CUMM_NC (128 * WGS)  // consumer threads
// registers a consumer thread takes (setmaxnreg) beside the producer's 40: all 65536 of a multiprocessor
#define CUMM_CONSUMER_REGS (WGS == 3 ? 152 : 232)
#define CUMM_SK (SK > 0 && !CUMM_BATCHED)  // stream-K compiled in (a batch runs whole tiles)
#define CUMM_C_STAGE (CUMM_EPI_TMA ? WGS * 64 * 128 * 2 : 0)  // per WG: 64 rows x 128 columns of halves
#if CL == 2
#define CUMM_CLUSTER __cluster_dims__(2, 1, 1)
#else
#define CUMM_CLUSTER
#endif
// Batched variant: 3-D maps, and the batch's tiles are one run: tile t is tile t % per of product t / per. The
// batch count comes after the batch strides (the spec's schedules_batch); a single product is a batch of one
// whose strides are 0 (sm90.cuh).
#if CUMM_BATCHED
#define CUMM_WS_ARGS CUMM_GEMM16_ARGS, const int batch
#else
#define CUMM_WS_ARGS CUMM_GEMM16_ARGS
constexpr int batch = 1;
#endif

extern "C" __global__ void __launch_bounds__(NUM_THREADS, 1) CUMM_CLUSTER
    CUMM_KERNEL(CUMM_WS_ARGS, const __grid_constant__ CummTmap tmA, const __grid_constant__ CummTmap tmB,
                const __grid_constant__ CummTmap tmC, float* __restrict__ skw) {
    constexpr int MT = BM / 64 / WGS, SB = (BM + BN) * 128;  // m64 blocks of a consumer warpgroup; stage bytes
    static_assert(MT * 64 * WGS == BM && BN % 64 == 0 && BN <= 256 && NUM_THREADS == 128 * (WGS + 1), "tile shape");
    static_assert(CL == 1 || CL == 2, "CL = 2: clusters of two blocks split the B boxes (an odd count: rank 0 one more)");
    static_assert(SK == 0 || WGS <= 2, "three consumer warpgroups run whole tiles (named barrier 3 is warpgroup 2's)");
    static_assert(!CUMM_BATCHED || CL == 1, "batched products run CL = 1: a batch's tiles are walked one at a time");
    static_assert(!(CUMM_TA || CUMM_TB) || CL == 1, "transposed operands run CL = 1: each block loads its own");
    extern __shared__ unsigned char smem_raw[];
    const unsigned raw = cumm_smem_u32(smem_raw), base = (raw + 1023) & ~1023u;  // swizzle atoms: 1024-aligned
    unsigned char* const sm = smem_raw + (base - raw);
    unsigned long long* const bars = reinterpret_cast<unsigned long long*>(sm + STAGES * SB + CUMM_C_STAGE);
    const CummRing<STAGES> ring{bars, bars + STAGES};
    // EPI = 1, beta != 0: cbar[w], a chunk of C landed for warpgroup w (after two unused words that the spec's
    // shared memory size still counts)
    unsigned long long* const cbar = bars + 2 * STAGES + 2;

    const int tid = threadIdx.x;
    // CL = 2: the walk is over pairs of tile rows (a cluster's two tiles); rank r takes row 2 p + r. An odd last
    // row's partner tile lies past M: it loads zeros (and its B half for the partner) and stores nothing.
    const int ntm = (M + BM * CL - 1) / (BM * CL), ntn = (N + BN - 1) / BN, per = ntm * ntn, KT = (K + 63) / 64;
    const int rank = CL == 1 ? 0 : (int)cumm_cluster_ctarank();
    const int first = CL == 1 ? blockIdx.x : blockIdx.x / CL, step = CL == 1 ? gridDim.x : gridDim.x / CL;
    const CummTileWalk<CUMM_SK ? SK : 0> walk(per * batch, KT, first, step, skw != nullptr);
    auto origin = [&](int t) {  // tile t's first row and column
        const int2 tc = cumm_tile_coord(t % per, ntm, ntn, GM);
        return make_int2((tc.x * CL + rank) * BM, tc.y * BN);
    };

    if (tid == 0) {
        cumm_prefetch_tmap(&tmA);
        cumm_prefetch_tmap(&tmB);
        ring.init<4 * WGS * CL>();  // one arrival per consumer warp (of the cluster)
        if (CUMM_EPI_TMA)
            for (int w = 0; w < WGS; ++w) cumm_mbar_init<1>(&cbar[w]);
        cumm_mbar_init_fence();
    }
    if (CL == 1)
        __syncthreads();
    else
        cumm_cluster_sync();  // every block's barriers exist before anyone multicasts or arrives remotely

    if (cumm_ws_producer<40, CUMM_CONSUMER_REGS>(tid)) {
        if (tid == 0) {
            int it = 0;  // slabs issued by this block, over all its tiles
            int t, k0, k1;
            for (int j = 0; walk.next(j, t, k0, k1); ++j) {
                const int2 o = origin(t);
                const int za = bsa ? t / per : 0, zb = bsb ? t / per : 0;  // a broadcast operand: matrix 0
                for (int kt = k0; kt < k1; ++kt, ++it) {
                    const int kc = walk.slab(j, kt);
                    const int s = ring.acquire(it, SB);  // A, and all of B: with CL = 2 half from the other block
                    unsigned char* const st = sm + s * SB;
                    if (CL == 1) {
                        cumm_load_slab16<BM, BN, CUMM_TA, CUMM_TB, CUMM_BATCHED>(st, &tmA, &tmB, o.x, o.y, kc, za, zb,
                                                                                &ring.full[s]);
                    } else {  // (row-major operands, one product) A, and the B boxes j % 2 == rank for both blocks
                        cumm_tma_load_z<0>(st, &tmA, kc * 64, o.x, 0, &ring.full[s]);
#pragma unroll
                        for (int j = 0; j < BN / 64; ++j)
                            if (j % 2 == rank)
                                cumm_tma_load_2d_mc(st + BM * 128 + j * 8192, &tmB, o.y + 64 * j, kc * 64, &ring.full[s], 3);
                    }
                }
            }
        }
        if (CL == 2) {
            __syncwarp();
            cumm_cluster_sync();  // stay until the other block is done with this one's barriers
        }
        return;
    }

    // the warpgroup index through a shuffle: known warp-uniform, so A's descriptors stay in uniform registers (a
    // 128 x 64 tile's k-slab of 8 wgmma 106 -> 91 instructions, those tiles 6-10 % faster on the H200)
    const int wg = __shfl_sync(~0u, tid / 128 - 1, 0);
    const int warp = tid % 128 / 32, lane = tid % 32, g = lane / 4, t4 = lane % 4;
    const int wrow = wg * MT * 64;  // this warpgroup's first row in the tile
    CummTmaEpilogue<MT, BN, CUMM_BATCHED> epi{sm + STAGES * SB + wg * 64 * 128 * 2, &tmC, &cbar[wg], 1 + wg,
                                              tid % 128, warp, g, t4, 0};
    int* const flag = reinterpret_cast<int*>(skw);
    float* const part = skw + CUMM_SK_FLAGS;  // stream-K: a BM x BN partial per block
    auto sk_block = [&](int f) { return CL == 1 ? f : f * CL + rank; };  // item f's block of this rank
    unsigned it = 0;  // slabs consumed (the ring's position; unsigned: its % and / a mask and a shift)
    int t, k0, k1;
    for (int i = 0; walk.next(i, t, k0, k1); ++i) {
        const int2 o = origin(t);
        const int z = CUMM_BATCHED ? t / per : 0;  // the tile's product
        // The TMA epilogue takes every tile whose columns end on a 16-byte boundary (the copy engine clips the
        // box at rows M and columns N; boxes that crossed a column N off the 16-byte grid were once found to write
        // C's padding past N, so those edge tiles take the direct stores); a stream-K piece that does not end its
        // tile stores nothing.
        const bool ctma = CUMM_EPI_TMA && (N % 8 == 0 || o.y + BN <= N) && !(walk.piece(t) && k1 < KT);
        if (ctma && beta != 0.0f && tid % 128 == 0) epi.prefetch(o.y, o.x + wrow, z);
        float d[MT][BN / 2];
#pragma unroll
        for (int m = 0; m < MT; ++m)
#pragma unroll
            for (int e = 0; e < BN / 2; ++e) d[m][e] = 0.0f;
        for (int kt = k0; kt < k1; ++kt, ++it) {
            const int s = ring.wait(it);
            const unsigned a0 = base + s * SB + wrow * 128, b0 = base + s * SB + BM * 128;
            cumm_wgmma_slab16<MT, BN, CUMM_TA, CUMM_TB, 1>(d, a0, b0);
            cumm_wgmma_wait<1>();  // the previous slab's wgmma are done: hand its stage back
            if (kt > k0) ring.release<CL>((it - 1) % STAGES, lane, rank);
        }
        cumm_wgmma_wait<0>();
        ring.release<CL>((it - 1) % STAGES, lane, rank);
#pragma unroll
        for (int m = 0; m < MT; ++m) cumm_wgmma_pin(d[m]);

        if (walk.piece(t)) {  // a stream-K piece: partial sums go through the workspace
            if (k1 < KT) {  // not the tile's last slab: hand the partial to the block that has it
                cumm_sk_put<MT, BN / 2, CUMM_NC, 3>(d, part, flag, sk_block(first), tid - 128);
                continue;
            }
            // the tile's last slabs: add the partials of the blocks whose ranges cover the rest of the tile
            for (int p = first - 1; p >= 0 && walk.shares(p, t); --p)
                cumm_sk_add<MT, BN / 2, CUMM_NC, 3>(d, part, flag, sk_block(p), tid - 128);
        }
        if (ctma) {
            epi.store(d, o.y, o.x + wrow, z, alpha, beta);
            continue;
        }
        cumm_store_tile<MT, BN / 2, VEC_C>(d, C, z * bsc, ldc, M, N, o.x + wrow, o.y, warp, g, t4, alpha, beta);
    }
    if (CUMM_EPI_TMA && tid % 128 == 0) cumm_tma_store_wait_all();
    if (CL == 2) cumm_cluster_sync();
}
