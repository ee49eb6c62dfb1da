import statistics, torch, cumm
from cumm.runtime.timing import torch_rounds_ms
for M, N, K in [(8192, 14336, 4096), (8192, 14336, 1024), (4096, 4096, 4096)]:
    x = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(K, N, device="cuda", dtype=torch.bfloat16) / K**0.5
    b = torch.randn(N, device="cuda", dtype=torch.bfloat16)
    v = {"plain": lambda i: cumm.matmul(x, w), "silu": lambda i: cumm.matmul(x, w, activation="silu"),
         "bias+silu": lambda i: cumm.matmul(x, w, bias=b, activation="silu"),
         "bias": lambda i: cumm.matmul(x, w, bias=b),
         "bias+gelu_tanh": lambda i: cumm.matmul(x, w, bias=b, activation="gelu_tanh")}
    for f in v.values():
        f(0)
    torch.cuda.synchronize()
    for rep in range(3):
        t = torch_rounds_ms(v, 5, 10)
        med = {n: statistics.median(s) for n, s in t.items()}
        print(f"{M}x{N}x{K} run {rep}: " + "  ".join(f"{n} {med[n] / med['plain']:.3f}" for n in v if n != "plain"),
              f"(plain {med['plain']:.4f} ms)", flush=True)
