// fp8.cuh: the FP8 rungs' types (17_fp8_wgmma, 18_fp8_block_scaled), rendered before tc16.cuh. The configuration's
// FA / FB pick A's and B's format (0: e4m3, 1: e5m2) and OUT C's type (0: bfloat16, 1: float16, 2: float32); this
// header turns OUT into tc16.cuh's CUMM_BF16 / OUT_F32, so C's conversions and both epilogues of sm90.cuh (direct
// stores, TMA store) serve the FP8 products unchanged. Operands are bytes; accumulation is FP32.
#define CUMM_BF16 (OUT == 0)
#define OUT_F32 (OUT == 2)
#if FA
#define CUMM_FP8_A "e5m2"
#else
#define CUMM_FP8_A "e4m3"
#endif
#if FB
#define CUMM_FP8_B "e5m2"
#else
#define CUMM_FP8_B "e4m3"
#endif
typedef unsigned char cumm_fp8;  // one float8 value, as bits
