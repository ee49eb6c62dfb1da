# wgmma_pingpong under compute-sanitizer: tile shapes, one tile (warpgroup 1 idle), odd item counts, rows past M,
# columns past N, beta into half (the TMA load of C) and float32, transposed keys in a batch, a fused epilogue
import cupy, ml_dtypes
import cumm
cfgs = [None, dict(BM=64, BN=256, STAGES=4), dict(BM=128, BN=64, STAGES=8), dict(BM=64, BN=192, STAGES=5, EPI=0)]
rng = cupy.random.default_rng(1)
for dt in (cupy.float16, ml_dtypes.bfloat16):
    for c in cfgs:
        for M, N, K in [(1, 8, 8), (127, 131, 136), (300, 200, 520), (257, 1001, 264)]:
            a = rng.standard_normal((M, K), dtype=cupy.float32).astype(dt)
            b = rng.standard_normal((K, -(-N // 8) * 8), dtype=cupy.float32).astype(dt)[:, :N]
            cumm.matmul(a, b, kernel="wgmma_pingpong", config=c)
            cumm.matmul(a, b, kernel="wgmma_pingpong", config=c, out=cupy.zeros((M, N), cupy.float32), beta=1.0)
            cumm.matmul(a, b, kernel="wgmma_pingpong", config=c, out=cupy.ones((M, N), dt), beta=0.5)
    q = rng.standard_normal((3, 200, 128), dtype=cupy.float32).astype(dt)
    k = rng.standard_normal((3, 136, 128), dtype=cupy.float32).astype(dt)
    cumm.matmul(q, k.transpose(0, 2, 1), kernel="wgmma_pingpong")
    a = rng.standard_normal((300, 520), dtype=cupy.float32).astype(dt)
    b = rng.standard_normal((520, 1000), dtype=cupy.float32).astype(dt)
    bias = rng.standard_normal(1000, dtype=cupy.float32).astype(dt)
    cumm.matmul(a, b, kernel="wgmma_pingpong", bias=bias, activation="gelu_tanh")
cupy.cuda.runtime.deviceSynchronize()
print("san_pp done")
