"""One variant, a few launches, for ncu: python one.py NAME M N K"""
import sys
import torch
import cumm
name = sys.argv[1]; M, N, K = map(int, sys.argv[2:5])
x = torch.randn(M, K, device="cuda", dtype=torch.bfloat16); w = torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
b = torch.randn(N, device="cuda", dtype=torch.bfloat16)
kw = {"plain pp": dict(kernel="wgmma_pingpong"), "b+gt pp": dict(kernel="wgmma_pingpong", bias=b, activation="gelu_tanh"),
      "gt pp": dict(kernel="wgmma_pingpong", activation="gelu_tanh"), "bias pp": dict(kernel="wgmma_pingpong", bias=b),
      "plain ws": dict(kernel="wgmma_ws"), "b+gt ws": dict(kernel="wgmma_ws", bias=b, activation="gelu_tanh")}[name]
for _ in range(6):
    cumm.matmul(x, w, **kw)
torch.cuda.synchronize()
