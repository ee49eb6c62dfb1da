// wgmma_grouped: 14_wgmma_ws's warp-specialized persistent mainloop (sm_90a) over the tiles of G products that
// share N and K and differ in M, known only on the device: a mixture-of-experts layer (each expert's tokens times
// its weights). What it adds to 14:
// - The group table: before the roles split, warp 0 reads the G row counts (`offs`: MASKED = 0, G cumulative row
//   ends of a contiguous A, as torch._grouped_mm's offs; MASKED = 1, G valid-row counts of a (G, max_m, K) A) and
//   scans them, a warp shuffle per 32 groups, into shared memory: each group's row end and the walk's first tile
//   past it. Bad device offsets are clamped, never read past: a row end is the running maximum of the ends so far
//   (decreasing offsets make empty groups), at least 0 and at most `rows` (the rows of A); a masked count is
//   clamped to [0, max_m]. So no load or store leaves A, B or C whatever the offsets hold.
// - One persistent walk (CummTileWalk, whole tiles) over the tiles of all groups, group after group: tile t's
//   group is a binary search of the table (log2 G shared loads), its place in the group cumm_tile_coord's grouped
//   order (GM tile rows column by column). The blocks running at once work on one or two groups: a group's B
//   (its expert's weights) is read from DRAM about once and served from L2 to the group's other tile rows.
// - A through a 2-D map (contiguous: rows of all groups; a tile's last rows may belong to the next group: loaded,
//   multiplied, never stored) or a 3-D map (masked: matrix g); B through a 3-D map, matrix g (B given as (G, K, N),
//   or transposed, CUMM_TB: the (G, N, K) weights that models store, read K-major in place).
// - EPI = 1, the TMA-store epilogue (CummTmaEpilogue, as 14's): a warpgroup's 64-row block goes to C through a
//   swizzled staging buffer and the copy engine, and the consumers start the next tile's wgmma while it drains.
//   The copy engine clips a box only at a map's edges, and a group ends anywhere: a block wholly inside its group
//   goes through tmC (C's rows, 2-D); one that crosses the group's end through tmK, the clip map: 3-D, dims N x BM
//   x (R + 1), both outer strides one row (overlapping), based BM rows before C, so element (n, y, z) is row
//   z + y - BM. Stored at z = the group's row end and y = row - end + BM, the rows at or past the end have y >= BM
//   and are clipped; every row before it is in the box's reach (a crossing block starts less than BM rows before
//   the end). Masked: C's groups as one column of R = (G - 1) gs + max_m rows (gs = bsc / ldc, the host takes
//   EPI = 1 only when bsc is whole rows), the end z = g gs + count. Column-edge tiles with N % 8 != 0 and EPI = 0
//   take direct stores (cumm_store_tile), each row checked against the group's end.
// - The group table lives in dynamic shared memory after the ring's barriers, 8 G + 16 bytes (the host adds it to
//   the launch's shared memory): with the epilogue's 32 KB staging, 4 stages of 128 x 256 leave room for 246
//   groups, 3 stages for GMAX (the plan takes 3 where G needs it).
// - SK > 0, stream-K tail (14's, on the same CummTileWalk and workspace): the tile count is known only on the
//   device, so the kernel itself applies 14's host rule to it: when the tiles leave a last round at most 60 % full
//   (and a tile has at least SKMIN k-slabs, or the tiles are fewer than the blocks), the last tiles % blocks tiles
//   are shared out as equal k-ranges over every block instead of a round in which the other blocks idle (8 groups
//   of 2048 x 4096 x 7168: 2048 tiles of 128 x 256, 15.5 rounds on 132 blocks). A piece that does not end its tile
//   puts its partial sums in the workspace `skw` and raises its flag; the block with the tile's last slab adds
//   them and runs the epilogue. skw null (no workspace: the host's choice, or a stream being captured into a
//   graph before it has one): whole tiles.
// Why one launch beats a loop of G matmuls: a loop pays a launch (~4-5 us of host time at G = 64, more than some
// products take) and a tail wave per expert (a product of 512 rows x 4096 columns is 64 tiles of 128 x 256 on 132
// multiprocessors: half of them idle); one walk packs every group's tiles into whole waves, and the next tile's
// first slabs load while the consumers store the last one, across group boundaries.
// Prediction (H200, bf16, MoE shapes of docs/grouped.md): the first pass (direct stores) measured 0.86-0.95x
// torch._grouped_mm on balanced groups, worst at K = 2048 (32 slabs a tile: the stores are a larger part of each
// tile); the TMA-store epilogue overlaps them with the next tile's mainloop, as it did for wgmma_ws: +5-10 % at K =
// 2048, +2-5 % at K = 7168, reaching about 1.0x torch._grouped_mm on the balanced shapes.
// Arguments: G groups; rows: the rows of A (contiguous: total tokens; masked: max_m); N, K; offs: G int32 on the
// device; C (row pitch ldc, masked: group stride bsc elements); maps: A (contiguous: dims K x rows, box 64 x BM;
// masked: K x max_m x G), B (dims N x K x G, box 64 x 64; CUMM_TB: K x N x G), 128-byte swizzle, 16-bit elements;
// EPI = 1: C's maps tmC (dims N x R, box 64 x 64) and tmK (the clip map above, box 64 x 64 x 1), 128-byte swizzle
// (EPI = 0: any 64-byte aligned 128 bytes, unused). Grid: one block per multiprocessor (the host cannot know the
// tile count without reading offs). Dynamic shared memory: the spec's smem plus 8 G + 16 bytes (the table).
// skw (last argument): SK > 0, CUMM_SK_FLAGS zeroed int flags (left zero), then gridDim.x x BM x BN floats; or null.

