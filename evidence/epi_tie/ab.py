# ruff: noqa: B023, E501, B007, E741, E702, E401, I001
"""The tie route: auto's fused calls (now wgmma_pingpong with its tuned 4096^3 entry where the table ties it with
wgmma_ws) against wgmma_ws's fused calls by name (the route before), bf16, x auto's plain; 3 runs of 9 rounds."""

import statistics
import torch
import cumm
from cumm.api.decision import decision
from cumm.runtime.timing import torch_rounds_ms

WS = dict(BM=128, BN=256, STAGES=4, WGS=2, GM=8, CL=1, EPI=1, SK=4)
SNIP = "v = v / (1.0f + __expf(-v));"
SH = [(4096, 4096, 4096), (4096, 4096, 3584), (2048, 8192, 4096)]
for M, N, K in SH:
    sets = [
        (torch.randn(M, K, device="cuda", dtype=torch.bfloat16), torch.randn(K, N, device="cuda", dtype=torch.bfloat16))
        for _ in range(3)
    ]
    b = torch.randn(N, device="cuda", dtype=torch.bfloat16)
    v = {"plain": lambda i: cumm.matmul(*sets[i % 3])}
    kws = [
        ("bias", dict(bias=b)),
        ("silu", dict(activation="silu")),
        ("b+gt", dict(bias=b, activation="gelu_tanh")),
        ("snip", dict(epilogue=SNIP)),
    ]
    for name, kw in kws:
        v["auto " + name] = lambda i, kw=kw: cumm.matmul(*sets[i % 3], **kw)
        v["ws " + name] = lambda i, kw=kw: cumm.matmul(*sets[i % 3], kernel="wgmma_ws", config=WS, **kw)
    for f in v.values():
        f(0)
        f(1)
        f(2)
    torch.cuda.synchronize()
    x, w = sets[0]
    ref = torch.nn.functional.gelu(x.double() @ w.double() + b.double(), approximate="tanh")
    got = cumm.matmul(x, w, bias=b, activation="gelu_tanh").double()
    print(
        f"{M}x{N}x{K}: plain {decision(x, w, None)} | fused {decision(x, w, None, bias=b, activation='gelu_tanh')} | err {float((got - ref).norm() / ref.norm()):.2e}",
        flush=True,
    )
    runs = {k: [] for k in v}
    for _r in range(3):
        t = torch_rounds_ms(v, 9, 8, rotate=True)
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
