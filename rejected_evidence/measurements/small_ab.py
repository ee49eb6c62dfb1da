# Configurations for the suite's few-tile deep shapes, interleaved with cuBLAS, each call settled alone first.
import statistics, time, torch, cumm
W = dict(GM=4, EPI=1, SK=0)
C = {
    "auto": None,
    "ws 128x64 w1 s8": ("wgmma_ws", dict(W, BM=128, BN=64, STAGES=8, WGS=1, NUM_THREADS=256)),
    "ws 128x64 w2 s8": ("wgmma_ws", dict(W, BM=128, BN=64, STAGES=8, WGS=2, NUM_THREADS=384)),
    "ws 128x64 w2 s6": ("wgmma_ws", dict(W, BM=128, BN=64, STAGES=6, WGS=2, NUM_THREADS=384)),
    "ws 128x64 w2 s8 e0": ("wgmma_ws", dict(W, BM=128, BN=64, STAGES=8, WGS=2, NUM_THREADS=384, EPI=0)),
    "ws 64x128 w1 s8": ("wgmma_ws", dict(W, BM=64, BN=128, STAGES=8, WGS=1, NUM_THREADS=256)),
    "csk 128x128 w2 ks2": ("wgmma_cluster_split_k", dict(BM=128, BN=128, STAGES=6, WGS=2, GM=4, KS=2, NUM_THREADS=384)),
    "csk 128x64 w2 ks2": ("wgmma_cluster_split_k", dict(BM=128, BN=64, STAGES=8, WGS=2, GM=4, KS=2, NUM_THREADS=384)),
    "csk 128x64 w1 ks2": ("wgmma_cluster_split_k", dict(BM=128, BN=64, STAGES=8, WGS=1, GM=4, KS=2, NUM_THREADS=256)),
}
def bench(M, N, K, dt, rounds=3, iters=20, settle=0.1):
    nrot = max(2, int(120e6 // ((M * K + K * N) * 2)) + 1)
    A = [torch.randn(M, K, device="cuda", dtype=dt) for _ in range(nrot)]
    B = [torch.randn(K, N, device="cuda", dtype=dt) for _ in range(nrot)]
    ref = A[0].double() @ B[0].double(); terr = float((A[0] @ B[0]).double().sub(ref).norm() / ref.norm())
    fs = {"torch": lambda i: torch.matmul(A[i], B[i])}
    for n, kc in C.items():
        fs[n] = (lambda i: cumm.matmul(A[i], B[i])) if kc is None else (lambda i, kc=kc: cumm.matmul(A[i], B[i], kernel=kc[0], config=kc[1]))
    ok = {}
    for n, f in fs.items():
        try:
            e = float(f(0).double().sub(ref).norm() / ref.norm())
            assert e <= 1.5 * terr + 1e-6, (n, e, terr)
            ok[n] = f
        except Exception as ex:
            print("  skip", n, str(ex)[:100])
    torch.cuda.synchronize()
    t = {n: [] for n in ok}
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for r in range(rounds):
        order = list(ok.items())
        if r % 2: order.reverse()
        for n, f in order:
            t0 = time.time(); i = 0
            while time.time() - t0 < settle:
                f(i % nrot); i += 1
            torch.cuda.synchronize()
            s.record()
            for i in range(iters): f(i % nrot)
            e.record(); e.synchronize()
            t[n].append(s.elapsed_time(e) / iters * 1000)
    base = statistics.median(t["torch"])
    print(f"{M}x{N}x{K} {dt}: " + "  ".join(f"{n} {statistics.median(v):.1f}us ({base / statistics.median(v):.3f})" for n, v in t.items()), flush=True)
for shp in [(1024, 1024, 8192), (128, 8192, 8192), (16, 28672, 4096)]:
    for dt in (torch.bfloat16, torch.float16):
        bench(*shp, dt)
