// fused3: E = A @ B @ C in one kernel, for row-major A (m x k, lda), B (k x p, ldb), C (p x n, ldc) and
// E (m x n, lde). The intermediate T = A @ B (m x p) never goes to global memory.
//
// Work split. A cluster of CL blocks owns a BM-row panel of E (grid.x = CL * ceil(m / BM); cluster rank
// = blockIdx.x % CL). p is walked in chunks of PC = CL * PCH * BN columns of T; per chunk:
//   phase 1  each block computes PCH slices of BN columns of T[panel, chunk] = A[panel, :] @ B[:, chunk]
//            (rank r owns chunk columns [r * PCH * BN, (r + 1) * PCH * BN)) and keeps them in shared memory;
//   gather   after a cluster barrier each block copies the other ranks' slices out of their shared memory
//            (distributed shared memory, sm_90), so every block holds the whole BM x PC chunk of T;
//   phase 2  each block computes its BN-wide column panels of E (panels rank, rank + CL, ...) as
//            T[panel, chunk] @ C[chunk, cols] and stores them (first chunk) or adds them into E (later
//            chunks: the same thread wrote those elements, so no synchronisation is needed).
// Each element of T is computed once (no recompute across column panels of E) and the cluster gives the
// grid CL times more blocks than row panels alone (m = 512: BM = 32 and CL = 4 make 64 blocks, BM = 16
// and CL = 8 make 256). With CL = 1 (GPUs without clusters) one block does all of it.
//
// Inside a block both phases are the same tile GEMM: a BM x BN tile, TM x TN per thread (float4 groups
// spaced BM/(TM/4) and BN/(TN/4) apart so that a warp's LDS.128 are conflict-free; 8 x 8 tiles make
// 64 FFMA per 4 LDS.128, which shared memory can feed), and the k-loop of every BK-deep slab split across
// KS groups of threads (a sliced-K block: the per-block tile is small, yet the block has enough warps).
// At the end of a tile the KS partial tiles are summed through shared memory in log2(KS) rounds (a tree;
// KS / 2 tiles of space, reusing the stages') into slice 0, which stores the result (to T in shared
// memory, or to E). Slabs are copied from global to shared memory by cp.async (no staging registers),
// one slab ahead of the arithmetic, into two stages. The left operand (A's slab, or T) is
// stored k-major ("transposed") with rows padded to BMP floats.
//
// Tails: every copy is predicated and zero-fills (cp.async with fewer source bytes than it writes): rows
// >= m of A, columns >= k, rows >= k of B, columns >= p of B, rows >= p of C, columns >= n of C. So padded
// rows and columns of T are exact zeros; E is stored only where row < m and col < n. VEC_A / VEC_B gate
// 16-byte accesses to A / B; VEC_C gates both C and E (the caller sets it only when both allow them).
#define BMP (BM + 4)

