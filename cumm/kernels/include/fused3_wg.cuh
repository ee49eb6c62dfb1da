// fused3_wg.cuh: the plumbing of chain/fused3_wg/kernel.cu (rendered after sm90.cuh, before that kernel):
// its shared-memory layout and constants (namespace wg), a chunk's layout and TF32 split, the copies (raw stages,
// mbarriers, the K group's barrier), a chunk's split and wgmma and the running sum. The kernel file keeps what
// the rung is about: a tile's pipeline over its chunks and the persistent two-phase kernel. Everything here
// reads the configuration's #defines (BM, BN, BK, KW, STAGES, TMA, MN, PC, ...).
// Y's split buffer holds Y^T in wgmma's canonical K-major layout without swizzle (sm90.cuh, cumm_wgmma_desc):
// MN = 0: all of Y^T big, then all of Y^T small (R = BN rows each); MN = 1: per K piece, Y^T big's BN rows then
// Y^T small's (R = 2 BN), so that x_big's two products are one wgmma of N = 2 BN.

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
constexpr int W = BK / 4;                // floats of a row of X's chunk per fragment thread (cumm_wg_load_x)
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
static_assert(!PC || (TMA && NPS >= 1), "PC = 1 needs TMA = 1 and a split buffer's room");
// A chunk's sums (cumm_wg_mma): NPB accumulators of big * big per thread (MN = 1: twice BN / 2, with
// x_big * y_small in the second half); the small terms fold every SF chunks: 256 of K with the copy engine,
// every chunk with cp.async (its k-loop is at the register limit, and the conditional fold spills there).
constexpr int NPB = MN ? BN : BN / 2;
constexpr int SF = TMA ? (256 / BK > 1 ? 256 / BK : 1) : 1;
// Descriptor steps (16-byte units) to Y^T small, to the next k-step and to the next split buffer
constexpr unsigned long long SMALL = MN ? BN : BN * BK / 4, STEP = MN ? 4 * BN : 2 * BN, BUF = SPL / 4;
}  // namespace wg

// ---- Layout of a chunk and the TF32 split ----------------------------------------------------------------

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

__device__ __forceinline__ uint4 cumm_wg_split4(float4 v, uint4& small) {
    uint4 big;
    cumm_split_tf32(v.x, big.x, small.x);
    cumm_split_tf32(v.y, big.y, small.y);
    cumm_split_tf32(v.z, big.z, small.z);
    cumm_split_tf32(v.w, big.w, small.w);
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

// ---- The copies: raw stages, their mbarriers, the K group's barrier ------------------------------------

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

// The barrier of K group kg's threads (the block's when KW = 1).
__device__ __forceinline__ void cumm_wg_group_sync(const int kg) {
    if constexpr (KW == 1) {
        __syncthreads();
    } else {
        cumm_bar_sync<wg::NTG>(1 + kg);
    }
}

// Raw stage of chunk c0 + j (seq: the chunks this block took before the tile, see cumm_wg_tile)
template <int PRE>
__device__ __forceinline__ float* cumm_wg_stage(float* const raw, const unsigned seq, const int j) {
    return raw + (TMA ? (seq + j) % STAGES : j % STAGES) * (PRE ? wg::XST : wg::RAW);
}

// Wait for chunk j (of nc) to land. cp.async: this thread's copies, then the K group's barrier for everyone's
// (after which every thread of the group is also done reading chunk j - 1's raw stage, so chunk j + STAGES - 1
// is issued into it). Copy engine: its stage's mbarrier (bars: the group's, one per stage; seq: see
// cumm_wg_tile).
template <class Issue>
__device__ __forceinline__ void cumm_wg_arrive(const int j, const int nc, const int kg,
                                               unsigned long long* const bars, const unsigned seq,
                                               const Issue& issue) {
    if constexpr (TMA) {
        cumm_mbar_wait(bars + (seq + j) % STAGES, (seq + j) / STAGES & 1);
    } else {
        cumm_cp_async_wait<STAGES - 2>();
        cumm_wg_group_sync(kg);
        if (j + STAGES - 1 < nc) issue(j + STAGES - 1);
        cumm_cp_async_commit();
    }
}

// ---- A chunk's split and wgmma, and the running sum -------------------------------------------------------

// The split buffer of chunk j: NSPLIT in turn (PRE = 1: its own, j)
template <int PRE>
__device__ __forceinline__ int cumm_wg_buffer(const int j) {
    return PRE ? j : wg::NSPLIT == 2 ? (j & 1) : j % wg::NSPLIT;
}

// Y's chunk j (in its raw stage), split and transposed into its split buffer
template <int PRE>
__device__ __forceinline__ void cumm_wg_split_chunk(float* const raw, const unsigned seq, float* const split,
                                                    const int j, const int tg) {
    cumm_wg_split_y<BM * wg::LDX>(cumm_wg_stage<PRE>(raw, seq, j),
                                  reinterpret_cast<uint4*>(split + cumm_wg_buffer<PRE>(j) * wg::SPL), tg);
}

// This thread's X fragments of every k-step of the raw chunk at q (rows r and r + 8 of the tile: the m16n8k8
// A-fragment, fragment thread t), split in registers. With K in cumm_wg_kcol's order a thread's values of all
// steps are runs of WS consecutive floats of each of its two rows: 16-byte loads (8-byte when WS is not a
// multiple of 4) instead of one load per value.
__device__ __forceinline__ void cumm_wg_load_x(const float* const q, const int r, const int t,
                                               unsigned (&xb)[BK / 8][4], unsigned (&xs)[BK / 8][4]) {
    using namespace wg;
    if constexpr (!TMA) {  // scalar loads, step by step (vector loads, or this order, spill there)
#pragma unroll
        for (int s = 0; s < BK / 8; ++s) {
            const int c = cumm_wg_kcol(t, 2 * s), d = cumm_wg_kcol(t, 2 * s + 1);
            cumm_split_tf32(q[cumm_wg_xi(r, c)], xb[s][0], xs[s][0]);
            cumm_split_tf32(q[cumm_wg_xi(r + 8, c)], xb[s][1], xs[s][1]);
            cumm_split_tf32(q[cumm_wg_xi(r, d)], xb[s][2], xs[s][2]);
            cumm_split_tf32(q[cumm_wg_xi(r + 8, d)], xb[s][3], xs[s][3]);
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
                    cumm_split_tf32(v[i], xb[(e + i) / 2][h + 2 * (i % 2)], xs[(e + i) / 2][h + 2 * (i % 2)]);
            }
        }
    }
}

