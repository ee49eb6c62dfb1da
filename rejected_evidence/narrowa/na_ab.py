# rung 16's few-row tiles (BM 16/32, h-narrowa) vs auto (main's table, restamped) vs torch.matmul; interleaved rounds,
# CUDA events, operands rotated past L2
import statistics, sys, time
from concurrent.futures import ThreadPoolExecutor
import torch
import cumm
C = lambda **k: dict(WGS=1, NUM_THREADS=256, GM=8, **k)
CFG = {"16/128/2/12": C(BM=16, BN=128, KS=2, STAGES=12), "16/128/4/12": C(BM=16, BN=128, KS=4, STAGES=12),
       "16/64/4/12": C(BM=16, BN=64, KS=4, STAGES=12), "16/256/4/6": C(BM=16, BN=256, KS=4, STAGES=6),
       "16/256/2/6": C(BM=16, BN=256, KS=2, STAGES=6), "32/64/4/10": C(BM=32, BN=64, KS=4, STAGES=10),
       "32/128/2/10": C(BM=32, BN=128, KS=2, STAGES=10), "64/128/2/8": C(BM=64, BN=128, KS=2, STAGES=8)}
SHAPES = [(16, 6144, 4096), (32, 6144, 4096), (16, 4096, 14336), (16, 28672, 4096), (16, 128256, 4096), (16, 4096, 4096)]
t0 = time.time()
for tdt in (torch.bfloat16, torch.float16):
    a0 = torch.randn(16, 64, device="cuda", dtype=tdt); b0 = torch.randn(64, 64, device="cuda", dtype=tdt)
    with ThreadPoolExecutor(8) as ex:
        list(ex.map(lambda c: cumm.matmul(a0, b0, kernel="wgmma_cluster_split_k", config=c), CFG.values()))
torch.cuda.synchronize(); print(f"compiled in {time.time() - t0:.0f} s", flush=True)
s, t = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
for tdt in (torch.bfloat16, torch.float16):
    for M, N, K in SHAPES:
        nrot = max(2, int(300e6 // (K * N * 2)))
        A = [torch.randn(M, K, device="cuda", dtype=tdt) for _ in range(nrot)]
        B = [torch.randn(K, N, device="cuda", dtype=tdt) for _ in range(nrot)]
        runs = {"torch": lambda i: torch.matmul(A[i], B[i]), "auto": lambda i: cumm.matmul(A[i], B[i])}
        for n, c in CFG.items():
            runs[n] = (lambda c: lambda i: cumm.matmul(A[i], B[i], kernel="wgmma_cluster_split_k", config=c))(c)
        ref = torch.matmul(A[0].double(), B[0].double())
        for n, f in runs.items():
            e = ((f(0).double() - ref).norm() / ref.norm()).item()
            assert e < 1e-2, (n, e)
        times = {n: [] for n in runs}
        for rnd in range(7):
            for n, f in runs.items():
                for i in range(3):
                    f(i % nrot)
                s.record()
                for i in range(20):
                    f(i % nrot)
                t.record(); t.synchronize()
                times[n].append(s.elapsed_time(t) / 20 * 1000)
        med = {n: statistics.median(v) for n, v in times.items()}
        best = min((v, n) for n, v in med.items() if n not in ("torch", "auto"))
        print(f"{str(tdt)[6:]} {M}x{N}x{K}: torch {med['torch']:.1f} us, auto {med['auto']:.1f} ({med['torch']/med['auto']:.3f}x) | "
              + ", ".join(f"{n} {med['torch']/v:.3f}" for n, v in med.items() if n not in ("torch", "auto"))
              + f" | best {best[1]} {med['torch']/best[0]:.3f}x", flush=True)
