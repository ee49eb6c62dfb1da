# ruff: noqa: B023, E501, B007, E741, E702, E401, I001
"""ncu: wgmma_pingpong 128x128 (S6 GM8, the route's) plain and bias + gelu_tanh at 2048^3 bf16; each twice."""

import torch
import cumm

x = torch.randn(2048, 2048, device="cuda", dtype=torch.bfloat16)
w = torch.randn(2048, 2048, device="cuda", dtype=torch.bfloat16)
b = torch.randn(2048, device="cuda", dtype=torch.bfloat16)
cfg = dict(BM=128, BN=128, STAGES=6, GM=8)
for _ in range(2):
    cumm.matmul(x, w, kernel="wgmma_pingpong", config=cfg)
    cumm.matmul(x, w, kernel="wgmma_pingpong", config=cfg, bias=b, activation="gelu_tanh")
torch.cuda.synchronize()
print("done")
