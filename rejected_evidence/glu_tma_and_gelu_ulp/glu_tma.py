# glu=: the TMA store of C's half tile (EPI = 1) against direct stores (EPI = 0), interleaved, settled; and torch.
import statistics, time, torch, torch.nn.functional as F, cumm
def run(M, N, K, variants, rounds=3, iters=10, settle=0.1):
    x = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    w1 = torch.randn(K, N, device="cuda", dtype=torch.bfloat16) / K**0.5
    w3 = torch.randn(K, N, device="cuda", dtype=torch.bfloat16) / K**0.5
    w13 = cumm.glu_weight(w1, w3)
    ref = F.silu(x.double() @ w1.double()) * (x.double() @ w3.double())
    terr = float(((F.silu(x @ w1) * (x @ w3)).double() - ref).norm() / ref.norm())
    fs = {n: (lambda kc=kc: cumm.matmul(x, w13, kernel=kc[0], config=kc[1], glu="silu")) for n, kc in variants.items()}
    comp = torch.compile(lambda x, w, w3: F.silu(x @ w) * (x @ w3))
    fs["torch.compile"] = lambda: comp(x, w1, w3)
    for n, f in fs.items():
        e = float((f().double() - ref).norm() / ref.norm())
        assert e <= 1.5 * terr + 1e-3, (n, e, terr)
    t = {n: [] for n in fs}
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for r in range(rounds):
        for n, f in (list(fs.items())[::-1] if r % 2 else fs.items()):
            t0 = time.time()
            while time.time() - t0 < settle: f()
            s.record()
            for _ in range(iters): f()
            e.record(); e.synchronize(); t[n].append(s.elapsed_time(e) / iters)
    med = {n: statistics.median(v) for n, v in t.items()}
    print(f"{M}x{N}x{K}: " + "  ".join(f"{n} {v:.4f} ms ({med['torch.compile'] / v:.3f}x compile)" for n, v in med.items()), flush=True)
WS = "wgmma_ws"
run(8192, 14336, 4096, {"ws tma": (WS, {}), "ws direct": (WS, dict(EPI=0))})
run(4096, 4096, 4096, {"ws tma": (WS, {}), "ws direct": (WS, dict(EPI=0))})
run(8192, 14336, 1024, {"auto (pp tma)": ("auto", None), "pp direct": ("wgmma_pingpong", dict(EPI=0))})
