"""FP8 bench and sanitizer driver: cumm.scaled_matmul's rungs beside torch._scaled_mm (cuBLAS FP8) and cumm's bf16
top rung (cumm.matmul): cumm.tools.bench_fp8 (as `python -m cumm bench --dtype fp8`), with rounds and launches to
choose.

    python3 bench/fp8.py                       # the issue's shapes
    python3 bench/fp8.py --shapes 4096x4096x4096 --rounds 5
    compute-sanitizer --tool memcheck python3 bench/fp8.py --sanitize   # small odd shapes, every rung, no timing
"""

from __future__ import annotations

import argparse

import torch

import cumm
from cumm.tools import bench_fp8

SHAPES = "4096x4096x4096,8192x8192x8192,8192x14336x4096,2048x2048x2048,128x7168x16384"


operands = bench_fp8.operands


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
    parsed = [tuple(map(int, s.split("x"))) for s in shapes.split(",")]
    print(bench_fp8.format_rows(bench_fp8.run(parsed, rounds, reps)))


def host(shapes: str, calls: int = 300) -> None:
    """Host time per call (us): calls queued back to back, timed on the host (the kernels are shorter than the
    calls at these shapes, so the host sets the pace)."""
    import time

    for s in shapes.split(","):
        M, N, K = map(int, s.split("x"))
        o, ob = operands(M, N, K), operands(M, N, K, True)
        fns = {
            "cumm": lambda: cumm.scaled_matmul(*o),  # noqa: B023 (called in this iteration)
            "cumm block": lambda: cumm.scaled_matmul(*ob),  # noqa: B023
            "torch._scaled_mm": lambda: torch._scaled_mm(*o[:2], *o[2:], out_dtype=torch.bfloat16),  # noqa: B023
        }
        us = {}
        for name, f in fns.items():
            for _ in range(20):
                f()
            torch.cuda.synchronize()
            t = time.perf_counter()
            for _ in range(calls):
                f()
            us[name] = (time.perf_counter() - t) / calls * 1e6
            torch.cuda.synchronize()
        print(f"{s}: host us/call " + ", ".join(f"{k} {v:.1f}" for k, v in us.items()))


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--shapes", default=SHAPES)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--sanitize", action="store_true")
    p.add_argument("--host", action="store_true", help="host time per call (256^3, 2048^3, 128 x 7168 x 16384)")
    a = p.parse_args()
    if a.sanitize:
        sanitize()
    elif a.host:
        host("256x256x256,2048x2048x2048,128x7168x16384")
    else:
        bench(a.shapes, a.rounds, a.reps)
