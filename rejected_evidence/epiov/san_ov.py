# rung 21 (wgmma_epi_overlap) under compute-sanitizer: one, two, many tiles a block, K < AHEAD slabs, bias+gelu
import cupy, ml_dtypes
import cumm
rng = cupy.random.default_rng(1)
for dt in (ml_dtypes.bfloat16,):
    for c in (None, dict(BN=64, STAGES=4, AHEAD=2)):
        for M, N, K in [(1, 8, 8), (128, 128, 64), (256, 128, 200), (129, 257, 1000), (1000, 2000, 520)]:
            a = rng.standard_normal((M, K), dtype=cupy.float32).astype(dt)
            b = rng.standard_normal((K, N), dtype=cupy.float32).astype(dt)
            bias = rng.standard_normal((N,), dtype=cupy.float32).astype(dt)
            cumm.matmul(a, b, kernel="wgmma_epi_overlap", config=c)
            cumm.matmul(a, b, kernel="wgmma_epi_overlap", config=c, bias=bias, activation="gelu")
cupy.cuda.runtime.deviceSynchronize()
print("san_ov done")
