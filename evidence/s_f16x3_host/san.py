"""memcheck: cached wgmma_f16x3 calls (the Splitter's launches), plain and fused, cupy and torch, odd shapes."""

# ruff: noqa: B023, E501, B007, E741
import cupy
import torch

import cumm

rng = cupy.random.default_rng(0)
for M, N, K in [(257, 384, 520), (130, 200, 65), (5, 3, 1)]:
    a = rng.standard_normal((M, K + 3), dtype=cupy.float32)[:, :K]
    b = rng.standard_normal((K, N), dtype=cupy.float32)
    bias = rng.standard_normal(N, dtype=cupy.float32)
    for x, y, z in (
        (a, b, bias),
        (torch.as_tensor(a, device="cuda"), torch.as_tensor(b, device="cuda"), torch.as_tensor(bias, device="cuda")),
    ):
        for _ in range(3):
            cumm.matmul(x, y, kernel="wgmma_f16x3")
            cumm.matmul(x, y, kernel="wgmma_f16x3", bias=z, activation="gelu")
cupy.cuda.Device().synchronize()
print("done")
