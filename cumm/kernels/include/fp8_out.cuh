// fp8_out.cuh: FP8 output for the FP8 rungs (17_fp8_wgmma, 18_fp8_block_scaled): C = cast(v * scale_result), one
// byte an element, e4m3 (OUT = 3) or e5m2 (OUT = 4), v the FP32 result after the rung's scales: the fused "cast to
// FP8 with a scale" of a model's next FP8 layer (torch._scaled_mm(..., scale_result=, out_dtype=float8)).
// Rendered only for those variants (cumm/runtime/render.py), after the spec's headers and before the template, so
// the rungs' templates and headers -- and every other variant's source, hash and tuned entries -- stay as they were:
// - The kernel gains a first parameter, scale_result (a device pointer to one float32): CUMM_KERNEL becomes a
//   function-like macro that prepends it to the template's parameter list (CUMM_FP8_OUT_KERNEL: the name).
// - The template's store, cumm_fp8_store<MT, TN, VEC, TMA>(epi, d, C, ...), becomes CummFp8Out's, which reads the
//   scale and converts pairs (include/fp8_cvt.cuh, rendered just before this header: round to nearest even,
//   saturating; cuBLAS's own overflow handling is not measured, docs/beyond.md).
// - Direct stores, through sm90.cuh's cumm_store_rows (the 16-bit stores' walk): the wgmma fragment holds column
//   pairs (2 t4, 2 t4 + 1) of rows g and g + 8, so a thread stores 2-byte pairs (when C is 16-byte aligned with
//   ldc % 16 == 0, VEC_C; else bytes) and a quad's four pairs make 8 consecutive bytes. C is 1 byte an element (half
//   of bf16's), yet these stores cost more than the bytes save (H200, 8192^3: 0.968 ms against the bf16 C's 0.872
//   by the TMA store): the TMA store would need an 8-bit staging layout, boxes of 64 rows x 128 bytes (128
//   columns, one 128-byte swizzled row each), the pairs written into it as 16-bit words, and a C map of bytes
//   (UINT8). EPI = 0 (spec constraint): no staging tile in shared memory, no C map.
// The template's C is cumm_out_t* (16-bit: fp8.cuh leaves OUT_F32 and CUMM_BF16 at 0 for OUT >= 3); it holds the
// byte pointer and is only ever read as bytes here.
#if OUT != 3 && OUT != 4
#error "fp8_out.cuh stores FP8: OUT = 3 (float8_e4m3fn) or 4 (float8_e5m2)"
#endif
#if EPI
#error "FP8 outputs are stored directly: EPI = 0"
#endif

struct CummFp8Out {
    const float* scale;  // scale_result: one float32 on the device

    // A warpgroup's tile (MT m64 blocks of TN columns, rows row0.., columns col0..) to C (bytes, ldc bytes a row)
    // as FP8 of v * scale; rows past M and columns past N are not stored. (TMA and the epilogue object: the
    // template's arguments, unused: EPI = 0.)
    template <int MT, int TN, int VEC, int TMA, class Epi>
    __device__ __forceinline__ void store(Epi&, const float (&d)[MT][TN / 2], cumm_out_t* __restrict__ C, int ldc,
                                          int M, int N, int row0, int col0, int warp, int g, int t4) const {
        const float s = __ldg(scale);
        cumm_store_rows<MT, TN / 2>(
            d, reinterpret_cast<unsigned char*>(C), 0, ldc, M, row0, col0, warp, g, t4,
            [&](unsigned char* crow, int col, float x, float y) {
                cumm_fp8_pair<OUT>(crow, col, N, x * s, y * s, VEC);  // (VEC: C and ldc on 16 bytes)
            });
    }
};

// The template's store and kernel name, as above (scale_result: the kernel's first parameter).
#define cumm_fp8_store CummFp8Out{cumm_scale_result}.store
#undef CUMM_KERNEL
#define CUMM_KERNEL(...) CUMM_FP8_OUT_KERNEL(const float* __restrict__ cumm_scale_result, __VA_ARGS__)
