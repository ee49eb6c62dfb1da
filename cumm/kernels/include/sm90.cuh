// sm90.cuh: Hopper (sm_90a) primitives of the kernels that use warpgroup tensor cores (fused3_wg.cu):
// shared-memory addresses, proxy fences, mbarriers, copy-engine (TMA) loads, and wgmma with its matrix
// descriptors, fence, commit and wait. Rendered after common.cuh; needs no configuration #define.
// Each wgmma operand type has its own section at the end (TF32 today: m64nNk8).
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
// (cumm/_chain/tmaps.py) and passed by value as a `const __grid_constant__` kernel parameter.
struct __align__(64) CummTmap {
    unsigned long long word[16];
};

// The box of 2-D `map` whose first element is (x, y) (x: the contiguous dimension) into shared memory at dst,
// as one asynchronous copy by the copy engine whose bytes count against mbarrier `bar` (cumm_mbar_expect).
// One thread issues it; no other thread spends an instruction. Elements past the tensor's edges arrive as
// zeros (and count too). dst is aligned as the map's swizzle needs (1024 bytes for 128-byte swizzle).
__device__ __forceinline__ void cumm_tma_load(float* dst, const CummTmap* map, int x, int y,
                                              unsigned long long* bar) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
        ::"r"(cumm_smem(dst)), "l"(reinterpret_cast<unsigned long long>(map)), "r"(x), "r"(y), "r"(cumm_smem(bar))
        : "memory");
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
