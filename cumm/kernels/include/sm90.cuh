// sm90.cuh: Hopper (sm_90a) primitives of the kernels that use warpgroup tensor cores (fused3_wg.cu, 13_wgmma.cu,
// 14_wgmma_ws.cu): shared-memory addresses, proxy fences, mbarriers, the copy engine (TMA loads, multicast
// loads, stores), wgmma with its matrix descriptors, fence, commit and wait, register budgets and cluster
// helpers. Rendered after common.cuh; needs no configuration #define. Each wgmma operand type has its own
// section at the end: TF32 (m64nNk8), and 16-bit (fp16 / bf16, m64nNk16), which exists when tc16.cuh (its
// CUMM_MMA_T) is rendered before this header.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ != 900
#error "sm90.cuh's wgmma exists only on sm_90a: compile with -arch=sm_90a (the spec's arch_specific=True)"
#endif

// Operands given transposed and read in place (column-major A: CUMM_TA, B: CUMM_TB): the renderer defines them
// only when set, for kernels that declare reads_transposed.
#ifndef CUMM_TA
#define CUMM_TA 0
#endif
#ifndef CUMM_TB
#define CUMM_TB 0
#endif

// ---- Shared memory and proxies ---------------------------------------------------------------------------

// The 32-bit shared-memory address of `p` (a generic pointer into this block's shared memory), which the
// asynchronous instructions below take.
__device__ __forceinline__ unsigned cumm_smem(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// Ordinary stores (the generic proxy) are not seen by the asynchronous proxy (wgmma's shared-memory operands,
// the copy engine) without a proxy fence: after a thread's stores to shared memory that a wgmma will read, and
// before the barrier that lets the wgmma be issued.
__device__ __forceinline__ void cumm_fence_proxy_async_shared() {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// The same for global memory: a kernel's stores before the copy engine's reads of them (in any block, after
// a grid-wide barrier), e.g. a persistent kernel's phase 1 writes what its phase 2 loads with TMA.
__device__ __forceinline__ void cumm_fence_proxy_async_global() {
    asm volatile("fence.proxy.async.global;\n" ::: "memory");
}

// ---- mbarriers: a 64-bit shared-memory word that counts arrivals and, with expect_tx, bytes ---------------

// Initialize `bar` for ARRIVALS arrivals per phase. One thread, before any use; then cumm_mbar_init_fence and a
// barrier, so that the other threads and the copy engine see it initialized.
template <int ARRIVALS = 1>
__device__ __forceinline__ void cumm_mbar_init(unsigned long long* bar) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(cumm_smem(bar)), "n"(ARRIVALS));
}

// Makes the mbarrier initializations before it visible to the asynchronous proxy (and the cluster).
__device__ __forceinline__ void cumm_mbar_init_fence() {
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

// One arrival on `bar` that also expects `bytes` more to land (TMA completes them): with one arrival per
// phase, the phase completes once those bytes have landed.
__device__ __forceinline__ void cumm_mbar_expect(unsigned long long* bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(cumm_smem(bar)), "r"(bytes)
                 : "memory");
}

// One arrival on `bar` (no bytes).
__device__ __forceinline__ void cumm_mbar_arrive(unsigned long long* bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(cumm_smem(bar)) : "memory");
}

// Wait until the phase of `bar` with this parity (0, 1, 0, ... for its successive phases) has completed
// (acquire: what the phase counted is visible). try_wait suspends the thread for a while before it fails.
__device__ __forceinline__ void cumm_mbar_wait(unsigned long long* bar, unsigned parity) {
    unsigned done;
    do {
        asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     "selp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done) : "r"(cumm_smem(bar)), "r"(parity) : "memory");
    } while (!done);
}

// ---- The copy engine (TMA): cp.async.bulk.tensor --------------------------------------------------------

// A tensor map (CUtensorMap: an operand's address, shape, strides, box and swizzle), encoded by the host
// (cumm/runtime/tmaps.py) and passed by value as a `const __grid_constant__` kernel parameter.
struct __align__(64) CummTmap {
    unsigned long long word[16];
};

// The box of 2-D `map` whose first element is (x, y) (x: the contiguous dimension) into shared memory at dst,
// as one asynchronous copy by the copy engine whose bytes count against mbarrier `bar` (cumm_mbar_expect).
// One thread issues it; no other thread spends an instruction. Elements past the tensor's edges arrive as
// zeros (and count too). dst is aligned as the map's swizzle needs (1024 bytes for 128-byte swizzle).
__device__ __forceinline__ void cumm_tma_load(void* dst, const CummTmap* map, int x, int y,
                                              unsigned long long* bar) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
        ::"r"(cumm_smem(dst)), "l"(reinterpret_cast<unsigned long long>(map)), "r"(x), "r"(y), "r"(cumm_smem(bar))
        : "memory");
}

// cumm_tma_load through a 3-D map: (x, y) in matrix z of a batch (the map's third dimension).
__device__ __forceinline__ void cumm_tma_load_3d(void* dst, const CummTmap* map, int x, int y, int z,
                                                 unsigned long long* bar) {
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n"
        ::"r"(cumm_smem(dst)), "l"(reinterpret_cast<unsigned long long>(map)), "r"(x), "r"(y), "r"(z),
        "r"(cumm_smem(bar))
        : "memory");
}

// cumm_tma_load into the same shared offset of every block of the cluster in `mask` (bit r: rank r), each
// block's bytes counted on its own mbarrier at bar's offset.
__device__ __forceinline__ void cumm_tma_load_2d_mc(void* dst, const CummTmap* map, int x, int y,
                                                    unsigned long long* bar, unsigned short mask) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, "
        "{%2, %3}], [%4], %5;\n"
        ::"r"(cumm_smem(dst)), "l"(reinterpret_cast<unsigned long long>(map)), "r"(x), "r"(y),
        "r"(cumm_smem(bar)), "h"(mask) : "memory");
}

// Shared memory at src (written by this block, then cumm_fence_proxy_async_shared) to the box of `map` at
// (x, y); the parts of the box past the tensor's edges are not written.
__device__ __forceinline__ void cumm_tma_store_2d(const CummTmap* map, const void* src, int x, int y) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n"
                 ::"l"(reinterpret_cast<unsigned long long>(map)), "r"(x), "r"(y), "r"(cumm_smem(src))
                 : "memory");
}
__device__ __forceinline__ void cumm_tma_store_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
// cumm_tma_store_2d through a 3-D map: the box at (x, y) of matrix z of a batch.
__device__ __forceinline__ void cumm_tma_store_3d(const CummTmap* map, const void* src, int x, int y, int z) {
    asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%1, %2, %3}], [%4];\n"
                 ::"l"(reinterpret_cast<unsigned long long>(map)), "r"(x), "r"(y), "r"(z), "r"(cumm_smem(src))
                 : "memory");
}
// Wait until the stores committed so far have read their shared memory (it may be overwritten then).
__device__ __forceinline__ void cumm_tma_store_wait_read() {
    asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
}
// Wait until the stores committed so far have completed.
__device__ __forceinline__ void cumm_tma_store_wait_all() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }

