"""Issue 52: fused bias+gelu_tanh on several rungs/tiles against auto's plain product, steady state (no sleep),
three runs of 9 interleaved rotated rounds; plus auto's silu / bias alone."""

# ruff: noqa: B023, E501, B007, E741

import statistics

import torch

import cumm
from cumm.runtime.timing import torch_rounds_ms

PP = "wgmma_pingpong"
for M, N, K, cfgs in [
    (
        4096,
        4096,
        4096,
        [
            (PP, dict(BM=128, BN=128, GM=8, STAGES=6)),
            (PP, dict(BM=128, BN=128, GM=16, STAGES=6)),
            (PP, dict(BM=128, BN=192, GM=8, STAGES=4)),
            (PP, dict(BM=64, BN=256, GM=8, STAGES=4)),
        ],
    ),
    (
        8192,
        14336,
        1024,
        [
            (PP, dict(BM=128, BN=128, GM=8, STAGES=6)),
            (PP, dict(BM=128, BN=192, GM=8, STAGES=4)),
            (PP, dict(BM=128, BN=192, GM=4, STAGES=4)),
        ],
    ),
]:
    sets = [
        (torch.randn(M, K, device="cuda", dtype=torch.bfloat16), torch.randn(K, N, device="cuda", dtype=torch.bfloat16))
        for _ in range(3)
    ]
    b = torch.randn(N, device="cuda", dtype=torch.bfloat16)
    v = {
        "plain": lambda i: cumm.matmul(*sets[i % 3]),
        "auto b+gt": lambda i: cumm.matmul(*sets[i % 3], bias=b, activation="gelu_tanh"),
        "auto silu": lambda i: cumm.matmul(*sets[i % 3], activation="silu"),
        "auto bias": lambda i: cumm.matmul(*sets[i % 3], bias=b),
    }
    for kern, cfg in cfgs:
        tag = f"{kern} {cfg['BM']}x{cfg['BN']} GM{cfg['GM']} S{cfg['STAGES']}"
        v[tag + " b+gt"] = lambda i, kern=kern, cfg=cfg: cumm.matmul(
            *sets[i % 3], bias=b, activation="gelu_tanh", kernel=kern, config=cfg
        )
        if cfg["BN"] != 192 or K != 1024:
            v[tag + " plain"] = lambda i, kern=kern, cfg=cfg: cumm.matmul(*sets[i % 3], kernel=kern, config=cfg)
    for f in v.values():
        f(0)
        f(1)
        f(2)
    torch.cuda.synchronize()
    runs = {k: [] for k in v}
    for rep in range(3):
        t = torch_rounds_ms(v, 9, 20 if K < 4096 else 8, rotate=True)
        med = {k: statistics.median(s) * 1000 for k, s in t.items()}
        for k in v:
            runs[k].append(med[k] / med["plain"])
        print(
            f"{M}x{N}x{K} run {rep}: plain {med['plain']:.1f} us; "
            + ", ".join(f"{k} {med[k] / med['plain']:.4f}" for k in v if k != "plain"),
            flush=True,
        )
    for k in v:
        print(
            f"{M}x{N}x{K} {k:40s} x plain: {' / '.join(f'{r:.4f}' for r in runs[k])}  median {statistics.median(runs[k]):.4f}",
            flush=True,
        )
