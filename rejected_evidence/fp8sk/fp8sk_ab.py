# FP8 stream-K tail (h-fp8sk): the shipped configurations with SK = 0 (whole tiles) and SK = 4, per-tensor and
# block-scaled, vs torch._scaled_mm (per-tensor), interleaved rounds, two operand sets alternating, CUDA events
import statistics, sys, torch, cumm
from cumm.tools.bench_fp8 import operands
W = {(4096, 4096, 4096): dict(BM=128, BN=128, STAGES=6, WGS=2, GM=8, EPI=1, PROMO=2, NUM_THREADS=384),
     (8192, 8192, 8192): dict(BM=192, BN=128, STAGES=4, WGS=3, GM=8, EPI=1, PROMO=1, NUM_THREADS=512),
     (8192, 14336, 4096): dict(BM=192, BN=128, STAGES=4, WGS=3, GM=16, EPI=1, PROMO=1, NUM_THREADS=512)}
BL = {(4096, 4096, 4096): dict(BM=128, BN=128, STAGES=5, WGS=2, GM=8, EPI=1, PROMO=2, NUM_THREADS=384),
      (8192, 8192, 8192): dict(BM=192, BN=128, STAGES=4, WGS=3, GM=16, EPI=1, PROMO=1, NUM_THREADS=512),
      (8192, 14336, 4096): dict(BM=192, BN=128, STAGES=4, WGS=3, GM=16, EPI=1, PROMO=1, NUM_THREADS=512)}
st, en = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
def t(fn, reps=10):
    for _ in range(3): fn()
    st.record()
    for _ in range(reps): fn()
    en.record(); en.synchronize()
    return st.elapsed_time(en) / reps * 1e3
for M, N, K in W:
    pt = [operands(M, N, K) for _ in range(2)]
    bl = [operands(M, N, K, block=True, k_block_major=True) for _ in range(2)]
    runs = {"torch": lambda i: torch._scaled_mm(*pt[i][:2], *pt[i][2:], out_dtype=torch.bfloat16)}
    for sk in (0, 4):
        runs[f"pt sk{sk}"] = (lambda c: lambda i: cumm.scaled_matmul(*pt[i], kernel="fp8_wgmma", config=c))({**W[(M, N, K)], "SK": sk})
        runs[f"bl sk{sk}"] = (lambda c: lambda i: cumm.scaled_matmul(*bl[i], kernel="fp8_block_scaled", config=c))({**BL[(M, N, K)], "SK": sk})
    res = {n: [] for n in runs}
    for r in range(7):
        for n, f in runs.items():
            res[n].append(t(lambda: f(r % 2)))
    fl = 2 * M * N * K / 1e6
    mt = statistics.median(res["torch"])
    print(f"{M}x{N}x{K}: torch {fl/mt:.0f} | " + " | ".join(
        f"{n} {fl/statistics.median(v):.0f} ({mt/statistics.median(v):.3f})" for n, v in res.items() if n != "torch"), flush=True)
