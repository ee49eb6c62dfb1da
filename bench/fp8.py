"""FP8 bench and sanitizer driver: cumm.scaled_matmul's rungs beside torch._scaled_mm (cuBLAS FP8) and cumm's bf16
top rung (cumm.matmul), interleaved in rounds (median of the rounds' CUDA-event times), operands rotated past the L2
(as many copies as make 256 MB), every result checked against the others first.

    python3 bench/fp8.py                       # the issue's shapes
    python3 bench/fp8.py --shapes 4096x4096x4096 --rounds 5
    compute-sanitizer --tool memcheck python3 bench/fp8.py --sanitize   # small odd shapes, every rung, no timing
"""

from __future__ import annotations

import argparse
import statistics

import torch

import cumm

SHAPES = "4096x4096x4096,8192x8192x8192,8192x14336x4096,2048x2048x2048,128x7168x16384"
E4 = torch.float8_e4m3fn


def operands(M, N, K, block=False):
    a = (torch.randn(M, K, device="cuda") * 8).to(E4)
    b = (torch.randn(N, K, device="cuda") * 8).to(E4).t()
    if block:
        return (
            a,
            b,
            torch.rand(M, -(-K // 128), device="cuda") + 0.5,
            torch.rand(-(-N // 128), -(-K // 128), device="cuda") + 0.5,
        )
    return a, b, torch.tensor(0.5, device="cuda"), torch.tensor(0.25, device="cuda")


def sanitize() -> None:
    for M, N, K in ((127, 131, 137), (65, 200, 16), (1, 1, 1), (300, 129, 256)):
        for block in (False, True):
            a, b, sa, sb = operands(M, N, K, block)
            for od in (torch.bfloat16, torch.float32):
                cumm.scaled_matmul(a, b, sa, sb, out_dtype=od)
                if not block:
                    cumm.scaled_matmul(a, b, sa, sb, out_dtype=od, use_fast_accum=True)
    torch.cuda.synchronize()
    print("sanitize runs done")


def bench(shapes: str, rounds: int, reps: int) -> None:
    print(f"{torch.cuda.get_device_name()}; TFLOP/s, median of {rounds} interleaved rounds of {reps} launches")
    print(f"{'M x N x K':>20} {'fp8_wgmma':>10} {'fast':>8} {'torch':>8} {'torch fast':>10} {'block':>8} {'bf16':>8}")
    for s in shapes.split(","):
        M, N, K = map(int, s.split("x"))
        copies = max(2, -(-(256 << 20) // (M * K + N * K)))
        ops = [operands(M, N, K) for _ in range(copies)]
        blk = [operands(M, N, K, True) for _ in range(copies)]
        bf = [(o[0].to(torch.bfloat16), o[1].to(torch.bfloat16)) for o in ops[:2]]
        runs = {
            "fp8_wgmma": lambda o: cumm.scaled_matmul(*o),
            "fast": lambda o: cumm.scaled_matmul(*o, use_fast_accum=True),
            "torch": lambda o: torch._scaled_mm(o[0], o[1], o[2], o[3], out_dtype=torch.bfloat16),
            "torch fast": lambda o: torch._scaled_mm(
                o[0], o[1], o[2], o[3], out_dtype=torch.bfloat16, use_fast_accum=True
            ),
        }
        c, t = runs["fp8_wgmma"](ops[0]).float(), runs["torch"](ops[0]).float()
        err = ((c - t).norm() / t.norm()).item()
        times: dict[str, list[float]] = {k: [] for k in [*runs, "block", "bf16"]}
        for _ in range(rounds):
            for name in times:
                ev = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
                ev[0].record()
                for i in range(reps):
                    if name == "block":
                        cumm.scaled_matmul(*blk[i % copies])
                    elif name == "bf16":
                        cumm.matmul(*bf[i % 2])
                    else:
                        runs[name](ops[i % copies])
                ev[1].record()
                ev[1].synchronize()
                times[name].append(ev[0].elapsed_time(ev[1]) / reps * 1e-3)
        tf = {k: 2 * M * N * K / statistics.median(v) / 1e12 for k, v in times.items()}
        print(
            f"{s:>20} " + " ".join(f"{tf[k]:>{max(8, len(k))}.0f}" for k in times) + f"   (cumm vs torch rel {err:.1e})"
        )


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--shapes", default=SHAPES)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--sanitize", action="store_true")
    a = p.parse_args()
    sanitize() if a.sanitize else bench(a.shapes, a.rounds, a.reps)
