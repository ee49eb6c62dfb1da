// repack: copy a row-major float matrix x (rows x cols, row stride ldx) into y (row stride ldy, a multiple
// of 4, 16-byte aligned), zero-filling columns cols .. ldy-1, so that GEMM kernels can load y 16 bytes at
// a time (cumm/plan/repack.py says when this pays). Each thread writes one float4 of y: four coalesced scalar
// loads (x's rows may start anywhere), one 16-byte store. blockIdx.y walks the rows. Compiled after
// common.cuh, no #defines.
extern "C" __global__ void __launch_bounds__(256) cumm_repack(const int rows, const int cols,
                                                              const float* __restrict__ x, const i64 ldx,
                                                              float* __restrict__ y, const int ldy) {
    const int c = (blockIdx.x * blockDim.x + threadIdx.x) * 4;
    if (c >= ldy) return;
    for (int r = blockIdx.y; r < rows; r += gridDim.y) {
        const float* src = x + (i64)r * ldx;
        float4 v;
        v.x = c + 0 < cols ? src[c + 0] : 0.0f;
        v.y = c + 1 < cols ? src[c + 1] : 0.0f;
        v.z = c + 2 < cols ? src[c + 2] : 0.0f;
        v.w = c + 3 < cols ? src[c + 3] : 0.0f;
        *reinterpret_cast<float4*>(y + (i64)r * ldy + c) = v;
    }
}

// unpack: the way back, for an output that the GEMM kernel wrote into a padded, aligned buffer y because C
// itself allows no 16-byte stores (cumm/plan/repack.py): one 16-byte load of y per thread, four coalesced scalar
// stores into x, none past column cols.
extern "C" __global__ void __launch_bounds__(256) cumm_unpack(const int rows, const int cols,
                                                              const float* __restrict__ y, const int ldy,
                                                              float* __restrict__ x, const i64 ldx) {
    const int c = (blockIdx.x * blockDim.x + threadIdx.x) * 4;
    if (c >= cols) return;
    for (int r = blockIdx.y; r < rows; r += gridDim.y) {
        const float4 v = *reinterpret_cast<const float4*>(y + (i64)r * ldy + c);
        float* dst = x + (i64)r * ldx;
        dst[c] = v.x;
        if (c + 1 < cols) dst[c + 1] = v.y;
        if (c + 2 < cols) dst[c + 2] = v.z;
        if (c + 3 < cols) dst[c + 3] = v.w;
    }
}
