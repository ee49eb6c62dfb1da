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
// - Direct stores (cumm_store_tile), each row checked against its group's row end: a TMA store would clip at the
//   map's edge only, and write the next group's rows (contiguous) or the rows past masked_m (masked: left untouched).
// Why one launch beats a loop of G matmuls: a loop pays a launch (~4-5 us of host time at G = 64, more than some
// products take) and a tail wave per expert (a product of 512 rows x 4096 columns is 64 tiles of 128 x 256 on 132
// multiprocessors: half of them idle); one walk packs every group's tiles into whole waves, and the next tile's
// first slabs load while the consumers store the last one, across group boundaries.
// Prediction (H200, bf16, MoE shapes of docs/grouped.md): near wgmma_ws on one product of the same total size on
// balanced groups (its direct stores cost ~3-5 % against 14's TMA-store epilogue), well above a loop of cuBLAS
// calls on 64 experts with few tokens each; to be measured beside torch._grouped_mm.
// Arguments: G groups; rows: the rows of A (contiguous: total tokens; masked: max_m); N, K; offs: G int32 on the
// device; C (row pitch ldc, masked: group stride bsc elements); maps: A (contiguous: dims K x rows, box 64 x BM;
// masked: K x max_m x G), B (dims N x K x G, box 64 x 64; CUMM_TB: K x N x G), 128-byte swizzle, 16-bit elements.
// Grid: one block per multiprocessor (the host cannot know the tile count without reading offs). G <= CUMM_GMAX.

#define CUMM_GMAX 1024  // groups the shared table holds (the spec's GMAX: the host refuses more)
#define CUMM_NC (128 * WGS)

extern "C" __global__ void __launch_bounds__(NUM_THREADS, 1)
    CUMM_KERNEL(const int G, const int rows, const int N, const int K, const int* __restrict__ offs,
                cumm_out_t* __restrict__ C, const int ldc, const i64 bsc, const __grid_constant__ CummTmap tmA,
                const __grid_constant__ CummTmap tmB) {
    constexpr int MT = BM / 64 / WGS, SB = (BM + BN) * 128;  // m64 blocks of a consumer warpgroup; stage bytes
    static_assert(MT * 64 * WGS == BM && BN % 64 == 0 && BN <= 256 && NUM_THREADS == 128 * (WGS + 1), "tile shape");
    static_assert(MASKED == 0 || MASKED == 1, "MASKED is 0 (contiguous A) or 1 (A of shape G x max_m x K)");
    extern __shared__ unsigned char smem_raw[];
    __shared__ int g_rend[CUMM_GMAX];  // group g's row end (contiguous: its start is g_rend[g - 1]; masked: its count)
    __shared__ int g_tend[CUMM_GMAX];  // the walk's tiles of groups 0..g
    __shared__ int s_tiles;
    const unsigned raw = cumm_smem(smem_raw), base = (raw + 1023) & ~1023u;  // swizzle atoms: 1024-aligned
    unsigned char* const sm = smem_raw + (base - raw);
    unsigned long long* const bars = reinterpret_cast<unsigned long long*>(sm + STAGES * SB);
    const CummRing<STAGES> ring{bars, bars + STAGES};
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
    if (tid == 0) {
        cumm_prefetch_tmap(&tmA);
        cumm_prefetch_tmap(&tmB);
        ring.init<4 * WGS>();  // one arrival per consumer warp
        cumm_mbar_init_fence();
    }
    __syncthreads();

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
    const CummTileWalk<0> walk(s_tiles, KT, blockIdx.x, gridDim.x, false);

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
        // rows from rend on belong to the next group (contiguous) or lie past masked_m (masked): not stored
        cumm_store_tile<MT, BN / 2, VEC_C>(d, C, MASKED ? (i64)grp * bsc : (i64)0, ldc, rend, N, row0 + wrow, col0,
                                          warp, g8, t4, 1.0f, 0.0f);
    }
}
