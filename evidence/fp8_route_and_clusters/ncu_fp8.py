import torch, cumm
M, N, K = 8192, 14336, 4096
x = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
w = torch.randn(K, N, device="cuda", dtype=torch.bfloat16) / K**0.5
s = torch.full((), 0.5, device="cuda")
c8 = torch.empty(M, N, device="cuda", dtype=torch.float8_e4m3fn)
for _ in range(3):
    cumm.matmul(x, w, kernel="wgmma_ws")
    cumm.matmul(x, w, kernel="wgmma_ws", out=c8, scale_result=s)
torch.cuda.synchronize()
