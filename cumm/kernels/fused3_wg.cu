// fused3_wg: E = A @ B @ C in one persistent launch on sm_90's warpgroup tensor cores (wgmma), with FP32
// accuracy from the same three-product TF32 split as tf32x3 and fused3_tc. Row-major A (m x k, lda),
// B (k x p, ldb), C (p x n, ldc), E (m x n, lde); T = A @ B goes through a scratch array (m x p, ldt).
//
// What changes from fused3_tc:
// * wgmma instead of mma.sync. One instruction multiplies a 64 x BM x 8 tile (mma.sync: 16 x 8 x 8) for
//   a whole warpgroup of 4 warps and runs asynchronously.
// * Each tile is computed transposed, O^T = Y^T X^T for O = X @ Y (X is A or T, Y is B or C). With TF32
//   operands wgmma reads shared memory only K-major. X's rows are K-major as stored, so X is the shared-memory
//   operand. Y is row-major (N-major), so it is the register operand, loaded from shared memory as the
//   fragments of Y^T.
// * K is split over KS warpgroups, each with its own cp.async pipeline taking every KS-th slab, so a small
//   chain's one tile per SM has KS independent chains of wgmma. The KS partial tiles are summed in shared
//   memory, which also transposes them, so E and T are written in coalesced rows.
// What it measured (H200, bench/NOTES.md, session 6): no faster than fused3_tc (n = 512: 29.7 against 24.9 us
// of device time). A tile's time goes to issuing the instructions that feed the tensor cores (copies, Y^T's
// fragments, the split), not to the multiplies, so the faster instruction did not shorten it. kernel="auto"
// does not pick it; it stays as the sm_90a rung of the chain kernels (kernel="fused3_wg").
//
// The split: x = big + small with big = x rounded to TF32. Each slab's Ys*Xb + Yb*Xs (small terms) and Yb*Xb
// are summed apart and added to the running sum in FP32. X's slab is split in shared memory once it has
// landed (big in place, small into a second buffer), because wgmma reads it there. Y's fragments are split
// in registers.
//
// Shared-memory layout of an X slab (BM rows x BK columns): wgmma's canonical K-major layout without swizzle.
// 8 rows x 4 floats (16 bytes) form a "core matrix" of 128 contiguous bytes. Chunk c of row r (columns 4c to
// 4c + 3) lies at float (c * BM + r) * 4. So core matrices adjacent in K lie 16 * BM bytes apart (the
// descriptor's leading byte offset), and those adjacent in rows lie 128 bytes apart (its stride byte offset).
// cp.async writes each 16-byte chunk straight to its place.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ != 900
#error "fused3_wg uses wgmma, which only sm_90a has: compile with -arch=sm_90a"
#endif

#define BN 64            // columns of a tile: the M dimension of one warpgroup's wgmma
#define NT (128 * KS)    // threads: KS warpgroups
#define LDY (BN + 8)     // shared row stride of a Y slab (floats): fragment loads hit 32 distinct banks
#define WG_STAGE (BK * LDY + 2 * BM * BK)  // floats per stage of one warpgroup: Y slab, X big, X small
#define LDR (BN + 4)     // row stride of the partial tiles summed at the end

__device__ __forceinline__ void cumm_wg_split(float x, unsigned& big, unsigned& small) {
    big = (__float_as_uint(x) + 0x1000u) & 0xffffe000u;  // round to TF32 (see tf32x3_tile.cuh)
    small = __float_as_uint(x - __uint_as_float(big));
}

// Descriptor of a K-major, unswizzled shared-memory operand: 8 x 8 TF32 (two core matrices along K) per
// 8 rows, core matrices lbo bytes apart along K and sbo bytes apart along rows.
__device__ __forceinline__ unsigned long long cumm_wg_desc(const float* p, unsigned lbo, unsigned sbo) {
    const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(p));
    return (unsigned long long)((a & 0x3ffff) >> 4) | ((unsigned long long)(lbo >> 4) << 16) |
           ((unsigned long long)(sbo >> 4) << 32);
}

