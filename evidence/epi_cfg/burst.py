# ruff: noqa: B023, E501, B007, E741, E702, E401, I001, E402
"""2048^3 bf16: a fused call's time in bursts against alone, and what a burst launches (torch profiler)."""

import statistics
import torch
import cumm

x = torch.randn(2048, 2048, device="cuda", dtype=torch.bfloat16)
w = torch.randn(2048, 2048, device="cuda", dtype=torch.bfloat16)
b = torch.randn(2048, device="cuda", dtype=torch.bfloat16)
V = {
    "plain": lambda: cumm.matmul(x, w),
    "pp plain": lambda: cumm.matmul(x, w, kernel="wgmma_pingpong"),
    "b+gt": lambda: cumm.matmul(x, w, bias=b, activation="gelu_tanh"),
    "torch": lambda: torch.matmul(x, w),
}
for f in V.values():
    f()
    f()
torch.cuda.synchronize()
for name, f in V.items():
    bursts, singles = [], []
    for _ in range(20):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(20):
            f()
        e.record()
        e.synchronize()
        bursts.append(s.elapsed_time(e) / 20 * 1000)
        s.record()
        f()
        e.record()
        e.synchronize()
        singles.append(s.elapsed_time(e) * 1000)
    print(f"{name:8s} burst {statistics.median(bursts):.1f} us  single {statistics.median(singles):.1f} us", flush=True)
from torch.profiler import profile, ProfilerActivity

with profile(activities=[ProfilerActivity.CUDA]) as prof:
    for _ in range(5):
        V["b+gt"]()
    torch.cuda.synchronize()
print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=8))
