// fused3_wg: E = A @ B @ C in one persistent launch on sm_90's warpgroup tensor cores (wgmma), with FP32
// accuracy from the same three-product TF32 split as tf32x3 and fused3_tc. Row-major A (m x k, lda),
// B (k x p, ldb), C (p x n, ldc), E (m x n, lde); T = A @ B goes through a scratch array (m x p, ldt).
//
// What it changes from fused3_tc, and why that is faster: fused3_tc's small tiles spend their time issuing
// the instructions that feed mma.sync (fragment loads, and the split of every value, redone by each warp that
// reads it). Here one wgmma multiplies 64 x BN x 8 for a warpgroup; Y (B, or C) is split once per block into
// shared memory and X's fragments are split in registers, and with TMA = 1 the copy engine brings the chunks in
// without copy instructions. So tiles are big, and a tile's K is split over the CL blocks of a cluster (or KW
// warpgroups of a block) to still give each multiprocessor a block. A chunk's wgmma and the rest of its work
// add up rather than overlap, so what pays is fewer instructions and fewer chunks. Measurements and the ideas
// that lost: docs/rejected.md; the named configurations and how multi_dot picks them: docs/chain.md.
//
// Its constants, layouts, copies and per-chunk steps are in include/fused3_wg.cuh; here: the tile's pipeline
// over its chunks (cumm_wg_tile) and the persistent kernel (two phases around a grid barrier).

// ---- The tile and the kernel ----------------------------------------------------------------------------

