# rung 16's few-row tiles under compute-sanitizer: odd shapes, a view, a batch, both half types
import cupy, ml_dtypes
import cumm
C = lambda **k: dict(WGS=1, NUM_THREADS=256, **k)
cfgs = [C(BM=16, BN=128, KS=2, STAGES=12), C(BM=32, BN=64, KS=4, STAGES=10)]
rng = cupy.random.default_rng(1)
for dt in (cupy.float16, ml_dtypes.bfloat16):
    for c in cfgs:
        for M, N, K in [(1, 8, 8), (17, 129, 257), (33, 200, 1000), (16, 256, 4104)]:
            a = rng.standard_normal((M, K), dtype=cupy.float32).astype(dt)
            b = rng.standard_normal((K, N), dtype=cupy.float32).astype(dt)
            cumm.matmul(a, b, kernel="wgmma_cluster_split_k", config=c)
cupy.cuda.runtime.deviceSynchronize()
print("san_na done")
