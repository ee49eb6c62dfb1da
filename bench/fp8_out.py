"""FP8 output (scale_result) beside torch._scaled_mm's on the same inputs: e4m3 x e4m3, per-tensor scales, C in
e4m3 (1 byte an element) and in bf16, median of interleaved rounds timed by CUDA events.

    python3 bench/fp8_out.py                      # 8192 x 8192 x 8192
    python3 bench/fp8_out.py --shape 4096x4096x4096 --rounds 9 --reps 20
    compute-sanitizer --tool memcheck python3 bench/fp8_out.py --sanitize   # small odd shapes, no timing
"""

from __future__ import annotations

import argparse
import statistics

import torch

import cumm
from cumm.runtime.timing import torch_rounds_ms


def sanitize() -> None:
    """Both FP8 outputs of both rungs on odd shapes (byte stores, partial tiles), out of an odd pointer too."""
    from cumm.tools.bench_fp8 import operands

    for M, N, K in ((127, 131, 137), (65, 200, 16), (1, 1, 1), (300, 129, 256)):
        for block in (False, True):
            a, b, sa, sb = operands(M, N, K, block)
            for fmt in (torch.float8_e4m3fn, torch.float8_e5m2):
                cumm.scaled_matmul(a, b, sa, sb, out_dtype=fmt, scale_result=torch.tensor(0.5, device="cuda"))
                big = torch.empty(M, N + 3, dtype=torch.uint8, device="cuda")
                cumm.scaled_matmul(a, b, sa, sb, out_dtype=fmt, out=big[:, 1 : N + 1].view(fmt))
    torch.cuda.synchronize()
    print("sanitize runs done")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--shape", default="8192x8192x8192")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--sanitize", action="store_true")
    args = p.parse_args()
    if args.sanitize:
        sanitize()
        return
    M, N, K = map(int, args.shape.split("x"))
    E4 = torch.float8_e4m3fn
    a = torch.randn(M, K, device="cuda").to(E4)
    b = torch.randn(N, K, device="cuda").to(E4).t()
    sa, sb, sr = (torch.tensor(v, device="cuda") for v in (0.5, 0.25, 2.0**-6))
    ce, cb = torch.empty(M, N, dtype=E4, device="cuda"), torch.empty(M, N, dtype=torch.bfloat16, device="cuda")
    runs = {
        "cumm e4m3 out": lambda: cumm.scaled_matmul(a, b, sa, sb, out_dtype=E4, scale_result=sr, out=ce),
        "torch e4m3 out": lambda: torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, scale_result=sr, out_dtype=E4),
        "cumm bf16 out": lambda: cumm.scaled_matmul(a, b, sa, sb, out_dtype=torch.bfloat16, out=cb),
        "torch bf16 out": lambda: torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16),
    }
    for f in runs.values():
        f()
    torch.cuda.synchronize()
    times = torch_rounds_ms({k: lambda i, f=f: f() for k, f in runs.items()}, args.rounds, args.reps)
    # what each FP8 C is: the fraction of elements equal to cast(v * s), cast(v / s), cast(v), v the same
    # library's FP32 result (saturating casts by torch)
    t = torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, scale_result=sr, out_dtype=E4)
    c = cumm.scaled_matmul(a, b, sa, sb, out_dtype=E4, scale_result=sr)
    t32 = torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.float32)
    c32 = cumm.scaled_matmul(a, b, sa, sb, out_dtype=torch.float32)
    cast = lambda v: v.clamp(-448, 448).to(E4).float()  # noqa: E731
    for name, q, v in (("torch", t, t32), ("cumm", c, c32)):
        qf = q.float()
        fr = [(cast(w) == qf).float().mean().item() for w in (v * sr, v / sr, v)]
        print(f"{name} e4m3 out == cast(v * s) {fr[0]:.6f}, cast(v / s) {fr[1]:.6f}, cast(v) {fr[2]:.6f}")
    same = (c.view(torch.uint8) == t.view(torch.uint8)).float().mean().item()
    print(f"{torch.cuda.get_device_name()}, {M}x{N}x{K}, median of {args.rounds} interleaved rounds of {args.reps}")
    ref = statistics.median(times["torch e4m3 out"])
    for name, ts in times.items():
        ms = statistics.median(ts)
        print(f"{name:16s} {ms:8.4f} ms {2 * M * N * K / ms / 1e9:8.1f} TFLOP/s  x torch e4m3: {ref / ms:.3f}")
    print(f"cumm e4m3 == torch e4m3 bytes: {same:.6f} of elements")


if __name__ == "__main__":
    main()
