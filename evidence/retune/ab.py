"""Re-tune arbitration: the configurations the UWG = 1 re-tune chose against the ones auto ran before (UWG = 1),
bursts of 20 calls in 9 rotated rounds beside torch.matmul, operands rotated over 4 sets, each checked first.
    PYTHONPATH=. python3 lab/s70/ab.py [bf16|fp16] [--warm]"""
import statistics, sys
import torch
import cumm
from cumm.runtime.timing import torch_rounds_ms

dt = torch.float16 if "fp16" in sys.argv else torch.bfloat16
warm = "--warm" in sys.argv
def ws(bm, bn, st, wgs, gm, epi, sk, cl=1):
    return ("wgmma_ws", dict(BM=bm, BN=bn, STAGES=st, WGS=wgs, GM=gm, CL=cl, EPI=epi, SK=sk, NUM_THREADS=128 * (wgs + 1), UWG=1))
def pp(bm, bn, st, gm):
    return ("wgmma_pingpong", dict(BM=bm, BN=bn, STAGES=st, GM=gm, EPI=1, NUM_THREADS=384))
def cs(bm, bn, st, wgs, gm, ks=2):
    return ("wgmma_cluster_split_k", dict(BM=bm, BN=bn, STAGES=st, WGS=wgs, GM=gm, KS=ks, NUM_THREADS=128 * (wgs + 1), UWG=1))
DEF = ws(128, 256, 4, 2, 8, 1, 4)
B192 = {"new": ws(128, 192, 3, 2, 4, 0, 0), "bn192": ws(128, 192, 4, 2, 8, 1, 4), "def": DEF}
BIG = {"pp": pp(128, 192, 4, 4), "def": DEF}
cases = [
    ((512, 5120, 5120), B192), ((512, 6144, 4096), B192),
    ((3000, 5000, 2000), {**BIG, "cl2": ws(128, 256, 4, 2, 8, 1, 4, cl=2)}),
    ((8192, 4096, 14336), BIG), ((8192, 28672, 4096), BIG),
    ((128, 8192, 8192), {"cs": cs(128, 128, 6, 2, 8), "1wg": ws(128, 64, 8, 1, 4, 1, 0)}),
    ((256, 4096, 14336), {"1wg": ws(128, 64, 8, 1, 4, 1, 0), "cs": cs(128, 128, 5, 1, 4)}),
]
for (M, N, K), cfgs in cases:
    sets = [(torch.randn(M, K, device="cuda", dtype=dt), torch.randn(K, N, device="cuda", dtype=dt)) for _ in range(4)]
    v = {name: (lambda i, c=c: cumm.matmul(*sets[i % 4], kernel=c[0], config=c[1])) for name, c in cfgs.items()}
    ref = sets[0][0].double() @ sets[0][1].double()
    tref = float(((sets[0][0] @ sets[0][1]).double() - ref).norm() / ref.norm())
    for name, c in cfgs.items():
        out = torch.full((M, N), float("nan"), device="cuda", dtype=dt)
        cumm.matmul(*sets[0], out=out, kernel=c[0], config=c[1])
        e = float((out.double() - ref).norm() / ref.norm())
        if not e <= 1.05 * tref:
            print(M, N, K, name, "ERROR", e, "torch", tref, flush=True); del v[name]
    torch.cuda.synchronize()
    del ref
    if warm:
        continue
    v["torch"] = lambda i: sets[i % 4][0] @ sets[i % 4][1]
    for rep in range(2):
        t = torch_rounds_ms(v, 9, 20, rotate=True)
        med = {k: statistics.median(s) * 1000 for k, s in t.items()}
        print(f"{dt} {M}x{N}x{K}: " + "  ".join(f"{k} {us:.1f}us ({med['torch'] / us:.3f})" for k, us in med.items()), flush=True)