namespace fused3 {
constexpr int ST = (BM / TM) * (BN / TN);  // threads of one k-slice (one BM x BN tile)
constexpr int NT = KS * ST;
constexpr int MQ = TM / 4, NQ = TN / 4;    // float4 groups of a thread's tile
constexpr int MG = BM / MQ, NG = BN / NQ;  // distance between those groups
constexpr int KSL = BK / KS;               // k of each slab handled by one slice
constexpr int PC = CL * PCH * BN;          // columns of T per chunk
constexpr int E4 = TM * TN / 4;            // float4s of a thread's tile
// shared memory, in floats: the T chunk [PC][BMP], then either two stages of {X [BK][BMP], Y [BK][BN]}
// (during a k-loop) or KS / 2 partial tiles of BM x BN (the slice reduction, after it)
constexpr int STAGE = BK * BMP + BK * BN;
constexpr int OFF_STAGE = PC * BMP;

// acc += X[k0 .. k0 + KSL) x Y[k0 .. k0 + KSL) for this slice's k0; X is k-major [.][BMP], Y is [.][BN].
__device__ __forceinline__ void slab_fma(float (&acc)[TM][TN], const float* __restrict__ X,
                                         const float* __restrict__ Y, int tr, int tc) {
#pragma unroll
    for (int k = 0; k < KSL; ++k) {
        float rm[TM], rn[TN];
#pragma unroll
        for (int q = 0; q < MQ; ++q)
            *reinterpret_cast<float4*>(&rm[4 * q]) =
                *reinterpret_cast<const float4*>(&X[k * BMP + q * MG + tr * 4]);
#pragma unroll
        for (int q = 0; q < NQ; ++q)
            *reinterpret_cast<float4*>(&rn[4 * q]) =
                *reinterpret_cast<const float4*>(&Y[k * BN + q * NG + tc * 4]);
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
            for (int j = 0; j < TN; ++j) acc[i][j] += rm[i] * rn[j];
    }
}

// Sum the KS slices' tiles into slice 0's registers: a tree of log2(KS) rounds in which the upper half of
// the remaining slices store their tiles (float4 e of thread ts at P[e][ts]: a warp's accesses are
// consecutive) and the lower half add them. Needs KS / 2 tiles of shared memory; all threads call it.
__device__ __forceinline__ void reduce_slices(float (&acc)[TM][TN], float4* P, int slice, int ts) {
#pragma unroll
    for (int half = KS / 2; half >= 1; half /= 2) {
        if (slice >= half && slice < 2 * half) {
            float4* dst = P + (slice - half) * E4 * ST + ts;
#pragma unroll
            for (int e = 0; e < E4; ++e)
                dst[e * ST] = make_float4(acc[e / NQ][e % NQ * 4], acc[e / NQ][e % NQ * 4 + 1],
                                          acc[e / NQ][e % NQ * 4 + 2], acc[e / NQ][e % NQ * 4 + 3]);
        }
        __syncthreads();
        if (slice < half) {
            const float4* src = P + slice * E4 * ST + ts;
#pragma unroll
            for (int e = 0; e < E4; ++e) {
                const float4 v = src[e * ST];
                acc[e / NQ][e % NQ * 4] += v.x;
                acc[e / NQ][e % NQ * 4 + 1] += v.y;
                acc[e / NQ][e % NQ * 4 + 2] += v.z;
                acc[e / NQ][e % NQ * 4 + 3] += v.w;
            }
        }
        __syncthreads();  // read before the next round (or the next k-loop) overwrites
    }
}

// Start copying a ROWS x COLS tile of a row-major matrix (rows row0.., columns col0..) into shared memory
// at dst (row stride DLD) with cp.async; elements outside nrows x ncols become zeros. VEC: 16-byte copies
// (partial chunks at the right edge zero-fill the rest), else 4-byte ones. Not committed or waited for.
template <int ROWS, int COLS, int DLD, int VEC>
__device__ __forceinline__ void copy_tile(float* dst, const float* __restrict__ g, int ld, int row0, int nrows,
                                          int col0, int ncols, int tid) {
    constexpr int CH = ROWS * COLS / 4 / NT;  // 16-byte chunks per thread
    static_assert(CH * 4 * NT == ROWS * COLS, "every thread copies the same number of chunks");
#pragma unroll
    for (int s = 0; s < CH; ++s) {
        const int r = (tid + s * NT) / (COLS / 4), c = (tid + s * NT) % (COLS / 4) * 4;
        const bool row_ok = row0 + r < nrows;
        const float* src = g + (i64)(row_ok ? row0 + r : 0) * ld + col0 + c;
        float* d = dst + r * DLD + c;
        if (VEC) {
            const int bytes = row_ok ? 4 * max(0, min(4, ncols - col0 - c)) : 0;
            cumm_cp_async16(d, bytes ? src : g, bytes);
        } else {
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const bool ok = row_ok && col0 + c + i < ncols;
                cumm_cp_async4(d + i, ok ? src + i : g, ok);
            }
        }
    }
}

