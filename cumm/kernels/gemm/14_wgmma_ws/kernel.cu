// wgmma_ws: 13_wgmma, warp-specialized and persistent (sm_90a). What changes, and why it is faster:
// - A producer warpgroup (only one of its threads works: TMA needs one) fills the stage ring; WGS consumer
//   warpgroups only wait on "full" barriers and issue wgmma. In 13, thread 0 refilled a stage between its own
//   wgmma and waited there for every warp to release it, so all consumers ran in lockstep with the refill.
// - setmaxnreg: the producer gives its registers back (40 a thread) and the consumers take them (232), so the
//   BM x BN accumulators (BN / 2 FP32 per thread and m64 tile) fit beside the addressing.
// - Persistent grid: one block per multiprocessor walks the tiles t = blockIdx.x, + gridDim.x, ...; the stage
//   ring runs on across tiles, so the producer loads the next tile's first slabs while the consumers store the
//   current one (no pipeline refill or block launch per tile).
// - Tile order: groups of GM tile rows are walked column by column, so the blocks running at once share A row
//   panels and B column panels in L2 (fewer DRAM reads than row-major order over the whole grid).
// - K order: a block's whole tiles walk K forwards and backwards in turn. The blocks run their j-th tiles
//   together; at 4096^3 those 132 tiles read all of B (32 MB) and a quarter of A, too much to stay in the 50 MB
//   L2 until the next round wants it again from slab 0. Started from the end instead, the next round first reads
//   the slabs the last one read last, still in L2: DRAM reads 186 -> 127 MB at 4096^3 (cuBLAS: 149 MB).
// - EPI = 1, TMA-store epilogue: the consumers write their tile to shared memory (swizzled, conflict-free) and
//   one thread per warpgroup hands it to the copy engine, instead of 4-byte stores from every thread that cover
//   half of each 32-byte sector and keep the consumers from starting the next tile's wgmma (128 columns at a
//   time, a last 64 for BN = 192: the host takes 128 x 192 tiles where 128 x 256 ones would leave multiprocessors
//   idle in their last round, the spec's shape_config). With beta != 0 the same path reads C: the copy engine
//   loads a warpgroup's first 64 x 128 chunk of C into the staging buffer while the mainloop runs, the next ones
//   once the buffer is free, and each thread reads the values it then overwrites (before, beta != 0 took 4-byte
//   loads and stores from every thread: 0.81-0.83x cuBLAS's addmm at 4096^3, now 0.91-0.92x).
// - SK > 0, stream-K tail: when the tiles are not a whole number of waves (4096^3: 512 tiles of 128 x 256 on 132
//   blocks, 3.88 waves), the last tiles % blocks tiles are not handed out whole (a fourth round in which 16 of
//   132 multiprocessors would idle) but as one run of k-slabs cut into equal ranges, one per block, a tile
//   shared by at most SK + 1 blocks. A range holds the end of one tile and perhaps the start of the next; a
//   block does the start first, so all blocks begin at slab 0 together and stay within a few slabs of each
//   other (their A and B slabs stay in L2; taken in range order they spread over K: 0.93x whole tiles at
//   4096^3). A piece that does not end its tile adds nothing to C: it writes its partial sums to a workspace
//   (cumm's per-stream scratch buffer, `skw`) and raises its flag; the block that holds the tile's last slab
//   does that piece last, adds the partials, lowers their flags and stores the tile.
// - CL = 2: clusters of two blocks own two vertically adjacent tiles (same B column panel); each block loads
//   its own A and half of the B boxes, multicast into both blocks' shared memory: 2/3 of the L2 -> SM traffic
//   of CL = 1 for 128 x 256 tiles. A stage is refilled only when both blocks' consumers have released it (they
//   arrive on both blocks' empty barriers). On row pitches that are multiples of 32 bytes it measured no faster
//   than CL = 1. Where B's rows start off 32 bytes (a pitch of 8 mod 16 halves), the copy engine reads each box
//   row in several small requests, and halving a block's requests pays (the host picks CL = 2 there: the spec's
//   pitch_config). With stream-K, a cluster takes each k-range, each of its blocks on its own tile of the pair.
// - WGS = 1: one consumer warpgroup and 64-row tiles (256 threads), twice the tiles of 128-row ones for products
//   with few tiles (bf16 256 x 8192 x 8192: 128 whole tiles of 64 x 256 instead of 64 of 128 x 256 shared out by
//   stream-K, 60.6 against 68.4 us). Whole tiles only (SK = 0): with stream-K the producer spills under 40 registers.
// - WGS = 3: three consumer warpgroups of 64 rows (512 threads, 152 registers each under setmaxnreg), for 192-row
//   tiles: 192 x 128 tiles fill a round where 128 x 256 ones leave multiprocessors idle (3072 x 1024: 128 tiles
//   against 96), and 192 x 192 ones (three stages) do one round's work where 128 x 256 ones need two (1536 x
//   3072: 128 tiles against 144). Whole tiles only (SK = 0). ptxas fits the consumers in the 128 registers a
//   thread of 512 at launch (192 x 192: 96 accumulators); the setmaxnreg values only share the register file out
//   as for WGS <= 2.
// - PP = 1 (experimental): ping-pong; each consumer warpgroup owns whole tiles and the two take turns on the
//   mainloop, so one's epilogue overlaps the other's wgmma.
// - Batched variant (CUMM_BATCHED): the tiles of every product of the batch form one run that the persistent
//   blocks walk, so a batch of small products fills the GPU as one large product would (with a grid z over the
//   batch, 132 multiprocessors split between 96 products left 36 idle). Whole tiles only (no stream-K).
// Host: as 13 (maps for A: dims K x M, box 64 x BM; B: dims N x K, box 64 x 64; 128-byte swizzle; 16-byte
// aligned A and B, lda, ldb % 8 == 0), and a third map for C (dims N x M, box 64 x 64, 128-byte swizzle, 16-bit;
// used only with EPI = 1, VEC_C (C 16-byte aligned, ldc % 8 == 0) and 16-bit output, else any 64-byte-aligned
// 128 bytes). Grid: CL = 1: min(tiles, multiprocessors) blocks, all multiprocessors when stream-K takes fewer
// tiles than that; CL = 2: 2 min(tile pairs, resident clusters
// (cuOccupancyMaxActiveClusters)) blocks, cluster dims compiled in (__cluster_dims__). NUM_THREADS =
// 128 (WGS + 1); dynamic shared memory STAGES (BM + BN) 128 + 1024 + 16 STAGES + 32 (mbarriers; 40 for WGS =
// 3), plus 16384 WGS with EPI = 1. Batched variant: the three maps get the batch as a third dimension (batch
// strides bsa, bsb, bsc; a broadcast operand is a batch of one), the batch count follows bsc, the grid is
// min(batch x tiles, multiprocessors) blocks and skw is null.
// skw (last argument): with SK > 0 and a mostly empty last wave (the spec's workspace function decides), a
// workspace of CUMM_SK_FLAGS int flags, zero at launch and left so, then blocks x BM x BN floats; else null. The
// flags sit at a fixed place whatever the tile shape: one buffer serves every configuration on a stream, and a
// flag placed after the partials (where they ended for 128 x 256 tiles) read another shape's partial sums as
// raised flags: the first launch after a change of tile shape added partials not yet written.

