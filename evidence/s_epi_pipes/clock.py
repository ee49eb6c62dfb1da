"""4096^3 bf16: plain / bias / silu / bias+gelu_tanh held 1.5 s each (2 rounds): us a call, SM clock, power."""

# ruff: noqa: B023, E501, B007, E741

import statistics
import subprocess
import sys
import time

import torch

import cumm

M = N = K = int(sys.argv[1]) if len(sys.argv) > 1 else 4096
ncu = "--ncu" in sys.argv
sets = [
    (torch.randn(M, K, device="cuda", dtype=torch.bfloat16), torch.randn(K, N, device="cuda", dtype=torch.bfloat16))
    for _ in range(3)
]
b = torch.randn(N, device="cuda", dtype=torch.bfloat16)
v = {
    "plain": lambda i: cumm.matmul(*sets[i % 3]),
    "bias": lambda i: cumm.matmul(*sets[i % 3], bias=b),
    "silu": lambda i: cumm.matmul(*sets[i % 3], activation="silu"),
    "b+gt": lambda i: cumm.matmul(*sets[i % 3], bias=b, activation="gelu_tanh"),
}
if ncu:
    for name, f in v.items():
        f(0)
        f(1)
    torch.cuda.synchronize()
    sys.exit()
for f in v.values():
    f(0)
    f(1)
    f(2)
torch.cuda.synchronize()
res = {k: [] for k in v}
for rnd in range(2):
    for name, f in v.items():
        smi = subprocess.Popen(
            ["nvidia-smi", "--query-gpu=clocks.sm,power.draw", "--format=csv,noheader,nounits", "-lms", "50"],
            stdout=subprocess.PIPE,
            text=True,
        )
        t_end = time.perf_counter() + 1.5
        times = []
        i = 0
        while time.perf_counter() < t_end:
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            for _ in range(10):
                f(i)
                i += 1
            e.record()
            e.synchronize()
            times.append(s.elapsed_time(e) / 10 * 1000)
        smi.terminate()
        out = smi.communicate()[0].strip().splitlines()
        rows = [tuple(float(x) for x in l.split(",")) for l in out if l.strip()]
        rows = rows[len(rows) // 3 :]
        clk = statistics.median(r[0] for r in rows)
        pw = statistics.median(r[1] for r in rows)
        us = statistics.median(times[len(times) // 3 :])
        res[name].append((us, clk, pw))
        print(
            f"{M}^3 round {rnd} {name:6s}: {us:7.1f} us  {clk:6.0f} MHz  {pw:5.0f} W  kcycles {us * clk / 1000:7.1f}",
            flush=True,
        )
p = res["plain"]
for name in v:
    r = res[name]
    print(
        f"{name:6s} time x plain {statistics.median(x[0] for x in r) / statistics.median(x[0] for x in p):.4f}  "
        f"cycles x plain {statistics.median(x[0] * x[1] for x in r) / statistics.median(x[0] * x[1] for x in p):.4f}",
        flush=True,
    )
