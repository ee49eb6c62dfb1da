# torch.profiler device time per call (the seed's way): cumm.multi_dot against torch's a @ b @ c, FP32, and parts.
import statistics
import torch
import cumm
from torch.profiler import profile, ProfilerActivity
torch.backends.cuda.matmul.allow_tf32 = False

def dev_us(fn, iters=50):
    for _ in range(5): fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(iters): fn()
        torch.cuda.synchronize()
    tot = sum(e.device_time_total for e in prof.key_averages() if e.device_time_total > 0 and e.self_device_time_total > 0)
    names = sorted({e.key[:60] for e in prof.key_averages() if e.self_device_time_total > 0})
    return sum(e.self_device_time_total for e in prof.key_averages()) / iters, names

for n in (256, 512, 1024):
    a, b, c = (torch.randn(n, n, device="cuda") for _ in range(3))
    ref = (a.double() @ b.double() @ c.double())
    out = cumm.multi_dot([a, b, c])
    err = ((out.double() - ref).norm() / ref.norm()).item()
    rows = {}
    for r in range(3):
        for name, fn in (("torch a@b@c", lambda: a @ b @ c), ("cumm.multi_dot", lambda: cumm.multi_dot([a, b, c])),
                         ("torch a@b", lambda: a @ b), ("cumm.matmul a@b", lambda: cumm.matmul(a, b)),
                         ("cumm.matmul 1x1x1", lambda: cumm.matmul(a[:1, :1], b[:1, :1]))):
            us, names = dev_us(fn)
            rows.setdefault(name, []).append(us)
            if r == 0: print(f"  n={n} {name}: kernels {names}")
    print(f"n = {n} (multi_dot error {err:.1e}): device us per call, 3 runs of 50 calls")
    for k, v in rows.items():
        print(f"  {k:20s} {' / '.join(f'{x:.2f}' for x in v)}  median {statistics.median(v):.2f}")
    t, m = statistics.median(rows["torch a@b@c"]), statistics.median(rows["cumm.multi_dot"])
    print(f"  torch / multi_dot = {t / m:.2f}x")
