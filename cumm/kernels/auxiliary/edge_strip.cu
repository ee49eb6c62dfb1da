// edge_strip: the thin remainders of a product whose last row or column of tiles would cost a whole wave.
// At 4097^3 with 128 x 128 tiles the grid is 33 x 33 blocks instead of 32 x 32: the 65 extra blocks each
// hold one useful row or column but occupy a block slot as long as a full tile, and they add a wave
// (1024 blocks fit in 4 waves of 264 on an H200, 1089 do not): ~20 % slower than 4096^3. cumm/plan/edges.py
// instead runs the GEMM kernel on the tile-aligned part and these kernels on the strips left over
// (at most EDGE_ROWS rows, or columns, thick), which read their operands once.
//
// Both kernels compute partial sums of a thin product P = X @ Y, X: R x K (R <= EDGE_ROWS), Y: K x L, over
// the slice [z * KC, min(K, (z + 1) * KC)) of K for z = blockIdx.y, into W + z * R * L at (i * wi + j * wj);
// cumm_splitk_reduce then sums the slices in order (deterministic) and applies alpha and beta.
// * cumm_edge_rows: the bottom strip. X = the last rows of A (k contiguous), Y = B (j contiguous).
// * cumm_edge_cols: the right strip, transposed. X = the last columns of B (i contiguous, k stride ldb),
//   Y = A read as A^T (k contiguous, j stride lda), so a warp's loads run along k and Y is transposed in
//   shared memory ([k][j], padded: conflict-free both ways).
// A block covers EDGE_JB columns j, one thread each, EDGE_ROWS accumulators per thread; slabs of EDGE_KT.
// Scalar loads only: any pointer and leading dimension is legal; everything past R, L, K is zero-filled.
#define EDGE_ROWS 16
#define EDGE_JB 128
#define EDGE_KT 32

template <bool ROWS>
__device__ __forceinline__ void cumm_edge_strip(const int R, const int L, const int K, const int KC,
                                                const float* __restrict__ X, const int xi, const int xk,
                                                const float* __restrict__ Y, const int yk, const int yj,
                                                float* __restrict__ W, const int wi, const int wj) {
    __shared__ float xs[EDGE_KT][EDGE_ROWS];
    __shared__ float ys[EDGE_KT][EDGE_JB + 1];
    const int tid = threadIdx.x, j0 = blockIdx.x * EDGE_JB, z = blockIdx.y;
    const int k0 = min(z * KC, K), k1 = min(k0 + KC, K);
    float acc[EDGE_ROWS];
#pragma unroll
    for (int i = 0; i < EDGE_ROWS; ++i) acc[i] = 0.0f;

    for (int kb = k0; kb < k1; kb += EDGE_KT) {
        // X slab: EDGE_KT x EDGE_ROWS values, 4 per thread, consecutive threads along X's contiguous axis.
#pragma unroll
        for (int s = 0; s < EDGE_KT * EDGE_ROWS / EDGE_JB; ++s) {
            const int idx = tid + s * EDGE_JB;
            const int kk = ROWS ? idx % EDGE_KT : idx / EDGE_ROWS;
            const int i = ROWS ? idx / EDGE_KT : idx % EDGE_ROWS;
            const int k = kb + kk;
            xs[kk][i] = (i < R && k < k1) ? X[(i64)i * xi + (i64)k * xk] : 0.0f;
        }
        // Y slab: EDGE_KT x EDGE_JB values; ROWS: thread t reads column j0 + t of each row (coalesced);
        // else a warp reads 32 consecutive k of one column j (coalesced along A's rows). All 32 loads of
        // a thread are issued before the first is used: the strips are bound by memory latency.
        float yv[EDGE_KT];
#pragma unroll
        for (int s = 0; s < EDGE_KT; ++s) {
            const int idx = tid + s * EDGE_JB;
            const int kk = ROWS ? s : idx % EDGE_KT;
            const int jj = ROWS ? tid : idx / EDGE_KT;
            const int k = kb + kk, j = j0 + jj;
            yv[s] = (k < k1 && j < L) ? Y[(i64)k * yk + (i64)j * yj] : 0.0f;
        }
#pragma unroll
        for (int s = 0; s < EDGE_KT; ++s) {
            const int idx = tid + s * EDGE_JB;
            const int kk = ROWS ? s : idx % EDGE_KT;
            const int jj = ROWS ? tid : idx / EDGE_KT;
            ys[kk][jj] = yv[s];
        }
        __syncthreads();
#pragma unroll 8
        for (int kk = 0; kk < EDGE_KT; ++kk) {
            const float y = ys[kk][tid];
#pragma unroll
            for (int i = 0; i < EDGE_ROWS; ++i) acc[i] += xs[kk][i] * y;  // xs: a broadcast
        }
        __syncthreads();
    }
    const int j = j0 + tid;
    if (j >= L) return;
    W += (i64)z * R * L + (i64)j * wj;
#pragma unroll
    for (int i = 0; i < EDGE_ROWS; ++i)
        if (i < R) W[(i64)i * wi] = acc[i];
}

extern "C" __global__ void __launch_bounds__(EDGE_JB)
    cumm_edge_rows(const int R, const int L, const int K, const int KC, const float* __restrict__ X, const int xi,
                   const int xk, const float* __restrict__ Y, const int yk, const int yj, float* __restrict__ W,
                   const int wi, const int wj) {
    cumm_edge_strip<true>(R, L, K, KC, X, xi, xk, Y, yk, yj, W, wi, wj);
}

extern "C" __global__ void __launch_bounds__(EDGE_JB)
    cumm_edge_cols(const int R, const int L, const int K, const int KC, const float* __restrict__ X, const int xi,
                   const int xk, const float* __restrict__ Y, const int yk, const int yj, float* __restrict__ W,
                   const int wi, const int wj) {
    cumm_edge_strip<false>(R, L, K, KC, X, xi, xk, Y, yk, yj, W, wi, wj);
}
