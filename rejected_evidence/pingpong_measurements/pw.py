# Is the fused epilogue's cost power? Each variant runs alone for ~2.5 s (bf16 8192x14336x1024, operands rotated);
# nvidia-smi samples the SM clock and the board power meanwhile; per-call time by CUDA events.
import subprocess, statistics, time, sys, os
import torch, cumm
M, N, K = 8192, 14336, int(sys.argv[1]) if len(sys.argv) > 1 else 1024
tdt = torch.bfloat16
nrot = 3
X = [torch.randn(M, K, device="cuda", dtype=tdt) for _ in range(nrot)]
W = [torch.randn(K, N, device="cuda", dtype=tdt) for _ in range(nrot)]
bias = torch.randn(N, device="cuda", dtype=tdt)
O = torch.empty(M, N, device="cuda", dtype=tdt)
PP = dict(BM=128, BN=128, STAGES=6)
V = {
    "torch": lambda i: torch.matmul(X[i], W[i], out=O),
    "lt bias+gelu": lambda i: torch._addmm_activation(bias, X[i], W[i], use_gelu=True),
    "ws plain": lambda i: cumm.matmul(X[i], W[i], kernel="wgmma_ws", out=O),
    "ws bias+gelu_tanh": lambda i: cumm.matmul(X[i], W[i], kernel="wgmma_ws", bias=bias, activation="gelu_tanh", out=O),
    "pp plain": lambda i: cumm.matmul(X[i], W[i], kernel="wgmma_pingpong", config=PP, out=O),
    "pp bias": lambda i: cumm.matmul(X[i], W[i], kernel="wgmma_pingpong", config=PP, bias=bias, out=O),
    "pp bias+relu": lambda i: cumm.matmul(X[i], W[i], kernel="wgmma_pingpong", config=PP, bias=bias, activation="relu", out=O),
    "pp bias+gelu_tanh": lambda i: cumm.matmul(X[i], W[i], kernel="wgmma_pingpong", config=PP, bias=bias, activation="gelu_tanh", out=O),
    "pp bias+gelu": lambda i: cumm.matmul(X[i], W[i], kernel="wgmma_pingpong", config=PP, bias=bias, activation="gelu", out=O),
}
for f in V.values():
    f(0)
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
        rows = rows[len(rows) // 3:]  # steady state
        clk = statistics.median(r[0] for r in rows); pw = statistics.median(r[1] for r in rows)
        us = statistics.median(ts[len(ts) // 3:])
        print(f"K={K} {n:20s} {us:8.1f} us  SM clock {clk:6.0f} MHz  power {pw:5.0f} W  time x clock {us * clk / 1e6:7.3f} Mcyc", flush=True)
