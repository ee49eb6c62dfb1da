// sm90_tc16.cuh: primitives of the half-precision tensor-core rungs (11_mma, 12_mma_swizzled_pipeline,
// 13_wgmma, 14_wgmma_ws), rendered after the configuration's #defines. Inputs are 16-bit: CUMM_BF16 = 0
// (float16) or 1 (bfloat16); accumulation is FP32; OUT_F32 = 1 writes C as float32, else C has the input type.
// Halves travel as raw 16-bit patterns (unsigned short): no cuda_fp16.h, conversions are single PTX cvt's.
// Section 1 (mma.sync, ldmatrix, cp.async, epilogue) needs sm_80; section 2 (TMA, mbarrier, wgmma) sm_90a.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "the half-precision tensor-core kernels need compute capability 8.0 or newer"
#endif
#ifndef CUMM_BF16
#define CUMM_BF16 0
#endif
#ifndef OUT_F32
#define OUT_F32 0
#endif

typedef unsigned short cumm_h16;  // one float16 or bfloat16, as bits
typedef long long i64;
#if OUT_F32
typedef float cumm_out_t;
#else
typedef cumm_h16 cumm_out_t;
#endif
#if CUMM_BF16
#define CUMM_MMA_T "bf16"
#else
#define CUMM_MMA_T "f16"
#endif

// C = alpha * A @ B + beta * C; A (M x K, row stride lda) and B (K x N, ldb) row-major halves, C (M x N, ldc).
#define CUMM_GEMM16_ARGS                                                                               \
    const int M, const int N, const int K, const float alpha, const cumm_h16* __restrict__ A,          \
    const int lda, const cumm_h16* __restrict__ B, const int ldb, const float beta,                     \
    cumm_out_t* __restrict__ C, const int ldc

__device__ __forceinline__ float cumm_h2f(cumm_h16 h) {
#if CUMM_BF16
    return __uint_as_float((unsigned)h << 16);
#else
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
#endif
}
__device__ __forceinline__ cumm_h16 cumm_f2h(float f) {  // round to nearest even
    cumm_h16 h;
    asm("cvt.rn." CUMM_MMA_T ".f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}
__device__ __forceinline__ unsigned cumm_f2h2(float lo, float hi) {  // lo in the low 16 bits
    unsigned r;
    asm("cvt.rn." CUMM_MMA_T "x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}
__device__ __forceinline__ float cumm_out2f(const cumm_out_t* p) {
#if OUT_F32
    return *p;
#else
    return cumm_h2f(*p);
#endif
}
__device__ __forceinline__ void cumm_store_out(cumm_out_t* p, float v) {
#if OUT_F32
    *p = v;
#else
    *p = cumm_f2h(v);
#endif
}

// Two adjacent outputs (col, col + 1) of a row of C: alpha * acc + beta * C, C read only when beta != 0
// (a NaN already in C must not leak). VC: C is 16-byte aligned and ldc % 8 == 0, so with col even the pair
// is one 4-byte (halves) or 8-byte (float) access.
template <int VC>
__device__ __forceinline__ void cumm_store_pair(cumm_out_t* __restrict__ row, int col, int ncols, float x, float y,
                                                float alpha, float beta) {
    x *= alpha;
    y *= alpha;
    if (VC && col + 1 < ncols) {
#if OUT_F32
        float2* p = reinterpret_cast<float2*>(row + col);
        if (beta != 0.0f) {
            const float2 c = *p;
            x += beta * c.x;
            y += beta * c.y;
        }
        *p = make_float2(x, y);
#else
        unsigned* p = reinterpret_cast<unsigned*>(row + col);
        if (beta != 0.0f) {
            const unsigned c = *p;
            x += beta * cumm_h2f((cumm_h16)(c & 0xffff));
            y += beta * cumm_h2f((cumm_h16)(c >> 16));
        }
        *p = cumm_f2h2(x, y);
#endif
        return;
    }
    if (col < ncols) cumm_store_out(row + col, beta != 0.0f ? x + beta * cumm_out2f(row + col) : x);
    if (col + 1 < ncols) cumm_store_out(row + col + 1, beta != 0.0f ? y + beta * cumm_out2f(row + col + 1) : y);
}

// Eight consecutive halves of a row from col, zero where col + i >= ncols or !ok. VEC: the row pointer plus
// col is 16-byte aligned whenever col % 8 == 0 (aligned base, leading dimension % 8 == 0): one 16-byte load.
template <int VEC>
__device__ __forceinline__ uint4 cumm_load8(const cumm_h16* __restrict__ row, int col, int ncols, bool ok) {
    uint4 v = make_uint4(0, 0, 0, 0);
    if (!ok) return v;
    if (VEC && col + 7 < ncols) return *reinterpret_cast<const uint4*>(row + col);
    unsigned w[4] = {0, 0, 0, 0};
#pragma unroll
    for (int i = 0; i < 8; ++i)
        if (col + i < ncols) w[i / 2] |= (unsigned)row[col + i] << (16 * (i % 2));
    return make_uint4(w[0], w[1], w[2], w[3]);
}

__device__ __forceinline__ unsigned cumm_smem_u32(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared without registers (cp.async.cg, sm_80); src_bytes < 16 zero-fills the rest and
// src_bytes = 0 reads nothing.
__device__ __forceinline__ void cumm_cp_async16_s(unsigned dst, const void* src, int src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
}

// Four 8x8 matrices of 16-bit elements from shared memory: lane l gives the address of row l % 8 of matrix
// l / 8; register i receives matrix i, lane l holding row l / 4, elements 2 (l % 4) and 2 (l % 4) + 1 (.trans:
// column l / 4, rows 2 (l % 4) and 2 (l % 4) + 1).
__device__ __forceinline__ void cumm_ldsm_x4(unsigned (&r)[4], unsigned addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr) : "memory");
}
__device__ __forceinline__ void cumm_ldsm_x4_t(unsigned (&r)[4], unsigned addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr) : "memory");
}

// d += a @ b for one m16n8k16 tile: a row-major 16x16 (4 registers of two halves), b column-major 16x8 (2),
// d 16x8 FP32 (4): lane 4g + t holds d rows g and g + 8, columns 2t and 2t + 1.
__device__ __forceinline__ void cumm_mma16816(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." CUMM_MMA_T "." CUMM_MMA_T ".f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// ---------------------------------------------------------------------------------------------------------
// Section 2: Hopper (sm_90a). The copy engine (TMA) with 2-D tensor maps made on the host, mbarriers, wgmma.
// ---------------------------------------------------------------------------------------------------------

// A CUtensorMap, encoded by the host and passed by value as a __grid_constant__ kernel parameter.
struct __align__(64) CummTmap16 {
    unsigned long long word[16];
};

__device__ __forceinline__ void cumm_mbar_init(unsigned long long* bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(cumm_smem_u32(bar)), "r"(count) : "memory");
}
// One arrival that also announces `bytes` of TMA traffic, which must land before the phase completes.
__device__ __forceinline__ void cumm_mbar_expect(unsigned long long* bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(cumm_smem_u32(bar)), "r"(bytes)
                 : "memory");
}
__device__ __forceinline__ void cumm_mbar_arrive(unsigned long long* bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(cumm_smem_u32(bar)) : "memory");
}
// Wait until the phase of `bar` with this parity has completed (acquire: what it tracked is visible).
__device__ __forceinline__ void cumm_mbar_wait(unsigned long long* bar, unsigned parity) {
    const unsigned a = cumm_smem_u32(bar);
    unsigned done;
    do {
        asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     "selp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done) : "r"(a), "r"(parity) : "memory");
    } while (!done);
}