#define CUMM_C_STAGE (EPI ? WGS * 64 * 128 * 2 : 0)  // the epilogue's staging: 64 rows x 128 columns per warpgroup
#define CUMM_SK_FLAGS 4096                           // stream-K flags at the workspace's start (14's layout)

extern "C" __global__ void __launch_bounds__(NUM_THREADS, 1)
    CUMM_KERNEL(const int G, const int rows, const int N, const int K, const int* __restrict__ offs,
                cumm_out_t* __restrict__ C, const int ldc, const i64 bsc, const __grid_constant__ CummTmap tmA,
                const __grid_constant__ CummTmap tmB, const __grid_constant__ CummTmap tmC,
                const __grid_constant__ CummTmap tmK, float* __restrict__ skw) {
    constexpr int MT = BM / 64 / WGS, SB = (BM + BN) * 128;  // m64 blocks of a consumer warpgroup; stage bytes
    static_assert(MT * 64 * WGS == BM && BN % 64 == 0 && BN <= 256 && NUM_THREADS == 128 * (WGS + 1), "tile shape");
    static_assert(MASKED == 0 || MASKED == 1, "MASKED is 0 (contiguous A) or 1 (A of shape G x max_m x K)");
    static_assert(EPI == 0 || EPI == 1, "EPI is 0 (direct stores) or 1 (TMA-store epilogue)");
    static_assert(SK == 0 || WGS == 2, "stream-K runs two consumer warpgroups (named barrier 3 is theirs)");
    extern __shared__ unsigned char smem_raw[];
    const unsigned raw = cumm_smem(smem_raw), base = (raw + 1023) & ~1023u;  // swizzle atoms: 1024-aligned
    unsigned char* const sm = smem_raw + (base - raw);
    unsigned long long* const bars = reinterpret_cast<unsigned long long*>(sm + STAGES * SB + CUMM_C_STAGE);
    const CummRing<STAGES> ring{bars, bars + STAGES};
    int* const g_rend = reinterpret_cast<int*>(bars + 2 * STAGES);  // group g's row end (contiguous: its start is
                                                                    // g_rend[g - 1]; masked: its count)
    int* const g_tend = g_rend + G;  // the walk's tiles of groups 0..g
    int& s_tiles = g_tend[G];
    const int tid = threadIdx.x, lane = tid % 32;
    const int ntn = (N + BN - 1) / BN, KT = (K + 63) / 64;

    if (tid < 32) {  // the group table: one warp scans the G counts, 32 at a time
        int rcarry = 0, tcarry = 0;  // the previous chunk's last row end and tile end
        for (int c = 0; c < G; c += 32) {
            const int gi = c + lane;
            const int v = gi < G ? offs[gi] : 0;
            int end = min(max(v, 0), rows), cnt;
            if (MASKED) {
                cnt = end;
            } else {  // a running maximum: row ends never decrease (a smaller offset makes an empty group)
#pragma unroll
                for (int d = 1; d < 32; d <<= 1) {
                    const int o = __shfl_up_sync(0xffffffffu, end, d);
                    if (lane >= d) end = max(end, o);
                }
                end = max(end, rcarry);
                const int prev = __shfl_up_sync(0xffffffffu, end, 1);
                cnt = end - (lane ? prev : rcarry);
                rcarry = __shfl_sync(0xffffffffu, end, 31);
            }
            int tiles = gi < G ? (cnt + BM - 1) / BM * ntn : 0;
#pragma unroll
            for (int d = 1; d < 32; d <<= 1) {
                const int o = __shfl_up_sync(0xffffffffu, tiles, d);
                if (lane >= d) tiles += o;
            }
            tiles += tcarry;
            tcarry = __shfl_sync(0xffffffffu, tiles, 31);
            if (gi < G) g_rend[gi] = end, g_tend[gi] = tiles;
        }
        if (lane == 0) s_tiles = tcarry;
    }
    ring.start<4 * WGS>(tid, &tmA, &tmB);  // one arrival per consumer warp

    // Tile t of the walk: its group, first row, the group's row end (rows at or past it are not stored), first column
    auto locate = [&](int t, int& grp, int& row0, int& rend, int& col0) {
        int lo = 0, hi = G - 1;  // the first group whose tiles end past t (empty groups end where the last did)
        while (lo < hi) {
            const int mid = (lo + hi) / 2;
            if (g_tend[mid] > t)
                hi = mid;
            else
                lo = mid + 1;
        }
        grp = lo;
        const int t0 = lo ? g_tend[lo - 1] : 0, rs = (MASKED || lo == 0) ? 0 : g_rend[lo - 1];
        rend = g_rend[lo];
        const int2 tc = cumm_tile_coord(t - t0, (rend - rs + BM - 1) / BM, ntn, GM);
        row0 = rs + tc.x * BM, col0 = tc.y * BN;
    };
    // stream-K where the last round is at most 60 % full (14's spec rule, applied to the device's tile count)
    const int tiles = s_tiles, rem = tiles % (int)gridDim.x;
    const bool split = SK > 0 && skw != nullptr && rem != 0 && 5 * rem <= 3 * (int)gridDim.x &&
                       (tiles < (int)gridDim.x || KT >= SKMIN) && gridDim.x <= CUMM_SK_FLAGS;
    const CummTileWalk<SK> walk(tiles, KT, blockIdx.x, gridDim.x, split);

    if (cumm_ws_producer<40, 232>(tid)) {
        if (tid == 0) {
            int it = 0;  // slabs issued by this block, over all its tiles
            int t, k0, k1, grp, row0, rend, col0;
            for (int j = 0; walk.next(j, t, k0, k1); ++j) {
                locate(t, grp, row0, rend, col0);
                for (int kt = k0; kt < k1; ++kt, ++it) {
                    const int kc = walk.slab(j, kt);
                    const int s = ring.acquire(it, SB);
                    unsigned char* const st = sm + s * SB;
                    cumm_tma_load_z<MASKED>(st, &tmA, kc * 64, row0, grp, &ring.full[s]);
#pragma unroll
                    for (int b = 0; b < BN / 64; ++b) {  // B: BN / 64 boxes of group grp's matrix
                        unsigned char* const sb = st + BM * 128 + b * 8192;
                        if (CUMM_TB)  // K-major B (the transposed weights): boxes of 64 rows of N by 64 k
                            cumm_tma_load_3d(sb, &tmB, kc * 64, col0 + 64 * b, grp, &ring.full[s]);
                        else
                            cumm_tma_load_3d(sb, &tmB, col0 + 64 * b, kc * 64, grp, &ring.full[s]);
                    }
                }
            }
        }
        return;
    }

    const int wg = tid / 128 - 1, warp = tid % 128 / 32, g8 = lane / 4, t4 = lane % 4;
    const int wrow = wg * MT * 64;  // this warpgroup's first row in the tile
    // EPI = 1: two views of one staging buffer, C's rows (tmC) and the clip map (tmK); beta = 0, so no C loads
    unsigned char* const cs = sm + STAGES * SB + wg * 64 * 128 * 2;
    CummTmaEpilogue<MT, BN, 0> epi{cs, &tmC, bars, 1 + wg, tid % 128, warp, g8, t4, 0};
    CummTmaEpilogue<MT, BN, 1> epk{cs, &tmK, bars, 1 + wg, tid % 128, warp, g8, t4, 0};
    const int gs = EPI && MASKED ? (int)(bsc / ldc) : 0;  // masked: C's rows per group in tmC's and tmK's rows
    int* const flag = reinterpret_cast<int*>(skw);
    float* const part = skw + CUMM_SK_FLAGS;  // stream-K: a BM x BN partial per block
    int it = 0;  // slabs consumed (the ring's position)
    int t, k0, k1, grp, row0, rend, col0;
    for (int i = 0; walk.next(i, t, k0, k1); ++i) {
        locate(t, grp, row0, rend, col0);
        float d[MT][BN / 2];
#pragma unroll
        for (int m = 0; m < MT; ++m)
#pragma unroll
            for (int e = 0; e < BN / 2; ++e) d[m][e] = 0.0f;
        for (int kt = k0; kt < k1; ++kt, ++it) {
            const int s = ring.wait(it);
            const unsigned a0 = base + s * SB + wrow * 128, b0 = base + s * SB + BM * 128;
            cumm_wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < 4; ++kk)
#pragma unroll
                for (int m = 0; m < MT; ++m)
                    cumm_wgmma16<BN, 0, !CUMM_TB>(
                        d[m], cumm_wg_desc_k(a0 + m * 64 * 128 + 32 * kk),
                        CUMM_TB ? cumm_wg_desc_k(b0 + 32 * kk) : cumm_wg_desc_mn(b0 + 2048 * kk, 8192), 1);
            cumm_wgmma_commit();
            cumm_wgmma_wait<1>();  // the previous slab's wgmma are done: hand its stage back
            if (kt > k0) ring.release<1>((it - 1) % STAGES, lane, 0);
        }
        cumm_wgmma_wait<0>();
        ring.release<1>((it - 1) % STAGES, lane, 0);
#pragma unroll
        for (int m = 0; m < MT; ++m) cumm_wgmma_pin(d[m]);
        if (walk.piece(t)) {  // a stream-K piece: partial sums go through the workspace
            if (k1 < KT) {    // not the tile's last slab: hand the partial to the block that has it
                cumm_sk_put<MT, BN / 2, 256, 3>(d, part, flag, blockIdx.x, tid - 128);
                continue;
            }
            for (int p = (int)blockIdx.x - 1; p >= 0 && walk.shares(p, t); --p)
                cumm_sk_add<MT, BN / 2, 256, 3>(d, part, flag, p, tid - 128);
        }
        if (EPI && (N % 8 == 0 || col0 + BN <= N)) {  // (a box crossing N off the 16-byte grid: direct stores)
            const int r0 = row0 + wrow;  // this warpgroup's first row (masked: in its group)
            if (r0 + MT * 64 <= rend)  // wholly inside the group
                epi.store(d, col0, grp * gs + r0, 0, 1.0f, 0.0f);
            else if (r0 < rend)  // crosses the group's end: rows at or past it clipped by tmK
                epk.store(d, col0, r0 - rend + BM, grp * gs + rend, 1.0f, 0.0f);
            continue;
        }
        // rows from rend on belong to the next group (contiguous) or lie past masked_m (masked): not stored
        cumm_store_tile<MT, BN / 2, VEC_C>(d, C, MASKED ? (i64)grp * bsc : (i64)0, ldc, rend, N, row0 + wrow, col0,
                                          warp, g8, t4, 1.0f, 0.0f);
    }
    if (EPI && tid % 128 == 0) cumm_tma_store_wait_all();  // the staging buffer stays until the stores read it
}
