"""Issue 52's <= 3 %: auto's bias + gelu_tanh against auto's plain product, bf16, three runs of 11 interleaved rotated
rounds per shape. python k1024.py [--warm]"""

import statistics, sys
import torch
import cumm
from cumm.runtime.timing import torch_rounds_ms

warm = "--warm" in sys.argv
for M, N, K in [(8192, 14336, 1024), (8192, 14336, 4096), (4096, 4096, 4096)]:
    sets = [
        (torch.randn(M, K, device="cuda", dtype=torch.bfloat16), torch.randn(K, N, device="cuda", dtype=torch.bfloat16))
        for _ in range(3)
    ]
    b = torch.randn(N, device="cuda", dtype=torch.bfloat16)
    v = {
        "plain": lambda i: cumm.matmul(*sets[i % 3]),
        "b+gt": lambda i: cumm.matmul(*sets[i % 3], bias=b, activation="gelu_tanh"),
    }
    for f in v.values():
        f(0)
    torch.cuda.synchronize()
    if warm:
        continue
    rs = []
    for rep in range(3):
        t = torch_rounds_ms(v, 11, 20 if K < 4096 else 8, rotate=True)
        med = {k: statistics.median(s) * 1000 for k, s in t.items()}
        rs.append(med["b+gt"] / med["plain"])
        print(f"{M}x{N}x{K} plain {med['plain']:.1f} b+gt {med['b+gt']:.1f} ratio {rs[-1]:.4f}", flush=True)
    print(f"{M}x{N}x{K} median of three {statistics.median(rs):.4f}", flush=True)
