"""Is issue 52's fused/plain ratio host time? Timing method A/B, host us per call, routes."""

# ruff: noqa: B023, E501, B007, E741

import statistics
import time

import torch

import cumm
from cumm.api import fused as FU
from cumm.api import matmul as MM


def routes():
    for _k, c in MM._calls.items():
        print("plain", c.M, c.N, c.K, c.plan.spec.name, dict(c.plan.cfg), flush=True)
    for _k, (c, _, _) in FU.calls.items():
        print("fused", c.M, c.N, c.K, c.plan.spec.name, dict(c.plan.cfg), flush=True)


def rounds(v, n, reps, sleep):
    t = {k: [] for k in v}
    names = list(v)
    for r in range(n):
        k = r % len(names)
        for name in names[k:] + names[:k]:
            fn = v[name]
            if sleep:
                torch.cuda._sleep(sleep)
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            for i in range(reps):
                fn(i)
            e.record()
            e.synchronize()
            t[name].append(s.elapsed_time(e) / reps)
    return {k: statistics.median(x) * 1000 for k, x in t.items()}


for M, N, K in [(4096, 4096, 4096), (8192, 14336, 1024)]:
    sets = [
        (torch.randn(M, K, device="cuda", dtype=torch.bfloat16), torch.randn(K, N, device="cuda", dtype=torch.bfloat16))
        for _ in range(3)
    ]
    b = torch.randn(N, device="cuda", dtype=torch.bfloat16)
    v = {
        "plain": lambda i: cumm.matmul(*sets[i % 3]),
        "b+gt": lambda i: cumm.matmul(*sets[i % 3], bias=b, activation="gelu_tanh"),
    }
    for f in v.values():
        f(0)
        f(1)
        f(2)
    torch.cuda.synchronize()
    for reps, sleep in [(8, 0), (8, 4_000_000), (40, 0), (20, 0), (20, 4_000_000)]:
        rs = []
        for _rep in range(3):
            m = rounds(v, 11, reps, sleep)
            rs.append(m["b+gt"] / m["plain"])
            print(
                f"{M}x{N}x{K} reps {reps} sleep {sleep}: plain {m['plain']:.1f} b+gt {m['b+gt']:.1f} ratio {rs[-1]:.4f}",
                flush=True,
            )
        print(f"{M}x{N}x{K} reps {reps} sleep {sleep}: MEDIAN {statistics.median(rs):.4f}", flush=True)
routes()
# host time per call on a small product (GPU time negligible)
x = torch.randn(256, 256, device="cuda", dtype=torch.bfloat16)
w = torch.randn(256, 256, device="cuda", dtype=torch.bfloat16)
bb = torch.randn(256, device="cuda", dtype=torch.bfloat16)
for name, fn in [
    ("plain", lambda: cumm.matmul(x, w)),
    ("b+gt", lambda: cumm.matmul(x, w, bias=bb, activation="gelu_tanh")),
    ("torch", lambda: x @ w),
]:
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(2000):
        fn()
    torch.cuda.synchronize()
    print(f"host {name}: {(time.perf_counter() - t0) / 2000 * 1e6:.1f} us/call", flush=True)
