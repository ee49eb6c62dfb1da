# wgmma_pingpong: correctness on odd shapes (both dtypes), then bf16 timing vs auto and torch (interleaved rounds,
# CUDA events, operands rotated past L2) at attention q @ k^T, fused-epilogue shapes and a few others.
import math, statistics, sys, time
import torch
import cumm
PP = "wgmma_pingpong"
CF = {"128x128s6": dict(BM=128, BN=128, STAGES=6), "64x256s4": dict(BM=64, BN=256, STAGES=4),
      "128x64s8": dict(BM=128, BN=64, STAGES=8), "64x128s8": dict(BM=64, BN=128, STAGES=8),
      "128x128s5g16": dict(BM=128, BN=128, STAGES=5, GM=16)}
if len(sys.argv) > 1 and sys.argv[1] == "quick":
    CF = {k: CF[k] for k in ("128x128s6", "64x256s4")}
t0 = time.time()
def err(x, ref): return ((x.double() - ref).norm() / ref.norm()).item()
bad = 0
for tdt in (torch.bfloat16, torch.float16):
    for (M, N, K) in [(1, 8, 8), (127, 131, 136), (2048, 2048, 2048), (4097, 300, 1000), (300, 1000, 4104), (64, 64, 64), (1000, 77, 520)]:
        for cn, c in [("def", None), ("64x256", CF["64x256s4"])]:
            a = torch.randn(M, K, device="cuda", dtype=tdt); b = torch.randn(K, N, device="cuda", dtype=tdt)
            ref = a.double() @ b.double()
            out = torch.full((M, N), math.nan, device="cuda", dtype=tdt)
            cumm.matmul(a, b, kernel=PP, config=c, out=out)
            e, et = err(out, ref), err(a @ b, ref)
            ok = e <= 1.5 * et + 1e-7
            bad += not ok
            print(f"{str(tdt)[6:]} {M}x{N}x{K} {cn}: {e:.2e} torch {et:.2e} {'ok' if ok else 'BAD'}", flush=True)
    # transposed B (k^T view) batched, broadcast weight, fused epilogue
    q = torch.randn(5, 300, 128, device="cuda", dtype=tdt); k = torch.randn(5, 500, 128, device="cuda", dtype=tdt)
    out = torch.full((5, 300, 500), math.nan, device="cuda", dtype=tdt)
    cumm.matmul(q, k.transpose(-1, -2), kernel=PP, out=out)
    ref = q.double() @ k.double().transpose(-1, -2)
    e, et = err(out, ref), err(q @ k.transpose(-1, -2), ref); bad += not (e <= 1.5 * et + 1e-7)
    print(f"{str(tdt)[6:]} batch5 qk^T: {e:.2e} torch {et:.2e}", flush=True)
    x = torch.randn(777, 1000, device="cuda", dtype=tdt); w = torch.randn(1000, 1536, device="cuda", dtype=tdt)
    bias = torch.randn(1536, device="cuda", dtype=tdt)
    for act in ("gelu", "gelu_tanh", "silu"):
        out = torch.full((777, 1536), math.nan, device="cuda", dtype=tdt)
        cumm.matmul(x, w, kernel=PP, bias=bias, activation=act, out=out)
        v = x.double() @ w.double() + bias.double()
        ref = {"gelu": torch.nn.functional.gelu(v), "gelu_tanh": torch.nn.functional.gelu(v, approximate="tanh"),
               "silu": torch.nn.functional.silu(v)}[act]
        tv = (x @ w + bias).float()
        tr = {"gelu": torch.nn.functional.gelu(tv), "gelu_tanh": torch.nn.functional.gelu(tv, approximate="tanh"),
              "silu": torch.nn.functional.silu(tv)}[act].to(tdt)
        e, et = err(out, ref), err(tr, ref); bad += not (e <= 1.5 * et + 1e-7)
        print(f"{str(tdt)[6:]} bias+{act}: {e:.2e} torch {et:.2e}", flush=True)
