// epilogue.cuh: the epilogue hook. Rendered only into a variant with an epilogue (CUMM_EPI = 1), after
// common.cuh and the spec's headers and before the kernel's template; a variant without one renders without it,
// so its source, template hash and SASS are what they were.
//
// How it reaches every rung without a per-kernel copy: in an epilogue variant the kernel's `alpha` argument is a
// CummAlpha (the GEMM argument macros are redefined below), a struct passed by value that carries alpha, M, N,
// C's base and leading dimensions, and the epilogue's extra operands. Every store of the ladder already takes
// alpha: common.cuh's cumm_epilogue / cumm_store4 / cumm_store2, tc16.cuh's cumm_store_pair, sm90.cuh's
// cumm_store_tile and CummTmaEpilogue. Each gets an overload here taking a CummAlpha: it applies the epilogue
// to alpha * acc at (row, col) of product z, then calls the unchanged store with alpha = 1 (folded away), which
// adds beta * C and casts. CummAlpha has no conversion to float, so a store that is not covered here does not
// compile (never silently skipped). The epilogue sees row < M and col < N only (elements past them run at the
// clamped row / column, unstored: operands are read in range),
// once per element of C, after the whole sum (split-K partials never get it: the plan does not split).
//
// Order per element: v = cumm_epi_first(acc, row, col, z) (alpha * acc, or with a named activation
// act(alpha * acc + bias) in one piece); cumm_epi_user(v, row, col, z) (the renderer's: the other named statements
// and a user's snippet); then C = v + beta * C, cast to C's dtype, or with an FP8 C (CUMM_EPI_FP8, 16-bit rungs
// only) C = fp8(v * scale), the scale the last operand's one float (beta = 0: the host refuses another).
//
// A GLU variant (glu=: the renderer defines CUMM_EPI_GLU as the activation) pairs the product's columns first:
// they come in 8-column blocks, gate then up (cumm.glu_weight interleaves w1 and w3 so), and C has half of them,
// C[row, 8 q + r] = act(alpha * P[row, 16 q + r]) * alpha * P[row, 16 q + 8 + r], then cumm_epi_user at
// (row, 8 q + r); CummAlpha's N is C's columns. Only the wgmma tile stores pair (KernelSpec.glu): the others are
// not defined in a GLU variant, so a rung without paired stores does not compile one.
#ifndef CUMM_EPI_NOPS
#define CUMM_EPI_NOPS 0
#endif
typedef long long i64;

struct CummEpiOp {  // an extra operand: its base, row stride and batch stride (elements; 0: broadcast)
    const void* p;
    i64 ld;
    i64 bs;
};

struct CummAlpha {
    float a;
    int M, N, pad_;
    const void* c;  // C as the kernel was given it (before a batched variant moves it to product z)
    i64 ldc, bsc;   // bsc = 0: one product
    CummEpiOp op[CUMM_EPI_NOPS > 0 ? CUMM_EPI_NOPS : 1];
    // split-K's `alpha = 1.0f` (common.cuh) compiles; an epilogue variant never splits (plan/epilogue.py)
    __device__ __forceinline__ CummAlpha& operator=(float x) {
        a = x;
        return *this;
    }
};
__device__ __forceinline__ float operator*(const CummAlpha& al, float x) { return al.a * x; }
__device__ __forceinline__ float operator*(float x, const CummAlpha& al) { return x * al.a; }

// An extra operand as the snippet reads it: x[i] is element i (row * ld_x + col for a matrix) as a float,
// whatever its dtype (T: float, or 16-bit bits with BF = 1 for bfloat16).
template <class T, int BF>
struct CummIn {
    const T* p;
    __device__ __forceinline__ float operator[](i64 i) const {
        if constexpr (sizeof(T) == 4) {
            return p[i];
        } else if constexpr (BF) {
            return __uint_as_float((unsigned)p[i] << 16);
        } else {
            float f;
            asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(p[i]));
            return f;
        }
    }
};
template <class T, int BF>
__device__ __forceinline__ CummIn<T, BF> cumm_epi_in(const CummAlpha& al, int k, int z) {
    return CummIn<T, BF>{static_cast<const T*>(al.op[k].p) + (i64)z * al.op[k].bs};
}

