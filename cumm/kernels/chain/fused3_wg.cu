// fused3_wg: E = A @ B @ C in one persistent launch on sm_90's warpgroup tensor cores (wgmma), with FP32
// accuracy from the same three-product TF32 split as tf32x3 and fused3_tc. Row-major A (m x k, lda),
// B (k x p, ldb), C (p x n, ldc), E (m x n, lde); T = A @ B goes through a scratch array (m x p, ldt).
//
// What changes from fused3_tc (bench/NOTES.md, sessions 6 and 7, has the measurements):
// * Big tiles, K split over a cluster. fused3_tc's small tiles (32 x 32 at n = 512, to have a tile per
//   multiprocessor) spend their time issuing the instructions that feed mma.sync: fragment loads and the
//   split of every fragment value, redone by each warp that reads it. Here a tile is BM x BN (128 x 32 at
//   n = 512) and the CL blocks of a cluster each multiply one contiguous 1/CL of K, so a small chain still has
//   a block per multiprocessor (n = 512: 64 tiles x 2 = 128 blocks). The CL partial tiles are summed through
//   distributed shared memory in rank order (deterministic): rank r sums rows r * BM / CL .. and stores them.
// * wgmma: one instruction multiplies 64 x BN x 8 for a warpgroup, asynchronously. X (A, or T) is the register
//   operand: each warp loads its 16 rows' fragments from the raw chunk (K permuted within a chunk, the same
//   way for X and Y, so that a thread's values are consecutive: 16-byte loads) and splits them. Y (B, or C)
//   is split once per block into shared memory, transposed into wgmma's canonical K-major layout (with TF32
//   operands wgmma reads only K-major); its split buffers (two; three with TMA = 1) let the wgmma of chunk j
//   run while the block splits chunk j + 1. With TMA = 0 the STAGES raw stages are filled by cp.async
//   (STAGES - 1 chunks in flight).
// * Each chunk's products are summed apart: small terms in one accumulator, big * big in another, restarted
//   per chunk (small: per 256 of K) and added to the running sum in FP32 with rounding (the tensor cores' own
//   long accumulation loses accuracy, see tf32x3.cu).
// * XA = 1 (wg128x32): chunk j + 1's copies, Y split and X fragments are prepared while chunk j's wgmma run,
//   in a second set of fragment registers; XA = 0 loads X's fragments after chunk j - 1's wgmma are waited for
//   (fewer registers: the 64-wide tiles spill with XA = 1).
// * TMA = 1 (the named configurations, 16-byte aligned operands): thread 0 copies each chunk as two boxes with
//   the copy engine (cp.async.bulk.tensor, tensor maps made by the host), completing on the stage's mbarrier;
//   STAGES chunks in flight, no copy instructions in the other threads and one block barrier per chunk, not two.
//   The engine cannot pad rows, so X's chunk rows are swizzled instead (cumm_wg_xi).
// * KW = 2 (kw64x32, n <= 512): the halves of a rank's K go to two warpgroups of one block, each its own
//   pipeline (stages, split buffers, mbarriers, a named barrier), instead of to two blocks of a cluster: the
//   tile then ends with a block barrier and local shared-memory sums, not a cluster barrier (whose release
//   is a GPU-wide memory barrier) and loads from another multiprocessor: 2.5 -> 1.2 us per block at n = 512.
// * RF = 1 (wg64x32, XA = 0): chunk j - 1's wgmma are waited for before the proxy fence that makes chunk j's
//   split visible to the wgmma, not after the barrier: the fence waits for the split's stores to land, and the
//   two waits then overlap. wg64x32 per call (rotating inputs): n = 896 55.5 -> 54.7 us, 768 45.3 -> 45.0;
//   kw64x32 at 512 unchanged; wg128x64 (longer wgmma per chunk, which the barrier then no longer overlaps)
//   slower at 1024 (bench/NOTES.md, session 14).
// * PC = 1 (kw64x32): C does not depend on phase 1, and every block waits at the grid barrier. So each K group
//   copies its chunks of C for the block's first phase-2 tile once its last phase-1 k-loop has read its raw
//   stages, and splits them between its arrival at the barrier and its wait; that tile's k-loop (PRE) then copies
//   and reads X (T) only: no split, no proxy fence. n = 512: phase 2 5.0 -> 3.8 us, phase 1 +0.3 (the copies'
//   traffic), 16.6 -> 16.0 us per call (bench/NOTES.md, session 15).
// * MN = 1 (wg128x64): Y's big and small halves of a K piece lie side by side (2 BN rows of the split
//   buffer), so x_big's two products (big * big and x_big * y_small) are one wgmma of N = 2 BN instead of two
//   of N = BN, summed apart in the two halves of one accumulator: 16 wgmma a chunk of 32 instead of 24, and the
//   wider ones run nearer the tensor cores' rate. wg128x64 at n = 1024: 61.9 -> 60.3 us per call; kw64x32 at
//   512 unchanged, wg64x32 spills (bench/NOTES.md, session 16).
// * PA = 2 sums two chunks in the tensor cores per fold; ST = 2 keeps the two small terms in their own
//   accumulators. Both measured within a few per cent of PA = ST = 1 (bench/NOTES.md, session 9).
// Measured on the H200 (device time, an event pair per call; bench/results/h200_chain.md, session 11): n = 512
// 16.9 us (kw64x32) against fused3_tc's 24.3, 1024 63.7 (wg128x64) against 98.1. The wgmma and
// the rest of a chunk's work add up rather than overlap: while a warpgroup's wgmma run, its own and other warps'
// instructions wait (bench/probe_hgmma.py, bench/NOTES.md session 10), so what pays is fewer instructions and
// fewer chunks.
//
// Canonical K-major layout (no swizzle) of an R-row operand chunk: 8 rows x 4 floats (16 bytes) form a
// "core matrix" of 128 contiguous bytes; chunk c of row r (columns 4c .. 4c + 3) lies at float (c * R + r) * 4.
// Core matrices adjacent in K lie 16 * R bytes apart (the descriptor's leading byte offset), those adjacent
// in rows 128 bytes apart (its stride byte offset). MN = 1: the split buffer's rows are Y^T big's BN, then
// Y^T small's BN, per K piece (R = 2 BN); MN = 0: all of Y^T big, then all of Y^T small (R = BN each).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ != 900
#error "fused3_wg uses wgmma, which only sm_90a has: compile with -arch=sm_90a"
#endif
#if TMA && !(VEC_A && VEC_B && VEC_C)
#error "TMA=1 copies 16-byte aligned operands only: cumm runs chains with an unaligned operand with TMA=0"
#endif