print(f"correctness done in {time.time() - t0:.0f} s, bad={bad}", flush=True)

s, t = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
tdt = torch.bfloat16
def bench(label, runs, nrot, flops):
    times = {n: [] for n in runs}
    for rnd in range(5):
        for n, f in runs.items():
            for i in range(3):
                f(i % nrot)
            s.record()
            for i in range(20):
                f(i % nrot)
            t.record(); t.synchronize()
            times[n].append(s.elapsed_time(t) / 20 * 1000)
    med = {n: statistics.median(v) for n, v in times.items()}
    base = med["torch"]
    print(f"{label}: torch {base:.1f} us {flops / base / 1e6:.0f} TF | " + ", ".join(f"{n} {base / v:.3f}" for n, v in med.items() if n != "torch"), flush=True)
    return med

# attention q @ k^T: (B, S, 128) @ (B, S, 128)^T
for B, S in [(32, 2048), (32, 4096), (256, 512)]:
    nrot = max(2, int(200e6 // (B * S * 128 * 4)))
    Q = [torch.randn(B, S, 128, device="cuda", dtype=tdt) for _ in range(nrot)]
    Kk = [torch.randn(B, S, 128, device="cuda", dtype=tdt) for _ in range(nrot)]
    O = torch.empty(B, S, S, device="cuda", dtype=tdt)
    runs = {"torch": lambda i: torch.matmul(Q[i], Kk[i].transpose(-1, -2), out=O),
            "auto": lambda i: cumm.matmul(Q[i], Kk[i].transpose(-1, -2), out=O)}
    for n, c in CF.items():
        runs[n] = (lambda c: lambda i: cumm.matmul(Q[i], Kk[i].transpose(-1, -2), kernel=PP, config=c, out=O))(c)
    bench(f"qk^T B{B} S{S}", runs, nrot, 2 * B * S * S * 128)
    del Q, Kk, O

for M, N, K in [(8192, 14336, 1024), (8192, 14336, 4096), (4096, 4096, 4096)]:
    nrot = max(2, int(300e6 // (K * (M + N) * 2)))
    X = [torch.randn(M, K, device="cuda", dtype=tdt) for _ in range(nrot)]
    W = [torch.randn(K, N, device="cuda", dtype=tdt) for _ in range(nrot)]
    Wt = [w.t().contiguous().t() for w in W]  # for torch's addmm_activation: (N, K) rows
    bias = torch.randn(N, device="cuda", dtype=tdt)
    O = torch.empty(M, N, device="cuda", dtype=tdt)
    runs = {"torch": lambda i: torch.matmul(X[i], W[i], out=O), "auto": lambda i: cumm.matmul(X[i], W[i], out=O)}
    for n, c in CF.items():
        runs[n] = (lambda c: lambda i: cumm.matmul(X[i], W[i], kernel=PP, config=c, out=O))(c)
    runs["lt bias+gelu"] = lambda i: torch._addmm_activation(bias, X[i], W[i], use_gelu=True)
    runs["auto bias+gelu"] = lambda i: cumm.matmul(X[i], W[i], bias=bias, activation="gelu", out=O)
    runs["auto bias+gelu_tanh"] = lambda i: cumm.matmul(X[i], W[i], bias=bias, activation="gelu_tanh", out=O)
    for n in ("128x128s6", "64x256s4"):
        runs[n + " bias+gelu"] = (lambda c: lambda i: cumm.matmul(X[i], W[i], kernel=PP, config=c, bias=bias, activation="gelu", out=O))(CF[n])
        runs[n + " bias+gelu_tanh"] = (lambda c: lambda i: cumm.matmul(X[i], W[i], kernel=PP, config=c, bias=bias, activation="gelu_tanh", out=O))(CF[n])
    bench(f"{M}x{N}x{K}", runs, nrot, 2 * M * N * K)
    del X, W, Wt, O
print(f"all done in {time.time() - t0:.0f} s", flush=True)