// d (64 x BM, f32) = a (64 x 8 TF32: 4 registers per thread, the m16n8k8 A-fragment of each warp's 16 rows)
// @ the 8 x BM TF32 operand described by desc, + d if accumulate. Asynchronous: wgmma.commit_group and
// wait_group end it.
#define CUMM_F4(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3])
#define CUMM_WG_IN "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(accumulate)
template <int N>
__device__ __forceinline__ void cumm_wgmma(float (&d)[N / 2], const unsigned (&a)[4], unsigned long long desc,
                                           int accumulate);
template <>
__device__ __forceinline__ void cumm_wgmma<16>(float (&d)[8], const unsigned (&a)[4], unsigned long long desc,
                                                 int accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %13, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n16k8.f32.tf32.tf32 {%0,%1,%2,%3,%4,%5,%6,%7}, {%8,%9,%10,%11}, %12, "
        "p, 1, 1;\n}\n"
        : CUMM_F4(0), CUMM_F4(4)
        : CUMM_WG_IN);
}
template <>
__device__ __forceinline__ void cumm_wgmma<32>(float (&d)[16], const unsigned (&a)[4], unsigned long long desc,
                                                 int accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n32k8.f32.tf32.tf32 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,"
        "%15}, {%16,%17,%18,%19}, %20, p, 1, 1;\n}\n"
        : CUMM_F4(0), CUMM_F4(4), CUMM_F4(8), CUMM_F4(12)
        : CUMM_WG_IN);
}
template <>
__device__ __forceinline__ void cumm_wgmma<64>(float (&d)[32], const unsigned (&a)[4], unsigned long long desc,
                                                 int accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,"
        "%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, {%32,%33,%34,%35}, %36, p, 1, 1;\n}\n"
        : CUMM_F4(0), CUMM_F4(4), CUMM_F4(8), CUMM_F4(12), CUMM_F4(16), CUMM_F4(20), CUMM_F4(24), CUMM_F4(28)
        : CUMM_WG_IN);
}

