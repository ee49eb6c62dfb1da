// wgmma: the Hopper tensor-core path (sm_90a). What changes from 12_mma_swizzled_pipeline, and why it is faster:
// - wgmma.mma_async m64nNk16: one instruction of a 4-warp warpgroup multiplies 64 x 16 by 16 x N (N = BN, up
//   to 256) with both operands read by the tensor cores straight from shared memory, asynchronously: no
//   ldmatrix, no fragment registers, and far fewer instructions per flop than mma.sync, which cannot reach
//   Hopper's tensor-core rate.
// - TMA (cp.async.bulk.tensor, 2-D tensor maps encoded on the host): one thread copies a whole BM x 64 slab of
//   A and BN / 64 boxes of 64 x 64 of B per stage; the copy engine computes addresses, zero-fills past the
//   edges of M, N, K and writes the 128-byte-swizzled layout wgmma reads without bank conflicts.
// - mbarriers instead of __syncthreads (sm90.cuh's stage ring, CummRing): a stage's "full" barrier completes when
//   its bytes have landed; its "empty" barrier when every consumer warp's wgmma has finished reading it, after
//   which thread 0 refills it STAGES slabs ahead. Warps never wait for each other except through the data they
//   share.
// WGS consumer warpgroups each own BM / WGS rows (MT = BM / 64 / WGS m64 tiles) of the BM x BN tile; there is no
// producer warp (thread 0 refills stages between its own wgmma; 14_wgmma_ws splits that off).
// Host: maps for A (dims K x M, box 64 x BM) and B (dims N x K, box 64 x 64), 16-bit elements, 128-byte swizzle,
// zero fill; needs 16-byte aligned A and B and lda, ldb % 8 == 0 (else the library runs 12_mma_*). Any M, N, K
// >= 1. Grid (ceil(N / BN), ceil(M / BM)), NUM_THREADS = 128 WGS, dynamic shared memory
// STAGES (BM + BN) 128 + 1024 (alignment) + 16 STAGES (barriers) bytes. Batched variant (CUMM_BATCHED): grid z
// is the batch, the maps have it as their third dimension (a broadcast operand: a map of one matrix, read as
// matrix 0) and C moves to product z (CUMM_BATCH()).

extern "C" __global__ void __launch_bounds__(NUM_THREADS, 1)
    CUMM_KERNEL(CUMM_GEMM16_ARGS, const __grid_constant__ CummTmap tmA, const __grid_constant__ CummTmap tmB) {
    constexpr int MT = BM / 64 / WGS, SB = (BM + BN) * 128;  // m64 blocks of a warpgroup; stage bytes
    static_assert(MT * 64 * WGS == BM && BN % 64 == 0 && BN <= 256 && NUM_THREADS == 128 * WGS, "tile shape");
    CUMM_BATCH();  // C moves to product z (A and B are read through the maps)
    extern __shared__ unsigned char smem_raw[];
    const unsigned raw = cumm_smem_u32(smem_raw), base = (raw + 1023) & ~1023u;  // swizzle atoms: 1024-aligned
    unsigned char* const sm = smem_raw + (base - raw);
    unsigned long long* const bars = reinterpret_cast<unsigned long long*>(sm + STAGES * SB);
    const CummRing<STAGES> ring{bars, bars + STAGES};

    const int tid = threadIdx.x, wg = tid / 128, warp = tid % 128 / 32, lane = tid % 32;
    const int g = lane / 4, t4 = lane % 4;
    const int bm0 = blockIdx.y * BM, bn0 = blockIdx.x * BN;
    const int KT = (K + 63) / 64;
    const int za = bsa ? (int)blockIdx.z : 0, zb = bsb ? (int)blockIdx.z : 0;  // a broadcast operand: matrix 0

    auto load = [&](int kt, int s) {  // thread 0: slab kt into stage s (its full barrier expects the bytes)
        unsigned char* const st = sm + s * SB;
        cumm_tma_load_z<CUMM_BATCHED>(st, &tmA, kt * 64, bm0, za, &ring.full[s]);
#pragma unroll
        for (int j = 0; j < BN / 64; ++j)
            cumm_tma_load_z<CUMM_BATCHED>(st + BM * 128 + j * 8192, &tmB, bn0 + 64 * j, kt * 64, zb, &ring.full[s]);
    };
    if (tid == 0) {
        cumm_prefetch_tmap(&tmA);
        cumm_prefetch_tmap(&tmB);
        ring.init<4 * WGS>();  // one arrival per consumer warp
        cumm_mbar_init_fence();
        for (int s = 0; s < STAGES && s < KT; ++s) load(s, ring.fill(s, SB));
    }
    __syncthreads();

    float d[MT][BN / 2];
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int i = 0; i < BN / 2; ++i) d[m][i] = 0.0f;

    for (int kt = 0; kt < KT; ++kt) {
        const int s = ring.wait(kt);
        const unsigned a0 = base + s * SB + wg * MT * 64 * 128, b0 = base + s * SB + BM * 128;
        cumm_wgmma_slab16<MT, BN, 0, 0>(d, a0, b0);
        cumm_wgmma_wait<1>();  // slab kt - 1's wgmma are done: its stage may be refilled
        if (kt > 0) {
            ring.release<1>((kt - 1) % STAGES, lane, 0);
            if (tid == 0 && kt - 1 + STAGES < KT) load(kt - 1 + STAGES, ring.refill(kt - 1, SB));
        }
    }
    cumm_wgmma_wait<0>();
#pragma unroll
    for (int m = 0; m < MT; ++m) cumm_wgmma_pin(d[m]);

    cumm_store_tile<MT, BN / 2, VEC_C>(d, C, 0, ldc, M, N, bm0 + wg * MT * 64, bn0, warp, g, t4, alpha, beta);
}