// Activations of the named epilogues (also usable in a snippet).
__device__ __forceinline__ float cumm_relu(float v) { return fmaxf(v, 0.0f); }
// 16-bit C (tc16.cuh's cumm_out_t): activations computed to below C's rounding rather than to FP32's.
#if defined(CUMM_MMA_T)
#define CUMM_EPI_C16 (sizeof(cumm_out_t) == 2)
#define CUMM_EPI_BF16C (CUMM_EPI_C16 && CUMM_BF16)  // bfloat16 C (8 bits of mantissa)
#else
#define CUMM_EPI_C16 false
#define CUMM_EPI_BF16C false
#endif
// tanh.approx.f32: one MUFU.TANH. Measured on the H200 over -12..12: relative error under 1e-5 (the PTX ISA
// promises 2^-11).
__device__ __forceinline__ float cumm_tanh_approx(float x) {
    float y;
    asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}
// Exact GELU 0.5 v (1 + erf(v / sqrt 2)). Where C is float16: erfc(|x|) = q(t) exp(-x^2), t = 1 / (1 + p |x|)
// (Abramowitz & Stegun 7.1.26, absolute error 1.5e-7: far below C's rounding), two MUFU and ~12 instructions
// against erff's ~27 (its two polynomials both evaluated and selected); then gelu = v - v q / 2 for v >= 0, v q / 2
// below: absolute error under 3e-8 (relative under 1e-3 down to v = -4). Float C keeps erff.
// bfloat16 C: Phi(v) = sigmoid(g(v)), g = logit Phi odd, fitted as v (c0 + c1 |v| + ... + c4 |v|^4) on [-5.5, 0]
// (weighted least squares towards the largest error: |g - fit| < 1.8e-3; p > 0.8 everywhere, so the tails go to
// 0 and v), and sigmoid through tanh as gelu_tanh's: h + h tanh(h p(|h|)) (h = v / 2, the coefficients scaled for
// it), one MUFU and six FMA-pipe instructions on one chain. Error over -16..16 in float32 before C's rounding:
// 0.44 units of bfloat16's last place (of max(|gelu|, 2^-14)) at most, under the rounding's own 0.5; A & S's
// form took two MUFU on a chain of ~11 (bias + GELU cost 1.37x its plain product at 8192 x 14336 x 1024).
__device__ __forceinline__ float cumm_gelu_h(float h) {
    const float a = fabsf(h);
    float p = fmaf(0.00733216386f, a, -0.0915003344f);
    p = fmaf(p, a, 0.44332093f);
    p = fmaf(p, a, -0.0904528126f);
    p = fmaf(p, a, 1.61200464f);
    return fmaf(h, cumm_tanh_approx(h * p), h);
}
__device__ __forceinline__ float cumm_gelu(float v) {
    if constexpr (CUMM_EPI_BF16C) {
        return cumm_gelu_h(0.5f * v);
    } else if constexpr (CUMM_EPI_C16) {
        const float x = fabsf(v) * 0.70710678118654752f;
        const float t = __fdividef(1.0f, fmaf(0.3275911f, x, 1.0f));
        float q = fmaf(1.061405429f, t, -1.453152027f);
        q = fmaf(q, t, 1.421413741f);
        q = fmaf(q, t, -0.284496736f);
        q = fmaf(q, t, 0.254829592f);
        q = q * t * __expf(-x * x);
        const float hq = 0.5f * v * q;
        return v >= 0.0f ? v - hq : hq;
    } else {
        return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
    }
}
// 0.5 v (1 + tanh u), u = sqrt(2 / pi) (v + 0.044715 v^3). What a fused GELU costs in the wgmma tiles follows the
// element's chain of issued instructions, its MUFU among them (16 an SM a cycle): a float16 form with one MUFU but a
// six-deep Newton chain for the reciprocal ran slower than two MUFU (docs/rejected.md). bfloat16 C: h + h tanh u
// (h = v / 2), one MUFU.TANH and four FMA-pipe instructions; tanh's 1e-5 stays within C's 1.5 units of last place
// even where 1 + tanh u cancels (v < 0). float16 C's units are 8x finer: there that tail was 6.8 units off, so
// float16 and float C keep v sigmoid(2 u) = one exp and one fast division (__fdividef, MUFU.RCP), exact to a few
// FP32 ulp with no cancellation (tanhf costs ~20 instructions an element).
// cumm_gelu_tanh_h(h) = gelu_tanh(2 h), bfloat16 C's form: u = h (2 c0 + 8 c1 h^2) is v (c0 + c1 v^2) with every
// rounding scaled by a power of two, so the same bits as from v.
__device__ __forceinline__ float cumm_gelu_tanh_h(float h) {
    return fmaf(h, cumm_tanh_approx(h * fmaf(8.0f * 0.0356774081f, h * h, 2.0f * 0.7978845608f)), h);
}
__device__ __forceinline__ float cumm_gelu_tanh(float v) {
    if constexpr (CUMM_EPI_BF16C) {
        return cumm_gelu_tanh_h(0.5f * v);
    } else {
        // e^(-2 u) = 2^(v (c1 + c2 v^2)): sqrt(2 / pi) and 0.044715 times -2 log2(e) folded into c1 and c2, two
        // multiplies fewer than 2 u then __expf's own scaling, on the chain the element waits on
        float e;
        asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(v * fmaf(-0.10294324f, v * v, -2.3022082f)));
        return __fdividef(v, 1.0f + e);
    }
}
// silu v sigmoid(v): for bfloat16 C h + h tanh h (h = v / 2: one MUFU, as gelu_tanh's); else __fdividef (IEEE `/`
// is a reciprocal, a check and a called slow path per element: FCHK + CALL in the SASS)
__device__ __forceinline__ float cumm_silu_h(float h) { return fmaf(h, cumm_tanh_approx(h), h); }
__device__ __forceinline__ float cumm_silu(float v) {
    if constexpr (CUMM_EPI_BF16C) {
        return cumm_silu_h(0.5f * v);
    } else {
        return __fdividef(v, 1.0f + __expf(-v));
    }
}