// Fetch `map` (a kernel parameter) into the tensor-map cache ahead of its first use.
__device__ __forceinline__ void cumm_prefetch_tmap(const CummTmap* map) {
    asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<unsigned long long>(map)) : "memory");
}

// ---- wgmma, any operand type ----------------------------------------------------------------------------
// wgmma.mma_async: a warpgroup (4 warps, 128 threads) multiplies 64 x N x K asynchronously. A comes from
// registers or shared memory, B from shared memory through a matrix descriptor; D stays in registers.

// Shared-memory matrix descriptor of an operand without swizzle. Its unit is the core matrix: 8 rows of
// 16 contiguous bytes (4 TF32 or 8 fp16 values along K), 128 contiguous bytes. LBO: the byte distance
// between core matrices adjacent in K (leading byte offset); SBO: between those adjacent in rows (the
// next 8 rows; stride byte offset). The canonical K-major layout of an R-row chunk, all rows of one
// 16-byte column of K before the next (16-byte column c of row r at byte (c * R + r) * 16): LBO = 16 * R,
// SBO = 128. Moving the operand on by b bytes adds b / 16 to the descriptor (its address field; shared
// addresses are below 2^18, so that cannot carry into the offsets). (The address is converted here, not
// through cumm_smem: that extra call changes the SASS of fused3_wg's cp.async configurations.)
template <int LBO, int SBO = 128>
__device__ __forceinline__ unsigned long long cumm_wgmma_desc(const void* p) {
    const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(p));
    return (unsigned long long)((a & 0x3ffff) >> 4) | ((unsigned long long)(LBO >> 4) << 16) |
           ((unsigned long long)(SBO >> 4) << 32);
}

// Descriptors of 128-byte-swizzled tiles (TMA's CU_TENSOR_MAP_SWIZZLE_128B layout: rows of 128 bytes, 16-byte
// chunk c of row r stored at chunk c ^ (r % 8), 1024-byte aligned 8-row atoms), from a shared address (cumm_smem).
// Fields: start address >> 4 (bits 0-13), leading byte offset >> 4 (16-29), stride byte offset >> 4 (32-45),
// swizzle mode (62-63; 1 = 128 bytes).
__device__ __forceinline__ unsigned long long cumm_wg_desc_sw128(unsigned addr, unsigned lbo, unsigned sbo) {
    return (unsigned long long)((addr & 0x3ffff) >> 4) | ((unsigned long long)(lbo >> 4) << 16) |
           ((unsigned long long)(sbo >> 4) << 32) | (1ull << 62);
}
// K-major operand (A: rows of 64 halves along K): 8-row groups 1024 bytes apart (SBO); LBO unused. The k16
// step j starts 32 j bytes into the row (the hardware applies the swizzle to the full address).
__device__ __forceinline__ unsigned long long cumm_wg_desc_k(unsigned addr) {
    return cumm_wg_desc_sw128(addr, 16, 1024);
}
// MN-major operand (B, row-major K x N: rows of 64 halves along N, each 64-column chunk of the tile one box of
// `chunk_bytes`): LBO = distance between 64-column chunks, SBO = between 8-row (k) groups = 1024.
__device__ __forceinline__ unsigned long long cumm_wg_desc_mn(unsigned addr, unsigned chunk_bytes) {
    return cumm_wg_desc_sw128(addr, chunk_bytes, 1024);
}

// Before a warpgroup's first wgmma that reads registers (A, D) written since its last wgmma.
__device__ __forceinline__ void cumm_wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }

// The wgmma issued since the last commit form one group, for cumm_wgmma_wait.
__device__ __forceinline__ void cumm_wgmma_commit() {
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}

// Wait until at most PENDING committed groups are in flight: then the others' D registers hold their
// results, and their A registers and shared memory operands may change.
template <int PENDING>
__device__ __forceinline__ void cumm_wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(PENDING) : "memory");
}

// The compiler does not know that a wgmma writes D later than its asm statement: after the wait, these
// empty asm statements make every later read of d depend on it (call once per accumulator array).
template <int R>
__device__ __forceinline__ void cumm_wgmma_pin(float (&d)[R]) {
#pragma unroll
    for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// ---- Warp specialization and clusters -------------------------------------------------------------------

// Register budgets of warp-specialized kernels: producers give registers back, consumers take them.
template <int R>
__device__ __forceinline__ void cumm_setmaxnreg_dec() { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(R)); }
template <int R>
__device__ __forceinline__ void cumm_setmaxnreg_inc() { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(R)); }

// Thread block clusters: this block's rank in its cluster (whatever the cluster's size; cluster.cuh's
// cumm_cluster_rank is the chain kernels' form for CL blocks), a barrier over all the cluster's threads (not
// .aligned: callable from diverged warps), an arrival on another block's mbarrier.
__device__ __forceinline__ unsigned cumm_cluster_ctarank() {
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
    return r;
}
__device__ __forceinline__ void cumm_cluster_sync() {
    asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
}
// Arrive on the mbarrier at bar's offset in block `rank` of the cluster. Default semantics (release, CTA
// scope), as CUTLASS's ClusterBarrier: what it orders here are this warp's finished wgmma reads of a stage
// before the other block's TMA overwrites it. (.release.cluster makes every consumer arrival a cluster-wide
// fence, which measured much slower.)
__device__ __forceinline__ void cumm_mbar_arrive_remote(unsigned long long* bar, unsigned rank) {
    asm volatile("{\n.reg .b32 ra;\nmapa.shared::cluster.u32 ra, %0, %1;\n"
                 "mbarrier.arrive.shared::cluster.b64 _, [ra];\n}\n"
                 ::"r"(cumm_smem(bar)), "r"(rank) : "memory");
}