namespace wg {
constexpr int MG = BM / 64;                // warpgroups along M: 64 rows of the tile each (wgmma's M)
constexpr int NTG = 128 * MG;              // threads of a K group (one chunk pipeline: copies, split, wgmma)
constexpr int NT = NTG * KW;               // threads: KW K groups, each 1 / KW of the block's K
// TMA = 0: raw X chunk [BM][LDX] and Y chunk [BK][LDY], rows padded so that fragment reads and 16-byte writes
// hit 32 banks. TMA = 1: the copy engine writes dense boxes (it cannot pad), so X's rows (BK floats: one 32-,
// 64- or 128-byte swizzle span) are swizzled instead (cumm_wg_xi), and each stage starts on a 1024-byte
// boundary, where the swizzle pattern starts.
constexpr int LDX = TMA ? BK : BK + 4;
constexpr int LDY = TMA ? BN : BN + 4;
constexpr int RAW = TMA ? (BM * BK + BK * BN + 255) / 256 * 256 : BM * LDX + BK * LDY;  // floats per raw stage
constexpr int SPL = 2 * BN * BK;           // floats per split buffer: Y^T big, then Y^T small
// Split buffers: with TMA = 1 a chunk has one block barrier, not two, so a warpgroup may split chunk j while
// another's wgmma still read chunk j - 2's buffer: three buffers keep them apart (see cumm_wg_tile).
constexpr int NSPLIT = TMA ? 3 : 2;
constexpr int W = BK / 4;                // floats of a row of X's chunk per fragment thread (load_x)
// X's chunk in column blocks of SPAN: with TMA = 1 one copy-engine box each (a 128-byte swizzle span at most:
// BK = 64 is two boxes), laid out one after the other; a thread's W values lie WS in each block (cumm_wg_kcol)
constexpr int SPAN = BK <= 32 || BK % 32 != 0 ? BK : 32, WS = SPAN / 4;
// big * big accumulators: BK = 64 sums each half of a chunk's K apart, so that it still folds every 32 of K
constexpr int NB = BK == 64 ? 2 : 1, SB = BK / 8 / NB;  // SB: k-steps per big * big accumulator
constexpr int LDP = BN + 8;                // partial tile [BM][LDP] (float2 stores hit 32 banks)
// A K group's pipeline: its raw stages, then its split buffers (GROUP floats, a multiple of 256: each
// group's stages start on 1024-byte boundaries too); the KW partial tiles after the groups' pipelines.
constexpr int OFF_SPLIT = STAGES * RAW, GROUP = OFF_SPLIT + NSPLIT * SPL, OFF_PART = KW * GROUP;
constexpr int OFF_BAR = OFF_PART + KW * BM * LDP;  // TMA = 1: one mbarrier (8 bytes) per raw stage and group
static_assert(!TMA || GROUP % 256 == 0, "each K group's raw stages start on a 1024-byte boundary");
// PC = 1: the block's first phase-2 tile has all its chunks of Y (C) split before the k-loop, in the grid
// barrier's wait. A K group's space then holds, from its start, X-only raw stages (XST floats each; C's raw
// chunks land there first, dense, before they are split) and from pre_off(n) the n split buffers.
constexpr int XST = BM * BK;
__host__ __device__ constexpr int pre_off(const int n) {
    const int a = STAGES * XST, b = n * BK * BN;
    return ((a > b ? a : b) + 255) / 256 * 256;
}
// the most chunks per K group that fit (a chain whose K group has more runs its first tile as any other)
__host__ __device__ constexpr int nps() {
    int n = 0;
    while (n < 64 && (n + 1) * SPL + pre_off(n + 1) <= GROUP) ++n;
    return n;
}
constexpr int NPS = nps();
static_assert(!PC || (TMA && XA == 0 && NPS >= 1), "PC = 1 needs TMA = 1, XA = 0 and a split buffer's room");
}  // namespace wg

// Float offset of element (r, c) of X's raw chunk. TMA = 1: the copy engine's swizzle, which XORs the 16-byte
// piece index within a row (BK * 4 bytes = the swizzle span) with the row's bits above it (byte offset bits
// 7.., as many as the span has pieces).
__device__ __forceinline__ int cumm_wg_xi(const int r, const int c) {
    if constexpr (TMA != 0) {
        const int o = c / wg::SPAN * (BM * wg::SPAN) + r * wg::SPAN + c % wg::SPAN;  // its box, then the row
        return o ^ (((o >> 5) & (wg::SPAN / 4 - 1)) << 2);
    } else {
        return r * wg::LDX + c;
    }
}

// The chunk column of value e (0 .. W - 1) of fragment thread t (lane % 4): its K slot is t (e even) or t + 4
// (e odd) of k-step e / 2. Y's chunk rows follow the same order (split_y), and a product's sum over K does not
// care about the order; this one puts a thread's values in runs of WS consecutive columns.
__device__ __forceinline__ int cumm_wg_kcol(const int t, const int e) {
    return wg::SPAN * (e / wg::WS) + wg::WS * t + e % wg::WS;
}

__device__ __forceinline__ void cumm_wg_split(float x, unsigned& big, unsigned& small) {
    big = (__float_as_uint(x) + 0x1000u) & 0xffffe000u;  // round to TF32 (see tf32x3_tile.cuh)
    small = __float_as_uint(x - __uint_as_float(big));
}

__device__ __forceinline__ uint4 cumm_wg_split4(float4 v, uint4& small) {
    uint4 big;
    cumm_wg_split(v.x, big.x, small.x);
    cumm_wg_split(v.y, big.y, small.y);
    cumm_wg_split(v.z, big.z, small.z);
    cumm_wg_split(v.w, big.w, small.w);
    return big;
}