// act(a acc + b) and act(a acc): a named activation taking alpha (and a bias) in its first instruction
// (cumm_epi_first, and a GLU's gate). The activations that start by halving their argument (gelu, gelu_tanh, silu
// for bfloat16 C, their _h forms) take h = (a / 2) acc + b / 2 in one FFMA: the bits of halving a acc + b (a power
// of two), one FMUL an element fewer (an element's epilogue is ~8 issued instructions, and the issued
// instructions are what a fused epilogue costs the other warpgroup's mainloop: docs/beyond.md).
#define CUMM_ACT_AB(f)                                                                                        \
    __device__ __forceinline__ float f##_ab(float acc, float a, float b) { return f(fmaf(a, acc, b)); }       \
    __device__ __forceinline__ float f##_a(float acc, float a) { return f(a * acc); }
#define CUMM_ACT_AB_HALF(f)                                                                                   \
    __device__ __forceinline__ float f##_ab(float acc, float a, float b) {                                    \
        if constexpr (CUMM_EPI_BF16C) return f##_h(fmaf(acc, 0.5f * a, 0.5f * b));                            \
        else return f(fmaf(a, acc, b));                                                                       \
    }                                                                                                         \
    __device__ __forceinline__ float f##_a(float acc, float a) {                                              \
        if constexpr (CUMM_EPI_BF16C) return f##_h(acc * (0.5f * a));                                         \
        else return f(a * acc);                                                                               \
    }
CUMM_ACT_AB(cumm_relu)
CUMM_ACT_AB_HALF(cumm_gelu)
CUMM_ACT_AB_HALF(cumm_gelu_tanh)
CUMM_ACT_AB_HALF(cumm_silu)
#undef CUMM_ACT_AB
#undef CUMM_ACT_AB_HALF
#define CUMM_CAT_(a, b) a##b
#define CUMM_CAT(a, b) CUMM_CAT_(a, b)

// The epilogue itself: defined by the renderer after this header (named epilogues and snippets alike).
// cumm_epi_first: v from the accumulator (alpha * acc, or a named activation's act(alpha * acc + bias) in one
// piece); cumm_epi_user: the statements on v after it.
__device__ __forceinline__ float cumm_epi_first(float acc, const int row, const int col, const int z,
                                                const CummAlpha& cumm_al);
__device__ __forceinline__ void cumm_epi_user(float& v, const int row, const int col, const int z,
                                              const CummAlpha& cumm_al);

// Branch-free: an element past M or N (a tile's edge, whose value no store writes) runs the epilogue at the last
// row / column instead of being skipped. A branch per element (`if (row < M && col < N)`) made every element its
// own block that the scheduler cannot overlap with the next one: the exp, reciprocal and loads of 128 elements a
// thread ran one after another (wgmma_ws, bf16, 8192 x 14336: +0.25 ms for a one-line silu, +0.65 ms for
// bias + GELU); without it they interleave.
// CLAMP = false: the caller knows the element is inside (a whole tile), so an operand's address is a base plus a
// constant per element rather than its own clamped 64-bit sum (bias alone spilled 1,728 bytes in
// wgmma_pingpong's 128 x 192 tiles with every address clamped: the loads the scheduler starts early each held one).
template <bool CLAMP = true>
__device__ __forceinline__ float cumm_epi_at(const CummAlpha& al, float acc, int row, int col, int z) {
    if constexpr (CLAMP) {
        row = min(row, al.M - 1);
        col = min(col, al.N - 1);
    }
    float v = cumm_epi_first(acc, row, col, z, al);
    cumm_epi_user(v, row, col, z, al);
    return v;
}

