// common.cuh: included (textually, by cumm's renderer) into every GEMM kernel after the configuration's
// #defines. Every kernel computes C = alpha * A @ B + beta * C for row-major A (M x K, row stride lda),
// B (K x N, ldb) and C (M x N, ldc). VEC_A / VEC_B / VEC_C are 1 when the renderer has checked that
// the pointer is 16-byte aligned and the leading dimension is a multiple of 4, so float4 accesses are legal.
// K, alpha, beta and the pointers are not const: CUMM_SPLIT_K narrows them to one slice of K, CUMM_BATCH
// moves them to one product of a batch.
typedef long long i64;  // offsets: M * lda can pass 2^31 for large matrices

// Batched products (CUMM_BATCHED = 1, a variant of its own): gridDim.z is the batch, and product z reads
// A + z * bsa, B + z * bsb and writes C + z * bsc (a stride of 0 broadcasts an operand). Every GEMM kernel
// starts with CUMM_BATCH() (or CUMM_SPLIT_K, which does the same when batched: a batch is not split).
// Unbatched variants have neither the arguments nor any code for it.
#ifndef CUMM_BATCHED
#define CUMM_BATCHED 0
#endif
#if CUMM_BATCHED
#define CUMM_GEMM_ARGS                                                                         \
    const int M, const int N, int K, float alpha,                                              \
    const float* __restrict__ A, const int lda, const float* __restrict__ B, const int ldb,    \
    float beta, float* __restrict__ C, const int ldc, const i64 bsa, const i64 bsb, const i64 bsc
#define CUMM_BATCH()                                                                           \
    do {                                                                                       \
        A += (i64)blockIdx.z * bsa;                                                            \
        B += (i64)blockIdx.z * bsb;                                                            \
        C += (i64)blockIdx.z * bsc;                                                            \
    } while (0)
#else
#define CUMM_GEMM_ARGS                                                                         \
    const int M, const int N, int K, float alpha,                                              \
    const float* __restrict__ A, const int lda, const float* __restrict__ B, const int ldb,    \
    float beta, float* __restrict__ C, const int ldc
#define CUMM_BATCH() \
    do {             \
    } while (0)
#endif

// Split-K. A kernel that declares split_k in its spec starts with CUMM_SPLIT_K(BK); it is launched with
// gridDim.z = S (S = 1: no change). Slice z multiplies the columns [k0, k1) of A by the same rows of B,
// k0 = min(z * KC, K), k1 = min(k0 + KC, K), with KC = ceil(K / S) rounded up to a multiple of G = lcm(BK, 4):
// whole slabs, and k0 a multiple of 4 so A + k0 keeps the 16-byte alignment VEC_A promised. It writes its
// raw partial sum (alpha = 1, beta = 0) to C + z * M * ldc: C is then an S x M x N float32 workspace that
// cumm's splitk_reduce kernel sums. An empty slice (k0 = K) is [0, 0): K = 0, A and B stay at the operands'
// start (no pointer past their end even for zero-byte copies), and it writes zeros. cumm/plan/splitk.py mirrors
// this arithmetic (and launches no empty slice).
__device__ __forceinline__ int2 cumm_k_slice(int K, int S, int z, int G) {
    const i64 kc = ((i64)K + S - 1) / S;
    const i64 k0 = min((kc + G - 1) / G * G * z, (i64)K);
    const int k1 = (int)min(k0 + (kc + G - 1) / G * G, (i64)K);
    return k0 < k1 ? make_int2((int)k0, k1) : make_int2(0, 0);
}
#if CUMM_BATCHED
#define CUMM_SPLIT_K(BK_) CUMM_BATCH()
#else
#define CUMM_SPLIT_K(BK_)                                                                             \
    do {                                                                                              \
        if (gridDim.z > 1) {                                                                          \
            const int2 cumm_ks_ = cumm_k_slice(K, gridDim.z, blockIdx.z, (BK_) % 4 == 0 ? (BK_)        \
                                               : (BK_) % 2 == 0 ? 2 * (BK_) : 4 * (BK_));             \
            A += cumm_ks_.x;                                                                          \
            B += (i64)cumm_ks_.x * ldb;                                                               \
            C += (i64)blockIdx.z * M * ldc;                                                           \
            K = cumm_ks_.y - cumm_ks_.x;                                                              \
            alpha = 1.0f;                                                                             \
            beta = 0.0f;                                                                              \
        }                                                                                             \
    } while (0)
