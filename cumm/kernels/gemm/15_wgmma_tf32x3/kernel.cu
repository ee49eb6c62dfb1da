// wgmma_tf32x3: 10_tf32x3's three-product split on Hopper's warpgroup tensor cores (sm_90a), with the machinery
// of 14_wgmma_ws: FP32 accuracy at the rate of TF32 wgmma. What changes from tf32x3, and why it is faster:
// - wgmma m64nBNk8 instead of mma.sync m16n8k8: one instruction per warpgroup multiplies 64 x BN x 8, with B
//   read by the tensor cores straight from shared memory (no fragment loads for B, no per-warp B split).
// - Each value is split once. In tf32x3 every warp split every A and B fragment it loaded, and a B value was
//   split by every warp row of the block. Here B is split once per stage, by three splitter warps, into two
//   shared buffers (B^T big, B^T small), and each consumer thread splits only its own A fragments, in registers.
// - The split buffers hold B^T: TF32 wgmma reads both operands K-major only, and B (row-major K x N) is N-major.
//   The splitters transpose in 4 x 4 blocks: a lane loads 4 k-rows x 4 columns (four 16-byte loads), splits them
//   and writes each column's 4 k as one 16-byte store to B^T big and one to B^T small: 12 shared-memory
//   instructions per 16 values, each a full 16-byte access, and the lanes' blocks are placed so that neither the
//   loads nor the stores meet a bank conflict (swizzled rows on both sides).
// - The copy engine (TMA) brings raw A and B into 128-byte-swizzled stages, tracked by mbarriers: no copy
//   instructions, tails past M, N, K zero-filled by the hardware.
// - Warp specialization as in wgmma_ws: warp 0 of the producer warpgroup issues the copies, warps 1-3 split,
//   two consumer warpgroups (setmaxnreg: 216 registers, the producers 72) only load and split their A
//   fragments and issue wgmma. Two rings: STAGES raw stages (full: copies landed -> spent: read by the splitters
//   and the consumers, refilled), and SB split buffers (ready: split -> done: their wgmma completed). A raw stage
//   is handed back as soon as it is read, so the copies run well ahead of the tensor cores.
// - The splitters set the pace (docs/ladder.md): their addresses are per-lane constants, and each block's
//   loads are issued before the previous block's stores (software pipelining), so loads are always in flight.
// - Persistent grid, grouped tile order (cumm_tile_coord, sm90.cuh): the ring runs on across tiles, so the next
//   tile's first stages load and split while the consumers store this one.
// Accumulation, as tf32x3: the tensor cores add into their accumulator rounding toward zero, so each stage
// (32 of K: 12 wgmma) sums into a fresh partial pb, added to the running sum acc rounded to nearest once the
// stage's wgmma are done; the error of that rounding stays bounded by one stage's chain, not by K.
// Order within a stage: the small products first (big_a small_b, small_a big_b), then big_a big_b. The split is
// common.cuh's cumm_split_tf32 (small left unrounded: rounding it too measured no more accurate, and slower).
// Host: maps for A (FP32, dims K x M, box 32 x BM) and B (dims N x K, box 32 x 32), 128-byte swizzle; A and B
// 16-byte aligned, lda, ldb % 4 == 0 (else tf32x3 runs: the spec's fallback). Grid: min(tiles, resident blocks),
// one block per multiprocessor. Batched variant: the maps have the batch as a third dimension, grid z is the batch
// and block (x, 0, z) walks the tiles of product z (a broadcast operand: matrix 0). NUM_THREADS = 384; dynamic
// shared memory (STAGES (BM + BN) + 2 SB BN) 128 + 1024 + 16 (STAGES + SB). Caveat (as tf32x3): an infinite input
// makes small = inf - inf = NaN.

#define CUMM_A_BYTES (BM * 128)  // raw A: BM rows of 32 floats (128 bytes), K-major
#define CUMM_B_BYTES (BN * 128)  // raw B: BN / 32 boxes of 32 k-rows x 32 floats; also each half of a split buffer
#define CUMM_RAW_BYTES (CUMM_A_BYTES + CUMM_B_BYTES)
#define CUMM_SPLITTERS 3  // warps 1-3 of the producer warpgroup
#if CUMM_BATCHED  // a copy of product z's box: 3-D maps, z = 0 for an operand broadcast over the batch
#define CUMM_LOAD(dst, map, x, y, bs, bar) cumm_tma_load_3d(dst, map, x, y, bs ? (int)blockIdx.z : 0, bar)
#else
#define CUMM_LOAD(dst, map, x, y, bs, bar) cumm_tma_load(dst, map, x, y, bar)
#endif

