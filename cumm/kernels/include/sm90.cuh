// sm90.cuh: Hopper (sm_90a) primitives of the kernels that use warpgroup tensor cores (fused3_wg.cu, 13_wgmma.cu,
// 14_wgmma_ws.cu): shared-memory addresses, proxy fences, mbarriers, the copy engine (TMA loads, multicast
// loads, stores), wgmma with its matrix descriptors, fence, commit and wait, register budgets and cluster
// helpers. Rendered after common.cuh; needs no configuration #define. Each wgmma operand type has its own
// section at the end: TF32 (m64nNk8), and 16-bit (fp16 / bf16, m64nNk16), which exists when tc16.cuh (its
// CUMM_MMA_T) is rendered before this header.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ != 900
#error "sm90.cuh's wgmma exists only on sm_90a: compile with -arch=sm_90a (the spec's arch_specific=True)"
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
// (cumm/_tmaps.py) and passed by value as a `const __grid_constant__` kernel parameter.
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

// ---- Named barriers, flags between blocks, cp.async groups ----------------------------------------------

// A barrier over the N threads (whole warps) that name barrier `id` (1-15; 0 is __syncthreads'): a subset of
// the block, e.g. one warpgroup, syncs without stopping the others.
template <int N>
__device__ __forceinline__ void cumm_bar_sync(int id) {
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "n"(N) : "memory");
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
#endif  // CUMM_MMA_T
#undef CUMM_WGMMA_D16
#undef CUMM_WGMMA_D4
