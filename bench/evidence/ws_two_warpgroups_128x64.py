"""A/B: wgmma_ws cluster configs (CA) against the tuned auto choice and torch.matmul, interleaved rounds."""
import sys, math, statistics, json
import torch, cupy
import cumm
from cumm.api.matmul import decision
from cumm.ladder import REGISTRY

spec = REGISTRY["wgmma_ws"]
NC = spec.configs
def named(n, **kw):
    return {**NC[n], **kw}

W2 = dict(BM=128, BN=64, WGS=2, GM=4, CL=1, EPI=1, NUM_THREADS=384)
CANDS = {
    (1024, 1024, 8192): [named("one_warpgroup_128x64"), dict(W2, STAGES=7, SK=0), dict(W2, STAGES=6, SK=4), dict(W2, STAGES=8, SK=0, EPI=0)],
    (128, 8192, 8192): [named("one_warpgroup_128x64"), dict(W2, STAGES=7, SK=0), dict(W2, STAGES=6, SK=4)],
    (128, 4096, 14336): [named("one_warpgroup_64x64"), dict(W2, STAGES=7, SK=0), dict(W2, STAGES=6, SK=4), dict(W2, BN=128, STAGES=6, SK=4)],
    (512, 4096, 14336): [named("one_warpgroup_128x128"), dict(W2, STAGES=7, SK=0), dict(W2, BN=128, STAGES=6, SK=0), dict(W2, BN=128, STAGES=6, SK=4)],
    (32, 6144, 4096): [named("one_warpgroup_64x64"), dict(W2, STAGES=7, SK=0), dict(W2, STAGES=6, SK=4)],
}

def timeit(fns, rounds=5, iters=20):
    res = [[] for _ in fns]
    st, en = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for r in range(rounds):
        for i, f in enumerate(fns):
            for j in range(3): f(j)
            torch.cuda.synchronize()
            st.record()
            for j in range(iters): f(j)
            en.record(); en.synchronize()
            res[i].append(st.elapsed_time(en) / iters * 1e3)
    return [statistics.median(x) for x in res]

dt = getattr(torch, sys.argv[1])
only = int(sys.argv[2]) if len(sys.argv) > 2 else None
warm = len(sys.argv) > 3
torch.manual_seed(0)
for i, ((M, N, K), cands) in enumerate(CANDS.items()):
    if only is not None and i != only:
        continue
    nbytes = (M * K + K * N) * 2
    ncp = max(2, math.ceil(300e6 / nbytes))
    xs = [torch.randn(M, K, device="cuda", dtype=dt) for _ in range(ncp)]
    ws = [torch.randn(K, N, device="cuda", dtype=dt) for _ in range(ncp)]
    ref = (xs[0].double() @ ws[0].double())
    cub = torch.matmul(xs[0], ws[0]).double()
    eref = ((cub - ref).norm() / ref.norm()).item()
    fns, names = [lambda j: torch.matmul(xs[j % ncp], ws[j % ncp])], ["torch"]
    fns.append(lambda j: cumm.matmul(xs[j % ncp], ws[j % ncp])); names.append("auto")
    out = cumm.matmul(xs[0], ws[0])
    auto_dec = decision(xs[0], ws[0], None)
    for c in cands:
        c = spec.resolve(c, 90)
        o = torch.full((M, N), float("nan"), device="cuda", dtype=dt)
        try:
            cumm.matmul(xs[0], ws[0], kernel="wgmma_ws", config=c, out=o)
        except Exception as e:
            print("FAIL", c, repr(e)[:300]); continue
        err = ((o.double() - ref).norm() / ref.norm()).item()
        ok = err <= 1.5 * eref + 1e-7
        names.append(f"{c['BM']}x{c['BN']} W{c['WGS']} S{c['STAGES']} SK{c['SK']} E{c['EPI']}" + ("" if ok else f" BADERR {err:.2e}"))
        fns.append(lambda j, c=c: cumm.matmul(xs[j % ncp], ws[j % ncp], kernel="wgmma_ws", config=c))
    if warm:
        continue
    t = timeit(fns)
    fl = 2 * M * N * K
    print(f"== {M}x{N}x{K} {dt} (auto: {auto_dec}) cuBLAS err {eref:.2e}")
    for n, x in zip(names, t):
        print(f"   {x:8.2f} us {fl / x / 1e6:7.1f} TFLOP/s  x torch {t[0] / x:5.3f}  {n}")