// a / b for 0 <= a, 0 < b: a 32-bit division when both fit (a 64-bit one is a long subroutine)
__device__ __forceinline__ i64 cumm_epi_div(i64 a, i64 b) {
    return ((a | b) >> 32) == 0 ? (i64)((unsigned)a / (unsigned)b) : a / b;
}

// (product, row) of a row pointer of C: the stores of common.cuh and tc16.cuh get the row's address only.
template <class T>
__device__ __forceinline__ int2 cumm_epi_row(const CummAlpha& al, const T* row) {
    i64 off = row - static_cast<const T*>(al.c);
    int z = 0;
    if (al.bsc) {
        z = (int)cumm_epi_div(off, al.bsc);
        off -= (i64)z * al.bsc;
    }
    return make_int2(z, (int)cumm_epi_div(off, al.ldc));
}

#ifdef CUMM_EPI_FP8  // ---- an FP8 C (3: float8_e4m3fn, 4: float8_e5m2) from a 16-bit rung -----------------
// The kernel still sees a 16-bit C (cumm_out_t*), but the host passes ldc and the batch stride in bytes (those of a
// byte view of C): every row pointer the kernel forms is C plus a count of elements that is the row's byte offset,
// so the direct stores below write at al.c plus that offset as bytes (include/fp8_cvt.cuh) and never touch the
// 16-bit address. C is never read (beta = 0). The TMA-store rungs' copy-engine path (VEC_C: C, ldc and the batch
// stride on 16 bytes) stages bytes instead of halves (CummStageFp8, below) through a map of bytes.
__device__ __forceinline__ unsigned char* cumm_epi_bytes(const CummAlpha& al, const cumm_out_t* row) {
    return static_cast<unsigned char*>(const_cast<void*>(al.c)) + (row - static_cast<const cumm_out_t*>(al.c));
}
// the scale: the last operand, one float32 (read once a tile: a store to C could alias it)
__device__ __forceinline__ float cumm_epi_scale(const CummAlpha& al) {
    return __ldg(static_cast<const float*>(al.op[CUMM_EPI_NOPS - 1].p));
}
// C, its rows and its products start on even bytes: a pair of columns (col even) is one 2-byte store
__device__ __forceinline__ bool cumm_epi_pairs(const CummAlpha& al) {
    return ((reinterpret_cast<unsigned long long>(al.c) | (unsigned long long)(al.ldc | al.bsc)) & 1) == 0;
}
#endif

#ifndef CUMM_EPI_GLU  // (stores that see one element or one pair at a time: no GLU)
// ---- common.cuh's stores (float C) -----------------------------------------------------------------------
__device__ __forceinline__ float cumm_epilogue(float acc, const float* c, const CummAlpha& al, float beta) {
    i64 off = c - static_cast<const float*>(al.c);
    int z = 0;
    if (al.bsc) {
        z = (int)cumm_epi_div(off, al.bsc);
        off -= (i64)z * al.bsc;
    }
    const int row = (int)cumm_epi_div(off, al.ldc), col = (int)(off - (i64)row * al.ldc);
    return cumm_epilogue(cumm_epi_at(al, acc, row, col, z), c, 1.0f, beta);
}

template <int VEC>
__device__ __forceinline__ void cumm_store4(float* __restrict__ row, int col, int ncols, float4 acc,
                                            const CummAlpha& al, float beta) {
    const int2 zr = cumm_epi_row(al, row);
    acc.x = cumm_epi_at(al, acc.x, zr.y, col + 0, zr.x);
    acc.y = cumm_epi_at(al, acc.y, zr.y, col + 1, zr.x);
    acc.z = cumm_epi_at(al, acc.z, zr.y, col + 2, zr.x);
    acc.w = cumm_epi_at(al, acc.w, zr.y, col + 3, zr.x);
    cumm_store4<VEC>(row, col, ncols, acc, 1.0f, beta);
}

