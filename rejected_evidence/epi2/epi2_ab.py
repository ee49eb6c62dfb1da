# A/B: wgmma_ws EPI = 2 (two staging buffers) against EPI = 1 on short-K products, beside torch.matmul (cuBLAS).
import statistics, sys, time
import torch, cumm
torch.backends.cuda.matmul.allow_tf32 = False

def timeit(fn, n, settle=0.1):
    t0 = time.time()
    while time.time() - t0 < settle: fn()
    e = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
    e[0].record()
    for _ in range(n): fn()
    e[1].record(); e[1].synchronize()
    return e[0].elapsed_time(e[1]) / n

shapes = [  # (batch, M, N, K, b_transposed)
    (32, 4096, 4096, 128, True), (32, 2048, 2048, 128, True), (256, 512, 512, 128, True),
    (1, 8192, 8192, 256, False), (1, 8192, 14336, 512, False), (1, 8192, 14336, 1024, False), (1, 4096, 4096, 4096, False),
]
dt = getattr(torch, sys.argv[1] if len(sys.argv) > 1 else "bfloat16")
cands = {
    "cublas": None,
    "ws": dict(kernel="wgmma_ws"),
    "ws S3": dict(kernel="wgmma_ws", config=dict(STAGES=3)),
    "ws S3 EPI2": dict(kernel="wgmma_ws", config=dict(STAGES=3, EPI=2)),
    "ws BN128 EPI2": dict(kernel="wgmma_ws", config=dict(BN=128, STAGES=4, EPI=2)),
    "auto": dict(kernel="auto"),
}
for bt, M, N, K, tr in shapes:
    sets = []
    for _ in range(2):
        a = torch.randn(bt, M, K, device="cuda", dtype=dt).squeeze(0)
        b = (torch.randn(bt, N, K, device="cuda", dtype=dt).transpose(-1, -2) if tr else torch.randn(bt, K, N, device="cuda", dtype=dt)).squeeze(0) if bt > 1 else (torch.randn(N, K, device="cuda", dtype=dt).t() if tr else torch.randn(K, N, device="cuda", dtype=dt))
        sets.append((a, b))
    ref = (sets[0][0].double() @ sets[0][1].double())
    fns = {}
    for k, kw in cands.items():
        if kw is None:
            fns[k] = lambda i=[0]: (i.__setitem__(0, i[0] + 1), torch.matmul(*sets[i[0] % 2]))[1]
        else:
            fns[k] = (lambda kw: lambda i=[0]: (i.__setitem__(0, i[0] + 1), cumm.matmul(*sets[i[0] % 2], **kw))[1])(kw)
    errs = {}
    for k, f in fns.items():
        try:
            c = f().double()
            errs[k] = ((c - ref).norm() / ref.norm()).item()
        except Exception as e:
            errs[k] = f"ERR {e}"[:120]
    ok = [k for k in fns if isinstance(errs[k], float)]
    flop = 2 * bt * M * N * K
    n = max(3, int(0.05 / max(flop / 500e12, 1e-6)))
    t = {k: [] for k in ok}
    for r in range(5):
        for k in ok:
            t[k].append(timeit(fns[k], n))
    med = {k: statistics.median(v) for k, v in t.items()}
    print(f"{bt}x{M}x{N}x{K}{' B^T' if tr else ''} {dt}: " + "  ".join(
        f"{k} {med[k]*1e3:.1f}us ({med['cublas']/med[k]:.3f})" for k in ok), flush=True)
    bad = {k: v for k, v in errs.items() if not isinstance(v, float) or v > 1e-2}
    if bad: print("  errors:", bad)
    del sets, ref
    torch.cuda.empty_cache()