#define CUMM_WG_STAGE_BYTES ((BM + BN) * 128)
#define CUMM_SK_FLAGS 4096  // stream-K flags at the workspace's start (the host gives stream-K at most this many blocks)
#define CUMM_NC (128 * WGS)  // consumer threads
// registers a consumer thread takes (setmaxnreg) beside the producer's 40: all 65536 of a multiprocessor
#define CUMM_CONSUMER_REGS (WGS == 3 ? 152 : 232)
#define CUMM_SK (SK > 0 && !CUMM_BATCHED)  // stream-K compiled in (a batch runs whole tiles)
#define CUMM_EPI_TMA (EPI && VEC_C && !OUT_F32)
#define CUMM_C_STAGE (CUMM_EPI_TMA ? WGS * 64 * 128 * 2 : 0)  // per WG: 64 rows x 128 columns of halves
// Operands given transposed (column-major: x.T, w.T), read in place: TA, A's columns contiguous (its map's
// dimensions M x K, boxes of 64 rows of M by 64 k, the warpgroups' descriptors M-major, wgmma imm-trans-a 1); TB,
// B's columns contiguous (dimensions K x N, boxes of 64 rows of N by 64 k, laid out and described as A's K-major
// rows are, imm-trans-b 0). The wgmma reads either layout from shared memory at the same rate.
#ifndef CUMM_TA
#define CUMM_TA 0
#endif
#ifndef CUMM_TB
#define CUMM_TB 0
#endif
#if CL == 2
#define CUMM_CLUSTER __cluster_dims__(2, 1, 1)
#else
#define CUMM_CLUSTER
#endif
// Batched variant: 3-D maps (the batch is their third dimension; a broadcast operand is matrix 0 of a batch of
// one), and the batch's tiles are one run that the persistent blocks walk: tile t is tile t % tiles of product
// t / tiles. The batch count comes after common.cuh's batch strides (the spec's schedules_batch).
#if CUMM_BATCHED
#define CUMM_WS_ARGS CUMM_GEMM16_ARGS, const i64 bsa, const i64 bsb, const i64 bsc, const int batch
#define CUMM_LOAD(dst, map, x, y, z, bar) cumm_tma_load_3d(dst, map, x, y, z, bar)
#define CUMM_STORE(map, src, x, y, z) cumm_tma_store_3d(map, src, x, y, z)
#else
#define CUMM_WS_ARGS CUMM_GEMM16_ARGS
#define CUMM_LOAD(dst, map, x, y, z, bar) cumm_tma_load(dst, map, x, y, bar)
#define CUMM_STORE(map, src, x, y, z) cumm_tma_store_2d(map, src, x, y)
#endif

