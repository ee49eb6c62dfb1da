"""Launch ours (auto) or torch.matmul 5x at 1024x1024x8192 bf16, for ncu."""
import sys
import torch
import cumm
who = sys.argv[1]
x = torch.randn(1024, 8192, device="cuda", dtype=torch.bfloat16)
w = torch.randn(8192, 1024, device="cuda", dtype=torch.bfloat16)
for _ in range(5):
    y = cumm.matmul(x, w) if who == "cumm" else x @ w
torch.cuda.synchronize()
