// wgmma_f16x3: FP32 products from three FP16 products on wgmma (sm_90a). What changes from 15_wgmma_tf32x3, and
// why it is faster:
// - FP16 pieces instead of TF32 ones. A value x of a row of A (scaled by 2^s, s the row's shift: its largest
//   finite magnitude into [2^14, 2^15)) is hi = fp16(x) and lo = fp16(x - hi): 22 of x's 24 bits, as many as
//   3xTF32's big and small keep. C = 2^-(s_row + s_col) (Al Bh + Ah Bl + Ah Bh): three FP16 wgmma, which run at
//   twice TF32's rate and read half its bytes, so three of them cost what 1.5 TF32 products do.
// - The split is done once, before the product (cumm/plan/pieces.py, kernels/auxiliary/pieces.cu): A's pieces
//   [Ah | Al] (M x 2K', K' = K rounded up to 64, zeros past K) and B's [Bh; Bl] (2K' x N), each row's and column's
//   shift after them. In 15 splitter warps rewrote every stage of B in shared memory, which bound the kernel
//   (docs/ladder.md: with the split free it ran 14 % faster); here the stages are plain TMA copies, as in 14.
// - The rows of A and columns of B are scaled by powers of two so that lo keeps its 11 bits (FP16's normal range
//   starts at 2^-14) and nothing overflows: the scaling is exact, and so is the unscaling in the epilogue (ldexpf).
// Accumulation, as 15: the tensor cores add into their accumulator rounding toward zero (measured: summed over
// all of K' in the tensor core, the error grows with K, 1.5e-5 at 4096^3 against cuBLAS's 1.2e-6), so each 64 of
// K's three products (12 wgmma) go into a fresh partial set, added into the FP32 totals once done. PROMO = 1 (one
// set: its adds wait for its wgmma; the other consumer warpgroup's keep the tensor cores busy meanwhile) measured
// faster than PROMO = 2 (two sets taking turns, as 17_fp8_wgmma): 4096^3 0.74 against 1.03 ms (docs/ladder.md).
// Order within the 64: the small products first (Al Bh, Ah Bl), then Ah Bh.
// Kept from 14 / 17: the producer warpgroup and stage ring (CummRing, setmaxnreg), the persistent grouped tile walk
// (every other tile's K backwards). Not taken over: stream-K, clusters, batches, transposed operands, the
// TMA-store epilogue (C is float32: direct stores with alpha and beta).
// Caveats: an infinite input makes lo = inf - inf = NaN (as 15), so its row or column of C is NaN; NaN propagates. An
// element more than ~2^30 below its row's (column's) largest keeps FP16's subnormal precision, 2^-24 of the scaled row
// (docs/ladder.md: 1.6e-5 of |A||B| with elements spread over 2^+-40 each, 4.4e-7 over 2^+-30).
// Host: maps for A's pieces (dims 2K' x M, box 64 x BM) and B's (dims N x 2K', box 64 x 64), 16-bit, 128-byte
// swizzle; lda = 2K', ldb = N rounded up to 8 (halves). Grid: min(tiles, multiprocessors) blocks of NUM_THREADS =
// 384; dynamic shared memory STAGES (BM + BN) 128 + 1024 + 16 STAGES + 16.

// The three products of 64 of K: (A piece, B piece) = (lo, hi), (hi, lo), (hi, hi); a piece's offset along K'
#define CUMM_A_OFF(s, KP) ((s) == 0 ? (KP) : 0)
#define CUMM_B_OFF(s, KP) ((s) == 1 ? (KP) : 0)

// One stage's 4 wgmma per m64 block into p: the first of a partial set starts it afresh (scale-d 0).
template <int MT, int TN>
__device__ __forceinline__ void cumm_f16x3_slab(float (&p)[MT][TN / 2], unsigned a0, unsigned b0, bool fresh) {
#pragma unroll
    for (int kk = 0; kk < 4; ++kk)
#pragma unroll
        for (int m = 0; m < MT; ++m)
            cumm_wgmma16<TN, 0, 1>(p[m], cumm_wg_desc_k(a0 + m * 8192 + 32 * kk), cumm_wg_desc_mn(b0 + 2048 * kk, 8192),
                                   fresh && kk == 0 ? 0 : 1);
}

// C's values unscaled: d (rows row0.., columns col0..) times 2^-(shift of its row + shift of its column), exactly.
template <int MT, int R>
__device__ __forceinline__ void cumm_f16x3_unscale(float (&d)[MT][R], const int* __restrict__ sa,
                                                   const int* __restrict__ sb, int M, int N, int row0, int col0,
                                                   int warp, int g, int t4) {
    int ra[MT][2];
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int h = 0; h < 2; ++h) ra[m][h] = __ldg(sa + min(row0 + m * 64 + warp * 16 + g + 8 * h, M - 1));
#pragma unroll
    for (int j = 0; j < R / 4; ++j) {
        const int col = col0 + 8 * j + 2 * t4;
        const int c0 = __ldg(sb + min(col, N - 1)), c1 = __ldg(sb + min(col + 1, N - 1));
#pragma unroll
        for (int m = 0; m < MT; ++m)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                d[m][4 * j + 2 * h] = ldexpf(d[m][4 * j + 2 * h], -(ra[m][h] + c0));
                d[m][4 * j + 2 * h + 1] = ldexpf(d[m][4 * j + 2 * h + 1], -(ra[m][h] + c1));
            }
    }
}