// Byte offset of 16-byte chunk c of row r in a 128-byte-swizzled tile (TMA's 128-byte swizzle).
__device__ __forceinline__ unsigned cumm_sw128(int r, int c) { return r * 128 + ((c ^ (r % 8)) << 4); }

extern "C" __global__ void __launch_bounds__(NUM_THREADS, 1)
    CUMM_KERNEL(CUMM_GEMM_ARGS, const __grid_constant__ CummTmap tmA, const __grid_constant__ CummTmap tmB) {
    static_assert(BM == 128 && NUM_THREADS == 384, "a producer warpgroup and two consumer warpgroups of 64 rows");
    static_assert(BN % 32 == 0 && BN <= 128, "B is copied in 32-column boxes; wgmma N up to 128");
    CUMM_BATCH();  // C moves to product z (A and B are read through the maps)
    extern __shared__ unsigned char smem_raw[];
    const unsigned raw = cumm_smem(smem_raw), base = (raw + 1023) & ~1023u;
    unsigned char* const sm = smem_raw + (base - raw);
    unsigned char* const splits = sm + STAGES * CUMM_RAW_BYTES;  // SB buffers: B^T big, then B^T small
    unsigned long long* const full = reinterpret_cast<unsigned long long*>(splits + SB * 2 * CUMM_B_BYTES);
    unsigned long long* const spent = full + STAGES;  // raw stage read (by the splitters and the consumers)
    unsigned long long* const ready = spent + STAGES;  // split buffer written
    unsigned long long* const done = ready + SB;       // split buffer's wgmma completed

    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int ntm = (M + BM - 1) / BM, ntn = (N + BN - 1) / BN, tiles = ntm * ntn, KT = (K + 31) / 32;

    if (tid == 0) {
        cumm_prefetch_tmap(&tmA);
        cumm_prefetch_tmap(&tmB);
        for (int s = 0; s < STAGES; ++s) {
            cumm_mbar_init<1>(&full[s]);
            cumm_mbar_init<CUMM_SPLITTERS + 8>(&spent[s]);  // the splitter warps and the 8 consumer warps
        }
        for (int b = 0; b < SB; ++b) {
            cumm_mbar_init<CUMM_SPLITTERS>(&ready[b]);
            cumm_mbar_init<8>(&done[b]);
        }
        cumm_mbar_init_fence();
    }
    __syncthreads();

    if (warp < 4) {  // producer warpgroup
        cumm_setmaxnreg_dec<72>();  // 128 x (168 - 72) registers handed to the consumers: 256 x (216 - 168)
        if (warp == 0) {  // the copies: one thread
            if (lane == 0) {
                int it = 0;
                for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
                    const int2 tc = cumm_tile_coord(t, ntm, ntn, GM);
                    for (int kt = 0; kt < KT; ++kt, ++it) {
                        const int s = it % STAGES;
                        cumm_mbar_wait(&spent[s], ((it / STAGES) & 1) ^ 1);  // the first round passes at once
                        unsigned char* const st = sm + s * CUMM_RAW_BYTES;
                        cumm_mbar_expect(&full[s], CUMM_RAW_BYTES);
                        CUMM_LOAD(st, &tmA, kt * 32, tc.x * BM, bsa, &full[s]);
#pragma unroll
                        for (int j = 0; j < BN / 32; ++j)
                            CUMM_LOAD(st + CUMM_A_BYTES + j * 4096, &tmB, tc.y * BN + 32 * j, kt * 32, bsb, &full[s]);
                    }
                }
            }
            return;
        }
        // The splitters, in 4 x 4 blocks: a lane loads rows k = 4 kc .. 4 kc + 3 at columns n = 4 q .. 4 q + 3 of
        // the raw stage (four 16-byte loads), and writes the transposed block as B^T rows n, 16-byte chunk kc (four
        // 16-byte stores to big, four to small). Lanes 8 p .. 8 p + 7 (one phase of a 16-byte access) take
        // a = q % 8 = (a2, t ^ u, a0) and b = kc = (b2, t, b0) over all (t, a0, b0): the loads' swizzled chunk
        // a ^ (4 b0 + i) and the stores' kc ^ (4 a0 + j) then differ across the 8 lanes, no bank conflicts.
        // Splitter w takes warp steps m = w - 1, w + 2, ... (BN / 16 of them, 32 blocks each). Lane (p = lane / 8;
        // t, a0, b0 = bits of lane % 8) of step m takes the box m / 2, a2 = m % 2, u = p % 2, b2 = p / 2: kc and
        // the low bits of a are lane constants, and so are the offsets within a block.
        const int lw = lane & 7, tt = lw >> 2, a0 = lw & 1, b0 = (lw >> 1) & 1, ph = lane / 8;
        const int kc = (ph >> 1) * 4 + tt * 2 + b0, alo = ((tt ^ ph) & 1) * 2 + a0;
        unsigned lo[4], so[4];  // per-row load offsets and per-column store offsets within a block
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            lo[i] = i * 128 + (((alo ^ i) & 3) << 4);
            so[i] = i * 128 + ((kc ^ (4 * a0 + i)) << 4);
        }
        constexpr int MS = BN / 16, R = (MS + CUMM_SPLITTERS - 1) / CUMM_SPLITTERS;  // warp steps of a stage
        const int m0 = warp - 1;
        unsigned lb[R], sb[R];  // per step: the block's raw offset (rows 4 kc.., chunk bit 2) and B^T row offset