// Y's raw chunk at base + OFF (BK x BN, rows LDY apart), split and transposed into the split buffer at Yb: Y^T
// chunk (c, col) at its canonical place. tg: the thread in its K group (NTG threads). (OFF: a raw stage's Y
// follows its X: as a constant here, the k-loop compiles as it did with this code written in it.)
template <int OFF>
__device__ __forceinline__ void cumm_wg_split_y(const float* const base, uint4* const Yb, const int tg) {
    using namespace wg;
    const float* const Yr = base + OFF;
    constexpr int U = (BN * BK / 4 + NTG - 1) / NTG;
    // All of a thread's loads first: the compiler cannot tell the raw stage from the split buffer apart, so
    // a store between two loads would hold the second back (one shared-memory latency per piece, in turn).
    float4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
        const int i = tg + u * NTG, col = i % BN, c = i / BN;  // consecutive threads: consecutive columns
        if ((BN * BK / 4) % NTG != 0 && i >= BN * BK / 4) break;
        // K slots 4 (c % 2) + e of step c / 2: chunk rows cumm_wg_kcol(e, c), e = 0 .. 3
        const float* q = Yr + cumm_wg_kcol(0, c) * LDY + col;
        v[u] = make_float4(q[0], q[WS * LDY], q[2 * WS * LDY], q[3 * WS * LDY]);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
        const int i = tg + u * NTG;
        if ((BN * BK / 4) % NTG != 0 && i >= BN * BK / 4) break;
        uint4 small;
        const int o = MN ? i + i / BN * BN : i;  // (MN = 1: K piece i / BN's rows are 2 BN apart)
        Yb[o] = cumm_wg_split4(v[u], small);
        Yb[o + (MN ? BN : BN * BK / 4)] = small;
    }
}

// Descriptor of a K-major, unswizzled shared-memory operand of R rows (see the layout above).
template <int R>
__device__ __forceinline__ unsigned long long cumm_wg_desc(const float* p) {
    const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(p));
    return (unsigned long long)((a & 0x3ffff) >> 4) | ((unsigned long long)(16 * R >> 4) << 16) |
           ((unsigned long long)(128 >> 4) << 32);
}

// d (64 x N, f32) (+)= a (64 x 8 TF32: 4 registers per thread, the m16n8k8 A-fragment of each warp's 16 rows)
// @ b (8 x N TF32, K-major in shared memory); asynchronous (wgmma.commit_group and wait_group end it; a's
// registers must not change before then). accumulate = 0 starts a fresh sum.
#define CUMM_F4(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3])
#define CUMM_F16(i) CUMM_F4(i), CUMM_F4(i + 4), CUMM_F4(i + 8), CUMM_F4(i + 12)
#define CUMM_WG_IN "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate)
template <int N>
__device__ __forceinline__ void cumm_wgmma(float (&d)[N / 2], const unsigned (&a)[4], unsigned long long b,
                                           int accumulate);
template <>
__device__ __forceinline__ void cumm_wgmma<32>(float (&d)[16], const unsigned (&a)[4], unsigned long long b,
                                                 int accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n32k8.f32.tf32.tf32 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,"
        "%15}, {%16,%17,%18,%19}, %20, p, 1, 1;\n}\n"
        : CUMM_F16(0)
        : CUMM_WG_IN);
}
template <>
__device__ __forceinline__ void cumm_wgmma<64>(float (&d)[32], const unsigned (&a)[4], unsigned long long b,
                                                 int accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,"
        "%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, {%32,%33,%34,%35}, %36, p, 1, 1;\n}\n"
        : CUMM_F16(0), CUMM_F16(16)
        : CUMM_WG_IN);
}
template <>
__device__ __forceinline__ void cumm_wgmma<128>(float (&d)[64], const unsigned (&a)[4], unsigned long long b,
                                                  int accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,"
        "%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,"
        "%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, "
        "{%64,%65,%66,%67}, %68, p, 1, 1;\n}\n"
        : CUMM_F16(0), CUMM_F16(16), CUMM_F16(32), CUMM_F16(48)
        : CUMM_WG_IN);
}

// The compiler does not know that wgmma writes d later than its asm statement: after the wait, these empty
// asm statements make every later read of d depend on it.
template <int R>
__device__ __forceinline__ void cumm_wg_pin(float (&d)[R]) {
#pragma unroll
    for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// The copy engine (TMA = 1, sm_90): a 2-D tensor map per operand, encoded by the host (cumm/_chain.py) and
// passed by value as a __grid_constant__ kernel parameter.
struct __align__(64) CummTmap {
    unsigned long long word[16];
};

__device__ __forceinline__ unsigned cumm_smem(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// The box of `map` whose first element is (x, y) (x: the contiguous dimension) into shared memory at dst, as
// one asynchronous copy whose bytes count against mbarrier `bar`. Elements past the tensor's edges arrive as
// zeros (and count too).
__device__ __forceinline__ void cumm_tma_load(float* dst, const CummTmap* map, int x, int y,
                                              unsigned long long* bar) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
        ::"r"(cumm_smem(dst)), "l"(reinterpret_cast<unsigned long long>(map)), "r"(x), "r"(y), "r"(cumm_smem(bar))
        : "memory");
}

// mbarrier `bar` (one arrival per phase) completes its phase once `bytes` have landed.
__device__ __forceinline__ void cumm_mbar_expect(unsigned long long* bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(cumm_smem(bar)), "r"(bytes)
                 : "memory");
}

// Wait until the phase of `bar` with this parity has completed (acquire: its bytes are visible).
__device__ __forceinline__ void cumm_mbar_wait(unsigned long long* bar, unsigned parity) {
    unsigned done;
    do {
        asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     "selp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done) : "r"(cumm_smem(bar)), "r"(parity) : "memory");
    } while (!done);
}

// TMA = 1: mbarrier i (K group kg's stage s: i = kg * STAGES + s; PC = 1: K group kg's C chunks KW * STAGES + kg)
__device__ __forceinline__ unsigned long long* cumm_wg_bar(float* const smem, const int i) {
    return reinterpret_cast<unsigned long long*>(smem + wg::OFF_BAR) + i;
}