// The box of `map` whose first element is (x, y) (x: the contiguous dimension) into shared memory at dst;
// its bytes count against `bar`. Elements past the tensor's edges arrive as zeros (and count too).
__device__ __forceinline__ void cumm_tma_load_2d(void* dst, const CummTmap16* map, int x, int y,
                                                 unsigned long long* bar) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
        ::"r"(cumm_smem_u32(dst)), "l"(reinterpret_cast<unsigned long long>(map)), "r"(x), "r"(y),
        "r"(cumm_smem_u32(bar)) : "memory");
}
// Shared memory at src (written by this block, then fence.proxy.async) to the box of `map` at (x, y); the
// parts of the box past the tensor's edges are not written.
__device__ __forceinline__ void cumm_tma_store_2d(const CummTmap16* map, const void* src, int x, int y) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n"
                 ::"l"(reinterpret_cast<unsigned long long>(map)), "r"(x), "r"(y), "r"(cumm_smem_u32(src))
                 : "memory");
}
__device__ __forceinline__ void cumm_tma_store_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
// Wait until the stores committed so far have read their shared memory (it may be overwritten then).
__device__ __forceinline__ void cumm_tma_store_wait_read() {
    asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
}
__device__ __forceinline__ void cumm_tma_store_wait_all() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }
__device__ __forceinline__ void cumm_fence_proxy_async() {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
__device__ __forceinline__ void cumm_prefetch_tmap(const CummTmap16* map) {
    asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<unsigned long long>(map)) : "memory");
}

// wgmma shared-memory matrix descriptors for 128-byte-swizzled tiles (TMA's CU_TENSOR_MAP_SWIZZLE_128B layout:
// rows of 128 bytes, 16-byte chunk c of row r stored at chunk c ^ (r % 8), 1024-byte aligned 8-row atoms).
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