#pragma unroll
        for (int r = 0; r < R; ++r) {
            const int m = m0 + r * CUMM_SPLITTERS, a = (m & 1) * 4 + alo;
            lb[r] = (m >> 1) * 4096 + kc * 512 + ((((m & 1) ^ b0)) << 6);
            sb[r] = ((m >> 1) * 8 + a) * 512;
        }
        int it = 0;
        for (int t = blockIdx.x; t < tiles; t += gridDim.x)
            for (int kt = 0; kt < KT; ++kt, ++it) {
                const int s = it % STAGES, b = it % SB;
                cumm_mbar_wait(&full[s], (it / STAGES) & 1);
                cumm_mbar_wait(&done[b], ((it / SB) & 1) ^ 1);  // its last wgmma are done (first round: at once)
                const unsigned char* const rb = sm + s * CUMM_RAW_BYTES + CUMM_A_BYTES;
                unsigned char* const big = splits + b * 2 * CUMM_B_BYTES;
                // Software-pipelined: the next block's loads are issued before this block's stores (the compiler
                // cannot tell the raw stage from the split buffer apart, so a load after a store would wait).
                float4 v[2][4];
                if (m0 < MS)  // (a warp may have no block when BN < 48)
#pragma unroll
                    for (int i = 0; i < 4; ++i) v[0][i] = *reinterpret_cast<const float4*>(rb + lb[0] + lo[i]);
#pragma unroll
                for (int r = 0; r < R; ++r) {
                    if (m0 + r * CUMM_SPLITTERS >= MS) break;
                    if (r + 1 < R && m0 + (r + 1) * CUMM_SPLITTERS < MS) {
#pragma unroll
                        for (int i = 0; i < 4; ++i)
                            v[(r + 1) & 1][i] = *reinterpret_cast<const float4*>(rb + lb[r + 1] + lo[i]);
                    }
                    const float4* const w = v[r & 1];
                    unsigned char* const p = big + sb[r];
#pragma unroll
                    for (int j = 0; j < 4; ++j) {
                        uint4 bg, sml;
                        cumm_split_tf32((&w[0].x)[j], bg.x, sml.x);
                        cumm_split_tf32((&w[1].x)[j], bg.y, sml.y);
                        cumm_split_tf32((&w[2].x)[j], bg.z, sml.z);
                        cumm_split_tf32((&w[3].x)[j], bg.w, sml.w);
                        *reinterpret_cast<uint4*>(p + so[j]) = bg;
                        *reinterpret_cast<uint4*>(p + CUMM_B_BYTES + so[j]) = sml;
                    }
                }
                cumm_fence_proxy_async_shared();  // these stores -> the consumers' wgmma (the async proxy)
                __syncwarp();
                if (lane == 0) {
                    cumm_mbar_arrive(&spent[s]);
                    cumm_mbar_arrive(&ready[b]);
                }
            }
        return;
    }

    cumm_setmaxnreg_inc<216>();
    const int wg = warp / 4 - 1, w4 = warp % 4, g = lane / 4, t4 = lane % 4;
    const int r0 = wg * 64 + w4 * 16 + g;  // this thread's first row of the tile (and r0 + 8)
    int it = 0;                            // stages consumed (over all tiles)
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
        const int2 tc = cumm_tile_coord(t, ntm, ntn, GM);
        const int bm0 = tc.x * BM, bn0 = tc.y * BN;
        float acc[BN / 2], pb[BN / 2];