#endif

// C is read only when beta != 0: a NaN already in C must not leak into alpha * A @ B.
__device__ __forceinline__ float cumm_epilogue(float acc, const float* c, float alpha, float beta) {
    return beta == 0.0f ? alpha * acc : alpha * acc + beta * *c;
}

// Four consecutive floats of a row, zero where col + i >= ncols. The 16-byte load runs only when
// VEC (alignment, checked by the caller's flag) holds and all four are in range.
template <int VEC>
__device__ __forceinline__ float4 cumm_load4(const float* __restrict__ row, int col, int ncols, bool row_ok) {
    float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
    if (!row_ok) return v;
    if (VEC && col + 3 < ncols) return *reinterpret_cast<const float4*>(row + col);
    if (col + 0 < ncols) v.x = row[col + 0];
    if (col + 1 < ncols) v.y = row[col + 1];
    if (col + 2 < ncols) v.z = row[col + 2];
    if (col + 3 < ncols) v.w = row[col + 3];
    return v;
}

// Store four consecutive outputs of one row of C, through one 16-byte access when legal.
template <int VEC>
__device__ __forceinline__ void cumm_store4(float* __restrict__ row, int col, int ncols, float4 acc,
                                            float alpha, float beta) {
    if (VEC && col + 3 < ncols) {
        float4* p = reinterpret_cast<float4*>(row + col);
        float4 o;
        if (beta == 0.0f) {
            o = make_float4(alpha * acc.x, alpha * acc.y, alpha * acc.z, alpha * acc.w);
        } else {
            const float4 c = *p;
            o = make_float4(alpha * acc.x + beta * c.x, alpha * acc.y + beta * c.y,
                            alpha * acc.z + beta * c.z, alpha * acc.w + beta * c.w);
        }
        *p = o;
        return;
    }
    if (col + 0 < ncols) row[col + 0] = cumm_epilogue(acc.x, row + col + 0, alpha, beta);
    if (col + 1 < ncols) row[col + 1] = cumm_epilogue(acc.y, row + col + 1, alpha, beta);
    if (col + 2 < ncols) row[col + 2] = cumm_epilogue(acc.z, row + col + 2, alpha, beta);
    if (col + 3 < ncols) row[col + 3] = cumm_epilogue(acc.w, row + col + 3, alpha, beta);
}

// x = big + small. big is x rounded to TF32 (10 mantissa bits), to nearest with ties away from zero:
// adding half a TF32 ulp to the magnitude bits and masking is that rounding in two integer instructions
// (cvt.rna.tf32.f32 costs about four on sm_90). small = x - big is exact in FP32 and |small| <= 2^-11 |x|;
// it goes to the tensor cores unrounded, which read its top 11 significant bits: an error below
// 2^-10 |small| <= 2^-21 |x|, the size of the small_a * small_b term the split drops anyway. Three
// instructions a value (in tf32x3 the main overhead besides the mma where warp tiles are small). The split of
// the TF32 tensor-core kernels (tf32x3_tile.cuh, 15_wgmma_tf32x3.cu, fused3_wg.cu).
__device__ __forceinline__ void cumm_split_tf32(float x, unsigned& big, unsigned& small) {
    big = (__float_as_uint(x) + 0x1000u) & 0xffffe000u;
    small = __float_as_uint(x - __uint_as_float(big));
}

