"""Why wgmma_pingpong lost at 2048 x 8192 x 4096: its tile order (GM) against wgmma_ws, plain and fused."""
import statistics, sys
import torch
import cumm
from cumm.runtime.timing import torch_rounds_ms
warm = "--warm" in sys.argv
for M, N, K in ((2048, 8192, 4096), (4096, 4096, 4096)):
    sets = [(torch.randn(M, K, device="cuda", dtype=torch.bfloat16), torch.randn(K, N, device="cuda", dtype=torch.bfloat16)) for _ in range(4)]
    b = torch.randn(N, device="cuda", dtype=torch.bfloat16)
    S = lambda i: sets[i % 4]
    v = {"ws": lambda i: cumm.matmul(*S(i), kernel="wgmma_ws")}
    for gm in (4, 8, 16):
        v[f"pp GM{gm}"] = (lambda gm: lambda i: cumm.matmul(*S(i), kernel="wgmma_pingpong", config=dict(BN=128, STAGES=4, GM=gm)))(gm)
    v["b+gt ws"] = lambda i: cumm.matmul(*S(i), bias=b, activation="gelu_tanh", kernel="wgmma_ws")
    v["b+gt pp GM16"] = lambda i: cumm.matmul(*S(i), bias=b, activation="gelu_tanh", kernel="wgmma_pingpong", config=dict(BN=128, STAGES=4, GM=16))
    for f in v.values(): f(0)
    torch.cuda.synchronize()
    if warm:
        continue
    for rep in range(2):
        t = torch_rounds_ms(v, 9, 20, rotate=True)
        med = {k: statistics.median(s) * 1000 for k, s in t.items()}
        print(f"{M}x{N}x{K}", "  ".join(f"{k} {us:.1f} ({us / med['ws']:.3f})" for k, us in med.items()), flush=True)
