"""Probe: FP32 products from FP16 pieces through cumm's fp16 kernel over 3K. Rows of A / columns of B scaled by
powers of two (max into [2^14, 2^15)); A_cat = [Al|Ah|Ah], B_cat = [Bh;Bl;Bh]; C = 2^-(ea+eb) * A_cat @ B_cat.
python pieces.py [--warm] [order]   (order: concat | inter)"""
import statistics, sys
import cupy as cp, numpy as np, torch
import cumm
from cumm.runtime.timing import torch_rounds_ms
torch.backends.cuda.matmul.allow_tf32 = False
SRC = r'''
#include <cuda_fp16.h>
__device__ __forceinline__ int col_of(int p, long long k, int K, int inter) {
  return inter ? (int)((k >> 6) * 192 + p * 64 + (k & 63)) : (int)(p * (long long)K + k);
}
extern "C" __global__ void row_max(const float* a, int K, float* amax) {
  const float* r = a + (long long)blockIdx.x * K; float mx = 0.f;
  for (int k = threadIdx.x; k < K; k += blockDim.x) mx = fmaxf(mx, fabsf(r[k]));
  for (int o = 16; o; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  __shared__ float s[32]; if ((threadIdx.x & 31) == 0) s[threadIdx.x >> 5] = mx; __syncthreads();
  if (threadIdx.x < 32) { mx = threadIdx.x < blockDim.x / 32 ? s[threadIdx.x] : 0.f;
    for (int o = 16; o; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    if (threadIdx.x == 0) amax[blockIdx.x] = mx; }
}
extern "C" __global__ void col_max(const float* b, int K, int N, unsigned* bmax) {
  int n = blockIdx.x * blockDim.x + threadIdx.x; if (n >= N) return;
  int k0 = blockIdx.y * 128, k1 = min(K, k0 + 128); float mx = 0.f;
  for (int k = k0; k < k1; ++k) mx = fmaxf(mx, fabsf(b[(long long)k * N + n]));
  atomicMax(bmax + n, __float_as_uint(mx));
}
__device__ __forceinline__ int shift_of(float mx) { int e; frexpf(mx, &e); return mx == 0.f ? 0 : 15 - e; }
extern "C" __global__ void split_a(const float* a, int M, int K, const float* amax, __half* out, float* ea, int inter) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; if (i >= (long long)M * K) return;
  int m = (int)(i / K); long long k = i - (long long)m * K; int s = shift_of(amax[m]);
  float x = ldexpf(a[i], s); __half h = __float2half_rn(x); __half l = __float2half_rn(x - __half2float(h));
  __half* r = out + (long long)m * 3 * K;
  r[col_of(0, k, K, inter)] = l; r[col_of(1, k, K, inter)] = h; r[col_of(2, k, K, inter)] = h;
  if (k == 0) ea[m] = (float)s;
}
// B (K x N, row-major) -> Bt (N x 3K, row-major): [Bh; Bl; Bh] along K, K-major for the kernel.
extern "C" __global__ void split_b(const float* b, int K, int N, const unsigned* bmax, __half* bt, float* eb, int inter) {
  __shared__ __half th[32][34], tl[32][34];
  int n0 = blockIdx.x * 32, k0 = blockIdx.y * 32;
  for (int j = threadIdx.y; j < 32; j += 8) { int k = k0 + j, n = n0 + threadIdx.x;
    if (k < K && n < N) { int s = shift_of(__uint_as_float(bmax[n])); float x = ldexpf(b[(long long)k * N + n], s);
      __half h = __float2half_rn(x); th[j][threadIdx.x] = h; tl[j][threadIdx.x] = __float2half_rn(x - __half2float(h));
      if (k == 0) eb[n] = (float)s; } }
  __syncthreads();
  for (int j = threadIdx.y; j < 32; j += 8) { int n = n0 + j; long long k = k0 + threadIdx.x;
    if (k < K && n < N) { __half* r = bt + (long long)n * 3 * K;
      r[col_of(0, k, K, inter)] = th[threadIdx.x][j]; r[col_of(1, k, K, inter)] = tl[threadIdx.x][j];
      r[col_of(2, k, K, inter)] = th[threadIdx.x][j]; } }
}
'''
mod = cp.RawModule(code=SRC, options=("-std=c++17",))
k_row, k_col, k_sa, k_sb = (mod.get_function(n) for n in ("row_max", "col_max", "split_a", "split_b"))
EPI = "v = ldexpf(v, -(int)(ea[row] + eb[col]));"

