// fp8_block_scaled: 17_fp8_wgmma with DeepSeek-V3's fine-grained scales: A (M x K) has a float32 scale per row and
// 128-deep block of K, sa[row * sa_m + kb * sa_k]; B (its N x K rows) one per 128 x 128 block, sb[nb * sb_n + kb *
// sb_k]. A product is then no longer (A @ B) times one number per row and column: each 128-deep block of K has its
// own, so they cannot wait for the epilogue. What changes from 17:
// - Promotion with the scales (DeepSeek-V3 3.3, PROMO = 1): a stage is one 128-deep block of K (a 128-byte row of
//   FP8, as in 17), its four k32 wgmma go into a fresh accumulator set p, and once they are done every thread adds
//   p * sa[row, kb] * sb[nb, kb] into its FP32 totals d: an FMA per accumulator and block, where 17 adds p once
//   per slab anyway. BN divides 128, so a tile sees one B scale per block of K (nb = the tile's first column / 128).
//   PROMO = 2 and WGS = 3 (192 x 128 tiles, one partial set) as in 17.
// - B's scales reach a block of K through a shuffle: lane l of every warp holds the scale of the item's block
//   k0 + l (32 loaded at a time, the next 32 a chunk ahead), and each block's is read from lane kt - k0 mod 32.
//   One uniform global load a block and thread instead cost 10 % (H200: 0.87x 17, 0.98x without it), and loading
//   it a block ahead did not help; the shuffle reads a register.
// - A's scales travel with the stage: the producer copies the tile's BM scales of block kb (a box of A's scales
//   stored K-block-major, tmS) into the stage's scale row with the same mbarrier, so a consumer reads its rows'
//   scales from shared memory. Loaded from global memory by every thread (two a thread and m64 block, each with
//   its 64-bit address math), they cost 8 % more instructions and longer stalls than 17 (ncu: 2.49 M against
//   2.30 M warp instructions an SM, 4.97 against 4.29 cycles between issues at 8192 x 14336 x 4096).
// - PROMO = 0, for the error study only: the whole K in the tensor core's accumulators and the first block's
//   scales applied once at the end; right only when every block of a row (of A) and of B has the same scale.
//   Beside PROMO = 1 on deep K with uniform block scales, it measures what the tensor core's narrower FP8
//   accumulation costs (the reason promotion exists).
// Predicted 0.9-1.0x 17 (the added FMAs run while the other consumer warpgroup's wgmma do). Measured (H200, 8192 x
// 14336 x 4096): 0.79-0.81x with every thread loading its scales, 0.84x with the scales in the stage (957 TFLOP/s,
// one stage fewer than 17: a sixth with its scale row leaves no room for the C staging tile); H100, three
// warpgroups: B's scales through the shuffle 0.98-1.03x 17, against 0.84-0.89x loaded every block.
// Host: as 17 (cumm/api/scaled.py); sb is float32 with any strides (sb_n, sb_k in elements); sa is read through
// tmS, a map of A's scales K-block-major (dims M x ceil(K / 128), rows padded to 16 bytes: the caller's sa when it
// is so stored, else a copy), and as sa (sa_m = 1, sa_k its row pitch) by the PROMO = 0 study.

#define CUMM_C_STAGE (CUMM_EPI_TMA ? WGS * 64 * 128 * 2 : 0)  // per WG: 64 rows x 128 columns of halves
#define CUMM_S_STAGE (STAGES * BM * 4)                        // each stage's BM scales of A (float32)