// The same for A's BM x BK slab, stored transposed (k-major, rows padded to BMP): element by element, a
// warp's 32 copies read 32 consecutive floats of a row of A.
template <int VEC>
__device__ __forceinline__ void copy_a_transposed(float* dst, const float* __restrict__ A, int lda, int row0,
                                                  int m, int k0, int k, int tid) {
    constexpr int EL = BM * BK / NT;
    static_assert(EL * NT == BM * BK, "every thread copies the same number of elements of A");
#pragma unroll
    for (int s = 0; s < EL; ++s) {
        const int r = (tid + s * NT) / BK, c = (tid + s * NT) % BK;
        const bool ok = row0 + r < m && k0 + c < k;
        cumm_cp_async4(dst + c * BMP + r, ok ? A + (i64)(row0 + r) * lda + k0 + c : A, ok);
    }
}

__device__ __forceinline__ void zero(float (&acc)[TM][TN]) {
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;
}
}  // namespace fused3

extern "C" __global__ void __launch_bounds__(fused3::NT, MINB) CUMM_CLUSTER_DIMS
CUMM_KERNEL(const int m, const int k, const int p, const int n,
            const float* __restrict__ A, const int lda, const float* __restrict__ B, const int ldb,
            const float* __restrict__ C, const int ldc, float* __restrict__ E, const int lde) {
    using namespace fused3;
    extern __shared__ float4 smem4[];
    float* const smem = reinterpret_cast<float*>(smem4);
    float* const Tt = smem;               // [PC][BMP]: column c of the T chunk is row c here
    float4* const P = reinterpret_cast<float4*>(smem + OFF_STAGE);  // partial tiles, over the stages

    const int tid = threadIdx.x, slice = tid / ST, ts = tid % ST;
    const int tr = ts / (NG / 4), tc = ts % (NG / 4);
    const int rank = cumm_cluster_rank();
    const int bm0 = blockIdx.x / CL * BM;

    float acc[TM][TN];
    auto X_of = [&](int st) { return smem + OFF_STAGE + st * STAGE; };     // stage st: X [BK][BMP]
    auto Y_of = [&](int st) { return smem + OFF_STAGE + st * STAGE + BK * BMP; };  // then Y [BK][BN]

    const int n_chunks = (p + PC - 1) / PC;
    for (int ch = 0; ch < n_chunks; ++ch) {
        const int pc0 = ch * PC;
        const int pc_len = min(PC, p - pc0);     // valid columns of T in this chunk
        const int kt2 = (pc_len + BK - 1) / BK;  // phase-2 slabs; T is finite (computed) up to kt2 * BK

        // Phase 1: this rank's slices of T = A[panel, :] @ B[:, chunk], into Tt.
        for (int j = 0; j < PCH; ++j) {
            const int g = rank * PCH + j;  // slice of the chunk
            if (g * BN >= pc_len) break;
            const int col0 = pc0 + g * BN;
            zero(acc);
            const int kt1 = (k + BK - 1) / BK;
            // Two stages: slab kt + 1 is copied (cp.async) while slab kt is multiplied.
            copy_a_transposed<VEC_A>(X_of(0), A, lda, bm0, m, 0, k, tid);
            copy_tile<BK, BN, BN, VEC_B>(Y_of(0), B, ldb, 0, k, col0, p, tid);
            cumm_cp_async_commit();
            for (int kt = 0; kt < kt1; ++kt) {
                cumm_cp_async_wait_all();  // this thread's copies of slab kt have landed
                __syncthreads();           // everyone's have, and nobody still reads the other stage
                if (kt + 1 < kt1) {
                    const int st = (kt + 1) & 1;
                    copy_a_transposed<VEC_A>(X_of(st), A, lda, bm0, m, (kt + 1) * BK, k, tid);
                    copy_tile<BK, BN, BN, VEC_B>(Y_of(st), B, ldb, (kt + 1) * BK, k, col0, p, tid);
                    cumm_cp_async_commit();
                }
                slab_fma(acc, X_of(kt & 1) + slice * KSL * BMP, Y_of(kt & 1) + slice * KSL * BN, tr, tc);
            }
            __syncthreads();  // the stages are read before the reduction reuses their space
            reduce_slices(acc, P, slice, ts);
            if (slice == 0) {  // T's columns are Tt's rows: column by column, four rows per float4
#pragma unroll
                for (int cq = 0; cq < NQ; ++cq)
#pragma unroll
                    for (int x = 0; x < 4; ++x)
#pragma unroll
                        for (int rq = 0; rq < MQ; ++rq)
                            *reinterpret_cast<float4*>(&Tt[(g * BN + cq * NG + tc * 4 + x) * BMP + rq * MG + tr * 4]) =
                                make_float4(acc[rq * 4][cq * 4 + x], acc[rq * 4 + 1][cq * 4 + x],
                                            acc[rq * 4 + 2][cq * 4 + x], acc[rq * 4 + 3][cq * 4 + x]);
            }
        }

        // Gather the other ranks' slices. The first barrier publishes every rank's slices; the second
        // (arrived here, waited for at the end of the chunk) keeps each rank's Tt alive and unchanged
        // until every other rank has copied from it.
        cumm_cluster_arrive();
        cumm_cluster_wait();
#if CL > 1
        {
            // Flattened over (source rank, row, float4 of the row), GU remote loads in flight per thread.
            constexpr int RG = PCH * BN;  // rows of Tt per rank
            constexpr int R4 = BM / 4;    // float4s per row (the padding is not copied)
            constexpr int GU = 4;
            const int rows_needed = kt2 * BK;
            for (int i0 = tid; i0 < (CL - 1) * RG * R4; i0 += GU * NT) {
                float4 v[GU];
                int off[GU];
#pragma unroll
                for (int u = 0; u < GU; ++u) {
                    const int i = i0 + u * NT;
                    const int src = (rank + 1 + i / (RG * R4)) % CL;  // stagger the sources across ranks
                    const int row = src * RG + i % (RG * R4) / R4;
                    off[u] = i < (CL - 1) * RG * R4 && row < rows_needed ? row * BMP + i % R4 * 4 : -1;
                    if (off[u] >= 0) v[u] = cumm_cluster_load4(cumm_cluster_map(Tt + off[u], src));
                }
#pragma unroll
                for (int u = 0; u < GU; ++u)
                    if (off[u] >= 0) *reinterpret_cast<float4*>(&Tt[off[u]]) = v[u];
            }
        }
#endif
        cumm_cluster_arrive();
        __syncthreads();  // the copies are visible to the whole block

        // Phase 2: this rank's column panels of E (+)= T[panel, chunk] @ C[chunk, panel].
        for (int np = rank; np * BN < n; np += CL) {
            const int n0 = np * BN;
            zero(acc);
            copy_tile<BK, BN, BN, VEC_C>(Y_of(0), C, ldc, pc0, p, n0, n, tid);
            cumm_cp_async_commit();
            for (int kt = 0; kt < kt2; ++kt) {
                cumm_cp_async_wait_all();
                __syncthreads();
                if (kt + 1 < kt2) {
                    copy_tile<BK, BN, BN, VEC_C>(Y_of((kt + 1) & 1), C, ldc, pc0 + (kt + 1) * BK, p, n0, n, tid);
                    cumm_cp_async_commit();
                }
                slab_fma(acc, Tt + (kt * BK + slice * KSL) * BMP, Y_of(kt & 1) + slice * KSL * BN, tr, tc);
            }
            __syncthreads();  // the stages are read before the reduction reuses their space
            reduce_slices(acc, P, slice, ts);
            if (slice == 0) {
                const float beta = ch == 0 ? 0.0f : 1.0f;  // later chunks add to what this thread stored
#pragma unroll
                for (int rq = 0; rq < MQ; ++rq)
#pragma unroll
                    for (int i = 0; i < 4; ++i) {
                        const int row = bm0 + rq * MG + tr * 4 + i;
                        if (row >= m) continue;
#pragma unroll
                        for (int cq = 0; cq < NQ; ++cq)
                            cumm_store4<VEC_C>(E + (i64)row * lde, n0 + cq * NG + tc * 4, n,
                                               make_float4(acc[rq * 4 + i][cq * 4], acc[rq * 4 + i][cq * 4 + 1],
                                                           acc[rq * 4 + i][cq * 4 + 2], acc[rq * 4 + i][cq * 4 + 3]),
                                               1.0f, beta);
                    }
            }
        }
        cumm_cluster_wait();  // every rank has copied this chunk's slices: Tt may change, or the block exit
    }
}
