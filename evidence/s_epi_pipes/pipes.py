"""Issue 52: what an epilogue instruction costs, by pipe. Snippets adding n instructions an element of one kind
(asm volatile: kept), x auto's plain product, bf16, three runs of 9 interleaved rotated rounds."""

# ruff: noqa: B023, E501, B007, E741

import statistics

import torch

import cumm
from cumm.runtime.timing import torch_rounds_ms


def rep(stmt, n):
    return " ".join([stmt] * n)


FMA = 'asm volatile("fma.rn.ftz.f32 %0, %0, 0f3F800347, 0f358637BD;" : "+f"(v));'
FMUL = 'asm volatile("mul.rn.ftz.f32 %0, %0, 0f3F800347;" : "+f"(v));'
MAX = 'asm volatile("max.ftz.f32 %0, %0, 0fF149F2CA;" : "+f"(v));'
LOP = '{ unsigned x = __float_as_uint(v); asm volatile("xor.b32 %0, %0, %1;" : "+r"(x) : "r"(row >> 30)); v = __uint_as_float(x); }'
H2 = '{ unsigned x = __float_as_uint(v); asm volatile("fma.rn.f16x2 %0, %0, %0, %0;" : "+r"(x)); v = __uint_as_float(x); }'
TANH = 'asm volatile("tanh.approx.f32 %0, %0;" : "+f"(v));'
SNIPS = {
    "snip v=v": "v = v;",
    "fma x4": rep(FMA, 4),
    "fma x8": rep(FMA, 8),
    "fmul x8": rep(FMUL, 8),
    "max x8": rep(MAX, 8),
    "hfma2 x8": rep(H2, 8),
    "tanh x2": rep(TANH, 2),
}
shapes = [(8192, 14336, 1024), (4096, 4096, 4096)]
for M, N, K in shapes:
    sets = [
        (torch.randn(M, K, device="cuda", dtype=torch.bfloat16), torch.randn(K, N, device="cuda", dtype=torch.bfloat16))
        for _ in range(3)
    ]
    b = torch.randn(N, device="cuda", dtype=torch.bfloat16)
    v = {
        "plain": lambda i: cumm.matmul(*sets[i % 3]),
        "b+gt": lambda i: cumm.matmul(*sets[i % 3], bias=b, activation="gelu_tanh"),
    }
    for name, s in SNIPS.items():
        v[name] = lambda i, s=s: cumm.matmul(*sets[i % 3], epilogue=s)
    for f in v.values():
        f(0)
        f(1)
        f(2)
    torch.cuda.synchronize()
    runs = {k: [] for k in v}
    for _r in range(3):
        t = torch_rounds_ms(v, 9, 20 if K < 4096 else 8, rotate=True)
        med = {k: statistics.median(x) * 1000 for k, x in t.items()}
        for k in v:
            runs[k].append(med[k] / med["plain"])
    for k in v:
        print(
            f"{M}x{N}x{K} {k:10s} x plain: {' / '.join(f'{r:.4f}' for r in runs[k])}  median {statistics.median(runs[k]):.4f}",
            flush=True,
        )
