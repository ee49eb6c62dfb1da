// skinny16: 19_skinny on 16-bit inputs (float16 / bfloat16, FP32 sums; C in the inputs' dtype or float32). A
// product with one row of A (decode, a GEMV) is bound by reading B once: 1 x 128256 x 4096 in bfloat16 is
// 1.05 GB of B for 0.5 GFLOP, 219 us at the H200's 4.8 TB/s. The tensor-core rungs tile it in 64 rows of A
// (wgmma's smallest M), 63 of them zeros, and their stage ring, producer and epilogue cost a fixed time per tile
// that a stream of B does not need. What changes from 19_skinny, and why it suits 16-bit inputs:
// - A 16-byte piece of B is 8 halves, so a thread takes 8 columns and a chunk of K is 8 rows (A's piece at k is
//   8 halves too): half the loads of FP32 for the same bytes, and each piece converted to FP32 in registers (one
//   instruction a value) before plain FP32 FMA, so the sums are as accurate as the tensor cores' FP32
//   accumulation (no HFMA2, whose sums would round to 16 bits).
// - The FMA work is 8 x BM per 16 bytes of B against 8 conversions: at M = 1 about 1 instruction a byte of B
//   spread over 132 x 128 lanes, far under the time of reading B.
// Kept from 19: the threads of a block split K as well as N (thread (kg, cn) of TK = NUM_THREADS / (BN / 8)
// k-groups takes columns 8 cn .. 8 cn + 7 of the block's BN and the chunks kg, kg + TK, ...), the next U chunks
// are loaded while this U's are multiplied, and the k-groups' partial sums meet once in shared memory.
// Prediction: 1 x 128256 x 4096 within ~5 % of cuBLAS's GEMV (0.92x for the tiled rungs in bfloat16); at M = 16
// about the tiled rungs. Measured (H200, CUDA events, B past L2, against torch.matmul): M = 1 as predicted:
// 1 x 128256 x 4096 0.95x (bf16) and 1.03x (fp16), 1 x 14336 x 4096 0.97x where auto ran 0.63x, 1 x 4096 x 4096
// 1.20x (bf16); M = 4 to 16 0.25-0.65x, not FMA-bound (M = 4 x 6144 x 4096 is 3 us of FMA, it took 30 us) but
// latency-bound: a thread walks its 16 chunks one after another with one chunk in flight, and BM > 1 takes the
// registers that would hold more. So the tuner races it at M = 1 only (race_max_m).
// Any M, N, K: rows past M and columns past N are not stored, k past K reads as zero; unaligned operands
// (VEC_A / VEC_B = 0) take the element-wise path. Grid: (ceil(N / BN), ceil(M / BM), batch); block NUM_THREADS;
// shared memory TK * BM * BN floats for the reduction (none when TK = 1).

// 8 halves of a row (columns col .. col + 7) as four words (column col + 2 w in word w's low half); zeros past
// ncols and for a row out of range. One 16-byte load when VEC (the row and col on 16 bytes) and all 8 are in range.
template <int VEC>
__device__ __forceinline__ uint4 cumm_load8h(const cumm_h16* __restrict__ row, int col, int ncols, bool row_ok) {
    if (!row_ok) return make_uint4(0u, 0u, 0u, 0u);
    if (VEC && col + 7 < ncols) return *reinterpret_cast<const uint4*>(row + col);
    unsigned w[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
        const unsigned lo = col + 2 * e < ncols ? row[col + 2 * e] : 0u;
        const unsigned hi = col + 2 * e + 1 < ncols ? row[col + 2 * e + 1] : 0u;
        w[e] = lo | hi << 16;
    }
    return make_uint4(w[0], w[1], w[2], w[3]);
}

// value e (0..7) of a piece, as FP32
__device__ __forceinline__ float cumm_piece(const uint4& p, int e) {
    const unsigned w = e < 2 ? p.x : e < 4 ? p.y : e < 6 ? p.z : p.w;
    return cumm_h2f((cumm_h16)(e % 2 ? w >> 16 : w & 0xffffu));
}

