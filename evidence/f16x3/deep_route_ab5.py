"""The deep-K route on the new tree: auto's fused bias + gelu_tanh (now wgmma_pingpong) against wgmma_ws's, beside
auto's plain product. python ab5.py [--warm] [SHAPE_INDEX]"""
import statistics, sys
import torch, torch.nn.functional as F
import cumm
from cumm.runtime.timing import torch_rounds_ms
SH = [(4096, 4096, 4096), (2048, 8192, 4096), (2048, 4096, 4096)]
warm = "--warm" in sys.argv
idx = [int(a) for a in sys.argv[1:] if a.isdigit()] or range(len(SH))
for M, N, K in (SH[i] for i in idx):
    sets = [(torch.randn(M, K, device="cuda", dtype=torch.bfloat16), torch.randn(K, N, device="cuda", dtype=torch.bfloat16)) for _ in range(4)]
    b = torch.randn(N, device="cuda", dtype=torch.bfloat16)
    S = lambda i: sets[i % 4]
    v = {"plain": lambda i: cumm.matmul(*S(i)),
         "fused auto": lambda i: cumm.matmul(*S(i), bias=b, activation="gelu_tanh"),
         "fused ws": lambda i: cumm.matmul(*S(i), bias=b, activation="gelu_tanh", kernel="wgmma_ws")}
    for f in v.values(): f(0)
    torch.cuda.synchronize()
    if warm:
        continue
    import cumm.api.fused as fz
    for c, _, _ in fz.calls.values():
        print("  fused route:", c.plan.spec.name, c.plan.cfg, flush=True)
    fz.calls.clear()
    x, w = sets[0]
    ref = F.gelu(x.double() @ w.double() + b.double(), approximate="tanh")
    got = v["fused auto"](0).double()
    print(f"{M}x{N}x{K} err {float((got - ref).norm() / ref.norm()):.2e}", flush=True)
    for rep in range(3):
        t = torch_rounds_ms(v, 9, 20, rotate=True)
        med = {k: statistics.median(s) * 1000 for k, s in t.items()}
        print(f"{M}x{N}x{K}", "  ".join(f"{k} {us:.1f}" for k, us in med.items()),
              f"| auto/ws fused {med['fused auto'] / med['fused ws']:.3f}  fused auto/plain {med['fused auto'] / med['plain']:.3f}", flush=True)