template <int VC>
__device__ __forceinline__ void cumm_store2(float* __restrict__ row, int col, int ncols, float x, float y,
                                            const CummAlpha& al, float beta) {
    const int2 zr = cumm_epi_row(al, row);
    cumm_store2<VC>(row, col, ncols, cumm_epi_at(al, x, zr.y, col, zr.x), cumm_epi_at(al, y, zr.y, col + 1, zr.x),
                    1.0f, beta);
}

#endif  // !CUMM_EPI_GLU

#ifdef CUMM_MMA_T  // ---- tc16.cuh's stores (16-bit or float C) -------------------------------------------
#ifndef CUMM_EPI_GLU
template <int VC>
__device__ __forceinline__ void cumm_store_pair(cumm_out_t* __restrict__ row, int col, int ncols, float x, float y,
                                                const CummAlpha& al, float beta) {
    const int2 zr = cumm_epi_row(al, row);
    x = cumm_epi_at(al, x, zr.y, col, zr.x);
    y = cumm_epi_at(al, y, zr.y, col + 1, zr.x);
#ifdef CUMM_EPI_FP8
    const float s = cumm_epi_scale(al);
    cumm_fp8_pair<CUMM_EPI_FP8>(cumm_epi_bytes(al, row), col, ncols, x * s, y * s, cumm_epi_pairs(al));
#else
    cumm_store_pair<VC>(row, col, ncols, x, y, 1.0f, beta);
#endif
}

__device__ __forceinline__ void cumm_store_one(cumm_out_t* __restrict__ row, int col, float x, const CummAlpha& al,
                                               float beta) {
    const int2 zr = cumm_epi_row(al, row);
    x = cumm_epi_at(al, x, zr.y, col, zr.x);
#ifdef CUMM_EPI_FP8
    cumm_epi_bytes(al, row)[col] = (unsigned char)(cumm_f2fp8x2<CUMM_EPI_FP8>(x * cumm_epi_scale(al), 0.0f) & 0xffu);
#else
    cumm_store_one(row, col, x, 1.0f, beta);
#endif
}
#endif  // !CUMM_EPI_GLU

#ifdef CUMM_EPI_SM90  // ---- sm90.cuh's epilogues (the renderer defines it when sm90.cuh is a header) ------
// The wgmma layout (sm90.cuh): thread (warp, g, t4) holds, of m64 block m, rows 64 m + 16 warp + g (+ 8) and
// columns 8 j + 2 t4 (+ 1) in d[m][4 j + 2 h (+ 1)].
// In place: the kernels' accumulators are their own non-const arrays, dead once stored (a second array of MT * R
// floats spilled under wgmma_ws's 232 registers).
template <int MT, int R, bool CLAMP>
__device__ __forceinline__ void cumm_epi_tile_(float (&d)[MT][R], const CummAlpha& al, int row0, int col0, int z,
                                               int warp, int g, int t4) {
    // column by column: a per-column operand (bias) is read once and dead after its column's 2 MT elements (rows
    // outermost, ptxas spilled 204 bytes in wgmma_pingpong's 128 x 192 tiles with bias + gelu_tanh)
#pragma unroll
    for (int j = 0; j < R / 4; ++j)
#pragma unroll
        for (int i = 0; i < 2; ++i)
#pragma unroll
            for (int m = 0; m < MT; ++m)
#pragma unroll
                for (int h = 0; h < 2; ++h)
                    d[m][4 * j + 2 * h + i] = cumm_epi_at<CLAMP>(al, d[m][4 * j + 2 * h + i],
                                                                 row0 + m * 64 + warp * 16 + g + 8 * h,
                                                                 col0 + 8 * j + 2 * t4 + i, z);
}
// A tile wholly inside C (one warp-uniform test) runs the epilogue unclamped, an edge tile clamped.
template <int MT, int R>
__device__ __forceinline__ void cumm_epi_tile(const float (&dc)[MT][R], const CummAlpha& al, int row0, int col0,
                                              int z, int warp, int g, int t4) {
    float(&d)[MT][R] = const_cast<float(&)[MT][R]>(dc);
    if (row0 + MT * 64 <= al.M && col0 + 2 * R <= al.N)
        cumm_epi_tile_<MT, R, false>(d, al, row0, col0, z, warp, g, t4);
    else
        cumm_epi_tile_<MT, R, true>(d, al, row0, col0, z, warp, g, t4);
}

