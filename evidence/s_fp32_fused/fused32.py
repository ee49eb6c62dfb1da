"""FP32 fused bias + gelu on auto (wgmma_f16x3 at 4096^3) against auto's plain product and wgmma_tf32x3's fused call."""

import statistics
import cupy as cp, torch
import cumm
from cumm.runtime.timing import torch_rounds_ms

M = N = K = 4096
sets = [
    (cp.random.standard_normal((M, K), dtype=cp.float32), cp.random.standard_normal((K, N), dtype=cp.float32))
    for _ in range(3)
]
bias = cp.random.standard_normal(N, dtype=cp.float32)
v = {
    "plain": lambda i: cumm.matmul(*sets[i % 3]),
    "b+gelu auto": lambda i: cumm.matmul(*sets[i % 3], bias=bias, activation="gelu"),
    "b+gelu tf32x3": lambda i: cumm.matmul(*sets[i % 3], bias=bias, activation="gelu", kernel="wgmma_tf32x3"),
}
for f in v.values():
    f(0)
cp.cuda.Device().synchronize()
for rep in range(2):
    t = torch_rounds_ms(v, 5, 5, rotate=True)
    med = {k: statistics.median(s) * 1000 for k, s in t.items()}
    print("  ".join(f"{k} {us:.0f}us ({us / med['plain']:.3f})" for k, us in med.items()), flush=True)
