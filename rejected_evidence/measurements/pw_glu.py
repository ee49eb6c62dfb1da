# Sustained (~2.5 s each) gated MLP at bf16 8192 x 14336 x K: SM clock and board power by nvidia-smi, time by events.
import subprocess, statistics, time, sys
import torch, torch.nn.functional as F, cumm
M, N, K = 8192, 14336, int(sys.argv[1]) if len(sys.argv) > 1 else 1024
tdt = torch.bfloat16
nrot = 2
X = [torch.randn(M, K, device="cuda", dtype=tdt) for _ in range(nrot)]
W1 = [torch.randn(K, N, device="cuda", dtype=tdt) / K**0.5 for _ in range(nrot)]
W3 = [torch.randn(K, N, device="cuda", dtype=tdt) / K**0.5 for _ in range(nrot)]
W13 = [cumm.glu_weight(a, b) for a, b in zip(W1, W3)]
comp = torch.compile(lambda x, w, w3: F.silu(x @ w) * (x @ w3))
V = {
    "cumm glu": lambda i: cumm.matmul(X[i], W13[i], glu="silu"),
    "torch.compile": lambda i: comp(X[i], W1[i], W3[i]),
    "eager": lambda i: F.silu(X[i] @ W1[i]) * (X[i] @ W3[i]),
    "torch 2N plain": lambda i: X[i] @ W13[i],
}
for f in V.values():
    f(0); f(1)
torch.cuda.synchronize()
s, t = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
for rnd in range(2):
    for n, f in V.items():
        time.sleep(0.5)
        smi = subprocess.Popen(["nvidia-smi", "--query-gpu=clocks.sm,power.draw", "--format=csv,noheader,nounits", "-lms", "50"],
                               stdout=subprocess.PIPE, text=True)
        t0 = time.time(); ts = []
        while time.time() - t0 < 2.5:
            s.record()
            for i in range(20):
                f(i % nrot)
            t.record(); t.synchronize()
            ts.append(s.elapsed_time(t) / 20 * 1000)
        smi.terminate(); out = smi.communicate()[0]
        rows = [tuple(float(x) for x in l.split(",")) for l in out.strip().splitlines() if l.strip()]
        rows = rows[len(rows) // 3:]
        clk = statistics.median(r[0] for r in rows); pw = statistics.median(r[1] for r in rows)
        us = statistics.median(ts[len(ts) // 3:])
        print(f"K={K} {n:16s} {us:8.1f} us  SM clock {clk:6.0f} MHz  power {pw:5.0f} W  energy {us * pw / 1e3:6.1f} mJ", flush=True)
