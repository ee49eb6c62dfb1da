# FP8 held for seconds: TFLOP/s, SM clock, board power for torch._scaled_mm, fp8_wgmma (auto), fp8_block_scaled.
import statistics, subprocess, threading, time, sys
import torch
import cumm
from cumm.tools.bench_fp8 import operands

def smi_sampler(stop, out):
    p = subprocess.Popen(["nvidia-smi", "--query-gpu=clocks.sm,power.draw", "--format=csv,noheader,nounits", "-lms", "100"],
                         stdout=subprocess.PIPE, text=True)
    while not stop.is_set():
        line = p.stdout.readline()
        if not line: break
        try:
            c, w = line.split(","); out.append((time.time(), float(c), float(w)))
        except ValueError: pass
    p.terminate()

def held(fn, flop, secs):
    samples, stop = [], threading.Event()
    th = threading.Thread(target=smi_sampler, args=(stop, samples)); th.start()
    t0 = time.time(); times = []
    while time.time() - t0 < secs:
        e = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
        e[0].record()
        for i in range(20): fn(i)
        e[1].record(); e[1].synchronize()
        times.append(e[0].elapsed_time(e[1]) / 20 * 1e-3)
    stop.set(); th.join()
    t1 = t0 + secs / 3
    s = [x for x in samples if x[0] > t1]
    tt = times[len(times) // 3:]
    tf = flop / statistics.median(tt) / 1e12
    mhz = statistics.median([x[1] for x in s]); w = statistics.median([x[2] for x in s])
    return tf, mhz, w

for M, N, K in ((8192, 14336, 4096), (8192, 8192, 8192)):
    flop = 2 * M * N * K
    ops = [operands(M, N, K) for _ in range(2)]
    blk = [operands(M, N, K, True, True) for _ in range(2)]
    bf = torch.bfloat16
    fns = {
        "torch._scaled_mm": lambda i: torch._scaled_mm(*ops[i % 2][:2], *ops[i % 2][2:], out_dtype=bf),
        "fp8_wgmma (auto)": lambda i: cumm.scaled_matmul(*ops[i % 2]),
        "fp8_block_scaled (auto)": lambda i: cumm.scaled_matmul(*blk[i % 2]),
        "torch fast_accum": lambda i: torch._scaled_mm(*ops[i % 2][:2], *ops[i % 2][2:], out_dtype=bf, use_fast_accum=True),
    }
    for f in fns.values(): f(0); f(1)
    torch.cuda.synchronize()
    res = {k: [] for k in fns}
    for r in range(2):
        for k, f in fns.items():
            res[k].append(held(f, flop, 2.5))
    print(f"\n{M}x{N}x{K}: held 2.5 s each, 2 rounds (TFLOP/s, MHz, W, TFLOP/s per GHz)")
    for k, v in res.items():
        for tf, mhz, w in v:
            print(f"  {k:26s} {tf:7.1f} TFLOP/s  {mhz:6.0f} MHz  {w:5.0f} W  {tf / mhz * 1000:6.1f} per GHz  {flop / tf / 1e12 * 1e3 / 1e-3 * 0 + w / tf:.3f} W per TFLOP/s")
    sys.stdout.flush()