// Chunks [c0, c0 + nc) of K's KT chunks: part pi of CL * KW (cluster rank, then K group).
__device__ __forceinline__ void cumm_wg_part(const int KT, const int pi, int& c0, int& nc) {
    c0 = static_cast<int>(static_cast<long long>(KT) * pi / (CL * KW));
    nc = static_cast<int>(static_cast<long long>(KT) * (pi + 1) / (CL * KW)) - c0;
}

// PC = 1: thread 0 of a K group copies its nc chunks of C (the block's first phase-2 tile: columns bn0..,
// chunks c0..) dense into its space (raw) with the copy engine, completing on mbarrier `bar`.
__device__ __forceinline__ void cumm_wg_preload(float* const raw, unsigned long long* const bar,
                                                const CummTmap* const tc, const int bn0, const int c0,
                                                const int nc) {
    cumm_mbar_expect(bar, 4 * BK * BN * nc);
    for (int j = 0; j < nc; ++j) cumm_tma_load(raw + j * BK * BN, tc, bn0, (c0 + j) * BK, bar);
}

// This cluster rank's share of the BM x BN tile O[bm0.., bn0..] = X @ Y (X: M x K, Y: K x N): the product
// over its 1/CL of K, summed with the other ranks' through distributed shared memory. VX / VY / VO: 16-byte
// accesses to X / Y / O are legal (common.cuh). Starts its cluster-barrier work with a wait and ends with an
// arrival, so the kernel arrives once before its first tile and waits once after its last.
// TMA = 1 (every operand 16-byte aligned): tx / ty are X's and Y's tensor maps; thread 0 copies whole chunks
// with the copy engine into STAGES stages, each with an mbarrier; `seq` counts the chunks this block has taken
// so far (the stage and the mbarrier's phase of a chunk follow from it) and moves on by this tile's.
// KW > 1: the block's warpgroups form KW K groups, each its own pipeline over 1 / KW of the rank's K (its own
// stages, split buffers, mbarriers and named barrier; thread 0 of each group copies); the KW x CL partial tiles
// are summed together, so K split within a block costs a block barrier where a cluster's costs a cluster one.
// PRE = 1 (PC = 1, phase 2's first tile): every chunk of Y is already split (in the barrier's wait, see the
// kernel), so the k-loop copies, waits for and reads X only. tc_next (PC = 1, phase 1's last tile of a block
// whose first phase-2 tile has PRE = 1; else null): once every chunk's raw stage has been read, its K group
// copies that tile's chunks of C (columns bn0_next..) into its raw stages, so that they land during the rest.
template <int VX, int VY, int VO, int PRE>
__device__ __forceinline__ void cumm_wg_tile(const int M, const int N, const int K, const float* __restrict__ X,
                                             const int ldx, const float* __restrict__ Y, const int ldy,
                                             float* __restrict__ O, const int ldo, const int bm0, const int bn0,
                                             const int rank, float* const smem, const CummTmap* tx,
                                             const CummTmap* ty, unsigned& seq, const CummTmap* tc_next = nullptr,
                                             const int bn0_next = 0) {
    using namespace wg;
    static_assert(!PRE || (PC && TMA && XA == 0), "the pre-split k-loop is PC = 1's (TMA = 1, XA = 0)");
    constexpr bool TM = TMA != 0;  // chunks by the copy engine (VX and VY then hold, see the #error above)
    // K group (from lane 0: the compiler then knows it is the same in the whole warp, and keeps the addresses
    // that follow from it, wgmma descriptors included, in uniform registers) and the thread in it
    const int tid = threadIdx.x, kg = KW == 1 ? 0 : __shfl_sync(0xffffffffu, tid / NTG, 0);
    const int tg = KW == 1 ? tid : tid % NTG;
    const int grp = tg / 128, warp = tid % 128 / 32, lane = tid % 32;
    const int g = lane / 4, t = lane % 4;  // fragment coordinates
    float* const raw = smem + kg * GROUP;
    float* const split = raw + OFF_SPLIT;
    float* const part = smem + OFF_PART;
    unsigned long long* const bars = cumm_wg_bar(smem, kg * STAGES);
    // chunks of K; this rank's group kg takes [c0, c0 + nc): part rank * KW + kg of CL * KW
    int c0, nc;
    cumm_wg_part((K + BK - 1) / BK, rank * KW + kg, c0, nc);
    // the barrier of this K group's threads (the block's when KW = 1)
    auto group_sync = [&]() {
        if constexpr (KW == 1) {
            __syncthreads();
        } else {
            asm volatile("bar.sync %0, %1;\n" ::"r"(1 + kg), "n"(NTG) : "memory");
        }
    };
    // Raw stage of chunk c0 + j: j % STAGES; with the copy engine the block's count of chunks goes on across
    // tiles, so that each stage's mbarrier sees one phase per chunk. PRE = 1: X-only stages.
    auto stage = [&](const int j) -> float* {
        return raw + (TM ? (seq + j) % STAGES : j % STAGES) * (PRE ? XST : RAW);
    };

    // Copies of chunk c0 + j into its raw stage, zero-filled past M, N and K. Thread tg copies the
    // 16-byte pieces tg, tg + NTG, ... of X's chunk (BM x BK) and of Y's (BK x BN). With 16-byte accesses
    // legal, the source pointers, row predicates and column byte counts are set once per tile, so a copy is a
    // few instructions (recomputing them per chunk had made the copies ~20 instructions each); otherwise
    // the general per-element copy of common.cuh. With the copy engine: two boxes from thread 0.
    constexpr int UX = (BM * BK / 4 + NTG - 1) / NTG, UY = (BK * BN / 4 + NTG - 1) / NTG;
    const float* xsrc[UX];  // row bm0 + r of X at column c0 * BK + c; null: row past M (the piece is zeros)
    const float* ysrc[UY];  // row c0 * BK + r of Y at column bn0 + c
    int ybytes[UY];         // bytes of the piece left of column N
    if constexpr (!TM) {
#pragma unroll
        for (int u = 0; u < UX; ++u) {
            const int i = tg + u * NTG, r = i / (BK / 4), c = i % (BK / 4) * 4;
            xsrc[u] = bm0 + r < M ? X + (i64)(bm0 + r) * ldx + c0 * BK + c : nullptr;
        }
#pragma unroll
        for (int u = 0; u < UY; ++u) {
            const int i = tg + u * NTG, r = i / (BN / 4), c = i % (BN / 4) * 4;
            ysrc[u] = Y + (i64)(c0 * BK + r) * ldy + bn0 + c;
            ybytes[u] = 4 * max(0, min(4, N - bn0 - c));
        }
    }
    auto issue = [&](int j) {
        const int k0 = (c0 + j) * BK;
        float* const Xr = stage(j);
        float* const Yr = Xr + BM * LDX;
        if constexpr (TM) {
            unsigned long long* const bar = bars + (seq + j) % STAGES;
            cumm_mbar_expect(bar, 4 * (BM * BK + (PRE ? 0 : BK * BN)));
#pragma unroll
            for (int h = 0; h < BK / SPAN; ++h) cumm_tma_load(Xr + h * BM * SPAN, tx, k0 + h * SPAN, bm0, bar);
            if constexpr (!PRE) cumm_tma_load(Yr, ty, bn0, k0, bar);
        } else {
#pragma unroll
            for (int u = 0; u < UX; ++u) {
                const int i = tg + u * NTG, r = i / (BK / 4), c = i % (BK / 4) * 4;
                if ((BM * BK / 4) % NTG != 0 && i >= BM * BK / 4) break;
                if constexpr (VX != 0) {
                    const int bytes = xsrc[u] ? 4 * max(0, min(4, K - k0 - c)) : 0;
                    cumm_cp_async16(&Xr[cumm_wg_xi(r, c)], bytes ? xsrc[u] + j * BK : X, bytes);
                } else {
                    const bool ok = bm0 + r < M;
                    cumm_cp_async_chunk<0>(&Xr[cumm_wg_xi(r, c)], X + (i64)(ok ? bm0 + r : 0) * ldx + k0, c, K - k0,
                                           ok);
                }
            }
#pragma unroll
            for (int u = 0; u < UY; ++u) {
                const int i = tg + u * NTG, r = i / (BN / 4), c = i % (BN / 4) * 4;
                if ((BK * BN / 4) % NTG != 0 && i >= BK * BN / 4) break;
                const bool ok = k0 + r < K;
                if constexpr (VY != 0) {
                    const int bytes = ok ? ybytes[u] : 0;
                    cumm_cp_async16(&Yr[r * LDY + c], bytes ? ysrc[u] + (i64)j * BK * ldy : Y, bytes);
                } else {
                    cumm_cp_async_chunk<0>(&Yr[r * LDY + c], Y + (i64)(ok ? k0 + r : 0) * ldy + bn0, c, N - bn0, ok);
                }
            }
        }
    };
    // Wait for chunk j to land. cp.async: this thread's copies, then the K group's barrier (the block's when
    // KW = 1) for everyone's (after which every thread of the group is also done reading chunk j - 1's raw stage,
    // so chunk j + STAGES - 1 is issued into it). Copy engine: the stage's mbarrier.
    auto arrive = [&](const int j) {
        if constexpr (TM) {
            cumm_mbar_wait(bars + (seq + j) % STAGES, (seq + j) / STAGES & 1);
        } else {
            asm volatile("cp.async.wait_group %0;\n" ::"n"(STAGES - 2));
            group_sync();
            if (j + STAGES - 1 < nc) issue(j + STAGES - 1);
            cumm_cp_async_commit();
        }
    };
    // Copy engine: once the group's barrier has passed after every read of chunk j's raw stage, its thread 0
    // refills it with chunk j + STAGES (STAGES chunks in flight; cp.async keeps STAGES - 1).
    auto refill = [&](const int j) {
        if constexpr (TM) {
            if (tg == 0 && j >= 0 && j + STAGES < nc) issue(j + STAGES);
        }
    };

    // running sum; a chunk's big * big and its two small terms (ST = 2: the second small term in pt, so that
    // a chunk's wgmma form three chains of BK / 8 on their accumulators, not one of BK / 4 and one of BK / 8)
    // MN = 1: pb and pb2 twice as wide, x_big * y_small in their second halves
    constexpr int NPB = MN ? BN : BN / 2;
    float acc[BN / 2], pb[NPB], ps[BN / 2], pt[BN / 2], pb2[NPB];  // pb2: the second half of K (NB = 2)
    // chunks per fold of the small terms: 256 of K, a multiple of PA (see retire); with cp.async every PA (its
    // k-loop is at the register limit, and the conditional fold spills there)
    constexpr int SF = TMA ? PA * (256 / (BK * PA) > 1 ? 256 / (BK * PA) : 1) : PA;
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) acc[i] = 0.0f;
    // Descriptor of split buffer 0's Y^T big at k-step 0; another buffer, the small half or a k-step only adds
    // to the address field (16-byte units), which cannot carry: shared memory addresses are below 2^18.
    // PRE = 1: chunk j's own buffer j, from pre_off(nc) on.
    const unsigned long long dy = cumm_wg_desc<MN ? 2 * BN : BN>(PRE ? raw + pre_off(nc) : split);
    constexpr unsigned long long SMALL = MN ? BN : BN * BK / 4, STEP = MN ? 4 * BN : 2 * BN, BUF = SPL / 4;
    auto buffer = [](const int j) { return PRE ? j : NSPLIT == 2 ? (j & 1) : j % NSPLIT; };

    // Y's chunk j, split and transposed into its split buffer
    auto split_y = [&](const int j) {
        cumm_wg_split_y<BM * LDX>(stage(j), reinterpret_cast<uint4*>(split + buffer(j) * SPL), tg);
    };
    // This warp's X fragments of every k-step of chunk j (rows 64 grp + 16 warp + g and + 8: the m16n8k8
    // A-fragment), split in registers. With K in cumm_wg_kcol's order a thread's values of all steps are runs
    // of WS consecutive floats of each of its two rows: 16-byte loads (8-byte when WS is not a multiple of 4)
    // instead of one load per value.
    auto load_x = [&](const int j, unsigned (&xb)[BK / 8][4], unsigned (&xs)[BK / 8][4]) {
        const float* const q = stage(j);
        const int r = 64 * grp + 16 * warp + g;
        if constexpr (!TM) {  // scalar loads, step by step (vector loads, or this order, spill there)
#pragma unroll
            for (int s = 0; s < BK / 8; ++s) {
                const int c = cumm_wg_kcol(t, 2 * s), d = cumm_wg_kcol(t, 2 * s + 1);
                cumm_wg_split(q[cumm_wg_xi(r, c)], xb[s][0], xs[s][0]);
                cumm_wg_split(q[cumm_wg_xi(r + 8, c)], xb[s][1], xs[s][1]);
                cumm_wg_split(q[cumm_wg_xi(r, d)], xb[s][2], xs[s][2]);
                cumm_wg_split(q[cumm_wg_xi(r + 8, d)], xb[s][3], xs[s][3]);
            }
        } else {
#pragma unroll
            for (int h = 0; h < 2; ++h) {  // row r + 8 h: fragment registers h (slot t) and 2 + h (slot t + 4)
#pragma unroll
                for (int e = 0; e < W; e += WS % 4 == 0 ? 4 : 2) {
                    const float* const a = q + cumm_wg_xi(r + 8 * h, cumm_wg_kcol(t, e));
                    float v[4];
                    if constexpr (WS % 4 == 0) {
                        const float4 f = *reinterpret_cast<const float4*>(a);
                        v[0] = f.x, v[1] = f.y, v[2] = f.z, v[3] = f.w;
                    } else {
                        const float2 f = *reinterpret_cast<const float2*>(a);
                        v[0] = f.x, v[1] = f.y;
                    }
#pragma unroll
                    for (int i = 0; i < (WS % 4 == 0 ? 4 : 2); ++i)
                        cumm_wg_split(v[i], xb[(e + i) / 2][h + 2 * (i % 2)], xs[(e + i) / 2][h + 2 * (i % 2)]);
                }
            }
        }
    };
    // Chunk i's products into the running sum, once its wgmma are waited for (its X fragments may then change,
    // and pb restarts). The small terms fold only every SF chunks (256 of K) and after the last: they are
    // ~2^-11 of the big one, so the tensor cores' own sum over that much of K errs by < 1e-7 of the result
    // (on the big term it costs accuracy, see tf32x3.cu), and 16 adds a chunk are saved (bench/NOTES.md).
    auto retire = [&](const int i) {
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
        cumm_wg_pin(pb);
        cumm_wg_pin(ps);
        if constexpr (ST == 2) cumm_wg_pin(pt);
        if constexpr (NB == 2) cumm_wg_pin(pb2);
#pragma unroll
        for (int q = 0; q < BN / 2; ++q) acc[q] += MN ? pb[q] + pb[(NPB - BN / 2) + q] : pb[q];
        if constexpr (NB == 2) {
#pragma unroll
            for (int q = 0; q < BN / 2; ++q) acc[q] += MN ? pb2[q] + pb2[(NPB - BN / 2) + q] : pb2[q];
        }
        if (i % SF == SF - 1 || i == nc - 1) {
#pragma unroll
            for (int q = 0; q < BN / 2; ++q) acc[q] += ST == 2 ? ps[q] + pt[q] : ps[q];
        }
    };

    // Chunk j's wgmma into the partial sums, small terms first (big restarted unless `more`: then it goes on
    // from the last chunk's; small restarted every SF chunks).
    auto mma = [&](const int j, const unsigned (&xb)[BK / 8][4], const unsigned (&xs)[BK / 8][4], const bool more) {
        const unsigned long long b = dy + buffer(j) * BUF;
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
        for (int s = 0; s < BK / 8; ++s) {
            cumm_wgmma<BN>(ps, xs[s], b + s * STEP, j % SF != 0 || s > 0);
#if MN
            // x_big against Y big and Y small side by side: both products in one wgmma
            cumm_wgmma<2 * BN>(s >= SB ? pb2 : pb, xb[s], b + s * STEP, more || s % SB > 0);
#else
            if constexpr (ST == 2) {
                cumm_wgmma<BN>(pt, xb[s], b + SMALL + s * STEP, j % SF != 0 || s > 0);
            } else {
                cumm_wgmma<BN>(ps, xb[s], b + SMALL + s * STEP, 1);
            }
            cumm_wgmma<BN>(s >= SB ? pb2 : pb, xb[s], b + s * STEP, more || s % SB > 0);
#endif
        }
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    };

    if constexpr (TM) {
        if (tg == 0)
            for (int s = 0; s < STAGES && s < nc; ++s) issue(s);
    } else {
#pragma unroll
        for (int s = 0; s < STAGES - 1; ++s) {
            if (s < nc) issue(s);
            cumm_cp_async_commit();  // empty groups keep the count uniform for wait_group below
        }
    }
    // Why the split buffers do not race: a chunk's split buffer was last read by the wgmma of chunk j - 2 (two
    // buffers) or j - 3 (three), and every warpgroup waits for those before the barrier that precedes the
    // split: with cp.async the one in arrive(j) (XA = 0 waits for chunk j - 2 in round j - 1; XA = 1 in prepare
    // (j - 1)), with the copy engine, which has no barrier in arrive, round j - 1's (XA = 0) or prepare(j - 1)'s.
    if constexpr (PRE) {
        // No split, no proxy fence: the group's barrier only guards the refill of chunk j - 1's X stage.
        for (int j = 0; j < nc; ++j) {
            arrive(j);
            if (j > 0 && j - 1 + STAGES < nc) {
                group_sync();  // every thread loaded chunk j - 1's X fragments
                refill(j - 1);
            }
            if (j > 0) retire(j - 1);
            unsigned xb[BK / 8][4], xs[BK / 8][4];
            load_x(j, xb, xs);
            mma(j, xb, xs, false);
        }
    } else if constexpr (XA == 0) {
        for (int j = 0; j < nc; ++j) {
            arrive(j);
            split_y(j);  // (this runs while chunk j - 1's wgmma do)
            // RF = 1: chunk j - 1's wgmma are waited for (and folded) before the proxy fence, which waits for
            // this thread's stores of the split, so that the two waits overlap; RF = 0: after the barrier, which
            // then overlaps the wgmma (longer with wider tiles: wg128x64 is faster so).
            if (RF && j > 0) retire(j - 1);
            asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy stores -> wgmma
            group_sync();
            refill(j - 1);  // every thread loaded chunk j - 1's X fragments before this barrier
            if (!RF && j > 0) retire(j - 1);
            // X's fragments for this warpgroup's 64 rows, split in registers
            unsigned xb[BK / 8][4], xs[BK / 8][4];
            load_x(j, xb, xs);
            mma(j, xb, xs, false);
        }
    } else {
        // X one chunk ahead: chunk j + 1's copies, Y split and X fragments are done while chunk j's wgmma run,
        // into a second set of fragment registers (the loop is unrolled by two so that the two sets swap roles
        // without copies). Chunk j's wgmma start only after chunk j - 1's have been waited for.
        unsigned xb0[BK / 8][4], xs0[BK / 8][4], xb1[BK / 8][4], xs1[BK / 8][4];
        // Wait for chunk j, split Y's chunk j, load and split this warp's X fragments of chunk j, make the split
        // visible to the wgmma; after the barrier, chunk j's raw stage is free.
        auto prepare = [&](const int j, unsigned (&xb)[BK / 8][4], unsigned (&xs)[BK / 8][4]) {
            arrive(j);
            split_y(j);
            load_x(j, xb, xs);
            asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
            group_sync();
            refill(j);
        };
        if (nc > 0) prepare(0, xb0, xs0);
        if constexpr (PA == 1) {
            for (int j = 0; j < nc; j += 2) {
                if (j > 0) retire(j - 1);
                mma(j, xb0, xs0, false);
                if (j + 1 < nc) {
                    prepare(j + 1, xb1, xs1);
                    retire(j);
                    mma(j + 1, xb1, xs1, false);
                    if (j + 2 < nc) prepare(j + 2, xb0, xs0);
                }
            }
            if (nc > 0) retire(nc - 1);
        } else {
            // PA = 2: two chunks per fold. Chunk j + 1's wgmma go on summing into chunk j's partial sums, issued
            // before chunk j is waited for: with 32-wide tiles a chunk's wgmma are short, and the tensor cores
            // otherwise idle while each chunk is waited for, folded and the next one issued. Chunk j's X
            // registers are reloaded (chunk j + 2) once chunk j alone has been waited for (wait_group 1). The
            // tensor cores' own sums then run over 2 * BK of K instead of BK (see tf32x3.cu on their accuracy).
            for (int j = 0; j < nc; j += 2) {
                mma(j, xb0, xs0, false);
                if (j + 1 < nc) {
                    prepare(j + 1, xb1, xs1);
                    mma(j + 1, xb1, xs1, true);
                    asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
                    if (j + 2 < nc) prepare(j + 2, xb0, xs0);
                }
                retire(j + 1 < nc ? j + 1 : j);
            }
        }
    }
    if constexpr (PC) {
        if (tc_next != nullptr) {  // (uniform in the block) every raw stage has been read: C's chunks go there
            group_sync();
            int c0n, ncn;
            cumm_wg_part((N + BK - 1) / BK, rank * KW + kg, c0n, ncn);  // (phase 2's K is phase 1's N)
            if (tg == 0) cumm_wg_preload(raw, cumm_wg_bar(smem, KW * STAGES + kg), tc_next, bn0_next, c0n, ncn);
        }
    }
    if constexpr (XA == 0) {
        if (nc > 0) retire(nc - 1);
    }
    // PC = 1: nothing is in flight here; said outright, ptxas need not assume wgmma past this point on paths
    // where nc is 0, and then serialize every wgmma of the kernel (C7518)
    if constexpr (PC) asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    if constexpr (TM) seq += nc;

    // Accumulator 4q + i holds row 64 grp + 16 warp + g (+ 8 for i >= 2), column 8q + 2t (+ 1 for odd i): the
    // m16n8 fragment, repeated over the BN / 8 column blocks. The partial tile has its own space, so the next
    // tile's first copies need not wait for the other ranks to finish reading it.
    cumm_cluster_wait();  // (the previous tile's last barrier: every rank is done reading this partial tile)
    {
        const int r = kg * BM + 64 * grp + 16 * warp + g;  // (K group kg's partial tile)
#pragma unroll
        for (int q = 0; q < BN / 8; ++q) {
            *reinterpret_cast<float2*>(part + r * LDP + 8 * q + 2 * t) = make_float2(acc[4 * q], acc[4 * q + 1]);
            *reinterpret_cast<float2*>(part + (r + 8) * LDP + 8 * q + 2 * t) =
                make_float2(acc[4 * q + 2], acc[4 * q + 3]);
        }
    }
