"""Probe: split-K for the half rungs as a batch of K slices (fp32 out) + a sum, against auto and cuBLAS."""
import statistics, cupy, torch, cumm
from cumm.api.matmul import decision
st, en = cupy.cuda.Event(), cupy.cuda.Event()

def t(fn, it=20, rounds=5):
    out = []
    for _ in range(rounds):
        for _ in range(3): fn()
        st.record()
        for _ in range(it): fn()
        en.record(); en.synchronize()
        out.append(cupy.cuda.get_elapsed_time(st, en) / it * 1e3)
    return statistics.median(out)

for (M, N, K) in [(128, 4096, 14336), (1024, 1024, 8192), (512, 4096, 14336), (16, 6144, 4096), (128, 8192, 8192), (32, 6144, 4096)]:
    a = cupy.random.standard_normal((M, K), dtype=cupy.float32).astype(cupy.dtype("bfloat16"))
    b = cupy.random.standard_normal((K, N), dtype=cupy.float32).astype(cupy.dtype("bfloat16"))
    ta, tb = torch.from_dlpack(a), torch.from_dlpack(b)
    res = {"cublas": t(lambda: torch.matmul(ta, tb)), "auto": t(lambda: cumm.matmul(a, b))}
    auto_dec = decision(a, b, None)
    for S in (2, 4, 8):
        Ks = K // S
        av = cupy.lib.stride_tricks.as_strided(a, shape=(S, M, Ks), strides=(Ks * 2, K * 2, 2))
        bv = b.reshape(S, Ks, N)
        ws = cupy.empty((S, M, N), dtype=cupy.float32)
        for cfg in (None, dict(BM=128, BN=128, WGS=1, NUM_THREADS=256, SK=0, STAGES=6), dict(BM=64, BN=128, WGS=1, NUM_THREADS=256, SK=0)):
            try:
                cumm.matmul(av, bv, kernel="wgmma_ws", config=cfg, out=ws)
                ref = (a.astype(cupy.float32) @ b.astype(cupy.float32))
                err = float(cupy.linalg.norm(ws.sum(0) - ref) / cupy.linalg.norm(ref))
                tb_ = t(lambda: cumm.matmul(av, bv, kernel="wgmma_ws", config=cfg, out=ws))
                tt = t(lambda: (cumm.matmul(av, bv, kernel="wgmma_ws", config=cfg, out=ws), ws.sum(0).astype(a.dtype)))
                res[f"S{S} {cfg and (cfg['BM'], cfg['BN'])}"] = (tb_, tt, err)
            except Exception as e:
                res[f"S{S} {cfg and (cfg['BM'], cfg['BN'])}"] = repr(e)[:100]
    print(f"== {M}x{N}x{K}: cuBLAS {res['cublas']:.1f} us, auto {res['auto']:.1f} us ({auto_dec})", flush=True)
    for k, v in res.items():
        if k.startswith("S"):
            print(f"   {k}: " + (v if isinstance(v, str) else f"batched {v[0]:.1f} us, +sum {v[1]:.1f} us (x cuBLAS {res['cublas']/v[1]:.3f}), err {v[2]:.1e}"), flush=True)