// The tile's values (the epilogue applied) to C: the unchanged direct stores (alpha = 1: beta * C, the cast), or
// with an FP8 C its bytes.
template <int MT, int R, int VEC>
__device__ __forceinline__ void cumm_epi_store(const float (&d)[MT][R], cumm_out_t* C, i64 coff, int ldc, int M,
                                               int N, int row0, int col0, int warp, int g, int t4,
                                               const CummAlpha& al, float beta) {
#ifdef CUMM_EPI_FP8
    const float s = cumm_epi_scale(al);
    const bool pairs = cumm_epi_pairs(al);
    cumm_store_rows(d, C, coff, ldc, M, row0, col0, warp, g, t4, [&](cumm_out_t* crow, int col, float x, float y) {
        cumm_fp8_pair<CUMM_EPI_FP8>(cumm_epi_bytes(al, crow), col, N, x * s, y * s, pairs);
    });
#else
    cumm_store_tile<MT, R, VEC>(d, C, coff, ldc, M, N, row0, col0, warp, g, t4, 1.0f, beta);
#endif
}

#ifdef CUMM_EPI_FP8
// An FP8 C through the copy engine: CummTmaEpilogue's walk with a pair of columns as 2 bytes, in boxes of 64 rows x
// 64 bytes (64 columns) with the 64-byte swizzle (16-byte piece c of row r at c ^ (r / 2 % 4): a warp's 2-byte
// stores of one column block land in 16 different banks), through C's map of bytes (cumm/runtime/launch.py); a
// chunk is 8 KB of the warpgroup's 16 KB staging buffer, the pair of block jj at bytes 8 (jj % 8) + 2 t4 of box
// jj / 8. A tile across a column N off the 16-byte grid (``tma`` false) takes the same walk with direct stores of
// the pairs (the kernels' own test is 16-bit C's 8-column grid; boxes across a column N off the 16-byte grid were
// once found to write past N): one walk, so the chunk's registers are the same either way.
struct CummStageFp8 {
    static constexpr int BOX = 4096;
    const CummAlpha& al;
    float s;   // the scale (cumm_epi_scale)
    bool tma;  // the tile's columns end on the 16-byte grid
    template <class E, class D>
    __device__ __forceinline__ bool stage(E& e, const D& d, int m, int half, int nb, int bn0, int row0, int z) const {
        unsigned short v[16][2];
#pragma unroll
        for (int jj = 0; jj < 16; ++jj)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int j = half * 16 + jj;
                if (jj < 8 * nb)
                    v[jj][h] = cumm_f2fp8x2<CUMM_EPI_FP8>(s * d[m][4 * j + 2 * h], s * d[m][4 * j + 2 * h + 1]);
            }
        if (tma) {
            e.put(v, nb, [&](int jj, int r) {
                const int piece = ((jj % 8) / 2) ^ ((r >> 1) & 3);  // (the 64-byte swizzle)
                return reinterpret_cast<unsigned short*>(e.cs + (jj / 8) * 4096 + r * 64 + piece * 16 + (jj % 2) * 8 +
                                                         2 * e.t4);
            });
            return true;
        }
#pragma unroll
        for (int h = 0; h < 2; ++h) {  // (C's rows on 16 bytes: every pair is 2-byte aligned)
            const int row = row0 + m * 64 + e.warp * 16 + e.g + 8 * h;
            if (row >= al.M) continue;
            unsigned char* crow = static_cast<unsigned char*>(const_cast<void*>(al.c)) + z * al.bsc + row * al.ldc;
#pragma unroll
            for (int jj = 0; jj < 16; ++jj) {
                const int col = bn0 + half * 128 + 8 * jj + 2 * e.t4;
                if (jj >= 8 * nb || col >= al.N) continue;
                if (col + 1 < al.N) {
                    *reinterpret_cast<unsigned short*>(crow + col) = v[jj][h];
                } else {
                    crow[col] = (unsigned char)(v[jj][h] & 0xffu);
                }
            }
        }
        return false;
    }
};
template <int TN>
__device__ __forceinline__ CummStageFp8 cumm_stage_fp8(const CummAlpha& al, int bn0) {
    return CummStageFp8{al, cumm_epi_scale(al), al.N % 16 == 0 || bn0 + TN <= al.N};
}
#endif

#ifndef CUMM_EPI_GLU
template <int MT, int R, int VEC>
__device__ __forceinline__ void cumm_store_tile(const float (&d)[MT][R], cumm_out_t* C, i64 coff, int ldc, int M,
                                                int N, int row0, int col0, int warp, int g, int t4,
                                                const CummAlpha& al, float beta) {
    cumm_epi_tile<MT, R>(d, al, row0, col0, al.bsc ? (int)(coff / al.bsc) : 0, warp, g, t4);
    cumm_epi_store<MT, R, VEC>(d, C, coff, ldc, M, N, row0, col0, warp, g, t4, al, beta);
}

