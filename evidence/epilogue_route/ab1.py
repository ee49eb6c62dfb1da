"""Where does a fused epilogue's cost come from? bf16, per shape: plain (auto, pingpong, ws), bias+gelu_tanh
(auto, pingpong, ws), bias only, gelu_tanh only, the silu snippet, torch. Interleaved rotated rounds."""
import statistics, sys
import torch, torch.nn.functional as F
import cumm
from cumm.api.decision import decision
from cumm.runtime.timing import torch_rounds_ms
SILU = "v = v / (1.0f + __expf(-v));"
shapes = [(8192, 14336, 1024), (8192, 14336, 4096), (4096, 4096, 4096)]
warm = "--warm" in sys.argv
for M, N, K in shapes:
    sets = [(torch.randn(M, K, device="cuda", dtype=torch.bfloat16), torch.randn(K, N, device="cuda", dtype=torch.bfloat16)) for _ in range(3)]
    b = torch.randn(N, device="cuda", dtype=torch.bfloat16)
    S = lambda i: sets[i % 3]
    v = {"plain": lambda i: cumm.matmul(*S(i)),
         "plain pp": lambda i: cumm.matmul(*S(i), kernel="wgmma_pingpong"),
         "plain ws": lambda i: cumm.matmul(*S(i), kernel="wgmma_ws"),
         "b+gt": lambda i: cumm.matmul(*S(i), bias=b, activation="gelu_tanh"),
         "b+gt pp": lambda i: cumm.matmul(*S(i), bias=b, activation="gelu_tanh", kernel="wgmma_pingpong"),
         "b+gt ws": lambda i: cumm.matmul(*S(i), bias=b, activation="gelu_tanh", kernel="wgmma_ws"),
         "bias": lambda i: cumm.matmul(*S(i), bias=b),
         "gt": lambda i: cumm.matmul(*S(i), activation="gelu_tanh"),
         "silu": lambda i: cumm.matmul(*S(i), epilogue=SILU),
         "torch": lambda i: S(i)[0] @ S(i)[1]}
    for f in v.values(): f(0)
    torch.cuda.synchronize()
    if warm:
        continue
    x, w = sets[0]
    print(f"== {M}x{N}x{K}  plain: {decision(x, w, None)!r}  pp: {decision(x, w, None, kernel='wgmma_pingpong')!r}  ws: {decision(x, w, None, kernel='wgmma_ws')!r}", flush=True)
    ref = F.gelu(x.double() @ w.double() + b.double(), approximate="tanh")
    for k in ("b+gt", "b+gt pp", "b+gt ws"):
        out = v[k](0); print(" err", k, f"{float((out.double() - ref).norm() / ref.norm()):.2e}")
    reps = max(5, int(20 * 1024 / K))
    for rep in range(2):
        t = torch_rounds_ms(v, 9, reps, rotate=True)
        med = {k: statistics.median(s) * 1000 for k, s in t.items()}
        base = med["plain"]
        print(" ", "  ".join(f"{k} {us:.1f} ({us / base:.3f})" for k, us in med.items()), flush=True)
