import cupy, ml_dtypes, cumm, math
rng = cupy.random.default_rng(1)
bf = ml_dtypes.bfloat16
for kernel in ["wgmma_pingpong", "wgmma_ws", "wgmma"]:
    for (M, N, K) in [(37, 24, 13), (130, 136, 200)]:
        x = rng.standard_normal((M, K), dtype="float32").astype(bf)
        w1 = rng.standard_normal((K, N), dtype="float32").astype(bf)
        w3 = rng.standard_normal((K, N), dtype="float32").astype(bf)
        w = cumm.glu_weight(w1, w3)
        out = cupy.full((M, N), math.nan, dtype="float32").astype(bf)
        cumm.matmul(x, w, kernel=kernel, config={}, out=out, glu="silu", beta=0.0)
        res = rng.standard_normal((M, N), dtype="float32").astype(bf)
        cumm.matmul(x, w, kernel=kernel, config={}, out=out, glu="gelu", residual=res, beta=1.0)
    xb = rng.standard_normal((3, 65, 40), dtype="float32").astype(bf)
    wb = cumm.glu_weight(rng.standard_normal((3, 40, 72), dtype="float32").astype(bf), rng.standard_normal((3, 40, 72), dtype="float32").astype(bf))
    if kernel != "wgmma":
        cumm.matmul(xb, wb, kernel=kernel, config={}, glu="silu")
cupy.cuda.runtime.deviceSynchronize()
print("san_glu done")