#if CL > 1
    cumm_cluster_arrive();  // (release) this rank's partial tile is written
    cumm_cluster_wait();    // (acquire) and every other rank's
#else
    __syncthreads();
#endif
    // Rank `rank` sums rows rank * BM / CL .. of the CL x KW partial tiles, in the order of their parts of K
    // (rank, then K group), and stores them. All of a thread's loads are issued before the first sum, so their
    // latencies overlap.
    constexpr int ROWS = BM / CL, U = (ROWS * BN / 4 + NT - 1) / NT, NP = CL * KW;
    float4 v[U][NP];
#pragma unroll
    for (int u = 0; u < U; ++u) {
        const int i = tid + u * NT, r = rank * ROWS + i / (BN / 4), c = i % (BN / 4) * 4;
        if ((ROWS * BN / 4) % NT != 0 && i >= ROWS * BN / 4) break;
#pragma unroll
        for (int q = 0; q < NP; ++q)
#if CL > 1
            v[u][q] = cumm_cluster_load4(cumm_cluster_map(part + (q % KW * BM + r) * LDP + c, q / KW));
#else
            v[u][q] = *reinterpret_cast<const float4*>(part + (q * BM + r) * LDP + c);
#endif
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
        const int i = tid + u * NT, r = rank * ROWS + i / (BN / 4), c = i % (BN / 4) * 4;
        if ((ROWS * BN / 4) % NT != 0 && i >= ROWS * BN / 4) break;
#pragma unroll
        for (int q = 1; q < NP; ++q) {
            v[u][0].x += v[u][q].x;
            v[u][0].y += v[u][q].y;
            v[u][0].z += v[u][q].z;
            v[u][0].w += v[u][q].w;
        }
        if (bm0 + r < M) cumm_store4<VO>(O + (i64)(bm0 + r) * ldo, bn0 + c, N, v[u][0], 1.0f, 0.0f);
    }
