# rung 21 (wgmma_epi_overlap) vs wgmma_ws, plain and bias+GELU, bf16 8192x14336x1024, interleaved, CUDA events
import statistics, sys, time
from concurrent.futures import ThreadPoolExecutor
import torch
import cumm
M, N, K = 8192, 14336, 1024
a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
b = torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
bias = torch.randn(N, device="cuda", dtype=torch.bfloat16)
runs = {
    "ws plain": lambda: cumm.matmul(a, b),
    "ws bias+gelu": lambda: cumm.matmul(a, b, bias=bias, activation="gelu"),
    "ov plain": lambda: cumm.matmul(a, b, kernel="wgmma_epi_overlap"),
    "ov bias+gelu": lambda: cumm.matmul(a, b, kernel="wgmma_epi_overlap", bias=bias, activation="gelu"),
    "torch": lambda: torch.matmul(a, b),
}
t0 = time.time()
with ThreadPoolExecutor(4) as ex:  # the four compiles at once
    list(ex.map(lambda f: f(), [runs[k] for k in list(runs)[:4]]))
torch.cuda.synchronize()
print(f"compiled in {time.time() - t0:.0f} s", flush=True)
ref = (a.float() @ b.float())
refg = torch.nn.functional.gelu(ref + bias.float())
for n, f in runs.items():
    out = f().float()
    r = refg if "gelu" in n else ref
    print(n, "rel err vs fp32 %.2e" % ((out - r).norm() / r.norm()).item(), flush=True)
times = {n: [] for n in runs}
s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
for rnd in range(5):
    for n, f in runs.items():
        f(); f()
        s.record()
        for _ in range(10):
            f()
        e.record(); e.synchronize()
        times[n].append(s.elapsed_time(e) / 10)
med = {n: statistics.median(v) for n, v in times.items()}
for n, v in med.items():
    print(f"{n:14s} {v * 1000:8.1f} us  {2 * M * N * K / v / 1e9:6.1f} TFLOP/s  x ws plain {v / med['ws plain']:.3f}")
