// fp8_cvt.cuh: FP32 to FP8 and a pair of FP8 bytes to a row of C, for the stores that write an FP8 C: the FP8 rungs'
// (include/fp8_out.cuh) and the 16-bit rungs' fused epilogue (include/epilogue.cuh, CUMM_EPI_FP8). Rendered just
// before those headers, only into variants that store FP8, so no other variant's source or hash changes.
// FMT is C's format: 3 float8_e4m3fn, 4 float8_e5m2 (the FP8 rungs' OUT codes).
// cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32 (sm_89+) rounds two floats to nearest even and packs them into 16 bits, lo
// in the low byte (the lower column). Saturating, the only form PTX has of these conversions from f32 (CUTLASS's
// converters use it): a value past the format's largest finite one (e4m3: 448, e5m2: 57344), infinities included,
// becomes that value with its sign; NaN stays NaN.
template <int FMT>
__device__ __forceinline__ unsigned short cumm_f2fp8x2(float lo, float hi) {
    static_assert(FMT == 3 || FMT == 4, "FP8 formats: 3 (float8_e4m3fn) or 4 (float8_e5m2)");
    unsigned short r;
    if constexpr (FMT == 3)
        asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
    else
        asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
    return r;
}

// Columns col and col + 1 (col even) of a row of FP8 bytes as x and y; a column at or past ncols is not stored.
// pair: the row and col are 2-byte aligned, so two values in bounds are one 2-byte store (a quad's four pairs are 8
// consecutive bytes of the row).
template <int FMT>
__device__ __forceinline__ void cumm_fp8_pair(unsigned char* crow, int col, int ncols, float x, float y, bool pair) {
    const unsigned short q = cumm_f2fp8x2<FMT>(x, y);
    if (pair && col + 1 < ncols) {
        *reinterpret_cast<unsigned short*>(crow + col) = q;
    } else {
        if (col < ncols) crow[col] = (unsigned char)(q & 0xffu);
        if (col + 1 < ncols) crow[col + 1] = (unsigned char)(q >> 8);
    }
}