// Two adjacent outputs (col, col + 1) of a row of C; one 8-byte store when legal.
template <int VC>
__device__ __forceinline__ void cumm_store2(float* __restrict__ row, int col, int ncols, float x, float y,
                                            float alpha, float beta) {
    if (VC && col + 1 < ncols) {  // ldc % 4 == 0, C 16-byte aligned and col even: 8-byte aligned
        float2* p = reinterpret_cast<float2*>(row + col);
        float2 o = make_float2(alpha * x, alpha * y);
        if (beta != 0.0f) {
            const float2 c = *p;
            o.x += beta * c.x;
            o.y += beta * c.y;
        }
        *p = o;
        return;
    }
    if (col < ncols) row[col] = cumm_epilogue(x, row + col, alpha, beta);
    if (col + 1 < ncols) row[col + 1] = cumm_epilogue(y, row + col + 1, alpha, beta);
}

// A ROWS x COLS tile (COLS % 4 == 0) of a row-major matrix, fetched from global memory into registers
// as float4s: slot s of thread t holds tile element (row(s), col(s) .. col(s) + 3). Consecutive threads
// take consecutive float4s of a row, so a warp's loads coalesce. Out-of-range elements read as zero.
template <int ROWS, int COLS, int NT, int VEC>
struct cumm_tile_fetch {
    static constexpr int SLOTS = ROWS * COLS / 4 / NT;
    static_assert(SLOTS * 4 * NT == ROWS * COLS, "every thread fetches the same number of float4s");
    float4 v[SLOTS];

    __device__ __forceinline__ static int row(int s, int tid) { return (tid + s * NT) / (COLS / 4); }
    __device__ __forceinline__ static int col(int s, int tid) { return (tid + s * NT) % (COLS / 4) * 4; }

    __device__ __forceinline__ void fetch(const float* __restrict__ g, int ld, int row0, int nrows,
                                          int col0, int ncols, int tid) {
#pragma unroll
        for (int s = 0; s < SLOTS; ++s) {
            const int r = row0 + row(s, tid);
            const bool ok = r < nrows;
            v[s] = cumm_load4<VEC>(g + (i64)(ok ? r : 0) * ld, col0 + col(s, tid), ncols, ok);
        }
    }
};

// Asynchronous global -> shared copies (cp.async, sm_80+): the data skips registers, so a kernel can
// prefetch the next tile without holding it in registers. src_bytes < size zero-fills the rest; with
// src_bytes = 0 nothing is read. Before sm_80 these fall back to plain (synchronous) copies.
__device__ __forceinline__ void cumm_cp_async4(float* dst, const float* src, bool ok) {
#if __CUDA_ARCH__ >= 800
    const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(s), "l"(src), "r"(ok ? 4 : 0));
#else
    *dst = ok ? *src : 0.0f;
#endif
}

__device__ __forceinline__ void cumm_cp_async16(float* dst, const float* src, int src_bytes) {
#if __CUDA_ARCH__ >= 800
    const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src), "r"(src_bytes));
#else
#pragma unroll
    for (int i = 0; i < 4; ++i) dst[i] = 4 * i < src_bytes ? src[i] : 0.0f;
#endif
}

__device__ __forceinline__ void cumm_cp_async_commit() {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::);
#endif
}

__device__ __forceinline__ void cumm_cp_async_wait_all() {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group 0;\n" ::);
#endif
}

// Copy a 16-byte chunk (4 floats of `row` from `col`) to shared memory asynchronously, zero-filling
// what lies past ncols or the whole chunk when !row_ok. VEC: one 16-byte copy (row + col aligned).
template <int VEC>
__device__ __forceinline__ void cumm_cp_async_chunk(float* dst, const float* row, int col, int ncols, bool row_ok) {
    if (VEC) {
        const int bytes = row_ok ? 4 * max(0, min(4, ncols - col)) : 0;
        cumm_cp_async16(dst, bytes ? row + col : row, bytes);
    } else {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const bool ok = row_ok && col + i < ncols;
            cumm_cp_async4(dst + i, row + (ok ? col + i : 0), ok);
        }
    }
}