// The TMA-store path: the same epilogue on the registers, a staging chunk's columns at a time just before the
// chunk is converted (CummTmaEpilogue::store's hook), then the unchanged staging and copy-engine store: a chunk's
// math runs while the copy engine reads the previous chunk out of the staging buffer. The hook is called per
// (m64 block, column half), blocks outermost; at block 0 it runs every block's rows of the half (the later calls find
// them done, before their conversion),
// column by column, so a per-column operand (bias) is read once for the 2 MT elements of a thread's column
// instead of once per block.
struct CummEpiChunk {
    const CummAlpha& al;
    int row0, col0, z, warp, g, t4;
    template <bool CLAMP, int MT, int R>
    __device__ __forceinline__ void run(float (&d)[MT][R], int half) const {
#pragma unroll
        for (int jj = 0; jj < 16; ++jj)
#pragma unroll
            for (int i = 0; i < 2; ++i)
#pragma unroll
                for (int m = 0; m < MT; ++m)
#pragma unroll
                    for (int h = 0; h < 2; ++h) {
                        const int j = half * 16 + jj;
                        if (j < R / 4)
                            d[m][4 * j + 2 * h + i] = cumm_epi_at<CLAMP>(al, d[m][4 * j + 2 * h + i],
                                                                         row0 + m * 64 + warp * 16 + g + 8 * h,
                                                                         col0 + 8 * j + 2 * t4 + i, z);
                    }
    }
    template <int MT, int R>
    __device__ __forceinline__ void operator()(const float (&dc)[MT][R], int m, int half) const {
        if (m != 0) return;  // (done at block 0)
        float(&d)[MT][R] = const_cast<float(&)[MT][R]>(dc);
        if (row0 + MT * 64 <= al.M && col0 + 2 * R <= al.N)  // the tile wholly inside C (warp-uniform)
            run<false>(d, half);
        else
            run<true>(d, half);
    }
};
template <int MT, int TN, int B3D>
struct CummTmaEpilogueE : CummTmaEpilogue<MT, TN, B3D> {
    using CummTmaEpilogue<MT, TN, B3D>::store;
    __device__ __forceinline__ void store(const float (&d)[MT][TN / 2], int bn0, int row0, int z,
                                          const CummAlpha& al, float beta) {
        const CummEpiChunk pre{al, row0, bn0, z, this->warp, this->g, this->t4};
#ifdef CUMM_EPI_FP8
        this->walk(d, bn0, row0, z, cumm_stage_fp8<TN>(al, bn0), pre);
#else
        CummTmaEpilogue<MT, TN, B3D>::store(d, bn0, row0, z, 1.0f, beta, pre);
#endif
    }
};
#else   // ---- GLU: pairs of 8-column blocks -------------------------------------------------------------
// Column blocks j (even: gate) and j + 1 (up) of a thread's fragment hold the same r = 2 t4 (+ 1) of the same
// rows: the pair is in its registers, and the pairs of a tile form the fragment of a tile of R / 4 column blocks
// at column col0 / 2 of C, which the unchanged stores write (bounds: CummAlpha's M and N, C's).
__device__ __forceinline__ float cumm_epi_glu(const CummAlpha& al, float gate, float up, int row, int col, int z) {
    float v = CUMM_CAT(CUMM_EPI_GLU, _a)(gate, al.a) * (al.a * up);
    cumm_epi_user(v, min(row, al.M - 1), min(col, al.N - 1), z, al);
    return v;
}

// e = the pairs of d (a tile of R / 2 columns at col0 of the product): C's fragment at col0 / 2.
template <int MT, int R>
__device__ __forceinline__ void cumm_glu_pairs(const float (&d)[MT][R], float (&e)[MT][R / 2], const CummAlpha& al,
                                               int row0, int col0, int z, int warp, int g, int t4) {
    static_assert(R % 8 == 0, "GLU pairs 8-column blocks: a tile of a multiple of 16 columns");
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int q = 0; q < R / 8; ++q)
#pragma unroll
                for (int i = 0; i < 2; ++i)
                    e[m][4 * q + 2 * h + i] =
                        cumm_epi_glu(al, d[m][8 * q + 2 * h + i], d[m][8 * q + 4 + 2 * h + i],
                                     row0 + m * 64 + warp * 16 + g + 8 * h, col0 / 2 + 8 * q + 2 * t4 + i, z);
}

