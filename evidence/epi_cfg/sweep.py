# ruff: noqa: B023, E501, B007, E741, E702, E401, I001
"""Which wgmma_pingpong configuration runs a fused bias + gelu_tanh fastest (x auto's plain product), bf16."""

import statistics, sys
import torch
import cumm
from cumm.runtime.timing import torch_rounds_ms

PP = "wgmma_pingpong"
CASES = {
    (8192, 14336, 1024): [dict(BN=192, STAGES=s, GM=g) for s in (3, 4) for g in (4, 8, 16, 32)]
    + [dict(BN=128, STAGES=s, GM=g) for s in (4, 6) for g in (4, 8, 16)],
    (4096, 4096, 4096): [dict(BN=128, STAGES=s, GM=g) for s in (3, 4, 5, 6) for g in (2, 4, 8, 16)],
}
which = [int(a) for a in sys.argv[1:]] or [0, 1]
for ci, ((M, N, K), cfgs) in enumerate(CASES.items()):
    if ci not in which:
        continue
    sets = [
        (torch.randn(M, K, device="cuda", dtype=torch.bfloat16), torch.randn(K, N, device="cuda", dtype=torch.bfloat16))
        for _ in range(3)
    ]
    b = torch.randn(N, device="cuda", dtype=torch.bfloat16)
    v = {
        "plain": lambda i: cumm.matmul(*sets[i % 3]),
        "auto b+gt": lambda i: cumm.matmul(*sets[i % 3], bias=b, activation="gelu_tanh"),
    }
    for c in cfgs:
        cfg = dict(BM=128, **c)
        name = f"BN{c['BN']} S{c['STAGES']} G{c['GM']}"
        v[name] = lambda i, cfg=cfg: cumm.matmul(*sets[i % 3], kernel=PP, config=cfg, bias=b, activation="gelu_tanh")
    for f in v.values():
        f(0)
        f(1)
        f(2)
    torch.cuda.synchronize()
    runs = {k: [] for k in v}
    for _r in range(3):
        t = torch_rounds_ms(v, 7, 8, rotate=True)
        med = {k: statistics.median(x) * 1000 for k, x in t.items()}
        for k in v:
            runs[k].append(med[k] / med["plain"])
    print(f"{M}x{N}x{K} (plain {med['plain']:.1f} us)", flush=True)
    for k in sorted(v, key=lambda k: statistics.median(runs[k])):
        print(f"  {k:14s} {statistics.median(runs[k]):.4f} ({'/'.join(f'{x:.3f}' for x in runs[k])})", flush=True)