#if CL > 1
    // This rank is done reading the others' partial tiles (its loads completed: their values were summed), so
    // a relaxed arrival suffices; a release would add a GPU-wide memory barrier behind the stores to O.
    cumm_cluster_arrive_relaxed();
#else
    __syncthreads();
#endif
}

// TMA = 1: the tensor maps of A (box BK x BM), B (BN x BK), T (BK x BM) and C (BN x BK), by value.
#if TMA
#define CUMM_WG_ARGS                                                                                         \
    CUMM_CHAIN_ARGS, const __grid_constant__ CummTmap tm_a, const __grid_constant__ CummTmap tm_b,          \
        const __grid_constant__ CummTmap tm_t, const __grid_constant__ CummTmap tm_c
#else
#define CUMM_WG_ARGS CUMM_CHAIN_ARGS
#endif

// Persistent: cluster q of the grid walks tiles q, q + clusters, ... of phase 1, then of phase 2.
extern "C" __global__ void __launch_bounds__(wg::NT, MINB) CUMM_CLUSTER_DIMS
    CUMM_KERNEL(CUMM_WG_ARGS) {
    cumm_grid_dependency_wait();  // (first: see grid_barrier.cuh)
    extern __shared__ float4 smem4[];
#if TMA
    // The swizzle pattern starts at 1024-byte boundaries of shared memory (the spec reserves the slack).
    float* const smem = reinterpret_cast<float*>(smem4) + ((1024 - cumm_smem(smem4) % 1024) % 1024) / 4;
    const CummTmap *ma = &tm_a, *mb = &tm_b, *mt = &tm_t, *mc = &tm_c;
    if (threadIdx.x == 0) {
        for (int s = 0; s < KW * (STAGES + PC); ++s)
            asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(cumm_smem(cumm_wg_bar(smem, s))));
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
#else
    float* const smem = reinterpret_cast<float*>(smem4);
    const CummTmap *ma = nullptr, *mb = nullptr, *mt = nullptr, *mc = nullptr;
#endif
    unsigned seq = 0;  // chunks this block has taken by the copy engine
    const int rank = cumm_cluster_rank(), cluster = blockIdx.x / CL, clusters = gridDim.x / CL;
    const int rows = (m + BM - 1) / BM;
    const int cols1 = (p + BN - 1) / BN, cols2 = (n + BN - 1) / BN, tiles1 = rows * cols1, tiles2 = rows * cols2;
#if PC
    // PC = 1: this block's first phase-2 tile (if it has one, and each K group's chunks fit: wg::NPS) gets its C
    // copied once the block's phase-1 k-loops are done (their raw stages free) and split while the grid
    // barrier waits, so that its k-loop has no Y to split: C does not depend on phase 1.
    const int kg = KW == 1 ? 0 : __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) / wg::NTG, 0);
    const int tg = threadIdx.x % wg::NTG, bn0_pre = cluster % cols2 * BN;
    const bool pre = cluster < tiles2 && ((p + BK - 1) / BK + CL * KW - 1) / (CL * KW) <= wg::NPS;
    int c0_pre, nc_pre;
    cumm_wg_part((p + BK - 1) / BK, rank * KW + kg, c0_pre, nc_pre);
    float* const raw_pre = smem + kg * wg::GROUP;
    if (pre && cluster >= tiles1 && tg == 0)  // no phase-1 tile: copy now
        cumm_wg_preload(raw_pre, cumm_wg_bar(smem, KW * STAGES + kg), mc, bn0_pre, c0_pre, nc_pre);
