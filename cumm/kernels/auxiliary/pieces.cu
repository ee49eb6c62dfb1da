// pieces: the FP16 pieces of FP32 operands that 23_wgmma_f16x3 multiplies (cumm/plan/pieces.py). A row of A (a
// column of B) is scaled by 2^s, s its shift: its largest finite magnitude into [2^14, 2^15) (s = 0 for a row of
// zeros); each scaled x becomes hi = fp16(x) and lo = fp16(x - hi), both rounded to nearest. Scaling by a power of
// two is exact, and it keeps lo in FP16's normal range (from 2^-14) for every x within 2^-18 of the row's largest.
// A (M x K, row stride lda) -> rows of [hi | lo] (2 KP halves, KP = K rounded up to 64, zeros past K), then the M
// shifts as ints; B (K x N, ldb) -> rows [hi; lo] (2 KP rows of ldp halves, zero rows past K), then the N shifts.
// Compiled after common.cuh and tc16.cuh (its FP16 conversions, cumm_f2h and cumm_h2f: CUMM_BF16 = 0), no #defines.

// The shift that brings the largest finite magnitude mx into [2^14, 2^15)
__device__ __forceinline__ int cumm_pieces_shift(float mx) {
    int e;
    frexpf(mx, &e);  // mx = f 2^e, f in [0.5, 1)
    return mx > 0.0f ? 15 - e : 0;
}
// |x| where finite, else 0 (an infinity or NaN does not set the scale)
__device__ __forceinline__ float cumm_pieces_mag(float x) {
    const float m = fabsf(x);
    return m <= 3.402823466e38f ? m : 0.0f;
}
// hi and lo of two scaled values, each pair packed in a word (the first in the low half)
__device__ __forceinline__ void cumm_pieces_split2(float x0, float x1, int s0, int s1, unsigned& hi, unsigned& lo) {
    const float y0 = ldexpf(x0, s0), y1 = ldexpf(x1, s1);
    const cumm_h16 h0 = cumm_f2h(y0), h1 = cumm_f2h(y1);
    hi = h0 | (unsigned)h1 << 16;
    lo = cumm_f2h(y0 - cumm_h2f(h0)) | (unsigned)cumm_f2h(y1 - cumm_h2f(h1)) << 16;
}

// A: one block of 256 threads per row (blocks stride over rows): the row's largest finite magnitude, then its
// pieces, two values a thread per step (one word of hi, one of lo). The second read of the row finds it in L1/L2.
// It also zeroes B's column maxima mx (N of them) for cumm_pieces_colmax, which runs after it.
extern "C" __global__ void __launch_bounds__(256) cumm_pieces_rows(const int M, const int K, const float* __restrict__ a,
                                                                   const i64 lda, const int KP, unsigned* __restrict__ out,
                                                                   int* __restrict__ shift, const int N,
                                                                   unsigned* __restrict__ mx) {
    __shared__ float red[8];
    for (int n = blockIdx.x * 256 + threadIdx.x; n < N; n += gridDim.x * 256) mx[n] = 0u;
    for (int r = blockIdx.x; r < M; r += gridDim.x) {
        const float* row = a + (i64)r * lda;
        float m = 0.0f;  // the row's largest finite magnitude
        for (int k = threadIdx.x; k < K; k += 256) m = fmaxf(m, cumm_pieces_mag(row[k]));
        for (int o = 16; o; o >>= 1) m = fmaxf(m, __shfl_xor_sync(~0u, m, o));
        if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = m;
        __syncthreads();
        m = red[0];
        for (int w = 1; w < 8; ++w) m = fmaxf(m, red[w]);
        const int s = cumm_pieces_shift(m);
        unsigned* const o = out + (i64)r * KP;  // the row's 2 KP halves as KP words: hi, then lo
        for (int w = threadIdx.x; w < KP / 2; w += 256) {
            const int k = 2 * w;
            unsigned hi, lo;
            cumm_pieces_split2(k < K ? row[k] : 0.0f, k + 1 < K ? row[k + 1] : 0.0f, s, s, hi, lo);
            o[w] = hi;
            o[KP / 2 + w] = lo;
        }
        if (threadIdx.x == 0) shift[r] = s;
        __syncthreads();  // (red is reused by the next row)
    }
}

// B's columns: the largest finite magnitude of each column over a block's 64 rows, into mx (zeroed by
// cumm_pieces_rows; positive floats order as their bits)
extern "C" __global__ void __launch_bounds__(256) cumm_pieces_colmax(const int K, const int N, const float* __restrict__ b,
                                                                     const i64 ldb, unsigned* __restrict__ mx) {
    const int n = blockIdx.x * 256 + threadIdx.x;
    if (n >= N) return;
    float m = 0.0f;
    for (int k0 = blockIdx.y * 64; k0 < K; k0 += gridDim.y * 64)  // (blocks in y stride past 65535 of them)
        for (int k = k0; k < min(K, k0 + 64); ++k) m = fmaxf(m, cumm_pieces_mag(b[(i64)k * ldb + n]));
    atomicMax(mx + n, __float_as_uint(m));
}

// B's pieces: two columns a thread (a word of each piece's row), blocks in y stride over the KP rows.
extern "C" __global__ void __launch_bounds__(256) cumm_pieces_cols(const int K, const int N, const float* __restrict__ b,
                                                                   const i64 ldb, const int KP, const int ldp,
                                                                   const unsigned* __restrict__ mx,
                                                                   unsigned* __restrict__ out, int* __restrict__ shift) {
    const int n = 2 * (blockIdx.x * 256 + threadIdx.x);
    if (n >= ldp) return;
    const int s0 = n < N ? cumm_pieces_shift(__uint_as_float(mx[n])) : 0;
    const int s1 = n + 1 < N ? cumm_pieces_shift(__uint_as_float(mx[n + 1])) : 0;
    if (blockIdx.y == 0) {
        if (n < N) shift[n] = s0;
        if (n + 1 < N) shift[n + 1] = s1;
    }
    for (int k = blockIdx.y; k < KP; k += gridDim.y) {
        const float* row = b + (i64)k * ldb;
        const bool in = k < K;
        unsigned hi, lo;
        cumm_pieces_split2(in && n < N ? row[n] : 0.0f, in && n + 1 < N ? row[n + 1] : 0.0f, s0, s1, hi, lo);
        out[((i64)k * ldp + n) / 2] = hi;
        out[((i64)(KP + k) * ldp + n) / 2] = lo;
    }
}