#pragma unroll
        for (int e = 0; e < BN / 2; ++e) acc[e] = 0.0f;
        for (int kt = 0; kt < KT; ++kt, ++it) {
            const int s = it % STAGES, b = it % SB;
            const unsigned char* const st = sm + s * CUMM_RAW_BYTES;
            cumm_mbar_wait(&full[s], (it / STAGES) & 1);
            // This warp's A fragments (4 k-steps of 8), raw: rows r0, r0 + 8; columns 8 j + t4 and 8 j + t4 + 4,
            // loaded while the previous stage's wgmma run.
            float xr[4][4];
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                xr[j][0] = *reinterpret_cast<const float*>(st + cumm_sw128(r0, 2 * j) + 4 * t4);
                xr[j][1] = *reinterpret_cast<const float*>(st + cumm_sw128(r0 + 8, 2 * j) + 4 * t4);
                xr[j][2] = *reinterpret_cast<const float*>(st + cumm_sw128(r0, 2 * j + 1) + 4 * t4);
                xr[j][3] = *reinterpret_cast<const float*>(st + cumm_sw128(r0 + 8, 2 * j + 1) + 4 * t4);
            }
            // The stage is refilled by the copy engine (the async proxy) once every warp has released it: a proxy
            // fence orders these loads before those writes. Without it the release (SYNCS.ARRIVE) was issued with
            // the 16 loads still in flight, and a refill could land first: on the H200, 2 of 300 calls at 4096^3
            // (STAGES=3) had one or two rows of a tile wrong (lab probe: bitwise repeat of one call).
            cumm_fence_proxy_async_shared();
            __syncwarp();
            if (lane == 0) cumm_mbar_arrive(&spent[s]);  // (release: after this warp's loads of the stage)
            if (kt > 0) {  // the previous stage's wgmma: done, its partial into the sum, its split buffer free
                cumm_wgmma_wait<0>();
                cumm_wgmma_pin(pb);
#pragma unroll
                for (int e = 0; e < BN / 2; ++e) acc[e] += pb[e];
                if (lane == 0) cumm_mbar_arrive(&done[(it - 1) % SB]);
            }
            // Split only now: the registers of xb and xs were the previous stage's wgmma operands.
            unsigned xb[4][4], xs[4][4];
#pragma unroll
            for (int j = 0; j < 4; ++j)
#pragma unroll
                for (int i = 0; i < 4; ++i) cumm_split_tf32(xr[j][i], xb[j][i], xs[j][i]);
            cumm_mbar_wait(&ready[b], (it / SB) & 1);
            const unsigned bt = cumm_smem(splits) + b * 2 * CUMM_B_BYTES;  // B^T big; B^T small after it
            cumm_wgmma_fence();
#pragma unroll
            for (int j = 0; j < 4; ++j) {  // k-step j: 32 bytes into each 128-byte row of B^T
                const unsigned long long db = cumm_wg_desc_k(bt + 32 * j);
                const unsigned long long ds = cumm_wg_desc_k(bt + CUMM_B_BYTES + 32 * j);
                cumm_wgmma_tf32<BN>(pb, xb[j], ds, j > 0);
                cumm_wgmma_tf32<BN>(pb, xs[j], db, 1);
                cumm_wgmma_tf32<BN>(pb, xb[j], db, 1);
            }
            cumm_wgmma_commit();
        }
        cumm_wgmma_wait<0>();
        cumm_wgmma_pin(pb);
#pragma unroll
        for (int e = 0; e < BN / 2; ++e) acc[e] += pb[e];
        if (lane == 0) cumm_mbar_arrive(&done[(it - 1) % SB]);

        // Thread (g, t4) of warp w4 holds rows r0, r0 + 8, columns 8 j + 2 t4 (+1) in acc[4 j .. 4 j + 3].
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int row = bm0 + r0 + 8 * h;
            if (row >= M) continue;
            float* const crow = C + (i64)row * ldc;
#pragma unroll
            for (int j = 0; j < BN / 8; ++j)
                cumm_store2<VEC_C>(crow, bn0 + 8 * j + 2 * t4, N, acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1], alpha,
                                   beta);
        }
    }
}
