"""``cumm bench --dtype fp8``: cumm.scaled_matmul's FP8 rungs (e4m3, bf16 out) beside torch._scaled_mm (cuBLAS FP8)
and cumm's bf16 top rung (cumm.matmul on the same values in bf16), interleaved in rounds (median of the rounds'
CUDA-event times), operands rotated past the L2 (as many copies as make 256 MB). Columns, the ladder's steps:
bf16, fp8_wgmma with one partial set (PROMO = 1), fp8_wgmma (its default: two sets taking turns), fp8_wgmma
use_fast_accum, torch._scaled_mm with and without use_fast_accum, fp8_block_scaled with PROMO = 1 and its default
(DeepSeek-V3 block scales). Each row checks cumm against torch first (rel, in the row)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from ..runtime.timing import torch_rounds_ms

SHAPES = ((4096, 4096, 4096), (8192, 8192, 8192), (8192, 14336, 4096), (2048, 2048, 2048), (128, 7168, 16384))
COLUMNS = ("bf16", "fp8 promo1", "fp8_wgmma", "fp8 fast", "torch", "torch fast", "block promo1", "block")


def operands(M: int, N: int, K: int, block: bool = False, k_block_major: bool = False):
    """e4m3 a (M x K) and b (the K x N column-major view of an N x K weight) with per-tensor or block scales (scale_a
    row-major, copied K-block-major on each call; with ``k_block_major`` stored so, read in place: the tuner's)."""
    import torch

    e4 = torch.float8_e4m3fn
    a = (torch.randn(M, K, device="cuda") * 8).to(e4)
    b = (torch.randn(N, K, device="cuda") * 8).to(e4).t()
    if block:
        from ..api.scaled import k_block_major as kbm

        kb, nb = -(-K // 128), -(-N // 128)
        sa = torch.rand(M, kb, device="cuda") + 0.5
        return a, b, kbm(sa, M) if k_block_major else sa, torch.rand(nb, kb, device="cuda") + 0.5
    return a, b, torch.tensor(0.5, device="cuda"), torch.tensor(0.25, device="cuda")


def run(shapes: Sequence[tuple[int, int, int]] = SHAPES, rounds: int = 5, reps: int = 10) -> list[dict]:
    """One row per shape: TFLOP/s per column and cumm's relative difference from torch._scaled_mm."""
    return [_row(M, N, K, rounds, reps) for M, N, K in shapes]


def _row(M: int, N: int, K: int, rounds: int, reps: int) -> dict:
    import torch

    from ..api.matmul import matmul
    from ..api.scaled import scaled_matmul

    bf, sm = torch.bfloat16, torch._scaled_mm
    copies = max(2, -(-(256 << 20) // (M * K + N * K)))
    ops = [operands(M, N, K) for _ in range(copies)]
    blk = [operands(M, N, K, True) for _ in range(copies)]
    half = [(o[0].to(bf), o[1].to(bf)) for o in ops[:2]]
    fns = {
        "bf16": lambda i: matmul(*half[i % 2]),
        "fp8 promo1": lambda i: scaled_matmul(*ops[i % copies], kernel="fp8_wgmma", config={"PROMO": 1}),
        "fp8_wgmma": lambda i: scaled_matmul(*ops[i % copies]),
        "fp8 fast": lambda i: scaled_matmul(*ops[i % copies], use_fast_accum=True),
        "torch": lambda i: sm(*ops[i % copies][:2], *ops[i % copies][2:], out_dtype=bf),
        "torch fast": lambda i: sm(*ops[i % copies][:2], *ops[i % copies][2:], out_dtype=bf, use_fast_accum=True),
        "block promo1": lambda i: scaled_matmul(*blk[i % copies], kernel="fp8_block_scaled", config={"PROMO": 1}),
        "block": lambda i: scaled_matmul(*blk[i % copies]),
    }
    c, t = fns["fp8_wgmma"](0).float(), fns["torch"](0).float()
    rel = ((c - t).norm() / t.norm()).item()
    for k in COLUMNS:
        fns[k](0)  # compiled and cached before the timing
    times = torch_rounds_ms({k: fns[k] for k in COLUMNS}, rounds, reps)
    tf = {k: 2 * M * N * K / (statistics.median(v) * 1e-3) / 1e12 for k, v in times.items()}
    return {"shape": [M, N, K], "tflops": tf, "rel_vs_torch": rel}


def format_rows(rows: Sequence[dict], markdown: bool = False) -> str:
    head = ["M x N x K", *COLUMNS, "cumm/torch", "rel vs torch"]

    def cells(r: dict) -> list[str]:
        tf = r["tflops"]
        return [
            "x".join(map(str, r["shape"])),
            *(f"{tf[k]:.0f}" for k in COLUMNS),
            f"{tf['fp8_wgmma'] / tf['torch']:.2f}",
            f"{r['rel_vs_torch']:.1e}",
        ]

    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        return "\n".join(lines + ["| " + " | ".join(cells(r)) + " |" for r in rows])
    width = [max(len(h), 8) for h in head]
    lines = [" ".join(h.rjust(w) for h, w in zip(head, width, strict=True))]
    lines += [" ".join(c.rjust(w) for c, w in zip(cells(r), width, strict=True)) for r in rows]
    return "\n".join(lines)
