// batch16.cuh: the batched variant of the half-precision rungs that run a batch over grid z (11_mma,
// 12_mma_swizzled_pipeline, 16_wgmma_cluster_split_k), rendered after tc16.cuh, whose CUMM_GEMM16_ARGS carry
// A's, B's and C's batch strides in a batched variant (elements; 0 broadcasts an operand). As the FP32 rungs do,
// the kernel starts with CUMM_BATCH() (common.cuh), which moves A, B and C to product blockIdx.z.
// A TMA rung's product in its operand's 3-D map (16_wgmma_cluster_split_k): blockIdx.z, or matrix 0 of an operand
// broadcast over the batch (batch stride 0: a map of one matrix); 0 in the unbatched variant (2-D maps, z unused).
#if CUMM_BATCHED
#define CUMM_BATCH_Z(bs_) ((bs_) ? (int)blockIdx.z : 0)
#else
#define CUMM_BATCH_Z(bs_) 0
#endif
