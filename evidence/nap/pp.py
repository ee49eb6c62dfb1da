"""128x192 ping-pong: plain and fused, interleaved rounds.  PYTHONPATH=<tree> python3 pp.py TAG [--warm NAME]"""
import statistics, sys
import torch
import cumm
from cumm.runtime.timing import torch_rounds_ms

tag = sys.argv[1]
warm = sys.argv[3] if len(sys.argv) > 3 and sys.argv[2] == "--warm" else None
PP = dict(BM=128, BN=192, STAGES=4)
for M, N, K in [(8192, 14336, 1024), (8192, 14336, 4096), (8192, 8192, 1024)]:
    torch.manual_seed(0)
    x = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(K, N, device="cuda", dtype=torch.bfloat16) / K**0.5
    b = torch.randn(N, device="cuda", dtype=torch.bfloat16)
    kw = dict(kernel="wgmma_pingpong", config=PP)
    v = {
        "plain": lambda: cumm.matmul(x, w, **kw),
        "silu": lambda: cumm.matmul(x, w, activation="silu", **kw),
        "gelu_tanh": lambda: cumm.matmul(x, w, activation="gelu_tanh", **kw),
        "bias+gelu_tanh": lambda: cumm.matmul(x, w, bias=b, activation="gelu_tanh", **kw),
        "torch": lambda: x @ w,
    }
    if warm:
        v[warm]()
        torch.cuda.synchronize()
        continue
    ref = x.float() @ w.float()
    e = float((v["plain"]().float() - ref).norm() / ref.norm())
    for f in v.values():
        f()
    torch.cuda.synchronize()
    t = torch_rounds_ms({k: (lambda i, f=f: f()) for k, f in v.items()}, 7, 10)
    med = {k: statistics.median(s) for k, s in t.items()}
    p = med["plain"]
    print(f"{tag} {M}x{N}x{K} err {e:.1e}: " + "  ".join(f"{k} {ms:.4f} ({ms / p:.3f})" for k, ms in med.items())
          + f"  torch/plain {med['torch'] / p:.3f}", flush=True)
