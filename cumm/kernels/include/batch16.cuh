// batch16.cuh: the batched variant's arguments for the half-precision mma.sync rungs (11_mma,
// 12_mma_swizzled_pipeline), rendered after tc16.cuh. As common.cuh's CUMM_GEMM_ARGS for the FP32 rungs:
// a batched variant (CUMM_BATCHED = 1) takes A's, B's and C's batch strides (elements; 0 broadcasts an operand)
// after the product's arguments, and its kernel starts with CUMM_BATCH(), which moves A, B and C to product
// blockIdx.z. The unbatched variant's arguments are tc16.cuh's, unchanged (and CUMM_BATCH() is empty).
#if CUMM_BATCHED
#define CUMM_GEMM16_BATCH_ARGS CUMM_GEMM16_ARGS, const i64 bsa, const i64 bsb, const i64 bsc
#else
#define CUMM_GEMM16_BATCH_ARGS CUMM_GEMM16_ARGS
#endif
// A TMA rung's product in its operand's 3-D map (16_wgmma_cluster_split_k): blockIdx.z, or matrix 0 of an operand
// broadcast over the batch (batch stride 0: a map of one matrix); 0 in the unbatched variant (2-D maps, z unused).
#if CUMM_BATCHED
#define CUMM_BATCH_Z(bs_) ((bs_) ? (int)blockIdx.z : 0)
#else
#define CUMM_BATCH_Z(bs_) 0
#endif
