// tf32x3: the first tensor-core rung, with FP32 accuracy. The SIMT rungs are bound by FFMA issue
// (docs/ladder.md: ~85 % of instructions are FFMA, 63 % of the FP32 peak); tensor cores do a 16x8x8
// product per warp instruction instead. TF32 keeps only 10 of FP32's 23 mantissa bits, so each operand
// is split as x = big + small, big = tf32(x), small = tf32(x - big), and the product is
//     a*b ~= big_a*big_b + big_a*small_b + small_a*big_b
// (the dropped small_a*small_b is below 2^-22 of a*b): three mma.sync per product.
// Accumulation: the tensor cores add into their FP32 accumulator rounding toward zero, so a long chain
// of mma shrinks the sum by about half an ulp per step: measured on the H200 at 4096^3, one accumulator
// over all of K gave a relative error of 2.9e-5 (cuBLAS: 1.1e-6), growing linearly with K. So each
// slab (3 * BK/8 mma) is summed in a fresh accumulator that is then added, rounded to nearest, into
// the running sum: the shrinkage is bounded by the 3 * BK/8 steps of one slab, not by K.
// Caveat: an infinite input makes small = inf - inf = NaN, so a product that FP32 would make +-inf
// comes out NaN here (finite inputs whose products stay finite are unaffected).
// Data path: STAGES-deep cp.async pipeline (one barrier per slab), A kept row-major [BM][BK+4] and B
// [BK][BN+8] in shared memory: those paddings make both the 16-byte copies and the 32-bit fragment
// reads of mma.m16n8k8 (lane = 4*g + t reads row g, column t) hit 32 distinct banks.
// Needs sm_80+ (mma.sync tf32, cp.async). The tile code is in tf32x3_tile.cuh (shared with fused3_tc).

extern "C" __global__ void __launch_bounds__(NUM_THREADS, MINB) CUMM_KERNEL(CUMM_GEMM_ARGS) {
    CUMM_SPLIT_K(BK);  // gridDim.z: this block's slice of K, or (batched) its product of the batch (common.cuh)
    extern __shared__ float4 smem4[];
    cumm_tf32x3_tile<VEC_A, VEC_B, VEC_C>(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, blockIdx.y * BM,
                                          blockIdx.x * BN, reinterpret_cast<float*>(smem4));
}
