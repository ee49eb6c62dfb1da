# (1) 1024 x 1024 x 8192: wgmma_ws 128 x 64 tiles with B multicast over clusters of two (CL = 2) against auto and
# torch, interleaved bursts; (2) sustained (2 s of back-to-back calls each, nvidia-smi clock and power): wgmma_ws CL = 1
# against CL = 2 and torch at large squares: is multicast's lower L2 traffic worth clock under the power cap?
import statistics, subprocess, time
import torch, cumm
tdt = torch.bfloat16
s, t = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
M, N, K = 1024, 1024, 8192
nrot = 8
A = [torch.randn(M, K, device="cuda", dtype=tdt) for _ in range(nrot)]
B = [torch.randn(K, N, device="cuda", dtype=tdt) for _ in range(nrot)]
O = torch.empty(M, N, device="cuda", dtype=tdt)
W = "wgmma_ws"
R = {"torch": lambda i: torch.matmul(A[i], B[i], out=O), "auto": lambda i: cumm.matmul(A[i], B[i], out=O)}
for st in (6, 8):
    for cl in (1, 2):
        c = dict(BM=128, BN=64, WGS=1, NUM_THREADS=256, STAGES=st, CL=cl, SK=0, GM=4, EPI=1)
        R[f"128x64 s{st} cl{cl}"] = (lambda c: lambda i: cumm.matmul(A[i], B[i], kernel=W, config=c, out=O))(c)
c = dict(BM=128, BN=128, WGS=2, NUM_THREADS=384, STAGES=6, CL=2, SK=0, GM=4, EPI=1)
R["128x128 wgs2 cl2"] = lambda i: cumm.matmul(A[i], B[i], kernel=W, config=c, out=O)
ref = A[0].double() @ B[0].double()
for n, f in R.items():
    f(0); e = ((O.double() - ref).norm() / ref.norm()).item(); assert e < 1e-2, (n, e)
times = {n: [] for n in R}
for rnd in range(7):
    for n, f in R.items():
        for i in range(3):
            f(i % nrot)
        s.record()
        for i in range(20):
            f(i % nrot)
        t.record(); t.synchronize()
        times[n].append(s.elapsed_time(t) / 20 * 1000)
med = {n: statistics.median(v) for n, v in times.items()}
print(f"1024x1024x8192: torch {med['torch']:.1f} us | " + ", ".join(f"{n} {med['torch'] / v:.3f}" for n, v in med.items() if n != "torch"), flush=True)

def sustained(label, V, nrot):
    for n, f in V.items():
        f(0)
    torch.cuda.synchronize()
    for n, f in V.items():
        time.sleep(0.5)
        smi = subprocess.Popen(["nvidia-smi", "--query-gpu=clocks.sm,power.draw", "--format=csv,noheader,nounits", "-lms", "50"], stdout=subprocess.PIPE, text=True)
        t0 = time.time(); ts = []
        while time.time() - t0 < 2.0:
            s.record()
            for i in range(10):
                f(i % nrot)
            t.record(); t.synchronize()
            ts.append(s.elapsed_time(t) / 10 * 1000)
        smi.terminate(); out = smi.communicate()[0]
        rows = [tuple(float(x) for x in l.split(",")) for l in out.strip().splitlines() if l.strip()]
        rows = rows[len(rows) // 3:]
        clk = statistics.median(r[0] for r in rows); pw = statistics.median(r[1] for r in rows)
        us = statistics.median(ts[len(ts) // 3:])
        print(f"{label} {n:14s} {us:8.1f} us  {clk:5.0f} MHz  {pw:4.0f} W  {us * clk / 1e6:6.3f} Mcyc", flush=True)

for M, N, K in [(8192, 8192, 8192), (4096, 4096, 4096), (8192, 14336, 4096)]:
    nrot = 2
    X = [torch.randn(M, K, device="cuda", dtype=tdt) for _ in range(nrot)]
    Y = [torch.randn(K, N, device="cuda", dtype=tdt) for _ in range(nrot)]
    O = torch.empty(M, N, device="cuda", dtype=tdt)
    V = {"torch": lambda i: torch.matmul(X[i], Y[i], out=O), "auto": lambda i: cumm.matmul(X[i], Y[i], out=O),
         "ws cl1 sk0": lambda i: cumm.matmul(X[i], Y[i], kernel=W, config=dict(SK=0), out=O),
         "ws cl2 sk0": lambda i: cumm.matmul(X[i], Y[i], kernel=W, config=dict(CL=2, SK=0), out=O)}
    sustained(f"{M}x{N}x{K}", V, nrot)
    del X, Y, O
