// tc16.cuh: primitives of the half-precision tensor-core rungs (11_mma, 12_mma_swizzled_pipeline, 13_wgmma,
// 14_wgmma_ws), rendered after the configuration's #defines. Inputs are 16-bit: CUMM_BF16 = 0 (float16) or 1
// (bfloat16); accumulation is FP32; OUT_F32 = 1 writes C as float32, else C has the input type. Halves travel
// as raw 16-bit patterns (unsigned short): no cuda_fp16.h, conversions are single PTX cvt's. Everything here
// (conversions, the epilogue, cp.async, ldmatrix, mma.sync) needs sm_80; the Hopper primitives of 13 and 14
// (TMA, mbarriers, wgmma on 16-bit operands) are in sm90.cuh, rendered after this header.
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
// The batched variant (CUMM_BATCHED) adds common.cuh's batch strides (elements between products; 0: an operand
// broadcast over the batch), so CUMM_BATCH() moves the pointers to product blockIdx.z as in the FP32 kernels.
#if CUMM_BATCHED
#define CUMM_GEMM16_ARGS                                                                               \
    const int M, const int N, const int K, const float alpha, const cumm_h16* __restrict__ A,          \
    const int lda, const cumm_h16* __restrict__ B, const int ldb, const float beta,                     \
    cumm_out_t* __restrict__ C, const int ldc, const i64 bsa, const i64 bsb, const i64 bsc
#else
#define CUMM_GEMM16_ARGS                                                                               \
    const int M, const int N, const int K, const float alpha, const cumm_h16* __restrict__ A,          \
    const int lda, const cumm_h16* __restrict__ B, const int ldb, const float beta,                     \
    cumm_out_t* __restrict__ C, const int ldc
#endif

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

// One output of a row of C (in bounds: the caller checks), for tiles held transposed (21_wgmma_swap_ab).
__device__ __forceinline__ void cumm_store_one(cumm_out_t* __restrict__ row, int col, float x, float alpha,
                                               float beta) {
    x *= alpha;
    cumm_store_out(row + col, beta != 0.0f ? x + beta * cumm_out2f(row + col) : x);
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
// Their groups, with the same memory clobber (the compiler keeps shared-memory accesses on their side of these):
// close the group of the copies issued since the last commit (an empty group keeps a pipeline's count uniform);
// wait until at most PENDING groups are in flight (common.cuh's and sm90.cuh's forms have no clobber).
__device__ __forceinline__ void cumm_cp_async_commit_s() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int PENDING>
__device__ __forceinline__ void cumm_cp_async_wait_s() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(PENDING) : "memory");
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