extern "C" __global__ void __launch_bounds__(NUM_THREADS, 1) CUMM_CLUSTER
    CUMM_KERNEL(CUMM_WS_ARGS, const __grid_constant__ CummTmap tmA, const __grid_constant__ CummTmap tmB,
                const __grid_constant__ CummTmap tmC, float* __restrict__ skw) {
    constexpr int MT = PP ? BM / 64 : BM / 64 / WGS, SB = CUMM_WG_STAGE_BYTES;
    static_assert(MT * 64 * (PP ? 1 : WGS) == BM && BN % 64 == 0 && BN <= 256 && NUM_THREADS == 128 * (WGS + 1), "tile shape");
    static_assert(CL == 1 || CL == 2, "CL = 2: clusters of two blocks split the B boxes (an odd count: rank 0 one more)");
    static_assert(!PP || WGS == 2, "ping-pong alternates two consumer warpgroups");
    static_assert(SK == 0 || PP == 0, "stream-K hands out k-ranges to blocks (or clusters) in turn");
    static_assert(SK == 0 || WGS <= 2, "three consumer warpgroups run whole tiles (named barrier 3 is warpgroup 2's)");
    static_assert(!CUMM_BATCHED || CL == 1, "batched products run CL = 1: a batch's tiles are walked one at a time");
    static_assert(!(CUMM_TA || CUMM_TB) || CL == 1, "transposed operands run CL = 1: each block loads its own");
    extern __shared__ unsigned char smem_raw[];
    const unsigned raw = cumm_smem_u32(smem_raw), base = (raw + 1023) & ~1023u;
    unsigned char* const sm = smem_raw + (base - raw);
    unsigned long long* const full = reinterpret_cast<unsigned long long*>(sm + STAGES * SB + CUMM_C_STAGE);
    unsigned long long* const empty = full + STAGES;
    unsigned long long* const handoff = empty + STAGES;  // PP = 1: handoff[w]: the other warpgroup's mainloop ended
    unsigned long long* const cbar = handoff + 2;  // EPI = 1, beta != 0: cbar[w]: a chunk of C landed for warpgroup w

    const int tid = threadIdx.x;
    // CL = 2: the schedule walks pairs of tile rows (a cluster's two tiles); rank r takes row 2 p + r. An odd
    // last row's partner tile lies past M: it loads zeros (and its B half for the partner) and stores nothing.
    const int ntm = (M + BM * CL - 1) / (BM * CL), ntn = (N + BN - 1) / BN, per = ntm * ntn;
#if CUMM_BATCHED
    const int tiles = per * batch;
#else
    const int tiles = per;
#endif
    const int KT = (K + 63) / 64;
    const int rank = CL == 1 ? 0 : (int)cumm_cluster_ctarank();
    const int first = CL == 1 ? blockIdx.x : blockIdx.x / CL, step = CL == 1 ? gridDim.x : gridDim.x / CL;
    // stream-K's flag and partial sums of the block that is item `first`'s rank r (a cluster's two blocks run
    // the same items, each on its own tile of the pair)
    auto sk_block = [&](int f) { return CL == 1 ? f : f * CL + rank; };

    // Work items (tile t, slabs k0 <= kt < k1). Whole tiles first, t = first, + step, ... below `dp`; then,
    // with stream-K (a workspace given: the host passes none when whole tiles pay), the U slabs of the last
    // tiles % step tiles in P equal ranges [U p / P, U (p + 1) / P), one per block p < P. A range is no longer
    // than a tile (P >= those tiles): it holds the end of one tile and perhaps the start of the next, which
    // comes first.
    const int dp = (CUMM_SK && skw != nullptr) ? tiles - tiles % step : tiles;  // tiles handed out whole
    const long long U = (long long)(tiles - dp) * KT;
    const int P = (int)min((long long)min(step, (tiles - dp) * (SK > 0 ? SK : 1)), U);
    const int whole = first < dp ? (dp - 1 - first) / step + 1 : 0;
    auto item = [&](int j, int& t, int& k0, int& k1) -> bool {
        if (j < whole) {
            t = first + j * step, k0 = 0, k1 = KT;
            return true;
        }
        j -= whole;
        if (!CUMM_SK || first >= P || j > 1) return false;
        const long long s = U * first / P, e = U * (first + 1) / P, nb = (s / KT + 1) * KT;  // next tile's start
        if (e <= nb && j == 1) return false;
        const long long u0 = e <= nb ? s : (j == 0 ? nb : s), u1 = e <= nb ? e : (j == 0 ? e : nb);
        t = dp + (int)(u0 / KT), k0 = (int)(u0 % KT), k1 = k0 + (int)(u1 - u0);
        return true;
    };

    if (tid == 0) {
        cumm_prefetch_tmap(&tmA);
        cumm_prefetch_tmap(&tmB);
        for (int s = 0; s < STAGES; ++s) {
            cumm_mbar_init<1>(&full[s]);
            cumm_mbar_init<4 * (PP ? 1 : WGS) * CL>(&empty[s]);  // one arrival per consumer warp (of the cluster)
        }
        if (PP) {
            cumm_mbar_init<4>(&handoff[0]);
            cumm_mbar_init<4>(&handoff[1]);
        }
        if (CUMM_EPI_TMA)
            for (int w = 0; w < WGS; ++w) cumm_mbar_init<1>(&cbar[w]);
        cumm_mbar_init_fence();
    }
    if (CL == 1)
        __syncthreads();
    else
        cumm_cluster_sync();  // every block's barriers exist before anyone multicasts or arrives remotely

    if (tid < 128) {  // producer warpgroup
        cumm_setmaxnreg_dec<40>();
        if (tid == 0) {
            int it = 0;  // slabs issued by this block, over all its tiles
            int t, k0, k1;
            for (int j = 0; item(j, t, k0, k1); ++j) {
                const int2 tc = cumm_tile_coord(t % per, ntm, ntn, GM);
                const int bm0 = (tc.x * CL + rank) * BM, bn0 = tc.y * BN;
#if CUMM_BATCHED
                const int za = bsa ? t / per : 0, zb = bsb ? t / per : 0;  // a broadcast operand: matrix 0
#else
                const int za = 0, zb = 0;
#endif
                for (int kt = k0; kt < k1; ++kt, ++it) {
                    const int s = it % STAGES;
                    // every other whole tile walks K backwards (see the header): it starts on the slabs the
                    // tiles before it ended on, which are still in L2
                    const int kc = (j < whole && (j & 1)) ? KT - 1 - kt : kt;
                    // first round: passes at once (waits for the phase before the barrier's first)
                    cumm_mbar_wait(&empty[s], ((it / STAGES) & 1) ^ 1);
                    unsigned char* const st = sm + s * SB;
                    cumm_mbar_expect(&full[s], SB);  // A, and all of B: half from this block, half from the other
                    if (CUMM_TA) {  // M-major A: BM / 64 boxes of 64 rows of M by 64 k
#pragma unroll
                        for (int c = 0; c < BM / 64; ++c)
                            CUMM_LOAD(st + c * 8192, &tmA, bm0 + 64 * c, kc * 64, za, &full[s]);
                    } else {
                        CUMM_LOAD(st, &tmA, kc * 64, bm0, za, &full[s]);
                    }
                    if (CUMM_TB) {  // K-major B: BN / 64 boxes of 64 rows of N by 64 k, one after another
#pragma unroll
                        for (int j = 0; j < BN / 64; ++j)
                            CUMM_LOAD(st + BM * 128 + j * 8192, &tmB, kc * 64, bn0 + 64 * j, zb, &full[s]);
                    } else {
#pragma unroll
                        for (int j = 0; j < BN / 64; ++j) {
                            if (CL == 1)
                                CUMM_LOAD(st + BM * 128 + j * 8192, &tmB, bn0 + 64 * j, kc * 64, zb, &full[s]);
                            else if (j % 2 == rank)
                                cumm_tma_load_2d_mc(st + BM * 128 + j * 8192, &tmB, bn0 + 64 * j, kc * 64, &full[s], 3);
                        }
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

    cumm_setmaxnreg_inc<CUMM_CONSUMER_REGS>();
    const int wg = tid / 128 - 1, warp = tid % 128 / 32, lane = tid % 32;
    const int g = lane / 4, t4 = lane % 4;
    int it = 0;  // slabs consumed (the ring's position)
    // hand stage s back: to this block's producer, and with CL = 2 to the other block's, which multicasts into it
    auto release = [&](int s) {
        if (lane == 0) {
            cumm_mbar_arrive(&empty[s]);
            if (CL == 2) cumm_mbar_arrive_remote(&empty[s], rank ^ 1);
        }
    };
    int k = 0;  // PP = 1: tiles this warpgroup has started
    int cph = 0;  // EPI = 1, beta != 0: chunks of C this warpgroup has loaded (cbar[wg]'s phase)
    int t, k0, k1;
    for (int i = 0; item(i, t, k0, k1); ++i) {
        // PP = 1: warpgroup wg takes every WGS-th tile; the producer fills the ring in tile order, so the other
        // warpgroup's first slabs arrive as this one's last are consumed: one runs its mainloop while the
        // other stores its tile, and the tensor cores stay busy across tile boundaries.
        // The mainloops take turns (handoff barriers): a warpgroup starts tile i only once the other has finished
        // tile i - 1's, so it never waits on a full barrier more than one phase ahead (a parity wait cannot tell
        // phase p from p + 2; without the turns, PP = 1 hung once blocks had two tiles of many slabs).
        if (PP && i % WGS != wg) continue;
        if (PP) {
            const int q = wg == 0 ? k - 1 : k;  // completed turns of handoff[wg] this tile needs, minus one
            if (q >= 0) cumm_mbar_wait(&handoff[wg], q & 1);
            ++k;
        }
        if (PP) it = i * KT;
        const int2 tc = cumm_tile_coord(t % per, ntm, ntn, GM);
        const int bm0 = (tc.x * CL + rank) * BM, bn0 = tc.y * BN;
        [[maybe_unused]] const int z = CUMM_BATCHED ? t / per : 0;  // the tile's product
        const int wrow = PP ? 0 : wg * MT * 64;  // this warpgroup's first row in the tile
#if CUMM_EPI_TMA
        // The TMA epilogue below takes every tile whose columns end on a 16-byte boundary (the copy engine clips
        // the box at rows M and columns N; for other N the edge column tiles take the direct stores); a stream-K
        // piece that does not end its tile stores nothing.
        const bool ctma = (N % 8 == 0 || bn0 + BN <= N) && !(CUMM_SK && t >= dp && k1 < KT);
        unsigned char* const cs = sm + STAGES * SB + wg * 64 * 128 * 2;  // this warpgroup's staging buffer
        // beta != 0: the epilogue reads C through the staging buffer in chunks of 64 rows x 128 columns; the
        // first is loaded now, so that it lands while the mainloop runs.
        if (ctma && beta != 0.0f && tid % 128 == 0) {
            cumm_tma_store_wait_read();  // the last tile's stores have read the buffer
            cumm_mbar_expect(&cbar[wg], (BN >= 128 ? 2 : 1) * 8192);
            CUMM_LOAD(cs, &tmC, bn0, bm0 + wrow, z, &cbar[wg]);
            if (BN >= 128) CUMM_LOAD(cs + 8192, &tmC, bn0 + 64, bm0 + wrow, z, &cbar[wg]);
        }
#endif
        float d[MT][BN / 2];
#pragma unroll
        for (int m = 0; m < MT; ++m)
#pragma unroll
            for (int e = 0; e < BN / 2; ++e) d[m][e] = 0.0f;
        for (int kt = k0; kt < k1; ++kt, ++it) {
            const int s = it % STAGES;
            cumm_mbar_wait(&full[s], (it / STAGES) & 1);
            const unsigned a0 = base + s * SB + wrow * 128, b0 = base + s * SB + BM * 128;
            cumm_wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < 4; ++kk)
#pragma unroll
                for (int m = 0; m < MT; ++m)  // (an M-major A: m64 block m is one box, 8 KB = 64 * 128 bytes)
                    cumm_wgmma16<BN, CUMM_TA, !CUMM_TB>(
                        d[m],
                        CUMM_TA ? cumm_wg_desc_mn(a0 + m * 64 * 128 + 2048 * kk, 8192)
                                : cumm_wg_desc_k(a0 + m * 64 * 128 + 32 * kk),
                        CUMM_TB ? cumm_wg_desc_k(b0 + 32 * kk) : cumm_wg_desc_mn(b0 + 2048 * kk, 8192), 1);
            cumm_wgmma_commit();
            cumm_wgmma_wait<1>();  // the previous slab's wgmma are done: hand its stage back
            if (kt > k0) release((it - 1) % STAGES);
        }
        cumm_wgmma_wait<0>();
        release((it - 1) % STAGES);
        if (PP && lane == 0) cumm_mbar_arrive(&handoff[wg ^ 1]);  // the other warpgroup's turn
#pragma unroll
        for (int m = 0; m < MT; ++m) cumm_wgmma_pin(d[m]);

        if (CUMM_SK && t >= dp) {  // a stream-K piece: partial sums go through the workspace
            // skw: a flag per block, then one BM x BN partial per block, each thread's accumulators as float4
            // columns (coalesced)
            const int ct = tid - 128;
            int* const flag = reinterpret_cast<int*>(skw);
            float* const part = skw + CUMM_SK_FLAGS;
            if (k1 < KT) {  // not the tile's last slab: hand the partial to the block that has it
                float4* const w = reinterpret_cast<float4*>(part + (size_t)sk_block(first) * BM * BN) + ct;
#pragma unroll
                for (int m = 0; m < MT; ++m)
#pragma unroll
                    for (int e = 0; e < BN / 8; ++e)
                        __stcg(w + (m * BN / 8 + e) * CUMM_NC,
                               make_float4(d[m][4 * e], d[m][4 * e + 1], d[m][4 * e + 2], d[m][4 * e + 3]));
                __threadfence();
                cumm_bar_sync<3, CUMM_NC>();
                if (ct == 0)
                    cumm_flag_release(flag + sk_block(first));
                continue;
            }
            // the tile's last slabs: add the partials of the blocks whose ranges cover the rest of the tile
            for (int p = first - 1; p >= 0 && U * (p + 1) / P > (long long)(t - dp) * KT; --p) {
                const int pb = sk_block(p);
                if (ct == 0) {
                    int up;
                    do up = cumm_flag_acquire(flag + pb);
                    while (!up);
                    flag[pb] = 0;  // read once per launch: ready for the next launch on this stream
                }
                cumm_bar_sync<3, CUMM_NC>();
                const float4* const w = reinterpret_cast<const float4*>(part + (size_t)pb * BM * BN) + ct;
#pragma unroll
                for (int m = 0; m < MT; ++m)
#pragma unroll
                    for (int e = 0; e < BN / 8; ++e) {
                        const float4 v = __ldcg(w + (m * BN / 8 + e) * CUMM_NC);
                        d[m][4 * e] += v.x, d[m][4 * e + 1] += v.y, d[m][4 * e + 2] += v.z, d[m][4 * e + 3] += v.w;
                    }
            }
        }

#if CUMM_EPI_TMA
        // Edge tiles too, when N % 8 == 0: the box is clipped at row M and column N. Boxes that crossed a column
        // N off the 16-byte grid were once found to write C's padding past N (ldc > N); those edge tiles take
        // the predicated direct stores below (a lab variant measured +2 % at bf16 3000 x 5000 x 2000 with the
        // edge tiles stored so; the shapes table moved within its spread).
        if (ctma) {
            // Through shared memory and the copy engine: each warpgroup writes its 64 rows, 128 columns at a time
            // (a last chunk of 64 when BN % 128 == 64), as 64 x 64 boxes in the 128-byte-swizzled layout (chunk c
            // of row r at c ^ (r % 8): the 8 rows of a warp's stores hit different banks), and one thread stores
            // them. The consumers go on to the next tile while the stores drain. With beta != 0 the chunk of C is
            // loaded into the same place first (the same swizzle: each thread reads the values it then overwrites).
            const int wtid = tid % 128;
#pragma unroll
            for (int m = 0; m < MT; ++m)
#pragma unroll
                for (int half = 0; half < (BN + 127) / 128; ++half) {
                    const int nb = BN - half * 128 >= 128 ? 2 : 1;  // 64-column boxes in this chunk
                    // thread (warp, g, t4)'s pair of columns j of row r: 4-byte word t4 of 16-byte chunk j % 8 (of
                    // box j / 8), swizzled
                    auto at = [&](int jj, int r) {
                        return reinterpret_cast<unsigned*>(cs + (jj / 8) * 8192 + r * 128 + ((jj % 8) ^ (r % 8)) * 16 + 4 * t4);
                    };
                    if (beta == 0.0f) {
                        unsigned v[16][2];  // the chunk converted while the previous stores drain
#pragma unroll
                        for (int jj = 0; jj < 16; ++jj)
#pragma unroll
                            for (int h = 0; h < 2; ++h) {
                                const int j = half * 16 + jj;
                                if (jj < 8 * nb)  // (a last chunk of 64 columns: the first 8 only)
                                    v[jj][h] = cumm_f2h2(alpha * d[m][4 * j + 2 * h], alpha * d[m][4 * j + 2 * h + 1]);
                            }
                        if (wtid == 0) cumm_tma_store_wait_read();  // the previous stores have read the buffer
                        cumm_bar_sync<128>(1 + wg);
#pragma unroll
                        for (int jj = 0; jj < 16; ++jj)
#pragma unroll
                            for (int h = 0; h < 2; ++h)
                                if (jj < 8 * nb) *at(jj, warp * 16 + g + 8 * h) = v[jj][h];
                    } else {  // beta != 0: chunk 0 came with the mainloop; the others are loaded once the
                        // buffer is free (the last chunk's stores have read it)
                        if (wtid == 0 && m + half > 0) {
                            cumm_tma_store_wait_read();
                            cumm_mbar_expect(&cbar[wg], nb * 8192);
                            CUMM_LOAD(cs, &tmC, bn0 + half * 128, bm0 + wrow + m * 64, z, &cbar[wg]);
                            if (nb == 2)
                                CUMM_LOAD(cs + 8192, &tmC, bn0 + half * 128 + 64, bm0 + wrow + m * 64, z, &cbar[wg]);
                        }
                        cumm_mbar_wait(&cbar[wg], cph++ & 1);
#pragma unroll
                        for (int jj = 0; jj < 16; ++jj)
#pragma unroll
                            for (int h = 0; h < 2; ++h) {
                                const int j = half * 16 + jj;
                                if (jj >= 8 * nb) continue;  // a last chunk of 64 columns
                                unsigned* const p = at(jj, warp * 16 + g + 8 * h);
                                const unsigned c = *p;
                                *p = cumm_f2h2(alpha * d[m][4 * j + 2 * h] + beta * cumm_h2f((cumm_h16)(c & 0xffffu)),
                                               alpha * d[m][4 * j + 2 * h + 1] + beta * cumm_h2f((cumm_h16)(c >> 16)));
                            }
                    }
                    cumm_fence_proxy_async_shared();  // generic-proxy stores -> the copy engine
                    cumm_bar_sync<128>(1 + wg);
                    if (wtid == 0) {
                        const int row0 = bm0 + wrow + m * 64;
                        CUMM_STORE(&tmC, cs, bn0 + half * 128, row0, z);
                        if (nb == 2) CUMM_STORE(&tmC, cs + 8192, bn0 + half * 128 + 64, row0, z);
                        cumm_tma_store_commit();
                    }
                }
            continue;
        }
#endif
#pragma unroll
        for (int m = 0; m < MT; ++m)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int row = bm0 + wrow + m * 64 + warp * 16 + g + 8 * h;
                if (row >= M) continue;
                cumm_out_t* crow = C + (i64)row * ldc;
#if CUMM_BATCHED
                crow += z * bsc;
#endif
#pragma unroll
                for (int j = 0; j < BN / 8; ++j)
                    cumm_store_pair<VEC_C>(crow, bn0 + 8 * j + 2 * t4, N, d[m][4 * j + 2 * h], d[m][4 * j + 2 * h + 1],
                                           alpha, beta);
            }
    }
#if CUMM_EPI_TMA
    if (tid % 128 == 0) cumm_tma_store_wait_all();
#endif
    if (CL == 2) cumm_cluster_sync();
}