#else
    constexpr bool pre = false;
    constexpr int bn0_pre = 0;
#endif
    cumm_cluster_arrive_relaxed();  // pairs with the first tile's wait (each tile waits, then arrives last)
    for (int t = cluster; t < tiles1; t += clusters)
        cumm_wg_tile<VEC_A, VEC_B, 1, 0>(m, p, k, A, lda, B, ldb, T, ldt, t / cols1 * BM, t % cols1 * BN, rank,
                                         smem, ma, mb, seq, pre && t + clusters >= tiles1 ? mc : nullptr, bn0_pre);
#if TMA
    // T's stores (generic proxy) before the copy engine's reads of T (async proxy) in other blocks
    asm volatile("fence.proxy.async.global;\n" ::: "memory");
#endif
#if PC
    {
        const unsigned long long arrival = cumm_grid_arrive(bar);
        if (pre) {  // C's chunks, split into their buffers while the other blocks finish phase 1
            cumm_mbar_wait(cumm_wg_bar(smem, KW * STAGES + kg), 0);
            for (int j = 0; j < nc_pre; ++j)
                cumm_wg_split_y<0>(raw_pre + j * BK * BN,
                                reinterpret_cast<uint4*>(raw_pre + wg::pre_off(nc_pre) + j * wg::SPL), tg);
            asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy stores -> wgmma
        }
        cumm_grid_wait(bar, arrival);
    }
#else
    cumm_grid_barrier(bar);
#endif
#if TMA
    asm volatile("fence.proxy.async.global;\n" ::: "memory");
#endif
    int t = cluster;
    if (pre) {
        cumm_wg_tile<1, VEC_C, VEC_C, PC>(m, n, p, T, ldt, C, ldc, E, lde, t / cols2 * BM, t % cols2 * BN, rank,
                                          smem, mt, mc, seq);
        t += clusters;
    }
    for (; t < tiles2; t += clusters)
        cumm_wg_tile<1, VEC_C, VEC_C, 0>(m, n, p, T, ldt, C, ldc, E, lde, t / cols2 * BM, t % cols2 * BN, rank,
                                         smem, mt, mc, seq);
    cumm_cluster_wait();  // no block exits while another rank may still read its partial tile
}