// Store v at shared address `cta_addr` (of this block) in the shared memory of block `rank` of the cluster.
__device__ __forceinline__ void cumm_dsmem_store4(unsigned cta_addr, unsigned rank, float4 v) {
    asm volatile("{\n.reg .b32 ra;\nmapa.shared::cluster.u32 ra, %0, %1;\n"
                 "st.shared::cluster.v4.f32 [ra], {%2, %3, %4, %5};\n}\n"
                 ::"r"(cta_addr), "r"(rank), "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w) : "memory");
}

// A tile's K split over a cluster of P blocks (16_wgmma_cluster_split_k, 21_wgmma_swap_ab): the partial sums d
// (MT m64 blocks of R accumulators a thread, NC consumer threads, this one ct) meet in distributed shared memory.
// Rank q owns accumulators [q E, q E + E) of every m64 block, E = R / P: every block writes its partials of q's
// share into block q's stage ring (slot r: rank r's, float4 f of thread ct at (f NC + ct): consecutive threads,
// consecutive 16 bytes), after a cluster barrier (every block's wgmma done with its ring); after a second one
// (every partial landed) each block adds the P partials of its share in rank order (the same bits every run)
// and hands each float4 of sums to sink(m, x, sums): accumulators rank E + x .. + 3 of m64 block m. The producer
// warpgroup passes both barriers too (they count every thread of the cluster).
template <int P, int NC, int MT, int R, class Sink>
__device__ __forceinline__ void cumm_cluster_sum(const float (&d)[MT][R], unsigned base, const unsigned char* sm,
                                                 unsigned rank, int ct, Sink sink) {
    constexpr int E = R / P;
    static_assert(E % 4 == 0, "each rank's share is whole float4s of every thread's accumulators");
    cumm_cluster_sync();
#pragma unroll
    for (int q = 0; q < P; ++q)
#pragma unroll
        for (int m = 0; m < MT; ++m)
#pragma unroll
            for (int f = 0; f < E / 4; ++f) {
                const float* const v = &d[m][q * E + 4 * f];
                cumm_dsmem_store4(base + (rank * (MT * E / 4) + m * E / 4 + f) * NC * 16 + ct * 16, q,
                                  make_float4(v[0], v[1], v[2], v[3]));
            }
    cumm_cluster_sync();
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int f = 0; f < E / 4; ++f) {
            const float4* const p = reinterpret_cast<const float4*>(sm) + (m * E / 4 + f) * NC + ct;
            float4 a = p[0];
#pragma unroll
            for (int r = 1; r < P; ++r) {
                const float4 b = p[r * MT * E / 4 * NC];
                a.x += b.x, a.y += b.y, a.z += b.z, a.w += b.w;
            }
            sink(m, 4 * f, a);
        }
}

// ---- Named barriers, flags between blocks, cp.async groups ----------------------------------------------

// A barrier over the N threads (whole warps) that name barrier `id` (1-15; 0 is __syncthreads'): a subset of
// the block, e.g. one warpgroup, syncs without stopping the others.
template <int N>
__device__ __forceinline__ void cumm_bar_sync(int id) {
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "n"(N) : "memory");
}
// Arrive at barrier `id` without waiting: the N threads it counts are these and the ones that bar.sync on it
// (a warpgroup hands a turn to another that waits there: 22_wgmma_pingpong).
template <int N>
__device__ __forceinline__ void cumm_bar_arrive(int id) {
    asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "n"(N) : "memory");
}
// The same with the barrier's id compiled in.
template <int ID, int N>
__device__ __forceinline__ void cumm_bar_sync() {
    asm volatile("bar.sync %0, %1;\n" ::"n"(ID), "n"(N) : "memory");
}

// A flag in global memory raised (set to 1) with release semantics at GPU scope: the writes before it (another
// block's partial sums) are visible to whoever reads the flag raised with cumm_flag_acquire.
__device__ __forceinline__ void cumm_flag_release(int* flag) {
    asm volatile("st.release.gpu.global.b32 [%0], 1;\n" ::"l"(flag) : "memory");
}
__device__ __forceinline__ int cumm_flag_acquire(const int* flag) {
    int v;
    asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(v) : "l"(flag) : "memory");
    return v;
}

// Wait until at most PENDING cp.async groups are in flight (common.cuh's cumm_cp_async_wait_all is PENDING = 0).
// No memory clobber, as that one: the barrier after it orders the shared-memory reads.
template <int PENDING>
__device__ __forceinline__ void cumm_cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(PENDING));
}

// ---- Persistent tile order -------------------------------------------------------------------------------

// Tile t of a persistent kernel's walk over an ntm x ntn grid of tiles, as (tile row, tile column): groups of gm
// tile rows are walked column by column, so the blocks running at once share A row panels and B column panels
// in L2 (fewer DRAM reads than row-major order over the whole grid).
__device__ __forceinline__ int2 cumm_tile_coord(int t, int ntm, int ntn, int gm) {
    const int per_group = gm * ntn, first = t / per_group * gm, rows = min(ntm - first, gm), r = t % per_group;
    return make_int2(first + r % rows, r / rows);
}

// Variants of the copies for kernels that read a batch of products through 3-D maps (a grid z over the batch, or a
// walk over the batch's tiles): B3D = CUMM_BATCHED picks the 3-D map (z: the product) or the 2-D one (z unused),
// so a kernel's code is the same text in both variants. The unbatched variant has no batch-stride arguments
// (common.cuh, tc16.cuh): zeros here, so `bsa ? z : 0` (an operand broadcast over the batch is matrix 0 of its
// map) and `z * bsc` read the same in both variants and compile to nothing in the 2-D one.
#if !CUMM_BATCHED
constexpr i64 bsa = 0, bsb = 0, bsc = 0;
#endif
template <int B3D>
__device__ __forceinline__ void cumm_tma_load_z(void* dst, const CummTmap* map, int x, int y, int z,
                                                unsigned long long* bar) {
    if (B3D)
        cumm_tma_load_3d(dst, map, x, y, z, bar);
    else
        cumm_tma_load(dst, map, x, y, bar);
}

// The producer's copies of one 64-deep slab (k-slab kc) of a tile at (row0, col0) into stage st, all on `bar`: A's
// ROWS rows (one box of 64 k by ROWS rows, or with TA ROWS / 64 M-major boxes of 64 rows by 64 k) at st, then B's COLS
// columns at st + ROWS * 128 (COLS / 64 boxes of 64 columns by 64 k, or with TB K-major boxes of 64 rows of N by 64 k).
// za, zb: the operands' matrices of a batch (B3D).
template <int ROWS, int COLS, int TA, int TB, int B3D>
__device__ __forceinline__ void cumm_load_slab16(unsigned char* st, const CummTmap* tmA, const CummTmap* tmB, int row0,
                                                 int col0, int kc, int za, int zb, unsigned long long* bar) {
    if (TA) {
#pragma unroll
        for (int c = 0; c < ROWS / 64; ++c) cumm_tma_load_z<B3D>(st + c * 8192, tmA, row0 + 64 * c, kc * 64, za, bar);
    } else {
        cumm_tma_load_z<B3D>(st, tmA, kc * 64, row0, za, bar);
    }
#pragma unroll
    for (int j = 0; j < COLS / 64; ++j) {
        unsigned char* const sb = st + ROWS * 128 + j * 8192;
        if (TB)
            cumm_tma_load_z<B3D>(sb, tmB, kc * 64, col0 + 64 * j, zb, bar);
        else
            cumm_tma_load_z<B3D>(sb, tmB, col0 + 64 * j, kc * 64, zb, bar);
    }
}

