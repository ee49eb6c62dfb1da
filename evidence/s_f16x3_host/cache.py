"""FP32 fused calls on wgmma_f16x3: kept (this tree) against the checked path every call (fused.calls cleared
before each: the tree before), host us a call and device time in interleaved bursts."""

# ruff: noqa: B023, E501, B007, E741
import statistics
import time

import torch

import cumm
from cumm.api import fused as FU
from cumm.runtime.timing import torch_rounds_ms

for n in (2048, 4096):
    sets = [(torch.randn(n, n, device="cuda"), torch.randn(n, n, device="cuda")) for _ in range(3)]
    b = torch.randn(n, device="cuda")

    def kept(i):
        return cumm.matmul(*sets[i % 3], bias=b, activation="gelu")

    def checked(i):
        FU.calls.clear()
        return cumm.matmul(*sets[i % 3], bias=b, activation="gelu")

    def plain(i):
        return cumm.matmul(*sets[i % 3])

    v = {"plain": plain, "fused kept": kept, "fused checked": checked}
    for f in v.values():
        f(0), f(1), f(2)
    torch.cuda.synchronize()
    routes = {k[0] for k in FU.calls}
    for name, f in v.items():  # host time: the GPU is far behind after a few calls, so time 30 calls + sync / 30
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for i in range(30):
            f(i)
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        print(f"{n}^3 {name:14s} host enqueue {(t1 - t0) / 30 * 1e6:7.1f} us a call", flush=True)
    rs = []
    for r in range(3):
        t = torch_rounds_ms(v, 9, 20, rotate=True)
        med = {k: statistics.median(x) * 1000 for k, x in t.items()}
        print(f"{n}^3 run {r}: " + ", ".join(f"{k} {med[k]:.1f} us" for k in v), f"routes {routes}", flush=True)
