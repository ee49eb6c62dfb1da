"""Few-tile deep products: cluster split-K configurations against torch, operands rotated over 4 sets.
    PYTHONPATH=. python3 ks.py [--warm]"""
import statistics, sys
import torch
import cumm
from cumm.runtime.timing import torch_rounds_ms

warm = "--warm" in sys.argv
CS = "wgmma_cluster_split_k"
WS = "wgmma_ws"
cfgs = {
    "auto": None,
    "ws 128x64 1wg st8": (WS, dict(BM=128, BN=64, STAGES=8, WGS=1, GM=4, EPI=1, SK=0, NUM_THREADS=256)),
    "ws 128x64 2wg st8": (WS, dict(BM=128, BN=64, STAGES=8, WGS=2, GM=4, EPI=1, SK=0, NUM_THREADS=384)),
    "ws 128x64 2wg st8 cl2": (WS, dict(BM=128, BN=64, STAGES=8, WGS=2, GM=4, EPI=1, SK=0, CL=2, NUM_THREADS=384)),
    "ws 128x64 1wg st8 epi0": (WS, dict(BM=128, BN=64, STAGES=8, WGS=1, GM=4, EPI=0, SK=0, NUM_THREADS=256)),
    "ks2 128x128 1wg st4": (CS, dict(BM=128, BN=128, STAGES=4, WGS=1, GM=4, KS=2, NUM_THREADS=256)),
}
for M, N, K in [(1024, 1024, 8192), (512, 5120, 5120), (128, 8192, 8192)]:
    sets = [(torch.randn(M, K, device="cuda", dtype=torch.bfloat16), torch.randn(K, N, device="cuda", dtype=torch.bfloat16)) for _ in range(4)]
    v = {}
    for name, c in cfgs.items():
        if c is None:
            v[name] = lambda i: cumm.matmul(*sets[i % 4])
        else:
            v[name] = lambda i, c=c: cumm.matmul(*sets[i % 4], kernel=c[0], config=c[1])
    v["torch"] = lambda i: sets[i % 4][0] @ sets[i % 4][1]
    ref = sets[0][0].float() @ sets[0][1].float()
    for name, f in list(v.items()):
        try:
            e = float((f(0).float() - ref).norm() / ref.norm())
        except Exception as ex:  # noqa
            print(name, "failed", str(ex)[:200]); del v[name]; continue
        if e > 1e-2:
            print(name, "error", e)
    torch.cuda.synchronize()
    if warm:
        continue
    for rep in range(3):
        t = torch_rounds_ms(v, 7, 20)
        med = {k: statistics.median(s) * 1000 for k, s in t.items()}
        print(f"{M}x{N}x{K}: " + "  ".join(f"{k} {us:.1f}us ({med['torch'] / us:.3f})" for k, us in med.items()), flush=True)
