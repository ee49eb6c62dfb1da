"""(p1-p3.cu: kernel.cu with p1-p3.patch applied.) Where a 3xTF32 product's energy goes under the power cap: variants of wgmma_tf32x3 held for seconds each.
p0 the rung; p1 splitters idle (B^T garbage); p2 two products a k-step; p3 A unsplit. Plus cuBLAS FP32."""
import dataclasses, pathlib, subprocess, sys, time
import cupy as cp
import cumm
from cumm.ladder import REGISTRY
here = pathlib.Path(__file__).parent
base = REGISTRY["wgmma_tf32x3"]
for p in ("p0", "p1", "p2", "p3"):
    cumm.register(dataclasses.replace(base, name=f"tf_{p}", template=here / f"{p}.cu", top=False, raced=False), replace=True)
hold = float(sys.argv[1]) if len(sys.argv) > 1 else 2.0
cfgs = {4096: dict(STAGES=4), 8192: dict(STAGES=4, SB=3, GM=16)}
def clock():
    out = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,power.draw", "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
    return out
for n, cfg in cfgs.items():
    sets = [(cp.random.standard_normal((n, n), dtype=cp.float32), cp.random.standard_normal((n, n), dtype=cp.float32)) for _ in range(2)]
    ref = sets[0][0].astype(cp.float64) @ sets[0][1].astype(cp.float64)
    fns = {f"tf_{p}": (lambda p: lambda i: cumm.matmul(*sets[i % 2], kernel=f"tf_{p}", config=cfg))(p) for p in ("p0", "p1", "p2", "p3")}
    fns["cublas"] = lambda i: cp.matmul(*sets[i % 2])
    for k, f in fns.items():
        c = f(0); cp.cuda.Device().synchronize()
        print(f"{n} {k} err {float(cp.linalg.norm(c - ref) / cp.linalg.norm(ref)):.2e}", flush=True)
    for rnd in range(2):
        for k, f in fns.items():
            t0 = time.perf_counter(); i = 0
            while time.perf_counter() - t0 < hold * 0.6:  # settle under load
                f(i); i += 1
            cp.cuda.Device().synchronize()
            e0, e1 = cp.cuda.Event(), cp.cuda.Event()
            reps = max(10, i // 2)
            e0.record()
            for j in range(reps):
                f(j)
            e1.record(); e1.synchronize()
            ms = cp.cuda.get_elapsed_time(e0, e1) / reps
            print(f"{n} round {rnd} {k:8s} {ms:.3f} ms {2 * n**3 / ms / 1e9:.1f} TFLOP/s | {clock()}", flush=True)
