"""1024 x 1024 x 8192 (the suite's minimum): wgmma_ws with 64 x 128 tiles in clusters of two sharing B (the mirror of
cuBLAS's 128 x 64 sharing A), against torch, rotated operand sets, interleaved rounds."""
import statistics, sys
import torch
import cumm
from cumm.runtime.timing import torch_rounds_ms

M, N, K = (int(t) for t in (sys.argv[1] if len(sys.argv) > 1 else "1024x1024x8192").split("x"))
warm = "--warm" in sys.argv
base = dict(STAGES=8, WGS=1, GM=4, EPI=1, SK=0, NUM_THREADS=256)
cfgs = {
    "auto": None,
    "64x128 CL2 S8": dict(base, BM=64, BN=128, CL=2),
    "64x128 CL1 S8": dict(base, BM=64, BN=128, CL=1),
    "64x128 CL2 S6 GM8": dict(base, BM=64, BN=128, CL=2, STAGES=6, GM=8),
    "128x64 CL2 S8": dict(base, BM=128, BN=64, CL=2),
    "64x128 CL2 S8 GM16": dict(base, BM=64, BN=128, CL=2, GM=16),
}
for dt in (torch.bfloat16, torch.float16):
    sets = [(torch.randn(M, K, device="cuda", dtype=dt), torch.randn(K, N, device="cuda", dtype=dt)) for _ in range(4)]
    ref = sets[0][0].double() @ sets[0][1].double()
    fns = {}
    for name, c in cfgs.items():
        kw = {} if c is None else dict(kernel="wgmma_ws", config=c)
        got = cumm.matmul(*sets[0], **kw)
        err = float((got.double() - ref).norm() / ref.norm())
        assert err < 5e-3, (name, err)
        fns[name] = lambda i, kw=kw: cumm.matmul(*sets[i % 4], **kw)
    fns["torch"] = lambda i: sets[i % 4][0] @ sets[i % 4][1]
    if warm:
        continue
    for f in fns.values():
        f(0)
    torch.cuda.synchronize()
    t = torch_rounds_ms(fns, 15, 20)
    med = {n: statistics.median(x) for n, x in t.items()}
    print(f"{dt} {M}x{N}x{K}")
    for n, ms in med.items():
        print(f"  {n:22s} {ms * 1000:7.2f} us  x torch {med['torch'] / ms:.3f}")
    sys.stdout.flush()