extern "C" __global__ void __launch_bounds__(NUM_THREADS, 1)
    CUMM_KERNEL(const int M, const int N, const int K, cumm_out_t* __restrict__ C, const int ldc,
                const float* __restrict__ sa, const int sa_m, const int sa_k, const float* __restrict__ sb,
                const int sb_n, const int sb_k, const __grid_constant__ CummTmap tmA,
                const __grid_constant__ CummTmap tmB, const __grid_constant__ CummTmap tmC,
                const __grid_constant__ CummTmap tmS) {
    constexpr int MT = BM / 64 / WGS, SB = (BM + BN) * 128;  // m64 blocks of a consumer warpgroup; stage bytes
    static_assert(MT * 64 * WGS == BM && 128 % BN == 0 && NUM_THREADS == 128 * (WGS + 1), "tile shape");
    extern __shared__ unsigned char smem_raw[];
    const unsigned raw = cumm_smem_u32(smem_raw), base = (raw + 1023) & ~1023u;  // swizzle atoms: 1024-aligned
    unsigned char* const sm = smem_raw + (base - raw);
    const float* const scl = reinterpret_cast<const float*>(sm + STAGES * SB + CUMM_C_STAGE);  // (1024-aligned)
    unsigned long long* const bars =
        reinterpret_cast<unsigned long long*>(sm + STAGES * SB + CUMM_C_STAGE + CUMM_S_STAGE);
    const CummRing<STAGES> ring{bars, bars + STAGES};

    const int tid = threadIdx.x;
    const int ntm = (M + BM - 1) / BM, ntn = (N + BN - 1) / BN, KT = (K + 127) / 128;  // 128-deep blocks of K
    const CummTileWalk<0> walk(ntm * ntn, KT, blockIdx.x, gridDim.x, false);
    auto origin = [&](int t) {  // tile t's first row and column
        const int2 tc = cumm_tile_coord(t, ntm, ntn, GM);
        return make_int2(tc.x * BM, tc.y * BN);
    };

    if (tid == 0) {
        cumm_prefetch_tmap(&tmA);
        cumm_prefetch_tmap(&tmB);
        cumm_prefetch_tmap(&tmS);
        ring.init<4 * WGS>();  // one arrival per consumer warp
        cumm_mbar_init_fence();
    }
    __syncthreads();

    if (cumm_ws_producer<CUMM_FP8_PRODUCER_REGS, CUMM_FP8_CONSUMER_REGS>(tid)) {
        if (tid == 0)  // 17's producer, and each slab's BM scales of A into the stage's scale row
            cumm_fp8_produce<BM, SB, 1>(ring, walk, origin, sm, &tmA, &tmB, &tmS, sm + STAGES * SB + CUMM_C_STAGE);
        return;
    }

    // (wg and warp through a shuffle: known warp-uniform, the wgmma descriptors built from them stay in uniform
    // registers instead of being moved there before each wgmma)
    const int wg = __shfl_sync(~0u, tid / 128 - 1, 0), warp = __shfl_sync(~0u, tid % 128 / 32, 0), lane = tid % 32,
              g = lane / 4, t4 = lane % 4;
    const int wrow = wg * MT * 64;
    CummTmaEpilogue<MT, BN, 0> epi{sm + STAGES * SB + wg * 64 * 128 * 2, &tmC, nullptr, 1 + wg, tid % 128, warp, g,
                                   t4, 0};
    int it = 0;
    int t, k0, k1;
    for (int i = 0; walk.next(i, t, k0, k1); ++i) {
        const int2 o = origin(t);
        const int r0 = wrow + warp * 16 + g;  // this thread's first row in the tile (then + 8 h + 64 m)
        const float* const sbn = sb + (i64)sb_n * (o.y / 128);  // the tile's one block column of B
#if PROMO
        // B's scales of this item's blocks, 32 at a time (the header): lane l holds step kb + l's, read by a shuffle
        auto bchunk = [&](int kb) { return kb + lane < k1 ? __ldg(sbn + (i64)sb_k * walk.slab(i, kb + lane)) : 0.f; };
        float bnow = bchunk(k0), bnext = bchunk(k0 + 32);
        auto bscale = [&](int kt) {
            if (kt > k0 && (kt - k0) % 32 == 0) bnow = bnext, bnext = bchunk(kt + 32);
            return __shfl_sync(~0u, bnow, (kt - k0) % 32);
        };
#endif
        float d[MT][BN / 2];
        cumm_zero_acc(d);
#if PROMO == 2
        // Two partial sets taking turns (as 17's PROMO = 2): block kt + 1's wgmma run into one while block kt's
        // sums (the other) are scaled and added into d; each set's scales are loaded when its wgmma are issued.
        float p0[MT][BN / 2], p1[MT][BN / 2], c0[MT][2], c1[MT][2];
        auto issue = [&](float (&p)[MT][BN / 2], float (&sc)[MT][2], int s, int kt) {
            const unsigned a0 = base + s * SB + wrow * 128, b0 = base + s * SB + BM * 128;
            cumm_wgmma_fence();
            cumm_fp8_slab<MT, BN, 1>(p, a0, b0);
            cumm_wgmma_commit();
            const float bs = bscale(kt);
#pragma unroll
            for (int m = 0; m < MT; ++m)
#pragma unroll
                for (int h = 0; h < 2; ++h) sc[m][h] = scl[s * BM + r0 + 64 * m + 8 * h] * bs;
        };
        auto add = [&](float (&p)[MT][BN / 2], const float (&sc)[MT][2], int s) {
            ring.release<1>(s, lane, 0);
#pragma unroll
            for (int m = 0; m < MT; ++m) {
                cumm_wgmma_pin(p[m]);
#pragma unroll
                for (int e = 0; e < BN / 2; ++e) d[m][e] = fmaf(p[m][e], sc[m][(e / 2) % 2], d[m][e]);
            }
        };
        int s0 = ring.wait(it), s1 = 0;  // (each wait's depth fixed where it stands, as in 17)
        issue(p0, c0, s0, k0);
        for (int kt = k0;; kt += 2) {
            if (kt + 1 >= k1) {
                cumm_wgmma_wait<0>();
                add(p0, c0, s0);
                ++it;
                break;
            }
            issue(p1, c1, s1 = ring.wait(it + 1), kt + 1);
            cumm_wgmma_wait<1>();
            add(p0, c0, s0);
            ++it;
            if (kt + 2 >= k1) {
                cumm_wgmma_wait<0>();
                add(p1, c1, s1);
                ++it;
                break;
            }
            issue(p0, c0, s0 = ring.wait(it + 1), kt + 2);
            cumm_wgmma_wait<1>();
            add(p1, c1, s1);
            ++it;
        }
#else
#if PROMO
        float p[MT][BN / 2];  // one block's sums, promoted into d with its scales
#endif
        for (int kt = k0; kt < k1; ++kt, ++it) {
            const int s = ring.wait(it);
            const unsigned a0 = base + s * SB + wrow * 128, b0 = base + s * SB + BM * 128;
            cumm_wgmma_fence();
#if PROMO
            cumm_fp8_slab<MT, BN, 1>(p, a0, b0);
#else
            cumm_fp8_slab<MT, BN, 0>(d, a0, b0);
#endif
            cumm_wgmma_commit();
#if PROMO
            float sc[MT][2];  // this block's scale of each of this thread's rows, times B's: loaded while the wgmma run
            const float bs = bscale(kt);
#pragma unroll
            for (int m = 0; m < MT; ++m)
#pragma unroll
                for (int h = 0; h < 2; ++h) sc[m][h] = scl[s * BM + r0 + 64 * m + 8 * h] * bs;
            cumm_wgmma_wait<0>();
            ring.release<1>(s, lane, 0);
#pragma unroll
            for (int m = 0; m < MT; ++m) {
                cumm_wgmma_pin(p[m]);
#pragma unroll
                for (int e = 0; e < BN / 2; ++e) d[m][e] = fmaf(p[m][e], sc[m][(e / 2) % 2], d[m][e]);
            }
#else
            cumm_wgmma_wait<1>();
            if (kt > k0) ring.release<1>((it - 1) % STAGES, lane, 0);
#endif
        }
#endif
#if !PROMO
        cumm_wgmma_wait<0>();
        ring.release<1>((it - 1) % STAGES, lane, 0);
#pragma unroll
        for (int m = 0; m < MT; ++m) {
            cumm_wgmma_pin(d[m]);
            const float bs = __ldg(sbn);  // block (row, 0)'s scales for the whole K (uniform scales only)
            // (rows clamped to M - 1: rows past M are never stored)
            const float s0 = __ldg(sa + (i64)sa_m * min(o.x + r0 + 64 * m, M - 1)) * bs;
            const float s1 = __ldg(sa + (i64)sa_m * min(o.x + r0 + 64 * m + 8, M - 1)) * bs;
#pragma unroll
            for (int e = 0; e < BN / 2; ++e) d[m][e] *= (e / 2) % 2 ? s1 : s0;
        }
#endif
        cumm_fp8_store<MT, BN, VEC_C, CUMM_EPI_TMA>(epi, d, C, ldc, M, N, o.x + wrow, o.y, warp, g, t4);
    }
    if (CUMM_EPI_TMA && tid % 128 == 0) cumm_tma_store_wait_all();
}
