// fp8_wgmma: 14_wgmma_ws with FP8 operands (e4m3 / e5m2, FA / FB) and scales: C = (A @ B) * sa * sb, where sa is
// one scale or one per row of A and sb one scale or one per column of B (torch._scaled_mm's conventions), applied to
// the FP32 accumulators in the epilogue; C bfloat16, float16 or float32 (OUT). What changes from 14, and why it is
// faster:
// - wgmma m64nNk32 on FP8 (sm90_fp8.cuh): the tensor cores run FP8 at twice the 16-bit rate (H200: 1,979 dense
//   TFLOP/s against 989), and a 128-byte shared-memory row holds 128 values of K instead of 64: a stage of the same
//   bytes carries twice the K, so the copy engine, L2 and shared memory move half the bytes per multiply-add.
// - Both operands K-major (FP8 wgmma has no transpose): B arrives as its N x K rows (the K x N column-major view
//   w.T of a weight, as torch._scaled_mm takes it) in one TMA box of BN rows; A as in 14 (a box of BM rows).
// - PROMO = 1 (torch._scaled_mm's default, use_fast_accum=False): the tensor core adds FP8 products into an
//   accumulator that keeps fewer bits than FP32 (DeepSeek-V3 3.3), so each 128-deep slab goes into a fresh
//   accumulator set p, which the consumers add into the FP32 registers d (promotion) once its wgmma are done.
//   Twice the accumulator registers, and the wgmma of the next slab waits for the adds. PROMO = 2: two partial sets
//   taking turns (below). WGS = 3 (three consumer warpgroups of 64 x 128, 192 x 128 tiles, 160 registers a thread):
//   one partial set, whose adds overlap the other two warpgroups' wgmma; 192-row tiles load a sixth fewer bytes a
//   multiply-add than 128-row ones. PROMO = 0 (use_fast_accum=True) keeps the whole K in the tensor core's
//   accumulators, as 14 does.
// Kept from 14: the producer warpgroup and stage ring (CummRing, cumm_ws_producer with setmaxnreg), the persistent
// grouped tile walk (CummTileWalk, every other tile's K backwards), the TMA-store epilogue for 16-bit C
// (CummTmaEpilogue) and direct stores otherwise (cumm_store_tile). Not taken over (yet): stream-K, clusters,
// batches, transposed operands.
// Prediction: as a fraction of the tensor rate, what 14 reaches (0.97-1.01x cuBLAS bf16); with PROMO = 1 and
// 128 x 128 tiles at 4096^3, 0.85-0.95x torch._scaled_mm (the adds stall each warpgroup's wgmma once a slab); with
// PROMO = 0 and 128 x 256 tiles, about torch._scaled_mm with use_fast_accum=True. To be measured.
// Host (cumm/api/scaled.py): maps for A (dims K x M, box 128 x BM), B (dims K x N, box 128 x BN), bytes, 128-byte
// swizzle; K % 16 == 0 and 16-byte aligned rows (else a zero-padded copy), and C's map (dims N x M, box 64 x 64,
// 16-bit) when C is 16-byte aligned with ldc % 8 == 0 (VEC_C), else direct stores. Grid: min(tiles,
// multiprocessors) blocks of NUM_THREADS = 128 (WGS + 1); dynamic shared memory STAGES (BM + BN) 128 + 1024 +
// 16 STAGES + 32, plus 16384 WGS with the TMA-store epilogue (EPI = 1).

#define CUMM_C_STAGE (CUMM_EPI_TMA ? WGS * 64 * 128 * 2 : 0)  // per WG: 64 rows x 128 columns of halves

