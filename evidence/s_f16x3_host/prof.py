"""Host time of a cached FP32 call on wgmma_f16x3 (2048^3), torch and cupy inputs: cProfile of 300 calls."""

# ruff: noqa: B023, E501, B007, E741
import cProfile
import pstats
import time

import cupy
import torch

import cumm

n = 2048
ta, tb = torch.randn(n, n, device="cuda"), torch.randn(n, n, device="cuda")
ca, cb = cupy.asarray(ta), cupy.asarray(tb)
for name, (a, b) in {"torch": (ta, tb), "cupy": (ca, cb)}.items():
    for _ in range(5):
        cumm.matmul(a, b)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(100):
        cumm.matmul(a, b)
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    print(f"{name}: host {(t1 - t0) / 100 * 1e6:.1f} us a call", flush=True)
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(300):
        cumm.matmul(a, b)
    pr.disable()
    torch.cuda.synchronize()
    pstats.Stats(pr).sort_stats("tottime").print_stats(18)
