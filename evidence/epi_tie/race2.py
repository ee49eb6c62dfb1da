# ruff: noqa: B023, E501, B007, E741, E702, E401, I001
"""Deep-K fused epilogues: wgmma_ws (auto) against wgmma_pingpong 128x128 with its defaults (STAGES=6, GM=8) and
with its 4096^3 tuned entry (STAGES=4, GM=4), bf16, x auto's plain; 3 runs of 9 interleaved rotated rounds."""

import statistics, sys
import torch
import cumm
from cumm.runtime.timing import torch_rounds_ms

PP = "wgmma_pingpong"
P6 = dict(BM=128, BN=128, STAGES=6, GM=8)
P4 = dict(BM=128, BN=128, STAGES=4, GM=4)
WS = dict(BM=128, BN=256, STAGES=4, WGS=2, GM=8, CL=1, EPI=1, SK=4)
SH = [
    (4096, 4096, 4096),
    (2048, 4096, 4096),
    (2048, 8192, 4096),
    (4096, 4096, 8192),
    (4096, 8192, 4096),
    (3072, 4096, 4096),
]
idx = [int(a) for a in sys.argv[1:]] or range(len(SH))
for M, N, K in (SH[i] for i in idx):
    sets = [
        (torch.randn(M, K, device="cuda", dtype=torch.bfloat16), torch.randn(K, N, device="cuda", dtype=torch.bfloat16))
        for _ in range(3)
    ]
    b = torch.randn(N, device="cuda", dtype=torch.bfloat16)
    v = {"plain": lambda i: cumm.matmul(*sets[i % 3])}
    kws = [("bias", dict(bias=b)), ("silu", dict(activation="silu")), ("b+gt", dict(bias=b, activation="gelu_tanh"))]
    for name, kw in kws:
        v["ws " + name] = lambda i, kw=kw: cumm.matmul(*sets[i % 3], kernel="wgmma_ws", config=WS, **kw)
        v["p4 " + name] = lambda i, kw=kw: cumm.matmul(*sets[i % 3], kernel=PP, config=P4, **kw)
    v["p6 b+gt"] = lambda i: cumm.matmul(*sets[i % 3], kernel=PP, config=P6, bias=b, activation="gelu_tanh")
    v["p4 plain"] = lambda i: cumm.matmul(*sets[i % 3], kernel=PP, config=P4)
    for f in v.values():
        f(0)
        f(1)
        f(2)
    torch.cuda.synchronize()
    runs = {k: [] for k in v}
    for _r in range(3):
        t = torch_rounds_ms(v, 9, 8, rotate=True)
        med = {k: statistics.median(x) * 1000 for k, x in t.items()}
        for k in v:
            runs[k].append(med[k] / med["plain"])
    print(
        f"{M}x{N}x{K} (plain {med['plain']:.1f} us): "
        + ", ".join(
            f"{k} {statistics.median(runs[k]):.4f} ({'/'.join(f'{x:.3f}' for x in runs[k])})" for k in v if k != "plain"
        ),
        flush=True,
    )