template <int B3D>
__device__ __forceinline__ void cumm_tma_store_z(const CummTmap* map, const void* src, int x, int y, int z) {
    if (B3D)
        cumm_tma_store_3d(map, src, x, y, z);
    else
        cumm_tma_store_2d(map, src, x, y);
}

// ==== The Hopper skeleton: the parts every TMA + wgmma kernel is built of ====================================
// A stage ring of mbarriers, the persistent tile walk (grouped order, stream-K), the producer / consumer split
// with setmaxnreg, stream-K's partial sums between blocks, and (16-bit section below) the epilogues. Written once
// here, so a rung's template says only what its slab, its tile and its product are. All __forceinline__: the
// kernels compile to the same instructions as when each spelled these out.

// ---- The stage ring: NSTAGES slots of shared memory, each with a `full` and an `empty` mbarrier ----------------
// Slab `it` (counted over the whole kernel: the ring runs on across tiles, so the next tile's first slabs load
// while the consumers finish this one) goes to slot it % NSTAGES; the parity of its round (it / NSTAGES) & 1 tells
// the barriers' phases apart. The producer waits on `empty`, one thread expects the slab's bytes on `full` and
// the copy engine completes them; the consumers wait on `full` and each of their warps arrives on `empty` once
// its wgmma have read the slot. Nobody waits for anyone except through the data they share (13's __syncthreads
// per slab made every warp wait for the slowest).
template <int NSTAGES>
struct CummRing {
    unsigned long long* full;   // NSTAGES barriers: the slot's slab has landed
    unsigned long long* empty;  // NSTAGES barriers: every consumer warp is done reading the slot
    // One thread, before any use (then cumm_mbar_init_fence and a block or cluster barrier). `full` counts one
    // arrival (the producer's expect_tx) and the bytes; `empty` one arrival per consumer warp.
    template <int CONSUMER_WARPS>
    __device__ __forceinline__ void init() const {
        for (int s = 0; s < NSTAGES; ++s) {
            cumm_mbar_init<1>(&full[s]);
            cumm_mbar_init<CONSUMER_WARPS>(&empty[s]);
        }
    }
    // The start of a warp-specialized kernel: thread 0 prefetches the operands' maps and makes the barriers, then
    // the whole block waits for them.
    template <int CONSUMER_WARPS>
    __device__ __forceinline__ void start(int tid, const CummTmap* a, const CummTmap* b) const {
        if (tid == 0) {
            cumm_prefetch_tmap(a);
            cumm_prefetch_tmap(b);
            init<CONSUMER_WARPS>();
            cumm_mbar_init_fence();
        }
        __syncthreads();
    }
    // Producer: the slot of slab `it`, once its last slab is released (the first round passes at once: it waits
    // for the phase before the barrier's first), its full barrier expecting `bytes`.
    __device__ __forceinline__ int acquire(int it, unsigned bytes) const {
        const int s = it % NSTAGES;
        cumm_mbar_wait(&empty[s], ((it / NSTAGES) & 1) ^ 1);
        cumm_mbar_expect(&full[s], bytes);
        return s;
    }
    // Producer, the first round only (it < NSTAGES: no slot has been used yet): acquire without the wait, for a
    // kernel that fills the ring before the consumers start (13_wgmma's thread 0 is producer and consumer).
    __device__ __forceinline__ int fill(int it, unsigned bytes) const {
        cumm_mbar_expect(&full[it], bytes);
        return it;
    }
    // A producer that also consumes (13_wgmma's thread 0): slab done + NSTAGES into the slot of slab `done` once
    // every consumer warp has released slab done (acquire(done + NSTAGES), with the phase counted from done).
    __device__ __forceinline__ int refill(int done, unsigned bytes) const {
        const int s = done % NSTAGES;
        cumm_mbar_wait(&empty[s], (done / NSTAGES) & 1);
        cumm_mbar_expect(&full[s], bytes);
        return s;
    }
    // Consumer: the slot of slab `it`, once it has landed (an unsigned `it`: no sign fix-ups of % and /).
    template <class I>
    __device__ __forceinline__ int wait(I it) const {
        const int s = it % NSTAGES;
        cumm_mbar_wait(&full[s], (it / NSTAGES) & 1);
        return s;
    }
    // Consumer warp: hand slot s back (lane 0 for the warp). With clusters of two (CL = 2) also to the other
    // block's producer, which multicasts into this block's slot.
    template <int CLUSTER>
    __device__ __forceinline__ void release(int s, int lane, int rank) const {
        if (lane == 0) {
            cumm_mbar_arrive(&empty[s]);
            if (CLUSTER == 2) cumm_mbar_arrive_remote(&empty[s], rank ^ 1);
        }
    }
};

// ---- Warp specialization -----------------------------------------------------------------------------------
// Warpgroup 0 produces (one of its threads issues the copies: TMA needs one), the others consume. setmaxnreg:
// the producer gives its registers back (PRODUCER_REGS a thread) and the consumers take them (CONSUMER_REGS), so
// the accumulators fit beside the addressing. True in the producer warpgroup.
template <int PRODUCER_REGS, int CONSUMER_REGS>
__device__ __forceinline__ bool cumm_ws_producer(int tid) {
    if (tid < 128) {
        cumm_setmaxnreg_dec<PRODUCER_REGS>();
        return true;
    }
    cumm_setmaxnreg_inc<CONSUMER_REGS>();
    return false;
}

// A consumer warpgroup's accumulators (MT m64 blocks of R registers a thread) set to zero before a tile.
template <int MT, int R>
__device__ __forceinline__ void cumm_zero_acc(float (&d)[MT][R]) {
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int e = 0; e < R; ++e) d[m][e] = 0.0f;
}

