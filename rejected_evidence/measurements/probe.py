# cuBLAS's kernels (names: tile, cluster, split) on the suite's weakest shapes, and ours, by torch.profiler.
import torch, cumm
from torch.profiler import profile, ProfilerActivity
def run(name, f):
    for _ in range(3): f()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(5): f()
        torch.cuda.synchronize()
    ev = {}
    for e in prof.events():
        if e.device_type.name == "CUDA":
            ev.setdefault(e.name, []).append(e.device_time)
    for k, v in ev.items():
        print(f"{name:28s} {sum(v)/5:8.1f} us/call  x{len(v)/5:.0f}  {k[:150]}", flush=True)
bf = torch.bfloat16
for dt in (bf, torch.float16):
    for M, N, K in [(1024, 1024, 8192), (128, 8192, 8192), (512, 4096, 14336), (4096, 4096, 4096)]:
        a = torch.randn(M, K, device="cuda", dtype=dt); b = torch.randn(K, N, device="cuda", dtype=dt)
        run(f"torch {dt} {M}x{N}x{K}", lambda: a @ b)
        run(f"cumm {dt} {M}x{N}x{K}", lambda: cumm.matmul(a, b))
q = torch.randn(32, 4096, 128, device="cuda", dtype=bf); k = torch.randn(32, 4096, 128, device="cuda", dtype=bf)
run("torch qk s4096", lambda: q @ k.transpose(1, 2))
run("cumm qk s4096", lambda: cumm.matmul(q, k.transpose(1, 2)))
a = torch.randn(8192, 8192, device="cuda"); b = torch.randn(8192, 8192, device="cuda")
torch.backends.cuda.matmul.allow_tf32 = False
run("torch fp32 8192", lambda: a @ b)
run("cumm fp32 8192", lambda: cumm.matmul(a, b))
