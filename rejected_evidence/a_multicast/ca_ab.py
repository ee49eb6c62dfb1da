# A multicast (wgmma_ws CL = 2, CA = 1) against the current choice and cuBLAS, interleaved rounds, operands rotated.
import statistics, sys, torch, cumm
BASE = dict(WGS=1, GM=4, EPI=1, SK=0, NUM_THREADS=256)
V = {
    "128x64 ca": dict(BASE, BM=128, BN=64, STAGES=8, CL=2, CA=1),
    "128x64": dict(BASE, BM=128, BN=64, STAGES=8),
    "64x128 ca": dict(BASE, BM=64, BN=128, STAGES=8, CL=2, CA=1),
    "128x128 ca": dict(BASE, BM=128, BN=128, STAGES=6, CL=2, CA=1),
    "128x256 ca": dict(CL=2, CA=1),
}
def check(dt):
    for (M, N, K) in [(300, 200, 136), (129, 1000, 520), (1, 64, 64), (257, 72, 8)]:
        a = torch.randn(M, K, device="cuda", dtype=dt); b = torch.randn(K, N, device="cuda", dtype=dt)
        ref = a.double() @ b.double(); terr = float((a @ b).double().sub(ref).norm() / ref.norm())
        for n, cfg in V.items():
            out = torch.full((M, N), float("nan"), device="cuda", dtype=dt)
            cumm.matmul(a, b, kernel="wgmma_ws", config=cfg, out=out)
            e = float(out.double().sub(ref).norm() / ref.norm())
            assert e <= 1.5 * terr + 1e-6, (M, N, K, n, e, terr)
    print("checks ok", dt, flush=True)
def bench(M, N, K, dt, rounds=5, iters=20):
    nrot = max(2, int(200e6 // ((M * K + K * N) * 2)) + 1)
    A = [torch.randn(M, K, device="cuda", dtype=dt) for _ in range(nrot)]
    B = [torch.randn(K, N, device="cuda", dtype=dt) for _ in range(nrot)]
    O = torch.empty(M, N, device="cuda", dtype=dt)
    fs = {"torch": lambda i: torch.matmul(A[i], B[i], out=O), "auto": lambda i: cumm.matmul(A[i], B[i], out=O)}
    for n, cfg in V.items():
        fs[n] = lambda i, cfg=cfg: cumm.matmul(A[i], B[i], kernel="wgmma_ws", config=cfg, out=O)
    ok = {}
    for n, f in fs.items():
        try:
            f(0); ok[n] = f
        except Exception as e:
            print("  skip", n, str(e)[:80])
    torch.cuda.synchronize()
    t = {n: [] for n in ok}
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for r in range(rounds):
        for n, f in ok.items():
            for i in range(3): f(i % nrot)
            s.record()
            for i in range(iters): f(i % nrot)
            e.record(); e.synchronize()
            t[n].append(s.elapsed_time(e) / iters * 1000)
    base = statistics.median(t["torch"])
    print(f"{M}x{N}x{K} {dt}: " + "  ".join(f"{n} {statistics.median(v):.1f}us ({base / statistics.median(v):.3f})" for n, v in t.items()), flush=True)
for dt in (torch.bfloat16, torch.float16):
    check(dt)
for dt in (torch.bfloat16, torch.float16):
    for shp in [(1024, 1024, 8192), (128, 8192, 8192), (512, 4096, 14336), (512, 5120, 5120), (128, 4096, 14336), (16, 28672, 4096)]:
        bench(*shp, dt)
