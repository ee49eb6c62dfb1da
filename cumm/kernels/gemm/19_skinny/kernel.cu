// skinny: a product with few rows of A (decode: M = 1 to 64) is bound by reading B once, not by arithmetic:
// 1 x 4096 x 4096 in FP32 is 67 MB of B for 34 MFLOP, 14 us at the H200's 4.8 TB/s and 0.5 us of FP32 FMA. The
// tiled rungs spend that time badly: a 128-row tile multiplies 127 rows of zeros (wgmma_tf32x3: three products
// each), and 4096 / 128 = 32 tiles leave 100 of the 132 multiprocessors without work (auto 0.23x cuBLAS there).
// What changes from the tiled rungs, and why it is faster here:
// - No tile of A or B in shared memory, no tensor cores: each thread streams its own 16-byte pieces of B from
//   global memory and multiplies them by A in plain FP32 FMA (true FP32, no split: it is the accurate rung too).
// - The block's threads split K as well as N: thread (kg, cn) of TK = NUM_THREADS / (BN / 4) k-groups takes
//   columns 4 cn .. 4 cn + 3 of the block's BN and the 4-deep k-chunks kg, kg + TK, ..., so a narrow block
//   (BN = 16: 256 blocks of 1024 threads at N = 4096, the GPU's threads filled) still has NUM_THREADS loads in
//   flight, and the next U chunks are loaded while this U's are multiplied (4 U 16-byte loads of B a thread in
//   flight): what keeps HBM busy is bytes in flight, about 36 KB a multiprocessor at 4.8 TB/s and ~1 us.
// - A (BM rows) is read as 16-byte pieces A[m][4c .. 4c + 3] through L1: every lane of a warp with one k-group
//   reads the same piece (one transaction), and A is small enough to stay in L1 / L2.
// - The k-groups' partial sums meet once, in shared memory, after the whole K: one __syncthreads per block.
// Prediction: within 10 % of reading B at the bandwidth cuBLAS's GEMV reaches (1 x 4096 x 4096: 0.9-1.1x
// cuBLAS FP32), against 0.23x for auto before; worse than the tiled rungs once M passes ~32 (the FMAs of BM rows
// per loaded piece of B grow with M while the tensor-core rungs' cost does not).
// Any M, N, K: rows past M and columns past N are not stored, k past K reads as zero (cumm_load4's bounds);
// unaligned operands take cumm_load4's scalar path (VEC_A / VEC_B = 0). Grid: (ceil(N / BN), ceil(M / BM),
// batch); block NUM_THREADS; shared memory TK * BM * BN floats for the reduction (none when TK = 1).

extern "C" __global__ void __launch_bounds__(NUM_THREADS, 1) CUMM_KERNEL(CUMM_GEMM_ARGS) {
    constexpr int TN = BN / 4, TK = NUM_THREADS / TN;  // column threads (four columns each), k-groups
    CUMM_BATCH();  // grid z: this block's product of the batch (common.cuh)
    extern __shared__ float4 red[];  // [TK][BM][TN]: each k-group's partial sums
    const int tid = threadIdx.x, cn = tid % TN, kg = tid / TN;
    const int m0 = blockIdx.y * BM, col = blockIdx.x * BN + 4 * cn;
    const float* const a0 = A + (i64)m0 * lda;
    const int chunks = (K + 3) / 4;

    float4 acc[BM];
#pragma unroll
    for (int m = 0; m < BM; ++m) acc[m] = make_float4(0.f, 0.f, 0.f, 0.f);

    // Chunks c0, c0 + TK, ..., c0 + (U - 1) TK of this thread: U four-row pieces of B and BM pieces of A each.
    // The next U chunks are loaded before this U's FMAs (software pipelining): a thread always has loads in
    // flight, instead of one round trip to memory per U chunks.
    float4 b[U][4], x[U][BM], nb[U][4], nx[U][BM];
    auto load = [&](int c0, float4 (&bb)[U][4], float4 (&xx)[U][BM]) {
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const int c = c0 + u * TK, k = 4 * c;
            const bool ok = c < chunks;
#pragma unroll
            for (int r = 0; r < 4; ++r) bb[u][r] = cumm_load4<VEC_B>(B + (i64)(k + r) * ldb, col, N, ok && k + r < K);
#pragma unroll
            for (int m = 0; m < BM; ++m) xx[u][m] = cumm_load4<VEC_A>(a0 + (i64)m * lda, k, K, ok && m0 + m < M);
        }
    };
    load(kg, b, x);
    for (int c0 = kg; c0 < chunks; c0 += U * TK) {
        if (c0 + U * TK < chunks) load(c0 + U * TK, nb, nx);
#pragma unroll
        for (int u = 0; u < U; ++u)
#pragma unroll
            for (int m = 0; m < BM; ++m) {
                const float4 a = x[u][m];
                acc[m].x += a.x * b[u][0].x + a.y * b[u][1].x + a.z * b[u][2].x + a.w * b[u][3].x;
                acc[m].y += a.x * b[u][0].y + a.y * b[u][1].y + a.z * b[u][2].y + a.w * b[u][3].y;
                acc[m].z += a.x * b[u][0].z + a.y * b[u][1].z + a.z * b[u][2].z + a.w * b[u][3].z;
                acc[m].w += a.x * b[u][0].w + a.y * b[u][1].w + a.z * b[u][2].w + a.w * b[u][3].w;
            }
#pragma unroll
        for (int u = 0; u < U; ++u) {
#pragma unroll
            for (int r = 0; r < 4; ++r) b[u][r] = nb[u][r];
#pragma unroll
            for (int m = 0; m < BM; ++m) x[u][m] = nx[u][m];
        }
    }

    if (TK == 1) {  // one k-group: this thread holds its columns' sums
#pragma unroll
        for (int m = 0; m < BM; ++m)
            if (m0 + m < M) cumm_store4<VEC_C>(C + (i64)(m0 + m) * ldc, col, N, acc[m], alpha, beta);
        return;
    }
#pragma unroll
    for (int m = 0; m < BM; ++m) red[(kg * BM + m) * TN + cn] = acc[m];
    __syncthreads();
    // Each thread sums the k-groups' partials of outputs o = tid, tid + NUM_THREADS, ... (row o / TN, columns
    // 4 (o % TN) ..): consecutive threads read consecutive 16-byte pieces.
    for (int o = tid; o < BM * TN; o += NUM_THREADS) {
        const int m = o / TN, q = o % TN;
        if (m0 + m >= M) continue;
        float4 s = red[o];
        for (int g = 1; g < TK; ++g) {
            const float4 v = red[g * BM * TN + o];
            s.x += v.x;
            s.y += v.y;
            s.z += v.z;
            s.w += v.w;
        }
        cumm_store4<VEC_C>(C + (i64)(m0 + m) * ldc, blockIdx.x * BN + 4 * q, N, s, alpha, beta);
    }
}
