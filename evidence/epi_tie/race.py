# ruff: noqa: B023, E501, B007, E741, E702, E401, I001
"""4096^3 (and 4096 x 4096 x 8192): auto (wgmma_ws) against wgmma_pingpong 128x128 by name, plain and fused, bf16,
x auto's plain; 3 runs of 9 interleaved rotated rounds."""

import statistics
import torch
import cumm
from cumm.api.decision import decision
from cumm.runtime.timing import torch_rounds_ms

PP = "wgmma_pingpong"
for M, N, K in [(4096, 4096, 4096), (4096, 4096, 8192)]:
    sets = [
        (torch.randn(M, K, device="cuda", dtype=torch.bfloat16), torch.randn(K, N, device="cuda", dtype=torch.bfloat16))
        for _ in range(3)
    ]
    b = torch.randn(N, device="cuda", dtype=torch.bfloat16)
    v = {"plain": lambda i: cumm.matmul(*sets[i % 3]), "pp plain": lambda i: cumm.matmul(*sets[i % 3], kernel=PP)}
    kws = [("bias", dict(bias=b)), ("silu", dict(activation="silu")), ("b+gt", dict(bias=b, activation="gelu_tanh"))]
    for name, kw in kws:
        v["auto " + name] = lambda i, kw=kw: cumm.matmul(*sets[i % 3], **kw)
        v["pp " + name] = lambda i, kw=kw: cumm.matmul(*sets[i % 3], kernel=PP, **kw)
    for f in v.values():
        f(0)
        f(1)
        f(2)
    torch.cuda.synchronize()
    x, w = sets[0]
    print(
        "ran:",
        decision(x, w, None),
        "|",
        decision(x, w, None, kernel=PP),
        "|",
        decision(x, w, None, bias=b, activation="gelu_tanh"),
        "|",
        decision(x, w, None, kernel=PP, bias=b, activation="gelu_tanh"),
        flush=True,
    )
    runs = {k: [] for k in v}
    for _r in range(3):
        t = torch_rounds_ms(v, 9, 8, rotate=True)
        med = {k: statistics.median(x) * 1000 for k, x in t.items()}
        for k in v:
            runs[k].append(med[k] / med["plain"])
        print(f"  run {_r}: plain {med['plain']:.1f} us", flush=True)
    print(
        f"{M}x{N}x{K}: "
        + ", ".join(
            f"{k} {statistics.median(runs[k]):.4f} ({'/'.join(f'{x:.3f}' for x in runs[k])})" for k in v if k != "plain"
        ),
        flush=True,
    )