template <int MT, int R, int VEC>
__device__ __forceinline__ void cumm_store_tile(const float (&d)[MT][R], cumm_out_t* C, i64 coff, int ldc, int M,
                                                int N, int row0, int col0, int warp, int g, int t4,
                                                const CummAlpha& al, float beta) {
    float e[MT][R / 2];
    cumm_glu_pairs<MT, R>(d, e, al, row0, col0, al.bsc ? (int)(coff / al.bsc) : 0, warp, g, t4);
    cumm_epi_store<MT, R / 2, VEC>(e, C, coff, ldc, al.M, al.N, row0, col0 / 2, warp, g, t4, al, beta);
}

// The TMA store of C's half-width tile: the staging and copy-engine store of a tile of TN / 2 columns at bn0 / 2,
// through C's map (the host makes it C's width, N / 2). A half tile that is not whole 64-column boxes (TN = 64,
// 192) is stored directly (C's base and strides from CummAlpha).
template <int MT, int TN, int B3D>
struct CummTmaEpilogueE : CummTmaEpilogue<MT, TN, B3D> {
    using Half = CummTmaEpilogue<MT, TN / 2, B3D>;
    static constexpr bool kTma = (TN / 2) % 64 == 0;
    using CummTmaEpilogue<MT, TN, B3D>::store;
    __device__ __forceinline__ Half half() const {
        return Half{this->cs, this->map, this->bar, this->bar_id, this->wtid, this->warp, this->g, this->t4, this->cph};
    }
    __device__ __forceinline__ void prefetch(int bn0, int row0, int z) {
        if constexpr (kTma) half().prefetch(bn0 / 2, row0, z);
    }
    __device__ __forceinline__ void store(const float (&d)[MT][TN / 2], int bn0, int row0, int z,
                                          const CummAlpha& al, float beta) {
        float e[MT][TN / 4];
        cumm_glu_pairs<MT, TN / 2>(d, e, al, row0, bn0, z, this->warp, this->g, this->t4);
        if constexpr (kTma) {
#ifdef CUMM_EPI_FP8
            half().walk(e, bn0 / 2, row0, z, cumm_stage_fp8<TN / 2>(al, bn0 / 2), CummNoPre{});
#else
            Half h = half();
            h.store(e, bn0 / 2, row0, z, 1.0f, beta);
            this->cph = h.cph;  // (C's chunks waited for with beta != 0)
#endif
        } else {
            cumm_epi_store<MT, TN / 4, VEC_C>(e, static_cast<cumm_out_t*>(const_cast<void*>(al.c)), z * al.bsc,
                                             (int)al.ldc, al.M, al.N, row0, bn0 / 2, this->warp, this->g, this->t4, al,
                                             beta);
        }
    }
};
#endif  // CUMM_EPI_GLU
#define CummTmaEpilogue CummTmaEpilogueE
#endif  // CUMM_EPI_SM90
#endif  // CUMM_MMA_T

// The kernels' argument lists with alpha as a CummAlpha (the macros expand where the kernel is declared, below).
#undef CUMM_GEMM_ARGS
#if CUMM_BATCHED
#define CUMM_GEMM_ARGS                                                                         \
    const int M, const int N, int K, CummAlpha alpha,                                          \
    const float* __restrict__ A, const int lda, const float* __restrict__ B, const int ldb,    \
    float beta, float* __restrict__ C, const int ldc, const i64 bsa, const i64 bsb, const i64 bsc
#else
#define CUMM_GEMM_ARGS                                                                         \
    const int M, const int N, int K, CummAlpha alpha,                                          \
    const float* __restrict__ A, const int lda, const float* __restrict__ B, const int ldb,    \
    float beta, float* __restrict__ C, const int ldc
#endif
#ifdef CUMM_GEMM16_ARGS
#undef CUMM_GEMM16_ARGS
#if CUMM_BATCHED
#define CUMM_GEMM16_ARGS                                                                               \
    const int M, const int N, const int K, const CummAlpha alpha, const cumm_h16* __restrict__ A,      \
    const int lda, const cumm_h16* __restrict__ B, const int ldb, const float beta,                     \
    cumm_out_t* __restrict__ C, const int ldc, const i64 bsa, const i64 bsb, const i64 bsc
#else
#define CUMM_GEMM16_ARGS                                                                               \
    const int M, const int N, const int K, const CummAlpha alpha, const cumm_h16* __restrict__ A,      \
    const int lda, const cumm_h16* __restrict__ B, const int ldb, const float beta,                     \
    cumm_out_t* __restrict__ C, const int ldc
#endif
#endif