// Chunk j's wgmma into the partial sums (dy: the descriptor of split buffer 0, see cumm_wg_tile): small terms
// first, into ps (restarted every SF chunks); big * big into pb (BK = 64: its second half of K into pb2),
// restarted each chunk. MN = 1: x_big against Y big and Y small side by side, both products in one wgmma of
// N = 2 BN: 16 wgmma a chunk of 32 instead of 24, and the wider ones run nearer the tensor cores' rate.
template <int PRE>
__device__ __forceinline__ void cumm_wg_mma(const unsigned long long dy, const int j,
                                            const unsigned (&xb)[BK / 8][4], const unsigned (&xs)[BK / 8][4],
                                            float (&ps)[BN / 2], float (&pb)[wg::NPB], float (&pb2)[wg::NPB]) {
    using namespace wg;
    const unsigned long long b = dy + cumm_wg_buffer<PRE>(j) * BUF;
    cumm_wgmma_fence();
#pragma unroll
    for (int s = 0; s < BK / 8; ++s) {
        cumm_wgmma_tf32<BN>(ps, xs[s], b + s * STEP, j % SF != 0 || s > 0);
#if MN
        cumm_wgmma_tf32<2 * BN>(s >= SB ? pb2 : pb, xb[s], b + s * STEP, s % SB > 0);
#else
        cumm_wgmma_tf32<BN>(ps, xb[s], b + SMALL + s * STEP, 1);
        cumm_wgmma_tf32<BN>(s >= SB ? pb2 : pb, xb[s], b + s * STEP, s % SB > 0);
#endif
    }
    cumm_wgmma_commit();
}

// Chunk i (of nc) into the running sum acc, once its wgmma are waited for (its X fragments may then change,
// and pb restarts). The small terms fold only every SF chunks (256 of K) and after the last: they are ~2^-11
// of the big one, so the tensor cores' own sum over that much of K errs by < 1e-7 of the result (on the big
// term it costs accuracy, see tf32x3.cu), and 16 adds a chunk are saved.
__device__ __forceinline__ void cumm_wg_retire(const int i, const int nc, float (&acc)[BN / 2],
                                               float (&pb)[wg::NPB], float (&ps)[BN / 2], float (&pb2)[wg::NPB]) {
    using namespace wg;
    cumm_wgmma_wait<0>();
    cumm_wgmma_pin(pb);
    cumm_wgmma_pin(ps);
    if constexpr (NB == 2) cumm_wgmma_pin(pb2);
#pragma unroll
    for (int q = 0; q < BN / 2; ++q) acc[q] += MN ? pb[q] + pb[(NPB - BN / 2) + q] : pb[q];
    if constexpr (NB == 2) {
#pragma unroll
        for (int q = 0; q < BN / 2; ++q) acc[q] += MN ? pb2[q] + pb2[(NPB - BN / 2) + q] : pb2[q];
    }
    if (i % SF == SF - 1 || i == nc - 1) {
#pragma unroll
        for (int q = 0; q < BN / 2; ++q) acc[q] += ps[q];
    }
}
