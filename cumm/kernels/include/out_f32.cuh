// out_f32.cuh: rendered before tc16.cuh by a rung whose inputs are float32 but whose wgmma read 16-bit pieces of
// them (23_wgmma_f16x3): C is float32 (OUT_F32) and the pieces are float16 (CUMM_BF16 = 0, tc16.cuh's default).
#define OUT_F32 1