// ---- The persistent tile walk: whole tiles in grouped order, then a stream-K tail ---------------------------
// One block (or cluster: a work item is a cluster's) per multiprocessor walks the items j = 0, 1, ... of `first`
// of `step`: tiles t = first, + step, ... (cumm_tile_coord orders them), no block launch or pipeline refill per
// tile. Every other whole tile walks K backwards: the blocks run their j-th tiles together, and at 4096^3 those
// read more than the L2 holds until the next round wants them again from slab 0; started from the end instead,
// the next round first reads the slabs the last one read last, still in L2 (DRAM reads 186 -> 127 MB).
// Stream-K (SPLIT = SK > 0, `split`: the host gave the workspace, when the last wave is mostly empty): the last
// tiles % step tiles are not handed out whole (a last round in which most multiprocessors idle) but as their U
// k-slabs in P equal ranges [U p / P, U (p + 1) / P), one per block p < P, a tile shared by at most SPLIT + 1
// blocks. A range is no longer than a tile: it holds the end of one tile and perhaps the start of the next; the
// start comes first, so all blocks begin at slab 0 together and stay within a few slabs of each other (their A
// and B slabs stay in L2; taken in range order they spread over K: 0.93x whole tiles at 4096^3).
template <int SPLIT>  // 0: whole tiles only
struct CummTileWalk {
    int tiles, KT, first, step;
    int dp;       // tiles handed out whole
    long long U;  // the stream-K tail's slabs
    int P;        // its ranges
    int whole;    // whole tiles of this block
    __device__ __forceinline__ CummTileWalk(int tiles_, int KT_, int first_, int step_, bool split)
        : tiles(tiles_), KT(KT_), first(first_), step(step_) {
        dp = (SPLIT > 0 && split) ? tiles - tiles % step : tiles;
        U = (long long)(tiles - dp) * KT;
        P = (int)min((long long)min(step, (tiles - dp) * (SPLIT > 0 ? SPLIT : 1)), U);
        whole = first < dp ? (dp - 1 - first) / step + 1 : 0;
    }
    // Item j: tile t, slabs k0 <= kt < k1; false past the last.
    __device__ __forceinline__ bool next(int j, int& t, int& k0, int& k1) const {
        if (j < whole) {
            t = first + j * step, k0 = 0, k1 = KT;
            return true;
        }
        j -= whole;
        if (SPLIT == 0 || first >= P || j > 1) return false;
        const long long s = U * first / P, e = U * (first + 1) / P, nb = (s / KT + 1) * KT;  // next tile's start
        if (e <= nb && j == 1) return false;
        const long long u0 = e <= nb ? s : (j == 0 ? nb : s), u1 = e <= nb ? e : (j == 0 ? e : nb);
        t = dp + (int)(u0 / KT), k0 = (int)(u0 % KT), k1 = k0 + (int)(u1 - u0);
        return true;
    }
    // The slab item j reads at its step kt: every other whole tile walks K backwards.
    __device__ __forceinline__ int slab(int j, int kt) const { return (j < whole && (j & 1)) ? KT - 1 - kt : kt; }
    __device__ __forceinline__ bool piece(int t) const { return SPLIT > 0 && t >= dp; }  // tile t is split
    // Whether block p's range ends past the start of split tile t (for p < first: it holds slabs of t).
    __device__ __forceinline__ bool shares(int p, int t) const { return U * (p + 1) / P > (long long)(t - dp) * KT; }
};

// ---- Stream-K's partial sums, through a workspace in global memory ---------------------------------------
// A piece that does not end its tile adds nothing to C: its NC consumer threads write their MT x R accumulators
// to block b's partial in `part` (NC MT R floats a block; float4 columns: thread ct's f-th at f * NC + ct,
// coalesced), then one raises flag[b]. The block that holds the tile's last slab does its piece last and adds
// each other piece's partial once its flag is up, lowering it (read once per launch: ready for the next launch
// on the stream). Named barrier BAR orders the consumers' stores before the flag and the flag before their loads.
template <int MT, int R, int NC, int BAR>
__device__ __forceinline__ void cumm_sk_put(const float (&d)[MT][R], float* part, int* flag, int b, int ct) {
    float4* const w = reinterpret_cast<float4*>(part + (size_t)b * NC * MT * R) + ct;
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int e = 0; e < R / 4; ++e)
            __stcg(w + (m * R / 4 + e) * NC, make_float4(d[m][4 * e], d[m][4 * e + 1], d[m][4 * e + 2], d[m][4 * e + 3]));
    __threadfence();
    cumm_bar_sync<BAR, NC>();
    if (ct == 0) cumm_flag_release(flag + b);
}
template <int MT, int R, int NC, int BAR>
__device__ __forceinline__ void cumm_sk_add(float (&d)[MT][R], const float* part, int* flag, int b, int ct) {
    if (ct == 0) {
        int up;
        do up = cumm_flag_acquire(flag + b);
        while (!up);
        flag[b] = 0;
    }
    cumm_bar_sync<BAR, NC>();
    const float4* const w = reinterpret_cast<const float4*>(part + (size_t)b * NC * MT * R) + ct;
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int e = 0; e < R / 4; ++e) {
            const float4 v = __ldcg(w + (m * R / 4 + e) * NC);
            d[m][4 * e] += v.x, d[m][4 * e + 1] += v.y, d[m][4 * e + 2] += v.z, d[m][4 * e + 3] += v.w;
        }
}

// ---- Direct stores of a warpgroup's accumulators, any operand type ------------------------------------------
// Thread 32 w + 4 g + t4 of a warpgroup holds, of each of its MT m64 blocks m, rows 16 w + g (+ 8) and columns
// 8 j + 2 t4 (+ 1) in d[m][4 j .. 4 j + 3] (the wgmma accumulator layout, TF32 and 16-bit alike). Rows row0 + 64 m
// + ... below M, columns col0 + 8 j + ... for j < R / 4, of the matrix at C + coff (a batch's product), each pair
// through pair(row pointer, column, x, y): C's own pair store (alpha, beta, the edge of N).
template <int MT, int R, typename T, typename Pair>
__device__ __forceinline__ void cumm_store_rows(const float (&d)[MT][R], T* C, i64 coff, int ldc, int M, int row0,
                                                int col0, int warp, int g, int t4, Pair pair) {
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int row = row0 + m * 64 + warp * 16 + g + 8 * h;
            if (row >= M) continue;
            T* crow = C + (i64)row * ldc;
            crow += coff;
#pragma unroll
            for (int j = 0; j < R / 4; ++j) pair(crow, col0 + 8 * j + 2 * t4, d[m][4 * j + 2 * h], d[m][4 * j + 2 * h + 1]);
        }
}
// One m64 block (a 1-D accumulator array).
template <int R, typename T, typename Pair>
__device__ __forceinline__ void cumm_store_rows(const float (&d)[R], T* C, i64 coff, int ldc, int M, int row0,
                                                int col0, int warp, int g, int t4, Pair pair) {
    cumm_store_rows(reinterpret_cast<const float(&)[1][R]>(d), C, coff, ldc, M, row0, col0, warp, g, t4, pair);
}

// ---- wgmma with TF32 operands: m64nNk8, FP32 accumulators ------------------------------------------------
// d (64 x N, f32) (+)= a (64 x 8 TF32) @ b (8 x N TF32). a: 4 registers per thread, the m16n8k8 A fragment of
// each warp's 16 rows (warp w of the warpgroup: rows 16 w ..); b: a descriptor (cumm_wgmma_desc), K-major (TF32
// operands are read K-major only). d: N / 2 registers per thread, the m16n8 accumulator fragment repeated over
// the N / 8 column blocks. accumulate = 0 starts a fresh sum. Asynchronous: cumm_wgmma_commit and
// cumm_wgmma_wait end it; a's and d's registers must not change before then.
#define CUMM_WGMMA_D4(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3])
#define CUMM_WGMMA_D16(i) CUMM_WGMMA_D4(i), CUMM_WGMMA_D4(i + 4), CUMM_WGMMA_D4(i + 8), CUMM_WGMMA_D4(i + 12)
#define CUMM_WGMMA_TF32_IN "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate)
template <int N>
__device__ __forceinline__ void cumm_wgmma_tf32(float (&d)[N / 2], const unsigned (&a)[4], unsigned long long b,
                                                int accumulate);
