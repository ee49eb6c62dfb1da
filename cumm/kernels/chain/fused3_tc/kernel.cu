// fused3_tc: E = A @ B @ C in one launch on tensor cores (the tf32x3 tile engine, FP32 accuracy), for
// row-major A (m x k, lda), B (k x p, ldb), C (p x n, ldc), E (m x n, lde).
//
// Why not fused3's scheme: fused3 keeps T = A @ B in shared memory, so each cluster owns a row panel of
// E and small chains give few, long-running blocks (n = 512: 43 us on the H200, latency-bound). Here
// the launch is persistent instead: the grid is at most what the GPU holds at once, and
//   phase 1  blocks walk the BM x BN tiles of T = A @ B and store them to T (m x p, ldt, from the pool:
//            1 MB at n = 512, so it stays in the 60 MB L2 and never makes a round trip to DRAM);
//   barrier  one grid-wide barrier (grid_barrier.cuh): every tile of T is written and visible;
//   phase 2  blocks walk the tiles of E = T @ C.
// So the second launch and its host cost disappear, and both phases spread over every SM.
// T's leading dimension is a multiple of 4 and its pointer 16-byte aligned (the caller allocates it),
// so phase 2 reads T with 16-byte copies; VEC_C gates C and E together (the caller checks both).

extern "C" __global__ void __launch_bounds__(NUM_THREADS * KS, MINB)
    CUMM_KERNEL(CUMM_CHAIN_ARGS) {
    cumm_grid_dependency_wait();  // (first: see grid_barrier.cuh)
    extern __shared__ float4 smem4[];
    float* const smem = reinterpret_cast<float*>(smem4);
    const int rows = (m + BM - 1) / BM;
    const int cols1 = (p + BN - 1) / BN, cols2 = (n + BN - 1) / BN;
    for (int t = blockIdx.x; t < rows * cols1; t += gridDim.x)
        cumm_tf32x3_tile<VEC_A, VEC_B, 1>(m, p, k, 1.0f, A, lda, B, ldb, 0.0f, T, ldt, t / cols1 * BM,
                                          t % cols1 * BN, smem);
    cumm_grid_barrier(bar);
    for (int t = blockIdx.x; t < rows * cols2; t += gridDim.x)
        cumm_tf32x3_tile<1, VEC_C, VEC_C>(m, n, p, 1.0f, T, ldt, C, ldc, 0.0f, E, lde, t / cols2 * BM,
                                          t % cols2 * BN, smem);
}
