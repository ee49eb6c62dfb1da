"""Few-tile deep products: wgmma_ws pairs of tile rows sharing B by multicast (CL = 2) with stream-K sharing
the pairs' slabs over every cluster, against auto and torch, operands rotated over 4 sets.
    PYTHONPATH=. python3 lab/s69/few.py [--warm NAME] [--dtype bf16|fp16]"""
import statistics, sys
import torch
import cumm
from cumm.runtime.timing import torch_rounds_ms

import os
TAG = 'old' if os.getcwd().startswith('/tmp/old') else 'new'
dt = torch.float16 if "fp16" in sys.argv else torch.bfloat16
warm = sys.argv[sys.argv.index("--warm") + 1] if "--warm" in sys.argv else None
WS = "wgmma_ws"
def ws(bm, bn, st, cl, sk, gm=4, wgs=2):
    return (WS, dict(BM=bm, BN=bn, STAGES=st, WGS=wgs, GM=gm, EPI=1, SK=sk, CL=cl, NUM_THREADS=128 * (wgs + 1)))
SW = "wgmma_swap_ab"
def sw(bm, bn, st, ks, wgs=1, gm=8):
    return (SW, dict(BM=bm, BN=bn, STAGES=st, WGS=wgs, GM=gm, KS=ks, NUM_THREADS=128 * (wgs + 1)))
CS = "wgmma_cluster_split_k"
def cs(st, gm, ks=2, bm=128, bn=128):
    return (CS, dict(BM=bm, BN=bn, STAGES=st, WGS=1, GM=gm, KS=ks, NUM_THREADS=256))
CS = "wgmma_cluster_split_k"
cfgs = {
    "auto": None,
    "ks2": (CS, dict(BM=128, BN=128, STAGES=4, WGS=1, GM=4, KS=2, NUM_THREADS=256)),
    "1wg": ws(128, 64, 8, 1, 0, gm=4, wgs=1),
    "2wg": ws(128, 64, 8, 1, 0, gm=4),
}
if warm:
    cfgs = {warm: cfgs[warm]}
shapes = [(1024, 1024, 8192), (128, 8192, 8192), (512, 5120, 5120), (4096, 4096, 4096)] if 'fp16' not in sys.argv else [(1024, 1024, 8192)]
for M, N, K in shapes:
    sets = [(torch.randn(M, K, device="cuda", dtype=dt), torch.randn(K, N, device="cuda", dtype=dt)) for _ in range(4)]
    v = {}
    for name, c in cfgs.items():
        if c is None:
            v[name] = lambda i: cumm.matmul(*sets[i % 4])
        else:
            v[name] = lambda i, c=c: cumm.matmul(*sets[i % 4], kernel=c[0], config=c[1])
    if not warm:
        v["torch"] = lambda i: sets[i % 4][0] @ sets[i % 4][1]
    ref = sets[0][0].double() @ sets[0][1].double()
    tref = float(((sets[0][0] @ sets[0][1]).double() - ref).norm() / ref.norm())
    for name, f in list(v.items()):
        try:
            out = torch.full((M, N), float("nan"), device="cuda", dtype=dt)
            if name in ("auto", "torch"):
                out = f(0)
            else:
                cumm.matmul(*sets[0], out=out, kernel=cfgs[name][0], config=cfgs[name][1])
            e = float((out.double() - ref).norm() / ref.norm())
        except Exception as ex:  # noqa
            print(M, N, K, name, "failed", str(ex)[:300], flush=True); del v[name]; continue
        if not e <= 1.05 * tref:
            print(M, N, K, name, "ERROR", e, "torch", tref, flush=True); del v[name]
    torch.cuda.synchronize()
    if warm:
        continue
    for rep in range(2):
        t = torch_rounds_ms(v, 9, 20, rotate=True)
        med = {k: statistics.median(s) * 1000 for k, s in t.items()}
        print(TAG, f"{M}x{N}x{K}: " + "  ".join(f"{k} {us:.1f}us ({med['torch'] / us:.3f})" for k, us in med.items()), flush=True)
