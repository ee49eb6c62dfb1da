# Fused bias + activation by K: wgmma_ws (auto's rung) against wgmma_pingpong and cuBLASLt's fused bias + GELU,
# bf16, interleaved rounds, CUDA events, operands rotated; x torch.matmul's plain product.
import statistics, sys, time
import torch, cumm
tdt = torch.bfloat16
s, t = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
PP = dict(BM=128, BN=128, STAGES=6)
SH = [(8192, 14336, 512), (8192, 14336, 1024), (8192, 14336, 2048), (8192, 14336, 4096), (4096, 4096, 4096),
      (4096, 4096, 1024), (2048, 8192, 1024), (16384, 4096, 1024)]
for M, N, K in SH:
    nrot = max(2, int(300e6 // (K * (M + N) * 2)))
    X = [torch.randn(M, K, device="cuda", dtype=tdt) for _ in range(nrot)]
    W = [torch.randn(K, N, device="cuda", dtype=tdt) for _ in range(nrot)]
    bias = torch.randn(N, device="cuda", dtype=tdt)
    O = torch.empty(M, N, device="cuda", dtype=tdt)
    R = {"torch": lambda i: torch.matmul(X[i], W[i], out=O),
         "lt": lambda i: torch._addmm_activation(bias, X[i], W[i], use_gelu=True)}
    for kn, cf in (("ws", None), ("pp", PP)):
        R[kn] = (lambda kn, cf: lambda i: cumm.matmul(X[i], W[i], kernel="wgmma_" + ("ws" if kn == "ws" else "pingpong"), config=cf, out=O))(kn, cf)
        for act in ("gelu_tanh", "gelu", "silu"):
            R[f"{kn} {act}"] = (lambda kn, cf, act: lambda i: cumm.matmul(X[i], W[i], kernel="wgmma_" + ("ws" if kn == "ws" else "pingpong"), config=cf, bias=bias, activation=act, out=O))(kn, cf, act)
    for f in R.values():
        f(0)
    torch.cuda.synchronize()
    times = {n: [] for n in R}
    for rnd in range(5):
        for n, f in R.items():
            for i in range(3):
                f(i % nrot)
            s.record()
            for i in range(10):
                f(i % nrot)
            t.record(); t.synchronize()
            times[n].append(s.elapsed_time(t) / 10 * 1000)
    med = {n: statistics.median(v) for n, v in times.items()}
    b = med["torch"]
    print(f"{M}x{N}x{K}: torch {b:.1f} us | " + ", ".join(f"{n} {b / v:.3f}" for n, v in med.items() if n != "torch"), flush=True)
    del X, W, O
