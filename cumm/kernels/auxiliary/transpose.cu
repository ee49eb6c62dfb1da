// transpose: copy a batch of column-major matrices x (rows x cols each; element (r, c) of matrix b at
// x[b * bsx + r + c * ldx]) into row-major y (y[b * bsy + r * ldy + c]), zero-filling columns cols .. ldy-1,
// so that the GEMM kernels, which read row-major operands, can take a transposed view (torch's w.t(),
// cupy's a.T) without the strided elementwise copy CuPy would make (one of its two sides touches a 32-byte
// sector per element: 0.03-0.5 TB/s on an H100 for 16-bit elements). Here a block moves a 64 x 64 tile
// through shared memory, so that both sides read and write whole rows: a warp reads 64 consecutive elements
// of a column of x and writes 64 consecutive elements of a row of y. The tile's rows are padded (64 + 4 /
// sizeof(T) elements) so that the column reads of the tile hit distinct banks. 16-bit elements move in pairs
// (one 4-byte access for two), the reads when `pairs` says x's columns start on 4 bytes (else one by one),
// the writes always (ldy is even and y 16-byte aligned: the host pads it). Grid: x over row tiles, y over
// column tiles of y (up to ldy), z over the batch, each walking further tiles in strides of the grid.
// Compiled after common.cuh, no #defines.
template <typename T>
__device__ __forceinline__ void cumm_transpose(const int rows, const int cols, const T* __restrict__ x,
                                               const i64 ldx, const i64 bsx, T* __restrict__ y, const i64 ldy,
                                               const i64 bsy, const int count, const int pairs) {
    constexpr int TILE = 64, PAD = TILE + 4 / (int)sizeof(T);
    __shared__ T tile[TILE][PAD];  // tile[c][r]: column c of the x tile, as read
    const int tx = threadIdx.x % 32, ty = threadIdx.x / 32;  // 256 threads: 32 x 8
    const int rtiles = (rows + TILE - 1) / TILE, ctiles = (int)((ldy + TILE - 1) / TILE);
    for (int b = blockIdx.z; b < count; b += gridDim.z)
        for (int ct = blockIdx.y; ct < ctiles; ct += gridDim.y)
            for (int rt = blockIdx.x; rt < rtiles; rt += gridDim.x) {
                const int r0 = rt * TILE, c0 = ct * TILE;
                const T* const xb = x + b * bsx;
                if (sizeof(T) == 2 && pairs) {  // rows 2 tx and 2 tx + 1 of column j in one 4-byte load
#pragma unroll
                    for (int j = ty; j < TILE; j += 8) {
                        const int r = r0 + 2 * tx, c = c0 + j;
                        unsigned v = 0;
                        if (c < cols && r + 1 < rows)
                            v = *reinterpret_cast<const unsigned*>(xb + r + c * ldx);
                        else if (c < cols && r < rows)
                            v = *reinterpret_cast<const unsigned short*>(xb + r + c * ldx);
                        *reinterpret_cast<unsigned*>(&tile[j][2 * tx]) = v;
                    }
                } else {
#pragma unroll
                    for (int j = ty; j < TILE; j += 8)
#pragma unroll
                        for (int h = 0; h < 2; ++h) {
                            const int r = r0 + tx + 32 * h, c = c0 + j;
                            tile[j][tx + 32 * h] = r < rows && c < cols ? xb[r + c * ldx] : T(0);
                        }
                }
                __syncthreads();
                T* const yb = y + b * bsy;
                if (sizeof(T) == 2) {  // columns 2 tx and 2 tx + 1 of row j in one 4-byte store
#pragma unroll
                    for (int j = ty; j < TILE; j += 8) {
                        const int r = r0 + j, c = c0 + 2 * tx;
                        const unsigned lo = *reinterpret_cast<const unsigned short*>(&tile[2 * tx][j]);
                        const unsigned hi = *reinterpret_cast<const unsigned short*>(&tile[2 * tx + 1][j]);
                        if (r < rows && c < ldy) *reinterpret_cast<unsigned*>(yb + r * ldy + c) = lo | hi << 16;
                    }
                } else {
#pragma unroll
                    for (int j = ty; j < TILE; j += 8)
#pragma unroll
                        for (int h = 0; h < 2; ++h) {
                            const int r = r0 + j, c = c0 + tx + 32 * h;
                            if (r < rows && c < ldy) yb[r * ldy + c] = tile[tx + 32 * h][j];
                        }
                }
                __syncthreads();  // the tile is read before the next one overwrites it
            }
}

// 16-bit elements (float16, bfloat16: moved as bits) and 32-bit ones (float32).
extern "C" __global__ void __launch_bounds__(256)
    cumm_transpose_b16(const int rows, const int cols, const unsigned short* __restrict__ x, const i64 ldx,
                       const i64 bsx, unsigned short* __restrict__ y, const i64 ldy, const i64 bsy, const int count,
                       const int pairs) {
    cumm_transpose(rows, cols, x, ldx, bsx, y, ldy, bsy, count, pairs);
}
extern "C" __global__ void __launch_bounds__(256)
    cumm_transpose_b32(const int rows, const int cols, const unsigned* __restrict__ x, const i64 ldx, const i64 bsx,
                       unsigned* __restrict__ y, const i64 ldy, const i64 bsy, const int count, const int pairs) {
    cumm_transpose(rows, cols, x, ldx, bsx, y, ldy, bsy, count, pairs);
}
