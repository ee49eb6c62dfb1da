"""Launch one configuration (or torch.matmul) 5x at 1024x1024x8192 bf16, for ncu.
    python3 launch5.py torch | auto | BM,BN,STAGES,WGS,CL,SK"""
import sys
import torch
import cumm
who = sys.argv[1]
x = torch.randn(1024, 8192, device="cuda", dtype=torch.bfloat16)
w = torch.randn(8192, 1024, device="cuda", dtype=torch.bfloat16)
if who not in ("torch", "auto"):
    f = list(map(int, who.split(",")))
    bm, bn, st, wgs, cl, sk = f[:6]
    cfg = dict(BM=bm, BN=bn, STAGES=st, WGS=wgs, GM=f[7] if len(f) > 7 else 4, EPI=1, SK=sk, CL=cl, NUM_THREADS=128 * (wgs + 1))
    if len(f) > 6:
        cfg["CA"] = f[6]
for _ in range(5):
    if who == "torch":
        y = x @ w
    elif who == "auto":
        y = cumm.matmul(x, w)
    else:
        y = cumm.matmul(x, w, kernel="wgmma_ws", config=cfg)
torch.cuda.synchronize()