template <>
__device__ __forceinline__ void cumm_wgmma_tf32<32>(float (&d)[16], const unsigned (&a)[4], unsigned long long b,
                                                    int accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n32k8.f32.tf32.tf32 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,"
        "%15}, {%16,%17,%18,%19}, %20, p, 1, 1;\n}\n"
        : CUMM_WGMMA_D16(0)
        : CUMM_WGMMA_TF32_IN);
}
template <>
__device__ __forceinline__ void cumm_wgmma_tf32<64>(float (&d)[32], const unsigned (&a)[4], unsigned long long b,
                                                    int accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,"
        "%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, {%32,%33,%34,%35}, %36, p, 1, 1;\n}\n"
        : CUMM_WGMMA_D16(0), CUMM_WGMMA_D16(16)
        : CUMM_WGMMA_TF32_IN);
}
template <>
__device__ __forceinline__ void cumm_wgmma_tf32<128>(float (&d)[64], const unsigned (&a)[4], unsigned long long b,
                                                     int accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,"
        "%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,"
        "%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, "
        "{%64,%65,%66,%67}, %68, p, 1, 1;\n}\n"
        : CUMM_WGMMA_D16(0), CUMM_WGMMA_D16(16), CUMM_WGMMA_D16(32), CUMM_WGMMA_D16(48)
        : CUMM_WGMMA_TF32_IN);
}
#undef CUMM_WGMMA_TF32_IN

// ---- wgmma with 16-bit operands (fp16 / bf16, CUMM_MMA_T of tc16.cuh): m64nNk16, FP32 accumulators ---------
#ifdef CUMM_MMA_T
// d (64 x N FP32, R = N / 2 registers a thread) (+)= A (64 x 16) @ B (16 x N), asynchronously; acc = 0 overwrites
// d. A and B come from shared memory through descriptors: A K-major (TA = 0) or M-major (TA = 1: A given
// column-major, imm-trans-a), B MN-major (TB = 1, the default: B row-major, imm-trans-b) or K-major (TB = 0: B given
// column-major). Thread 32 w + 4 g + t of the warpgroup holds rows 16 w + g (+8) of d, columns 8 j + 2 t (+1) in
// d[4 j .. 4 j + 3] (rows g, g, g+8, g+8).
template <int N, int TA, int TB>
struct CummWgmma16;
template <int N, int TA = 0, int TB = 1>
__device__ __forceinline__ void cumm_wgmma16(float (&d)[N / 2], unsigned long long a, unsigned long long b, int acc) {
    CummWgmma16<N, TA, TB>::run(d, a, b, acc);
}
// N = 8, 16, 32: the few rows of a product as wgmma's N (21_wgmma_swap_ab: C^T = B^T A^T)
template <int TA, int TB>
struct CummWgmma16<8, TA, TB> {
    static __device__ __forceinline__ void run(float (&d)[4], unsigned long long a, unsigned long long b, int acc) {
        asm volatile(
            "{\n.reg .pred p;\nsetp.ne.b32 p, %6, 0;\n"
            "wgmma.mma_async.sync.aligned.m64n8k16.f32." CUMM_MMA_T "." CUMM_MMA_T " {%0,%1,%2,%3}, %4, %5, p, 1, 1, "
            "%7, %8;\n}\n"
            : CUMM_WGMMA_D4(0)
            : "l"(a), "l"(b), "r"(acc), "n"(TA), "n"(TB));
    }
};
template <int TA, int TB>
struct CummWgmma16<16, TA, TB> {
    static __device__ __forceinline__ void run(float (&d)[8], unsigned long long a, unsigned long long b, int acc) {
        asm volatile(
            "{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
            "wgmma.mma_async.sync.aligned.m64n16k16.f32." CUMM_MMA_T "." CUMM_MMA_T " {%0,%1,%2,%3,%4,%5,%6,%7}, %8, %9, p, 1, 1, "
            "%11, %12;\n}\n"
            : CUMM_WGMMA_D4(0), CUMM_WGMMA_D4(4)
            : "l"(a), "l"(b), "r"(acc), "n"(TA), "n"(TB));
    }
};
template <int TA, int TB>
struct CummWgmma16<32, TA, TB> {
    static __device__ __forceinline__ void run(float (&d)[16], unsigned long long a, unsigned long long b, int acc) {
        asm volatile(
            "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
            "wgmma.mma_async.sync.aligned.m64n32k16.f32." CUMM_MMA_T "." CUMM_MMA_T " {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, %16, %17, p, 1, 1, "
            "%19, %20;\n}\n"
            : CUMM_WGMMA_D4(0), CUMM_WGMMA_D4(4), CUMM_WGMMA_D4(8), CUMM_WGMMA_D4(12)
            : "l"(a), "l"(b), "r"(acc), "n"(TA), "n"(TB));
    }
};
template <int TA, int TB>
struct CummWgmma16<64, TA, TB> {
    static __device__ __forceinline__ void run(float (&d)[32], unsigned long long a, unsigned long long b, int acc) {
        asm volatile(
            "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
            "wgmma.mma_async.sync.aligned.m64n64k16.f32." CUMM_MMA_T "." CUMM_MMA_T " {"
            "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,"
            "%25,%26,%27,%28,%29,%30,%31"
            "}, %32, %33, p, 1, 1, %35, %36;\n}\n"
            : CUMM_WGMMA_D16(0), CUMM_WGMMA_D16(16)
            : "l"(a), "l"(b), "r"(acc), "n"(TA), "n"(TB));
    }
};
template <int TA, int TB>
struct CummWgmma16<128, TA, TB> {
    static __device__ __forceinline__ void run(float (&d)[64], unsigned long long a, unsigned long long b, int acc) {
        asm volatile(
            "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
            "wgmma.mma_async.sync.aligned.m64n128k16.f32." CUMM_MMA_T "." CUMM_MMA_T " {"
            "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,"
            "%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,"
            "%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63"
            "}, %64, %65, p, 1, 1, %67, %68;\n}\n"
            : CUMM_WGMMA_D16(0), CUMM_WGMMA_D16(16), CUMM_WGMMA_D16(32), CUMM_WGMMA_D16(48)
            : "l"(a), "l"(b), "r"(acc), "n"(TA), "n"(TB));
    }
};
template <int TA, int TB>
struct CummWgmma16<192, TA, TB> {
    static __device__ __forceinline__ void run(float (&d)[96], unsigned long long a, unsigned long long b, int acc) {
        asm volatile(
            "{\n.reg .pred p;\nsetp.ne.b32 p, %98, 0;\n"
            "wgmma.mma_async.sync.aligned.m64n192k16.f32." CUMM_MMA_T "." CUMM_MMA_T " {"
            "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,"
            "%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,"
            "%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,"
            "%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,"
            "%91,%92,%93,%94,%95"
            "}, %96, %97, p, 1, 1, %99, %100;\n}\n"
            : CUMM_WGMMA_D16(0), CUMM_WGMMA_D16(16), CUMM_WGMMA_D16(32), CUMM_WGMMA_D16(48), CUMM_WGMMA_D16(64), CUMM_WGMMA_D16(80)
            : "l"(a), "l"(b), "r"(acc), "n"(TA), "n"(TB));
    }
};
template <int TA, int TB>
struct CummWgmma16<256, TA, TB> {
    static __device__ __forceinline__ void run(float (&d)[128], unsigned long long a, unsigned long long b, int acc) {
        asm volatile(
            "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
            "wgmma.mma_async.sync.aligned.m64n256k16.f32." CUMM_MMA_T "." CUMM_MMA_T " {"
            "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,"
            "%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,"
            "%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,"
            "%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,"
            "%91,%92,%93,%94,%95,%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,"
            "%110,%111,%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127"
            "}, %128, %129, p, 1, 1, %131, %132;\n}\n"
            : CUMM_WGMMA_D16(0), CUMM_WGMMA_D16(16), CUMM_WGMMA_D16(32), CUMM_WGMMA_D16(48), CUMM_WGMMA_D16(64), CUMM_WGMMA_D16(80), CUMM_WGMMA_D16(96), CUMM_WGMMA_D16(112)
            : "l"(a), "l"(b), "r"(acc), "n"(TA), "n"(TB));
    }
};