// The compiler does not know that wgmma writes d later than its asm statement: after the wait, these empty
// asm statements make every later read of d depend on it.
template <int R>
__device__ __forceinline__ void cumm_wg_pin(float (&d)[R]) {
#pragma unroll
    for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// One BM x BN tile O[bm0.., bn0..] = X @ Y (X: M x K, Y: K x N), by the whole block. VX / VY / VO: 16-byte
// accesses to X / Y / O are legal (common.cuh). Ends with a barrier, so the caller may reuse smem.
template <int VX, int VY, int VO>
__device__ __forceinline__ void cumm_wg_tile(const int M, const int N, const int K, const float* __restrict__ X,
                                             const int ldx, const float* __restrict__ Y, const int ldy,
                                             float* __restrict__ O, const int ldo, const int bm0, const int bn0,
                                             float* const smem) {
    const int tid = threadIdx.x, wg = tid / 128, wt = tid % 128, warp = wt / 32, lane = tid % 32;
    const int g = lane / 4, t = lane % 4;  // fragment coordinates
    float* const stages = smem + wg * (STAGES * WG_STAGE);
    const int KT = (K + BK - 1) / BK;
    const int mine = KT > wg ? (KT - wg + KS - 1) / KS : 0;  // this warpgroup's slabs: wg, wg + KS, ...

    auto issue = [&](int j, int st) {  // copy this warpgroup's j-th slab into stage st; zero-filled past edges
        const int k0 = (wg + j * KS) * BK;
        float* Ys = stages + st * WG_STAGE;
        float* Xs = Ys + BK * LDY;
#pragma unroll
        for (int u = 0; u < (BK * BN / 4 + 127) / 128; ++u) {  // constant trip counts: fully unrolled
            const int i = wt + u * 128, r = i / (BN / 4), c = i % (BN / 4) * 4;
            const bool ok = k0 + r < K;
            if ((BK * BN / 4) % 128 == 0 || i < BK * BN / 4)
                cumm_cp_async_chunk<VY>(&Ys[r * LDY + c], Y + (i64)(ok ? k0 + r : 0) * ldy + bn0, c, N - bn0, ok);
        }
#pragma unroll
        for (int u = 0; u < (BM * BK / 4 + 127) / 128; ++u) {
            const int i = wt + u * 128, r = i / (BK / 4), c = i % (BK / 4);
            const bool ok = bm0 + r < M;
            if ((BM * BK / 4) % 128 == 0 || i < BM * BK / 4)
                cumm_cp_async_chunk<VX>(&Xs[(c * BM + r) * 4], X + (i64)(ok ? bm0 + r : 0) * ldx + k0, 4 * c,
                                        K - k0, ok);
        }
    };

    // Each slab's products are summed apart (scale-d = 0 starts a fresh sum) and added to acc in FP32 with
    // rounding: the tensor cores' own accumulation over a long K lost accuracy (K = 4096 in one warpgroup:
    // 9.8e-6 relative error, against 2.5e-6 with four).
    float acc[BM / 2], pb[BM / 2], ps[BM / 2];  // running sum; this slab's big * big and its two small terms
#pragma unroll
    for (int i = 0; i < BM / 2; ++i) acc[i] = 0.0f;
    // Descriptors of stage 0's X big / X small at k-step 0; a later stage or k-step only adds to the address
    // field (bits 0-13, 16-byte units), which cannot carry: shared memory addresses are below 2^18.
    const unsigned long long desc0 = cumm_wg_desc(stages + BK * LDY, 16 * BM, 128);
    constexpr unsigned long long SMALL = BM * BK * 4 / 16, STEP = 8 * BM * 4 / 16, STAGE_D = WG_STAGE * 4 / 16;

#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < mine) issue(s, s);
        cumm_cp_async_commit();
    }
    // Every warpgroup runs the same number of rounds (one idles where K has fewer slabs than rounds * KS), so
    // that the block's barriers are plain __syncthreads: compute-sanitizer's racecheck reported hazards
    // between warpgroups with per-warpgroup named barriers (bench/NOTES.md, session 6).
    const int rounds = (KT + KS - 1) / KS;
    for (int j = 0; j < rounds; ++j) {
        asm volatile("cp.async.wait_group %0;\n" ::"n"(STAGES - 2));
        __syncthreads();  // slab j has landed; every wgmma on the stage refilled next has completed
        if (j + STAGES - 1 < mine) issue(j + STAGES - 1, (j + STAGES - 1) % STAGES);
        cumm_cp_async_commit();
        if (j >= mine) {  // (uniform over the warpgroup) no slab this round: only the barriers
            __syncthreads();
            continue;
        }

        const int st = j % STAGES;
        float* const Ys = stages + st * WG_STAGE;
        float* const Xb = Ys + BK * LDY;
        float* const Xs = Xb + BM * BK;
#pragma unroll
        for (int u = 0; u < (BM * BK / 4 + 127) / 128; ++u) {  // split X's slab: big in place, small beside it
            const int i = wt + u * 128;
            if ((BM * BK / 4) % 128 != 0 && i >= BM * BK / 4) break;
            float4 v = reinterpret_cast<float4*>(Xb)[i];
            unsigned b0, b1, b2, b3, s0, s1, s2, s3;
            cumm_wg_split(v.x, b0, s0);
            cumm_wg_split(v.y, b1, s1);
            cumm_wg_split(v.z, b2, s2);
            cumm_wg_split(v.w, b3, s3);
            reinterpret_cast<uint4*>(Xb)[i] = make_uint4(b0, b1, b2, b3);
            reinterpret_cast<uint4*>(Xs)[i] = make_uint4(s0, s1, s2, s3);
        }
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy stores -> wgmma
        __syncthreads();

        unsigned yb[BK / 8][4], ys[BK / 8][4];  // fragments of Y^T (rows: Y's columns warp*16 + g (+8))
#pragma unroll
        for (int s = 0; s < BK / 8; ++s) {
            const float* q = Ys + (8 * s + t) * LDY + warp * 16 + g;
            cumm_wg_split(q[0], yb[s][0], ys[s][0]);
            cumm_wg_split(q[8], yb[s][1], ys[s][1]);
            cumm_wg_split(q[4 * LDY], yb[s][2], ys[s][2]);
            cumm_wg_split(q[4 * LDY + 8], yb[s][3], ys[s][3]);
        }
        const unsigned long long db = desc0 + st * STAGE_D;  // X big of this stage at k-step 0
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
        for (int s = 0; s < BK / 8; ++s) {  // small terms first, into their own sum; then the big one
            cumm_wgmma<BM>(ps, ys[s], db + s * STEP, s > 0);
            cumm_wgmma<BM>(ps, yb[s], db + SMALL + s * STEP, 1);
            cumm_wgmma<BM>(pb, yb[s], db + s * STEP, s > 0);
        }
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
        cumm_wg_pin(pb);
        cumm_wg_pin(ps);
#pragma unroll
        for (int i = 0; i < BM / 2; ++i) acc[i] += pb[i] + ps[i];
    }
    cumm_cp_async_wait_all();  // (only empty groups can be pending)
    __syncthreads();           // every warpgroup is done with its stages: they become the partial tiles

    // Partial tile of this warpgroup, transposed back: accumulator i of n8-block q is O^T(row, col) with
    // row = warp*16 + g (+8 for i >= 2) (a column of O) and col = 8q + 2t (+1 for odd i) (a row of O).
    float* const part = smem + wg * BM * LDR;
#pragma unroll
    for (int q = 0; q < BM / 8; ++q)
#pragma unroll
        for (int i = 0; i < 4; ++i)
            part[(8 * q + 2 * t + (i & 1)) * LDR + warp * 16 + g + 8 * (i >> 1)] = acc[4 * q + i];
    __syncthreads();
#pragma unroll
    for (int u = 0; u < (BM * BN / 4 + NT - 1) / NT; ++u) {
        const int i = tid + u * NT, r = i / (BN / 4), c = i % (BN / 4) * 4;
        if ((BM * BN / 4) % NT != 0 && i >= BM * BN / 4) break;
        float4 v = *reinterpret_cast<const float4*>(smem + r * LDR + c);
#pragma unroll
        for (int w = 1; w < KS; ++w) {
            const float4 x = *reinterpret_cast<const float4*>(smem + w * BM * LDR + r * LDR + c);
            v.x += x.x;
            v.y += x.y;
            v.z += x.z;
            v.w += x.w;
        }
        if (bm0 + r < M) cumm_store4<VO>(O + (i64)(bm0 + r) * ldo, bn0 + c, N, v, 1.0f, 0.0f);
    }
    __syncthreads();
}

extern "C" __global__ void __launch_bounds__(NT, MINB)
    CUMM_KERNEL(const int m, const int k, const int p, const int n, const float* __restrict__ A, const int lda,
                const float* __restrict__ B, const int ldb, const float* __restrict__ C, const int ldc,
                float* __restrict__ E, const int lde, float* __restrict__ T, const int ldt, unsigned* bar) {
    extern __shared__ float4 smem4[];
    float* const smem = reinterpret_cast<float*>(smem4);
    const int rows = (m + BM - 1) / BM;
    const int cols1 = (p + BN - 1) / BN, cols2 = (n + BN - 1) / BN;
    for (int t = blockIdx.x; t < rows * cols1; t += gridDim.x)
        cumm_wg_tile<VEC_A, VEC_B, 1>(m, p, k, A, lda, B, ldb, T, ldt, t / cols1 * BM, t % cols1 * BN, smem);
    cumm_grid_barrier(bar);
    for (int t = blockIdx.x; t < rows * cols2; t += gridDim.x)
        cumm_wg_tile<1, VEC_C, VEC_C>(m, n, p, T, ldt, C, ldc, E, lde, t / cols2 * BM, t % cols2 * BN, smem);
}