__device__ __forceinline__ void cumm_wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void cumm_wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cumm_wg_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// The compiler does not know that wgmma writes d after its asm statement: after the wait, these empty asm
// statements make every later read of d depend on it.
template <int R>
__device__ __forceinline__ void cumm_wg_pin(float (&d)[R]) {
#pragma unroll
    for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// d (64 x N FP32, R = N / 2 registers a thread) (+)= A (64 x 16, K-major, descriptor a) @ B (16 x N, MN-major:
// B row-major, imm-trans-b = 1, descriptor b), asynchronously; acc = 0 overwrites d. Thread 32 w + 4 g + t of
// the warpgroup holds rows 16 w + g (+8) of d, columns 8 j + 2 t (+1) in d[4 j .. 4 j + 3] (rows g, g, g+8, g+8).
#define CUMM_WG_T CUMM_MMA_T
#define CUMM_WG_F4(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3])
#define CUMM_WG_F8(i) CUMM_WG_F4(i), CUMM_WG_F4(i + 4)
template <int N>
__device__ __forceinline__ void cumm_wgmma16(float (&d)[N / 2], unsigned long long a, unsigned long long b, int acc);
template <> __device__ __forceinline__ void cumm_wgmma16<64>(float (&d)[32], unsigned long long a, unsigned long long b, int acc) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32." CUMM_WG_T "." CUMM_WG_T " {"
        "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,"
        "%25,%26,%27,%28,%29,%30,%31"
        "}, %32, %33, p, 1, 1, 0, 1;\n}\n"
        : CUMM_WG_F8(0), CUMM_WG_F8(8), CUMM_WG_F8(16), CUMM_WG_F8(24)
        : "l"(a), "l"(b), "r"(acc));
}
template <> __device__ __forceinline__ void cumm_wgmma16<128>(float (&d)[64], unsigned long long a, unsigned long long b, int acc) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32." CUMM_WG_T "." CUMM_WG_T " {"
        "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,"
        "%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,"
        "%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63"
        "}, %64, %65, p, 1, 1, 0, 1;\n}\n"
        : CUMM_WG_F8(0), CUMM_WG_F8(8), CUMM_WG_F8(16), CUMM_WG_F8(24), CUMM_WG_F8(32), CUMM_WG_F8(40), CUMM_WG_F8(48), CUMM_WG_F8(56)
        : "l"(a), "l"(b), "r"(acc));
}
template <> __device__ __forceinline__ void cumm_wgmma16<192>(float (&d)[96], unsigned long long a, unsigned long long b, int acc) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %98, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n192k16.f32." CUMM_WG_T "." CUMM_WG_T " {"
        "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,"
        "%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,"
        "%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,"
        "%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,"
        "%91,%92,%93,%94,%95"
        "}, %96, %97, p, 1, 1, 0, 1;\n}\n"
        : CUMM_WG_F8(0), CUMM_WG_F8(8), CUMM_WG_F8(16), CUMM_WG_F8(24), CUMM_WG_F8(32), CUMM_WG_F8(40), CUMM_WG_F8(48), CUMM_WG_F8(56), CUMM_WG_F8(64), CUMM_WG_F8(72), CUMM_WG_F8(80), CUMM_WG_F8(88)
        : "l"(a), "l"(b), "r"(acc));
}
template <> __device__ __forceinline__ void cumm_wgmma16<256>(float (&d)[128], unsigned long long a, unsigned long long b, int acc) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32." CUMM_WG_T "." CUMM_WG_T " {"
        "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,"
        "%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,"
        "%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,"
        "%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,"
        "%91,%92,%93,%94,%95,%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,"
        "%110,%111,%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127"
        "}, %128, %129, p, 1, 1, 0, 1;\n}\n"
        : CUMM_WG_F8(0), CUMM_WG_F8(8), CUMM_WG_F8(16), CUMM_WG_F8(24), CUMM_WG_F8(32), CUMM_WG_F8(40), CUMM_WG_F8(48), CUMM_WG_F8(56), CUMM_WG_F8(64), CUMM_WG_F8(72), CUMM_WG_F8(80), CUMM_WG_F8(88), CUMM_WG_F8(96), CUMM_WG_F8(104), CUMM_WG_F8(112), CUMM_WG_F8(120)
        : "l"(a), "l"(b), "r"(acc));
}

// Register budgets of warp-specialized kernels (sm_90a): producers give registers back, consumers take them.
template <int R>
__device__ __forceinline__ void cumm_setmaxnreg_dec() { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(R)); }
template <int R>
__device__ __forceinline__ void cumm_setmaxnreg_inc() { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(R)); }

// Thread block clusters (sm_90): rank in the cluster, a barrier over all its threads (not .aligned: callable
// from diverged warps), arrivals on another block's mbarrier, TMA multicast.
__device__ __forceinline__ unsigned cumm_cluster_rank() {
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
                 ::"r"(cumm_smem_u32(bar)), "r"(rank) : "memory");
}
// cumm_tma_load_2d into the same shared offset of every block in `mask` (bit r: rank r), each block's bytes
// counted on its own mbarrier at bar's offset.
__device__ __forceinline__ void cumm_tma_load_2d_mc(void* dst, const CummTmap16* map, int x, int y,
                                                    unsigned long long* bar, unsigned short mask) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, "
        "{%2, %3}], [%4], %5;\n"
        ::"r"(cumm_smem_u32(dst)), "l"(reinterpret_cast<unsigned long long>(map)), "r"(x), "r"(y),
        "r"(cumm_smem_u32(bar)), "h"(mask) : "memory");
}