// This cluster rank's share of the BM x BN tile O[bm0.., bn0..] = X @ Y (X: M x K, Y: K x N): the product
// over its 1/CL of K, summed with the other ranks' through distributed shared memory (in rank order:
// deterministic). VX / VY / VO: 16-byte accesses to X / Y / O are legal (common.cuh). Starts its
// cluster-barrier work with a wait and ends with an arrival, so the kernel arrives once before its first tile
// and waits once after its last. Per chunk of K: wait for its copies, split Y's chunk into a split buffer
// (while the last chunk's wgmma run), load and split this warp's X fragments, issue the wgmma; fold each
// chunk's sums into the running sum once its wgmma are waited for.
// TMA = 1 (every operand 16-byte aligned): tx / ty are X's and Y's tensor maps; thread 0 copies whole chunks
// with the copy engine into STAGES stages, each with an mbarrier; `seq` counts the chunks this block has taken
// so far (the stage and the mbarrier's phase of a chunk follow from it) and moves on by this tile's.
// KW > 1: the block's warpgroups form KW K groups, each its own pipeline over 1 / KW of the rank's K (its own
// stages, split buffers, mbarriers and named barrier; thread 0 of each group copies); the KW x CL partial tiles
// are summed together, so K split within a block costs a block barrier where a cluster's costs a cluster one
// (whose release is a GPU-wide memory barrier) and loads from another multiprocessor.
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
    static_assert(!PRE || (PC && TMA), "the pre-split k-loop is PC = 1's (TMA = 1)");
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
    // issue(j): the copies of chunk c0 + j into its raw stage, zero-filled past M, N and K. Copy engine: two
    // boxes (BK = 64: three) from thread 0 of the group, counted on the stage's mbarrier. cp.async: thread tg
    // copies the 16-byte pieces tg, tg + NTG, ... of X's chunk (BM x BK) and of Y's (BK x BN); with 16-byte
    // accesses legal, the source pointers, row predicates and column byte counts are set once per tile, so a
    // copy is a few instructions (recomputing them per chunk had made the copies ~20 instructions each);
    // otherwise the general per-element copy of common.cuh. (issue and refill stay lambdas over the tile's
    // state: as functions of their own, the compiler orders the setup code differently, see the tile's end.)
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
        float* const Xr = cumm_wg_stage<PRE>(raw, seq, j);
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
    // Copy engine: once the group's barrier has passed after every read of chunk j's raw stage, its thread 0
    // refills it with chunk j + STAGES (STAGES chunks in flight; cp.async keeps STAGES - 1).
    auto refill = [&](const int j) {
        if constexpr (TM) {
            if (tg == 0 && j >= 0 && j + STAGES < nc) issue(j + STAGES);
        }
    };

    // The running sum acc, and a chunk's sums (see cumm_wg_mma): big * big in pb (pb2: the second half of K,
    // NB = 2), the two small terms in ps; MN = 1: pb and pb2 twice as wide, x_big * y_small in their second halves
    float acc[BN / 2], pb[NPB], ps[BN / 2], pb2[NPB];
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) acc[i] = 0.0f;
    // Descriptor of split buffer 0's Y^T big at k-step 0; another buffer, the small half or a k-step only adds
    // to the address field (16-byte units), which cannot carry: shared memory addresses are below 2^18.
    // PRE = 1: chunk j's own buffer j, from pre_off(nc) on.
    const unsigned long long dy = cumm_wgmma_desc<16 * (MN ? 2 * BN : BN)>(PRE ? raw + pre_off(nc) : split);

    if constexpr (TM) {
        if (tg == 0)
            for (int s = 0; s < STAGES && s < nc; ++s) issue(s);
    } else {
#pragma unroll
        for (int s = 0; s < STAGES - 1; ++s) {
            if (s < nc) issue(s);
            cumm_cp_async_commit();  // empty groups keep the count uniform for cumm_wg_arrive's wait_group
        }
    }
    // Why the split buffers do not race: a chunk's split buffer was last read by the wgmma of chunk j - 2 (two
    // buffers) or j - 3 (three), and every warpgroup waits for those before the barrier that precedes the
    // split: with cp.async the one in cumm_wg_arrive(j) (chunk j - 2 is waited for in round j - 1), with the copy
    // engine, which has no barrier in cumm_wg_arrive, round j - 1's.
    if constexpr (PRE) {
        // No split, no proxy fence: the group's barrier only guards the refill of chunk j - 1's X stage.
        for (int j = 0; j < nc; ++j) {
            cumm_wg_arrive(j, nc, kg, bars, seq, issue);
            if (j > 0 && j - 1 + STAGES < nc) {
                cumm_wg_group_sync(kg);  // every thread loaded chunk j - 1's X fragments
                refill(j - 1);
            }
            if (j > 0) cumm_wg_retire(j - 1, nc, acc, pb, ps, pb2);
            unsigned xb[BK / 8][4], xs[BK / 8][4];
            cumm_wg_load_x(cumm_wg_stage<PRE>(raw, seq, j), 64 * grp + 16 * warp + g, t, xb, xs);
            cumm_wg_mma<PRE>(dy, j, xb, xs, ps, pb, pb2);
        }
    } else {
        for (int j = 0; j < nc; ++j) {
            cumm_wg_arrive(j, nc, kg, bars, seq, issue);
            cumm_wg_split_chunk<PRE>(raw, seq, split, j, tg);  // (this runs while chunk j - 1's wgmma do)
            // RF = 1: chunk j - 1's wgmma are waited for (and folded) before the proxy fence, which waits for
            // this thread's stores of the split, so that the two waits overlap; RF = 0: after the barrier, which
            // then overlaps the wgmma (longer with wider tiles: wg128x64 is faster so).
            if (RF && j > 0) cumm_wg_retire(j - 1, nc, acc, pb, ps, pb2);
            cumm_fence_proxy_async_shared();  // generic-proxy stores -> wgmma
            cumm_wg_group_sync(kg);
            refill(j - 1);  // every thread loaded chunk j - 1's X fragments before this barrier
            if (!RF && j > 0) cumm_wg_retire(j - 1, nc, acc, pb, ps, pb2);
            // X's fragments for this warpgroup's 64 rows, split in registers
            unsigned xb[BK / 8][4], xs[BK / 8][4];
            cumm_wg_load_x(cumm_wg_stage<PRE>(raw, seq, j), 64 * grp + 16 * warp + g, t, xb, xs);
            cumm_wg_mma<PRE>(dy, j, xb, xs, ps, pb, pb2);
        }
    }
    if constexpr (PC) {
        if (tc_next != nullptr) {  // (uniform in the block) every raw stage has been read: C's chunks go there
            cumm_wg_group_sync(kg);
            int c0n, ncn;
            cumm_wg_part((N + BK - 1) / BK, rank * KW + kg, c0n, ncn);  // (phase 2's K is phase 1's N)
            if (tg == 0) cumm_wg_preload(raw, cumm_wg_bar(smem, KW * STAGES + kg), tc_next, bn0_next, c0n, ncn);
        }
    }
    if (nc > 0) cumm_wg_retire(nc - 1, nc, acc, pb, ps, pb2);
    // PC = 1: nothing is in flight here; said outright, ptxas need not assume wgmma past this point on paths
    // where nc is 0, and then serialize every wgmma of the kernel (C7518)
    if constexpr (PC) cumm_wgmma_wait<0>();
    if constexpr (TM) seq += nc;

    // The tile's end: the running sums into this K group's partial tile, then the sum of the CL x KW partial
    // tiles. (Written out here: moved into a function, even a lambda, the same code compiles to different
    // SASS for every named configuration; this file's steps are functions where the SASS stays the same.)
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

