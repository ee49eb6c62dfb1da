# FP8 stream-K tail under compute-sanitizer: a partial last wave, fewer tiles than blocks, three warpgroups
import torch, cumm
from cumm.tools.bench_fp8 import operands
for kernel, block in (("fp8_wgmma", False), ("fp8_block_scaled", True)):
    for c in ({"SK": 4}, {"SK": 4, "BM": 192, "WGS": 3, "NUM_THREADS": 512, "PROMO": 1, "STAGES": 4}):
        for M, N, K in [(1408, 2048, 2048), (300, 200, 4096), (1000, 1000, 2100)]:
            ops = operands(M, N, K, block=block, k_block_major=block)
            cumm.scaled_matmul(*ops, kernel=kernel, config=c)
torch.cuda.synchronize()
print("san_sk done")