extern "C" __global__ void __launch_bounds__(NUM_THREADS, 1) CUMM_KERNEL(CUMM_GEMM16_ARGS) {
    constexpr int TN = BN / 8, TK = NUM_THREADS / TN;  // column threads (eight columns each), k-groups
    CUMM_BATCH();  // grid z: this block's product of the batch (common.cuh)
    extern __shared__ float4 red[];  // [TK][BM][TN][2]: each k-group's partial sums
    const int tid = threadIdx.x, cn = tid % TN, kg = tid / TN;
    const int m0 = blockIdx.y * BM, col = blockIdx.x * BN + 8 * cn;
    const cumm_h16* const a0 = A + (i64)m0 * lda;
    const int chunks = (K + 7) / 8;

    float acc[BM][8];
#pragma unroll
    for (int m = 0; m < BM; ++m)
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[m][e] = 0.0f;

    // Chunks c0, c0 + TK, ..., c0 + (U - 1) TK of this thread: U eight-row pieces of B and BM pieces of A each,
    // the next U loaded before this U's FMAs (a thread always has loads in flight).
    uint4 b[U][8], x[U][BM], nb[U][8], nx[U][BM];
    auto load = [&](int c0, uint4 (&bb)[U][8], uint4 (&xx)[U][BM]) {
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const int c = c0 + u * TK, k = 8 * c;
            const bool ok = c < chunks;
#pragma unroll
            for (int r = 0; r < 8; ++r) bb[u][r] = cumm_load8h<VEC_B>(B + (i64)(k + r) * ldb, col, N, ok && k + r < K);
#pragma unroll
            for (int m = 0; m < BM; ++m) xx[u][m] = cumm_load8h<VEC_A>(a0 + (i64)m * lda, k, K, ok && m0 + m < M);
        }
    };
    load(kg, b, x);
    for (int c0 = kg; c0 < chunks; c0 += U * TK) {
        if (c0 + U * TK < chunks) load(c0 + U * TK, nb, nx);
#pragma unroll
        for (int u = 0; u < U; ++u)
#pragma unroll
            for (int r = 0; r < 8; ++r) {
                float bv[8];  // row k + r of the piece, as FP32 (converted once for the BM rows)
#pragma unroll
                for (int e = 0; e < 8; ++e) bv[e] = cumm_piece(b[u][r], e);
#pragma unroll
                for (int m = 0; m < BM; ++m) {
                    const float a = cumm_piece(x[u][m], r);
#pragma unroll
                    for (int e = 0; e < 8; ++e) acc[m][e] += a * bv[e];
                }
            }
#pragma unroll
        for (int u = 0; u < U; ++u) {
#pragma unroll
            for (int r = 0; r < 8; ++r) b[u][r] = nb[u][r];
#pragma unroll
            for (int m = 0; m < BM; ++m) x[u][m] = nx[u][m];
        }
    }

    if (TK == 1) {  // one k-group: this thread holds its columns' sums
#pragma unroll
        for (int m = 0; m < BM; ++m)
            if (m0 + m < M)
#pragma unroll
                for (int e = 0; e < 8; e += 2)
                    cumm_store_pair<VEC_C>(C + (i64)(m0 + m) * ldc, col + e, N, acc[m][e], acc[m][e + 1], alpha, beta);
        return;
    }
#pragma unroll
    for (int m = 0; m < BM; ++m) {
        float4* const p = red + 2 * ((kg * BM + m) * TN + cn);
        p[0] = make_float4(acc[m][0], acc[m][1], acc[m][2], acc[m][3]);
        p[1] = make_float4(acc[m][4], acc[m][5], acc[m][6], acc[m][7]);
    }
    __syncthreads();
    // Each thread sums the k-groups' partials of outputs o = tid, tid + NUM_THREADS, ... (row o / TN, columns
    // 8 (o % TN) ..): consecutive threads read consecutive 32-byte pieces.
    for (int o = tid; o < BM * TN; o += NUM_THREADS) {
        const int m = o / TN, q = o % TN;
        if (m0 + m >= M) continue;
        float s[8];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const float4 v = red[2 * o + h];
            s[4 * h] = v.x, s[4 * h + 1] = v.y, s[4 * h + 2] = v.z, s[4 * h + 3] = v.w;
        }
        for (int g = 1; g < TK; ++g)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const float4 v = red[2 * (g * BM * TN + o) + h];
                s[4 * h] += v.x, s[4 * h + 1] += v.y, s[4 * h + 2] += v.z, s[4 * h + 3] += v.w;
            }
        const int c = blockIdx.x * BN + 8 * q;
#pragma unroll
        for (int e = 0; e < 8; e += 2)
            cumm_store_pair<VEC_C>(C + (i64)(m0 + m) * ldc, c + e, N, s[e], s[e + 1], alpha, beta);
    }
}