// Persistent: cluster q of the grid walks tiles q, q + clusters, ... of phase 1, then of phase 2. Launch bounds:
// one block per multiprocessor, as every configuration measured (a MINB parameter was always 1: gone).
extern "C" __global__ void __launch_bounds__(wg::NT, 1) CUMM_CLUSTER_DIMS
    CUMM_KERNEL(CUMM_WG_ARGS) {
    cumm_grid_dependency_wait();  // (first: see grid_barrier.cuh)
    extern __shared__ float4 smem4[];
#if TMA
    // The swizzle pattern starts at 1024-byte boundaries of shared memory (the spec reserves the slack).
    float* const smem = reinterpret_cast<float*>(smem4) + ((1024 - cumm_smem(smem4) % 1024) % 1024) / 4;
    const CummTmap *ma = &tm_a, *mb = &tm_b, *mt = &tm_t, *mc = &tm_c;
    if (threadIdx.x == 0) {
        for (int s = 0; s < KW * (STAGES + PC); ++s) cumm_mbar_init(cumm_wg_bar(smem, s));
        cumm_mbar_init_fence();
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
    // PC = 1: C does not depend on phase 1, and every block waits at the grid barrier. So this block's first
    // phase-2 tile (if it has one, and each K group's chunks fit: wg::NPS) gets its C copied once the block's
    // phase-1 k-loops are done (their raw stages free) and split while the grid barrier waits; that tile's
    // k-loop (PRE) then copies and reads X (T) only: no split, no proxy fence.
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
    cumm_fence_proxy_async_global();  // T's stores before the copy engine's reads of T in other blocks
#endif
#if PC
    {
        const unsigned long long arrival = cumm_grid_arrive(bar);
        if (pre) {  // C's chunks, split into their buffers while the other blocks finish phase 1
            cumm_mbar_wait(cumm_wg_bar(smem, KW * STAGES + kg), 0);
            for (int j = 0; j < nc_pre; ++j)
                cumm_wg_split_y<0>(raw_pre + j * BK * BN,
                                   reinterpret_cast<uint4*>(raw_pre + wg::pre_off(nc_pre) + j * wg::SPL), tg);
            cumm_fence_proxy_async_shared();  // the split's stores -> the wgmma
        }
        cumm_grid_wait(bar, arrival);
    }
#else
    cumm_grid_barrier(bar);
#endif
#if TMA
    cumm_fence_proxy_async_global();
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
