"""A/B of fused epilogues: auto and 128x192 ping-pong, plain and fused, cuBLASLt beside; interleaved rounds.
    PYTHONPATH=<tree> python3 ab.py TAG [--warm NAME]"""
import json, statistics, sys, os
import torch, torch.nn.functional as F
import cumm
from cumm.runtime.timing import torch_rounds_ms

tag = sys.argv[1]
warm = sys.argv[3] if len(sys.argv) > 3 and sys.argv[2] == "--warm" else None
PP = dict(BM=128, BN=192, STAGES=4)
shapes = [(8192, 14336, 4096), (8192, 14336, 1024), (4096, 4096, 4096)]
out = []
for M, N, K in shapes:
    torch.manual_seed(0)
    x = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(K, N, device="cuda", dtype=torch.bfloat16) / K**0.5
    b = torch.randn(N, device="cuda", dtype=torch.bfloat16)
    v = {
        "plain": lambda: cumm.matmul(x, w),
        "bias+gelu_tanh": lambda: cumm.matmul(x, w, bias=b, activation="gelu_tanh"),
        "silu": lambda: cumm.matmul(x, w, activation="silu"),
        "gelu_tanh": lambda: cumm.matmul(x, w, activation="gelu_tanh"),
        "bias": lambda: cumm.matmul(x, w, bias=b),
        "pp plain": lambda: cumm.matmul(x, w, kernel="wgmma_pingpong", config=PP),
        "pp bias+gelu_tanh": lambda: cumm.matmul(x, w, bias=b, activation="gelu_tanh", kernel="wgmma_pingpong", config=PP),
        "cuBLASLt bias+gelu": lambda: torch._addmm_activation(b, x, w, use_gelu=True),
        "torch.matmul": lambda: x @ w,
    }
    if warm:
        v[warm]()
        torch.cuda.synchronize()
        continue
    if os.environ.get("AB_CHECK") and (K <= 1024 or M == 4096):
      ref = F.gelu(x.double() @ w.double() + b.double(), approximate="tanh")
      for n in ("bias+gelu_tanh", "pp bias+gelu_tanh", "cuBLASLt bias+gelu"):
        e = float((v[n]().double() - ref).norm() / ref.norm())
        print(f"  err {n}: {e:.2e}")
      del ref
    for f in v.values():
        f()
    torch.cuda.synchronize()
    t = torch_rounds_ms({k: (lambda i, f=f: f()) for k, f in v.items()}, 7, 10)
    med = {k: statistics.median(s) for k, s in t.items()}
    print(f"{tag} {M}x{N}x{K}: " + "  ".join(f"{k} {ms:.4f}" for k, ms in med.items()))
    r = dict(tag=tag, shape=f"{M}x{N}x{K}", ms=med,
             gelu_x_plain=med["bias+gelu_tanh"] / med["plain"], silu_x_plain=med["silu"] / med["plain"],
             bias_x_plain=med["bias"] / med["plain"], gt_x_plain=med["gelu_tanh"] / med["plain"],
             pp_gelu_x_pp=med["pp bias+gelu_tanh"] / med["pp plain"],
             lt_x_gelu=med["cuBLASLt bias+gelu"] / med["bias+gelu_tanh"],
             lt_x_ppgelu=med["cuBLASLt bias+gelu"] / med["pp bias+gelu_tanh"])
    print("   " + "  ".join(f"{k} {x:.3f}" for k, x in r.items() if isinstance(x, float)), flush=True)
    out.append(r)
if not warm:
    with open(os.path.join(os.environ["OUT"], f"ab_{tag}.json"), "a") as fh:
        fh.write(json.dumps(out) + "\n")
