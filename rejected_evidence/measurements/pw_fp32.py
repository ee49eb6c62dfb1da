# Sustained FP32 (2.5 s each): cumm auto (3xTF32) vs cuBLAS FP32 at 4096^3 and 8192^3: clock, power, time.
import subprocess, statistics, time
import torch, cumm
torch.backends.cuda.matmul.allow_tf32 = False
for n in (4096, 8192):
    A = [torch.randn(n, n, device="cuda") for _ in range(2)]; B = [torch.randn(n, n, device="cuda") for _ in range(2)]
    O = torch.empty(n, n, device="cuda")
    V = {"cumm": lambda i: cumm.matmul(A[i], B[i], out=O), "torch": lambda i: torch.matmul(A[i], B[i], out=O)}
    for f in V.values(): f(0)
    torch.cuda.synchronize()
    s, t = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for rnd in range(2):
        for name, f in V.items():
            time.sleep(0.5)
            smi = subprocess.Popen(["nvidia-smi", "--query-gpu=clocks.sm,power.draw", "--format=csv,noheader,nounits", "-lms", "50"], stdout=subprocess.PIPE, text=True)
            t0 = time.time(); ts = []; first = None
            while time.time() - t0 < 2.5:
                s.record()
                for i in range(4): f(i % 2)
                t.record(); t.synchronize()
                ts.append(s.elapsed_time(t) / 4)
            smi.terminate(); out = smi.communicate()[0]
            rows = [tuple(float(x) for x in l.split(",")) for l in out.strip().splitlines() if l.strip()]
            rows = rows[len(rows) // 3:]
            clk = statistics.median(r[0] for r in rows); pw = statistics.median(r[1] for r in rows)
            ms = statistics.median(ts[len(ts) // 3:])
            print(f"n={n} {name:6s} first {ts[0]:7.3f} ms  steady {ms:7.3f} ms {2*n**3/ms/1e9:6.1f} TFLOP/s  clock {clk:5.0f} MHz  power {pw:4.0f} W", flush=True)