// One 64-deep slab of a consumer warpgroup: its MT m64 blocks of A against N columns of B from one stage (A's
// blocks at a0, 8 KB apart: 64 rows of 128 bytes K-major, or with TA one M-major box each; B at b0: N / 64 M-major
// boxes of 64 k rows, or with TB K-major rows of N), four k16 steps, fenced before and committed as one group.
// STEPPED (every rung above 13, whose slab shows the plain form): one descriptor of A's and one of B's stage, each
// k16 step and m64 block a constant added to its address field (a shared address is below 2^18, so (a + o) >> 4 =
// (a >> 4) + (o >> 4) never carries past the field's 14 bits), where each wgmma's descriptors were masked, shifted
// and or-ed anew: a 128 x 64 tile's k-slab of eight m64n64 wgmma 107 -> 72 instructions (66 with an unsigned slab
// count), 1.5-5 % faster on the H200 on one warpgroup's tiles.
template <int MT, int N, int TA, int TB, int STEPPED = 0>
__device__ __forceinline__ void cumm_wgmma_slab16(float (&d)[MT][N / 2], unsigned a0, unsigned b0) {
    cumm_wgmma_fence();
    if (STEPPED) {
        const unsigned long long da = TA ? cumm_wg_desc_mn(a0, 8192) : cumm_wg_desc_k(a0);
        const unsigned long long db = TB ? cumm_wg_desc_k(b0) : cumm_wg_desc_mn(b0, 8192);
#pragma unroll
        for (int kk = 0; kk < 4; ++kk)
#pragma unroll
            for (int m = 0; m < MT; ++m)
                cumm_wgmma16<N, TA, !TB>(d[m], da + ((TA ? m * 8192 + 2048 * kk : m * 8192 + 32 * kk) >> 4),
                                         db + ((TB ? 32 * kk : 2048 * kk) >> 4), 1);
    } else {
#pragma unroll
        for (int kk = 0; kk < 4; ++kk)
#pragma unroll
            for (int m = 0; m < MT; ++m)
                cumm_wgmma16<N, TA, !TB>(d[m], TA ? cumm_wg_desc_mn(a0 + m * 8192 + 2048 * kk, 8192)
                                                  : cumm_wg_desc_k(a0 + m * 8192 + 32 * kk),
                                         TB ? cumm_wg_desc_k(b0 + 32 * kk) : cumm_wg_desc_mn(b0 + 2048 * kk, 8192), 1);
    }
    cumm_wgmma_commit();
}

// ---- Epilogues of the 16-bit kernels: a warpgroup's accumulators to C -------------------------------------
// Thread 32 w + 4 g + t4 of a warpgroup holds, of each of its MT m64 blocks m, rows 16 w + g (+ 8) and columns
// 8 j + 2 t4 (+ 1) in d[m][4 j .. 4 j + 3] (the wgmma layout above).

// Direct stores (cumm_store_pair: alpha, beta, the edges of M and N): cumm_store_rows with C's pair store.
template <int MT, int R, int VEC>
__device__ __forceinline__ void cumm_store_tile(const float (&d)[MT][R], cumm_out_t* C, i64 coff, int ldc, int M,
                                                int N, int row0, int col0, int warp, int g, int t4, float alpha,
                                                float beta) {
    cumm_store_rows(d, C, coff, ldc, M, row0, col0, warp, g, t4, [&](cumm_out_t* crow, int col, float x, float y) {
        cumm_store_pair<VEC>(crow, col, N, x, y, alpha, beta);
    });
}

// Whether a rung with an EPI parameter stores C through the TMA epilogue below (EPI = 1, a 16-bit C whose rows the
// copy engine can write: VEC_C); else its direct stores (cumm_store_tile).
#define CUMM_EPI_TMA (EPI && VEC_C && !OUT_F32)

struct CummNoPre {  // CummTmaEpilogue::store's default chunk hook: nothing
    template <class D>
    __device__ __forceinline__ void operator()(const D&, int, int) const {}
};