extern "C" __global__ void __launch_bounds__(NUM_THREADS, 1)
    CUMM_KERNEL(const int M, const int N, const int K, cumm_out_t* __restrict__ C, const int ldc,
                const float* __restrict__ sa, const int sa_step, const float* __restrict__ sb, const int sb_step,
                const __grid_constant__ CummTmap tmA, const __grid_constant__ CummTmap tmB,
                const __grid_constant__ CummTmap tmC) {
    constexpr int MT = BM / 64 / WGS, SB = (BM + BN) * 128;  // m64 blocks of a consumer warpgroup; stage bytes
    static_assert(MT * 64 * WGS == BM && BN % 64 == 0 && BN <= 256 && NUM_THREADS == 128 * (WGS + 1), "tile shape");
    extern __shared__ unsigned char smem_raw[];
    const unsigned raw = cumm_smem_u32(smem_raw), base = (raw + 1023) & ~1023u;  // swizzle atoms: 1024-aligned
    unsigned char* const sm = smem_raw + (base - raw);
    unsigned long long* const bars = reinterpret_cast<unsigned long long*>(sm + STAGES * SB + CUMM_C_STAGE);
    const CummRing<STAGES> ring{bars, bars + STAGES};

    const int tid = threadIdx.x;
    const int ntm = (M + BM - 1) / BM, ntn = (N + BN - 1) / BN, KT = (K + 127) / 128;  // 128-deep slabs
    const CummTileWalk<0> walk(ntm * ntn, KT, blockIdx.x, gridDim.x, false);
    auto origin = [&](int t) {  // tile t's first row and column
        const int2 tc = cumm_tile_coord(t, ntm, ntn, GM);
        return make_int2(tc.x * BM, tc.y * BN);
    };

    ring.start<4 * WGS>(tid, &tmA, &tmB);  // one arrival per consumer warp

    if (cumm_ws_producer<CUMM_FP8_PRODUCER_REGS, CUMM_FP8_CONSUMER_REGS>(tid)) {
        if (tid == 0) cumm_fp8_produce<BM, SB>(ring, walk, origin, sm, &tmA, &tmB);
        return;
    }

    // (wg and warp through a shuffle: known warp-uniform, the wgmma descriptors built from them stay in uniform
    // registers instead of being moved there before each wgmma)
    const int wg = __shfl_sync(~0u, tid / 128 - 1, 0), warp = __shfl_sync(~0u, tid % 128 / 32, 0), lane = tid % 32,
              g = lane / 4, t4 = lane % 4;
    const int wrow = wg * MT * 64;  // this warpgroup's first row in the tile
    CummTmaEpilogue<MT, BN, 0> epi{sm + STAGES * SB + wg * 64 * 128 * 2, &tmC, nullptr, 1 + wg, tid % 128, warp, g,
                                   t4, 0};
    int it = 0;  // slabs consumed (the ring's position)
    int t, k0, k1;
    for (int i = 0; walk.next(i, t, k0, k1); ++i) {
        const int2 o = origin(t);
        float d[MT][BN / 2];
        cumm_zero_acc(d);
#if PROMO == 2
        // Two partial sets taking turns: slab kt + 1's wgmma run into one while slab kt's sums (the other) are
        // added into d, so the adds no longer hold the tensor core (with PROMO = 1 both warpgroups wait on the
        // same stage, finish together and add together: the tensor core idles through every slab's adds).
        float p0[MT][BN / 2], p1[MT][BN / 2];
        auto issue = [&](float (&p)[MT][BN / 2], int s) {
            const unsigned a0 = base + s * SB + wrow * 128, b0 = base + s * SB + BM * 128;
            cumm_wgmma_fence();
            cumm_fp8_slab<MT, BN, 1>(p, a0, b0);
            cumm_wgmma_commit();
        };
        auto add = [&](float (&p)[MT][BN / 2], int s) {  // p's slab is done: hand its stage back, add p into d
            ring.release<1>(s, lane, 0);
            cumm_fp8_promote(d, p);
        };
        // (each wait's depth fixed where it stands: ptxas serializes every wgmma when it cannot tell which
        // accumulators a wait has made safe to read)
        int s0 = ring.wait(it), s1 = 0;
        issue(p0, s0);
        for (int kt = k0;; kt += 2) {
            if (kt + 1 >= k1) {
                cumm_wgmma_wait<0>();
                add(p0, s0);
                ++it;
                break;
            }
            issue(p1, s1 = ring.wait(it + 1));
            cumm_wgmma_wait<1>();
            add(p0, s0);
            ++it;
            if (kt + 2 >= k1) {
                cumm_wgmma_wait<0>();
                add(p1, s1);
                ++it;
                break;
            }
            issue(p0, s0 = ring.wait(it + 1));
            cumm_wgmma_wait<1>();
            add(p1, s1);
            ++it;
        }
#else
#if PROMO
        float p[MT][BN / 2];  // one slab's sums, promoted into d
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
            cumm_wgmma_wait<0>();  // this slab's sums are in p: hand its stage back, add p into d
            ring.release<1>(s, lane, 0);
            cumm_fp8_promote(d, p);
#else
            cumm_wgmma_wait<1>();  // the previous slab's wgmma are done: hand its stage back
            if (kt > k0) ring.release<1>((it - 1) % STAGES, lane, 0);
#endif
        }
#if !PROMO
        cumm_wgmma_wait<0>();
        ring.release<1>((it - 1) % STAGES, lane, 0);
#pragma unroll
        for (int m = 0; m < MT; ++m) cumm_wgmma_pin(d[m]);
#endif
#endif
        cumm_fp8_scale_tile<MT, BN / 2>(d, sa, sa_step, sb, sb_step, M, N, o.x + wrow, o.y, warp, g, t4);
        cumm_fp8_store<MT, BN, VEC_C, CUMM_EPI_TMA>(epi, d, C, ldc, M, N, o.x + wrow, o.y, warp, g, t4);
    }
    if (CUMM_EPI_TMA && tid % 128 == 0) cumm_tma_store_wait_all();
}
