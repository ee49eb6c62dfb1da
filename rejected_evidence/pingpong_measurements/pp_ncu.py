import torch, cumm
M, N, K = 8192, 14336, 1024
a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
b = torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
bias = torch.randn(N, device="cuda", dtype=torch.bfloat16)
PP = dict(BM=128, BN=128, STAGES=6)
fs = [lambda: cumm.matmul(a, b, kernel="wgmma_pingpong", config=PP),
      lambda: cumm.matmul(a, b, kernel="wgmma_pingpong", config=PP, bias=bias, activation="gelu_tanh"),
      lambda: cumm.matmul(a, b, kernel="wgmma_pingpong", config=PP, bias=bias, activation="gelu")]
for f in fs:
    f()
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStart()
for f in fs:
    f(); torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStop()
