# ruff: noqa: B023, E501, B007, E741, E702, E401, I001
"""Host time a call (tiny product, the GPU idle behind it): plain against fused, torch and cupy, bf16."""

import time
import cupy
import torch
import cumm


def per_call(f, n=2000):
    for _ in range(50):
        f()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        f()
    dt = time.perf_counter() - t
    torch.cuda.synchronize()
    return dt / n * 1e6


for kind in ("torch", "cupy"):
    for M, N, K in [(64, 64, 64), (2048, 2048, 2048)]:
        if kind == "torch":
            x = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
            w = torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
            b = torch.randn(N, device="cuda", dtype=torch.bfloat16)
        else:
            x = cupy.random.standard_normal((M, K), dtype=cupy.float32).astype(cupy.float16)
            w = cupy.random.standard_normal((K, N), dtype=cupy.float32).astype(x.dtype)
            b = cupy.random.standard_normal(N, dtype=cupy.float32).astype(x.dtype)
        r = {
            "plain": per_call(lambda: cumm.matmul(x, w)),
            "bias": per_call(lambda: cumm.matmul(x, w, bias=b)),
            "b+gt": per_call(lambda: cumm.matmul(x, w, bias=b, activation="gelu_tanh")),
            "snippet": per_call(lambda: cumm.matmul(x, w, epilogue="v = v * 2.0f;")),
        }
        if kind == "torch":
            r["torch.matmul"] = per_call(lambda: torch.matmul(x, w))
        print(kind, f"{M}x{N}x{K}", " ".join(f"{k} {v:.1f}us" for k, v in r.items()), flush=True)