// CummTmaEpilogue's 16-bit C: a pair of columns is a 4-byte word, at word t4 of 16-byte chunk jj % 8 of row r in box
// jj / 8 (64 rows x 128 bytes, 128-byte swizzle). With beta != 0 the copy engine has loaded the chunk of C into the
// buffer (the first with prefetch, while the mainloop ran; the others once the buffer is free), and each thread
// reads the pairs it then overwrites.
struct CummStage16 {
    static constexpr int BOX = 8192;
    float alpha, beta;
    template <class E, class D>
    __device__ __forceinline__ bool stage(E& e, const D& d, int m, int half, int nb, int bn0, int row0, int z) const {
        auto at = [&](int jj, int r) {
            return reinterpret_cast<unsigned*>(e.cs + (jj / 8) * 8192 + r * 128 + ((jj % 8) ^ (r % 8)) * 16 + 4 * e.t4);
        };
        if (beta == 0.0f) {
            unsigned v[16][2];
#pragma unroll
            for (int jj = 0; jj < 16; ++jj)
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const int j = half * 16 + jj;
                    if (jj < 8 * nb)  // (a last chunk of 64 columns: the first 8 only)
                        v[jj][h] = cumm_f2h2(alpha * d[m][4 * j + 2 * h], alpha * d[m][4 * j + 2 * h + 1]);
                }
            e.put(v, nb, at);
            return true;
        }
        if (e.wtid == 0 && m + half > 0) {
            cumm_tma_store_wait_read();
            cumm_mbar_expect(e.bar, nb * 8192);
            cumm_tma_load_z<E::kB3D>(e.cs, e.map, bn0 + half * 128, row0 + m * 64, z, e.bar);
            if (nb == 2) cumm_tma_load_z<E::kB3D>(e.cs + 8192, e.map, bn0 + half * 128 + 64, row0 + m * 64, z, e.bar);
        }
        cumm_mbar_wait(e.bar, e.cph++ & 1);
#pragma unroll
        for (int jj = 0; jj < 16; ++jj)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int j = half * 16 + jj;
                if (jj >= 8 * nb) continue;  // a last chunk of 64 columns
                unsigned* const p = at(jj, e.warp * 16 + e.g + 8 * h);
                const unsigned c = *p;
                *p = cumm_f2h2(alpha * d[m][4 * j + 2 * h] + beta * cumm_h2f((cumm_h16)(c & 0xffffu)),
                               alpha * d[m][4 * j + 2 * h + 1] + beta * cumm_h2f((cumm_h16)(c >> 16)));
            }
        return true;
    }
};

// The TMA-store epilogue (16-bit C, 16-byte aligned, ldc % 8 == 0): the warpgroup writes its 64-row blocks to a
// 16 KB staging buffer, 128 columns at a time (a last 64 when TN (the tile's columns) % 128 == 64), as 64 x 64 boxes in the
// 128-byte-swizzled layout (chunk c of row r at c ^ (r % 8): the 8 rows of a warp's stores hit different banks),
// and one thread hands them to the copy engine, which clips the boxes at rows M and columns N. Instead of 4-byte
// stores from every thread that cover half of each 32-byte sector and keep the consumers from starting the next
// tile's wgmma: the consumers go on while the stores drain. With beta != 0 the same path reads C: the copy engine
// loads each chunk of C into the buffer (the first with `prefetch`, while the mainloop runs; the next once the
// buffer is free) and each thread reads the values it then overwrites (before, beta != 0 took 4-byte loads and
// stores from every thread: 0.81-0.83x cuBLAS's addmm at 4096^3, then 0.91-0.92x). B3D: 3-D maps (a batch).
// The format of C is a policy of the one walk: CummStage16 above, or an FP8 C's CummStageFp8 (the fused-epilogue hook).
template <int MT, int TN, int B3D>
struct CummTmaEpilogue {
    static constexpr int kB3D = B3D;
    unsigned char* cs;        // this warpgroup's staging buffer (1024-byte aligned), 64 x 128 halves
    const CummTmap* map;      // C's map: dims N x M, boxes 64 x 64, 128-byte swizzle
    unsigned long long* bar;  // beta != 0: a chunk of C has landed in cs
    int bar_id, wtid, warp, g, t4;  // the warpgroup's named barrier, the thread in it
    int cph;                  // chunks of C loaded (bar's phase)

    // Thread 0 of the warpgroup, at the start of a tile that takes this epilogue with beta != 0: load the first
    // chunk of C (rows row0.., columns bn0..) while the mainloop runs.
    __device__ __forceinline__ void prefetch(int bn0, int row0, int z) {
        cumm_tma_store_wait_read();  // the last tile's stores have read the buffer
        cumm_mbar_expect(bar, (TN >= 128 ? 2 : 1) * 8192);
        cumm_tma_load_z<B3D>(cs, map, bn0, row0, z, bar);
        if (TN >= 128) cumm_tma_load_z<B3D>(cs + 8192, map, bn0 + 64, row0, z, bar);
    }

    // The walk over a tile's chunks (an m64 block's columns, up to 128 at a time), one for every format of C: pre(d,
    // m, half) on the chunk's registers (a fused epilogue, a chunk at a time: its temporaries never share the
    // registers with the whole tile's), then f.stage writes the chunk into the staging buffer in F's layout (false:
    // it stored the chunk itself), and the copy engine stores its one or two 64-column boxes of F::BOX bytes.
    template <class F, class Pre>
    __device__ __forceinline__ void walk(const float (&d)[MT][TN / 2], int bn0, int row0, int z, F f, Pre pre) {
#pragma unroll
        for (int m = 0; m < MT; ++m)
#pragma unroll
            for (int half = 0; half < (TN + 127) / 128; ++half) {
                const int nb = TN - half * 128 >= 128 ? 2 : 1;  // 64-column boxes in this chunk
                pre(d, m, half);
                if (!f.stage(*this, d, m, half, nb, bn0, row0, z)) continue;
                cumm_fence_proxy_async_shared();  // generic-proxy stores -> the copy engine
                cumm_bar_sync<128>(bar_id);
                if (wtid == 0) {
                    const int r0 = row0 + m * 64;
                    cumm_tma_store_z<B3D>(map, cs, bn0 + half * 128, r0, z);
                    if (nb == 2) cumm_tma_store_z<B3D>(map, cs + F::BOX, bn0 + half * 128 + 64, r0, z);
                    cumm_tma_store_commit();
                }
            }
    }

    // A chunk converted while the previous stores drained (v[jj][h]: thread (warp, g, t4)'s pair of columns of
    // 8-column block jj, row warp * 16 + g + 8 h) into the buffer once they have read it; at(jj, r): the pair's place
    template <class W, class At>
    __device__ __forceinline__ void put(const W (&v)[16][2], int nb, At at) const {
        if (wtid == 0) cumm_tma_store_wait_read();  // the previous stores have read the buffer
        cumm_bar_sync<128>(bar_id);
#pragma unroll
        for (int jj = 0; jj < 16; ++jj)
#pragma unroll
            for (int h = 0; h < 2; ++h)
                if (jj < 8 * nb) *at(jj, warp * 16 + g + 8 * h) = v[jj][h];
    }

    template <class Pre = CummNoPre>
    __device__ __forceinline__ void store(const float (&d)[MT][TN / 2], int bn0, int row0, int z, float alpha,
                                          float beta, Pre pre = {}) {
        walk(d, bn0, row0, z, CummStage16{alpha, beta}, pre);
    }
};

#endif  // CUMM_MMA_T
#undef CUMM_WGMMA_D16
#undef CUMM_WGMMA_D4
