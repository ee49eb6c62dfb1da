"""Fused bias + gelu_tanh on wgmma_ws (auto's route) against wgmma_pingpong at K = 4096-8192 shapes where pingpong's
128 x 128 rounds cost no more than ws's 128 x 256 ones; plain products beside."""
import statistics, sys
import torch
import cumm
from cumm.runtime.timing import torch_rounds_ms
shapes = [(4096, 4096, 4096), (2048, 4096, 4096), (4096, 4096, 8192), (2048, 8192, 4096), (4096, 8192, 2560)]
warm = "--warm" in sys.argv
for M, N, K in shapes:
    sets = [(torch.randn(M, K, device="cuda", dtype=torch.bfloat16), torch.randn(K, N, device="cuda", dtype=torch.bfloat16)) for _ in range(4)]
    b = torch.randn(N, device="cuda", dtype=torch.bfloat16)
    S = lambda i: sets[i % 4]
    v = {"plain": lambda i: cumm.matmul(*S(i)),
         "plain pp": lambda i: cumm.matmul(*S(i), kernel="wgmma_pingpong"),
         "b+gt": lambda i: cumm.matmul(*S(i), bias=b, activation="gelu_tanh"),
         "b+gt pp": lambda i: cumm.matmul(*S(i), bias=b, activation="gelu_tanh", kernel="wgmma_pingpong"),
         "b+gt ws": lambda i: cumm.matmul(*S(i), bias=b, activation="gelu_tanh", kernel="wgmma_ws"),
         "torch": lambda i: S(i)[0] @ S(i)[1]}
    for f in v.values(): f(0)
    torch.cuda.synchronize()
    if warm:
        continue
    print(f"== {M}x{N}x{K}", flush=True)
    reps = max(10, int(40 * 4096**3 / (M * N * K)))
    for rep in range(3):
        t = torch_rounds_ms(v, 11, reps, rotate=True)
        med = {k: statistics.median(s) * 1000 for k, s in t.items()}
        print(" ", "  ".join(f"{k} {us:.1f} ({us / med['plain']:.3f})" for k, us in med.items()), f"| pp/ws fused {med['b+gt pp'] / med['b+gt ws']:.3f}", flush=True)