def pieces(a, b, inter, parts=False):
    M, K = a.shape; N = b.shape[1]
    amax = cp.empty(M, cp.float32); bmax = cp.zeros(N, cp.uint32)
    acat = cp.empty((M, 3 * K), cp.float16); bt = cp.empty((N, 3 * K), cp.float16)
    ea = cp.empty(M, cp.float32); eb = cp.empty(N, cp.float32)
    k_row((M,), (256,), (a, np.int32(K), amax))
    k_col(((N + 255) // 256, (K + 127) // 128), (256,), (b, np.int32(K), np.int32(N), bmax))
    k_sa(((M * K + 255) // 256,), (256,), (a, np.int32(M), np.int32(K), amax, acat, ea, np.int32(inter)))
    k_sb(((N + 31) // 32, (K + 31) // 32), (32, 8), (b, np.int32(K), np.int32(N), bmax, bt, eb, np.int32(inter)))
    if parts:
        return acat, bt, ea, eb
    return cumm.matmul(acat, bt.T, out_dtype=cp.float32, epilogue=EPI, operands={"ea": ea, "eb": eb})

warm = "--warm" in sys.argv
orders = [o for o in ("concat", "inter") if o in sys.argv] or ["concat", "inter"]
SH = [(2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192), (1000, 999, 1031)]
for M, N, K in SH:
    ns = 2 if M >= 8192 else 4
    sets = [(cp.random.standard_normal((M, K), dtype=cp.float32), cp.random.standard_normal((K, N), dtype=cp.float32)) for _ in range(ns)]
    tsets = [(torch.as_tensor(x, device="cuda"), torch.as_tensor(y, device="cuda")) for x, y in sets]
    v = {"cublas": lambda i: torch.matmul(*tsets[i % ns]), "cumm auto": lambda i: cumm.matmul(*sets[i % ns])}
    for o in orders:
        inter = int(o == "inter")
        if inter and K % 64:
            continue
        v[o] = (lambda inter: lambda i: pieces(*sets[i % ns], inter))(inter)
        ac, bt, ea, eb = pieces(*sets[0], inter, parts=True)
        v[o + " gemm"] = (lambda ac, bt, ea, eb: lambda i: cumm.matmul(ac, bt.T, out_dtype=cp.float32, epilogue=EPI, operands={"ea": ea, "eb": eb}))(ac, bt, ea, eb)
        v[o + " plain3K"] = (lambda ac, bt: lambda i: cumm.matmul(ac, bt.T))(ac, bt)
    for f in v.values(): f(0)
    cp.cuda.Device().synchronize()
    if warm:
        print("warm", M, N, K, flush=True); continue
    for kind in ("normal", "lognormal2"):
        a, b = sets[0]
        if kind != "normal":
            a = a * cp.exp(2 * cp.random.standard_normal(a.shape, dtype=cp.float32))
            b = b * cp.exp(2 * cp.random.standard_normal(b.shape, dtype=cp.float32))
        ref = cp.asarray(torch.as_tensor(a, device="cuda").double() @ torch.as_tensor(b, device="cuda").double())
        nr = float(cp.linalg.norm(ref))
        scale = cp.asarray(torch.as_tensor(cp.abs(a), device="cuda").double() @ torch.as_tensor(cp.abs(b), device="cuda").double())
        res = {"cublas": cp.asarray(torch.matmul(torch.as_tensor(a, device="cuda"), torch.as_tensor(b, device="cuda"))), "cumm auto": cumm.matmul(a, b)}
        for o in orders:
            if o == "inter" and K % 64: continue
            res[o] = pieces(a, b, int(o == "inter"))
        print(f"{M}x{N}x{K} {kind}: " + "  ".join(f"{n} {float(cp.linalg.norm(c - ref)) / nr:.2e}/{float(cp.max(cp.abs(c - ref) / scale)):.1e}" for n, c in res.items()), flush=True)
    for rep in range(2):
        t = torch_rounds_ms(v, 7, 10, rotate=True)
        med = {k: statistics.median(s) * 1000 for k, s in t.items()}
        fl = 2 * M * N * K / 1e12
        print(f"{M}x{N}x{K} " + "  ".join(f"{k} {us:.1f}us ({fl / us * 1e6:.0f}TF, x{med['cublas'] / us:.2f})" for k, us in med.items()), flush=True)
