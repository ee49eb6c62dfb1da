"""Deep-K fused epilogues: auto (wgmma_ws) against wgmma_pingpong 64x256, bf16, x auto's plain; 3 runs of 9 rounds."""

# ruff: noqa: B023, E501, B007, E741

import statistics

import torch

import cumm
from cumm.runtime.timing import torch_rounds_ms

PP = "wgmma_pingpong"
C64 = dict(BM=64, BN=256, GM=8, STAGES=4)
for M, N, K in [(4096, 4096, 4096), (2048, 4096, 4096), (4096, 4096, 8192), (2048, 8192, 4096), (8192, 8192, 4096)]:
    sets = [
        (torch.randn(M, K, device="cuda", dtype=torch.bfloat16), torch.randn(K, N, device="cuda", dtype=torch.bfloat16))
        for _ in range(3)
    ]
    b = torch.randn(N, device="cuda", dtype=torch.bfloat16)
    v = {
        "plain": lambda i: cumm.matmul(*sets[i % 3]),
        "pp64 plain": lambda i: cumm.matmul(*sets[i % 3], kernel=PP, config=C64),
    }
    for name, kw in [
        ("bias", dict(bias=b)),
        ("silu", dict(activation="silu")),
        ("b+gt", dict(bias=b, activation="gelu_tanh")),
    ]:
        v["auto " + name] = lambda i, kw=kw: cumm.matmul(*sets[i % 3], **kw)
        v["pp64 " + name] = lambda i, kw=kw: cumm.matmul(*sets[i % 3], kernel=PP, config=C64, **kw)
    for f in v.values():
        f(0)
        f(1)
        f(2)
    torch.cuda.synchronize()
    runs = {k: [] for k in v}
    for _r in range(3):
        t = torch_rounds_ms(v, 9, 8 if M * N * K >= 2**36 else 16, rotate=True)
        med = {k: statistics.median(x) * 1000 for k, x in t.items()}
        for k in v:
            runs[k].append(med[k] / med["plain"])
    print(
        f"{M}x{N}x{K}: "
        + ", ".join(f"{k} {statistics.median(runs[k]):.4f}" for k in v if k != "plain")
        + "  | runs b+gt auto "
        + "/".join(f"{x:.3f}" for x in runs["auto b+gt"])
        + " pp64 "
        + "/".join(f"{x:.3f}" for x in runs["pp64 b+gt"]),
        flush=True,
    )