extern "C" __global__ void __launch_bounds__(NUM_THREADS, 1)
    CUMM_KERNEL(CUMM_GEMM16_ARGS, const __grid_constant__ CummTmap tmA, const __grid_constant__ CummTmap tmB) {
    constexpr int MT = BM / 128, SB = (BM + BN) * 128;  // m64 blocks of a consumer warpgroup; stage bytes
    static_assert(MT * 128 == BM && BN % 64 == 0 && NUM_THREADS == 384, "two consumer warpgroups of BM / 2 rows");
    static_assert(PROMO == 1 || PROMO == 2, "one partial set, or two taking turns");
    extern __shared__ unsigned char smem_raw[];
    const unsigned raw = cumm_smem_u32(smem_raw), base = (raw + 1023) & ~1023u;  // swizzle atoms: 1024-aligned
    unsigned char* const sm = smem_raw + (base - raw);
    unsigned long long* const bars = reinterpret_cast<unsigned long long*>(sm + STAGES * SB);
    const CummRing<STAGES> ring{bars, bars + STAGES};

    const int tid = threadIdx.x;
    const int KP = (K + 63) / 64 * 64, ntm = (M + BM - 1) / BM, ntn = (N + BN - 1) / BN, KT = KP / 64;
    const CummTileWalk<0> walk(ntm * ntn, KT, blockIdx.x, gridDim.x, false);
    auto origin = [&](int t) {  // tile t's first row and column
        const int2 tc = cumm_tile_coord(t, ntm, ntn, GM);
        return make_int2(tc.x * BM, tc.y * BN);
    };
    ring.start<8>(tid, &tmA, &tmB);  // one arrival per consumer warp

    if (cumm_ws_producer<40, 232>(tid)) {
        if (tid == 0) {
            int it = 0, t, k0, k1;
            for (int j = 0; walk.next(j, t, k0, k1); ++j) {
                const int2 o = origin(t);
                for (int kt = k0; kt < k1; ++kt) {
                    const int kc = walk.slab(j, kt) * 64;
#pragma unroll 1
                    for (int s = 0; s < 3; ++s, ++it) {
                        unsigned char* const st = sm + ring.acquire(it, SB) * SB;
                        unsigned long long* const bar = &ring.full[it % STAGES];
                        cumm_tma_load_z<0>(st, &tmA, CUMM_A_OFF(s, KP) + kc, o.x, 0, bar);
#pragma unroll
                        for (int c = 0; c < BN / 64; ++c)
                            cumm_tma_load_z<0>(st + BM * 128 + c * 8192, &tmB, o.y + 64 * c, CUMM_B_OFF(s, KP) + kc, 0,
                                               bar);
                    }
                }
            }
        }
        return;
    }

    const int wg = __shfl_sync(~0u, tid / 128 - 1, 0), warp = __shfl_sync(~0u, tid % 128 / 32, 0), lane = tid % 32,
              g = lane / 4, t4 = lane % 4;
    const int wrow = wg * MT * 64;  // this warpgroup's first row in the tile
    // the rows' and columns' shifts, after the pieces (cumm/plan/pieces.py)
    const int* const sa = reinterpret_cast<const int*>(A + (i64)M * lda);
    const int* const sb = reinterpret_cast<const int*>(B + (i64)2 * KP * ldb);
    unsigned it = 0;  // stages consumed (the ring's position)
    // 64 of K's three stages (from stage `at` on) into partial set p, issued and committed as one group
    auto issue = [&](float (&p)[MT][BN / 2], unsigned at) {
        cumm_wgmma_fence();
#pragma unroll
        for (int s = 0; s < 3; ++s) {
            const unsigned st = base + ring.wait(at + s) * SB;
            cumm_f16x3_slab<MT, BN>(p, st + wrow * 128, st + BM * 128, s == 0);
        }
        cumm_wgmma_commit();
    };
    auto add = [&](float (&d)[MT][BN / 2], float (&p)[MT][BN / 2]) {  // p's stages are done: hand them back, add p
#pragma unroll
        for (int s = 0; s < 3; ++s, ++it) ring.release<1>(it % STAGES, lane, 0);
#pragma unroll
        for (int m = 0; m < MT; ++m) {
            cumm_wgmma_pin(p[m]);
#pragma unroll
            for (int e = 0; e < BN / 2; ++e) d[m][e] += p[m][e];
        }
    };
    int t, k0, k1;
    for (int i = 0; walk.next(i, t, k0, k1); ++i) {
        const int2 o = origin(t);
        float d[MT][BN / 2];
        cumm_zero_acc(d);
#if PROMO == 2
        float p0[MT][BN / 2], p1[MT][BN / 2];
        issue(p0, it);
        for (int kt = k0;; kt += 2) {  // (each wait's depth fixed where it stands, as 17)
            if (kt + 1 >= k1) {
                cumm_wgmma_wait<0>();
                add(d, p0);
                break;
            }
            issue(p1, it + 3);
            cumm_wgmma_wait<1>();
            add(d, p0);
            if (kt + 2 >= k1) {
                cumm_wgmma_wait<0>();
                add(d, p1);
                break;
            }
            issue(p0, it + 3);
            cumm_wgmma_wait<1>();
            add(d, p1);
        }
#else
        float p[MT][BN / 2];
        for (int kt = k0; kt < k1; ++kt) {
            issue(p, it);
            cumm_wgmma_wait<0>();
            add(d, p);
        }
#endif
        cumm_f16x3_unscale<MT, BN / 2>(d, sa, sb, M, N, o.x + wrow, o.y, warp, g, t4);
        cumm_store_tile<MT, BN / 2, VEC_C>(d, C, 0, ldc, M, N, o.x + wrow, o.y, warp, g, t4, alpha, beta);
    }
}
