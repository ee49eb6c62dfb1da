"""wgmma_f16x3 on the H200: accuracy (odd shapes, against float64 and cuBLAS FP32), auto's route, timing against
cuBLAS FP32 and wgmma_tf32x3 in interleaved rounds. python f16x3.py [--warm] [--acc] [--time]"""
import statistics, sys, time
import cupy as cp, numpy as np, torch
import cumm
from cumm.api.decision import decision
from cumm.runtime.timing import torch_rounds_ms
torch.backends.cuda.matmul.allow_tf32 = False
args = sys.argv[1:]
CFGS = {"f16x3": None, "f16x3 wide": {"BN": 192, "STAGES": 5}}

def err(c, ref):
    return float(cp.linalg.norm(c.astype(cp.float64) - ref) / cp.linalg.norm(ref))

if "--acc" in args or not args or "--warm" in args:
    rng = cp.random.default_rng(1)
    for M, N, K in [(1, 1, 1), (1, 136, 1), (7, 13, 5), (257, 384, 520), (131, 97, 4097), (4097, 65, 33), (1000, 999, 1031), (2048, 2048, 2048), (4096, 4096, 4096)]:
        a = rng.standard_normal((M, K), dtype=cp.float32); b = rng.standard_normal((K, N), dtype=cp.float32)
        ref = a.astype(cp.float64) @ b.astype(cp.float64)
        out = cp.full((M, N), cp.nan, cp.float32)
        cumm.matmul(a, b, kernel="wgmma_f16x3", out=out)
        e = err(out, ref); e32 = err(cp.asarray(torch.as_tensor(a, device="cuda") @ torch.as_tensor(b, device="cuda")), ref)
        et = err(cumm.matmul(a, b, kernel="wgmma_tf32x3"), ref)
        c2 = cumm.matmul(a, b, kernel="wgmma_f16x3", config=CFGS["f16x3 wide"])
        print(f"{M}x{N}x{K}: f16x3 {e:.2e} (wide {err(c2, ref):.2e}) tf32x3 {et:.2e} cublas {e32:.2e} nan {int(cp.isnan(out).sum())}", flush=True)
        ra = cumm.matmul(a, b); print("   auto:", decision(a, b, None), flush=True)
    # dynamic range: rows and columns scaled by 2^(+-60), log-normal magnitudes, alpha/beta, a view
    a = rng.standard_normal((300, 700), dtype=cp.float32) * cp.exp2(rng.integers(-60, 60, (300, 1))).astype(cp.float32)
    b = rng.standard_normal((700, 500), dtype=cp.float32) * cp.exp(3 * rng.standard_normal((700, 500))).astype(cp.float32)
    ref = a.astype(cp.float64) @ b.astype(cp.float64)
    c = cumm.matmul(a, b, kernel="wgmma_f16x3")
    sc = cp.abs(a).astype(cp.float64) @ cp.abs(b).astype(cp.float64)
    e32 = cp.asarray(torch.as_tensor(a, device="cuda") @ torch.as_tensor(b, device="cuda"))
    print(f"range: f16x3 {err(c, ref):.2e} worst/|A||B| {float(cp.max(cp.abs(c - ref) / sc)):.1e}; cublas {err(e32, ref):.2e} worst {float(cp.max(cp.abs(e32 - ref) / sc)):.1e}", flush=True)
    a2 = rng.standard_normal((640, 900), dtype=cp.float32)[::2, 100:]; b2 = rng.standard_normal((800, 300), dtype=cp.float32)
    c0 = rng.standard_normal((320, 300), dtype=cp.float32)
    c = c0.copy(); cumm.matmul(a2, b2, kernel="wgmma_f16x3", out=c, alpha=0.5, beta=-2.0)
    ref = 0.5 * (a2.astype(cp.float64) @ b2.astype(cp.float64)) - 2.0 * c0
    print(f"view alpha beta: {err(c, ref):.2e}", flush=True)
    a3 = a2.copy(); a3[3, 5] = cp.nan; a3[7, 9] = cp.inf; a3[11] = 0
    c = cumm.matmul(a3, b2, kernel="wgmma_f16x3")
    print("nan row", bool(cp.isnan(c[3]).all()), "inf row nan", bool(cp.isnan(c[7]).all()), "zero row", bool((c[11] == 0).all()),
          "others finite", bool(cp.isfinite(cp.delete(c, [3, 7], axis=0)).all()), flush=True)

if "--time" in args or not args or "--warm" in args:
    SH = [(1024, 1024, 1024), (1536, 1536, 1536), (2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192), (8192, 8192, 256), (512, 8192, 8192)]
    for M, N, K in SH:
        ns = 2 if M >= 8192 else 4
        sets = [(cp.random.standard_normal((M, K), dtype=cp.float32), cp.random.standard_normal((K, N), dtype=cp.float32)) for _ in range(ns)]
        tsets = [(torch.as_tensor(x, device="cuda"), torch.as_tensor(y, device="cuda")) for x, y in sets]
        v = {"cublas": lambda i: torch.matmul(*tsets[i % ns]), "tf32x3": lambda i: cumm.matmul(*sets[i % ns], kernel="wgmma_tf32x3"),
             "auto": lambda i: cumm.matmul(*sets[i % ns])}
        for n, cfg in CFGS.items():
            v[n] = (lambda cfg: lambda i: cumm.matmul(*sets[i % ns], kernel="wgmma_f16x3", config=cfg))(cfg)
        from cumm.plan import pieces as P
        v["split only"] = lambda i: P.split(sets[i % ns][0], K, sets[i % ns][1], N, M, N, K)[0]
        for f in v.values(): f(0)
        cp.cuda.Device().synchronize()
        if "--warm" in args:
            continue
        print(f"{M}x{N}x{K} auto: {decision(sets[0][0], sets[0][1], None)}", flush=True)
        for rep in range(2):
            t = torch_rounds_ms(v, 7, 10 if M < 8192 else 4, rotate=True)
            med = {k: statistics.median(s) * 1000 for k, s in t.items()}
            fl = 2 * M * N * K / 1e12
            print(f"{M}x{N}x{K} " + "  ".join(f"{k} {us:.1f}us (x{med['cublas'] / us:.2f})" for k, us in med.items()), flush=True)
