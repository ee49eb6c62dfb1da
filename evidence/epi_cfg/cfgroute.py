# ruff: noqa: B023, E501, B007, E741, E702, E401, I001
"""Fused calls routed to wgmma_pingpong at K <= 2048: the route's configuration (defaults + wide rule) against the
rung's tuned entry at the shape, bf16, x auto's plain; 3 runs of 9 rounds."""

import statistics
import torch
import cumm
from cumm.api.decision import decision
from cumm.runtime.timing import torch_rounds_ms

PP = "wgmma_pingpong"
SH = {
    (4096, 4096, 1024): dict(BM=128, BN=192, STAGES=4, GM=16),
    (2048, 2048, 2048): dict(BM=128, BN=128, STAGES=4, GM=4),
    (3000, 5000, 2000): dict(BM=128, BN=192, STAGES=4, GM=4),
    (8192, 8192, 256): dict(BM=128, BN=192, STAGES=4, GM=4),
}
for (M, N, K), tuned in SH.items():
    sets = [
        (torch.randn(M, K, device="cuda", dtype=torch.bfloat16), torch.randn(K, N, device="cuda", dtype=torch.bfloat16))
        for _ in range(3)
    ]
    b = torch.randn(N, device="cuda", dtype=torch.bfloat16)
    v = {"plain": lambda i: cumm.matmul(*sets[i % 3])}
    for name, kw in [("silu", dict(activation="silu")), ("b+gt", dict(bias=b, activation="gelu_tanh"))]:
        v["route " + name] = lambda i, kw=kw: cumm.matmul(*sets[i % 3], **kw)
        v["tuned " + name] = lambda i, kw=kw: cumm.matmul(*sets[i % 3], kernel=PP, config=tuned, **kw)
    for f in v.values():
        f(0)
        f(1)
        f(2)
    torch.cuda.synchronize()
    x, w = sets[0]
    print(f"{M}x{N}x{K}: route {decision(x, w, None, bias=b, activation='gelu_tanh')} | tuned {tuned}", flush=True)
    runs = {k: [] for k in v}
    for _r in range(3):
        t = torch_rounds_ms(v, 9, 8 if M * N * K > 2**34 else 20, rotate=True)
        med = {k: statistics.median(x) * 1000 for k, x in t.items()}
        for k in v:
            runs[k].append(med[k] / med["plain"])
    print(
        f"  (plain {med['plain']:.1f} us) "
        + ", ".join(
            f"{k} {statistics.median(runs[k]):.4f} ({'/'.join(f'{x:.3f}' for x in runs[k])})" for k in v if k != "plain"
        ),
        flush=True,
    )
