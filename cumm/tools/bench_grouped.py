"""``python -m cumm bench --grouped``: cumm.grouped_matmul beside torch._grouped_mm and a loop of per-group cuBLAS
calls (torch.mm) on mixture-of-experts shapes, bf16, in the same run.

Each shape: E experts, the (N, K) of an MoE projection, T tokens shared out balanced or skewed (a quarter of the
experts empty, the rest geometric); weights stored (E, N, K) and passed as their transposed (E, K, N) view (what
torch._grouped_mm wants); offsets on the device. Every method is checked against float64 on a few groups first,
then timed in interleaved rounds (CUDA events around `reps` back-to-back calls), median over rounds.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

EXPERTS = (8, 64)
NK = ((4096, 7168), (7168, 2048))
TOKENS = 16384


def token_counts(experts: int, total: int, skewed: bool, seed: int = 0) -> list[int]:
    """Rows per expert, multiples of 16 (torch._grouped_mm's offsets), summing to about ``total``."""
    import numpy as np

    if not skewed:
        return [total // experts // 16 * 16] * experts
    rs = np.random.default_rng(seed)
    w = (0.7 ** (8 / experts)) ** np.arange(experts)  # geometric: 0.7 a step over 8 experts
    w[rs.permutation(experts)[: experts // 4]] = 0  # a quarter of the experts get no tokens
    rs.shuffle(w)
    return [int(x) // 16 * 16 for x in total * w / w.sum()]


def _time(fn, reps: int) -> float:
    import torch

    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn()
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop) / reps


def _methods(a, b, offs, out, ends: list[int]) -> dict:
    import torch

    from ..api.grouped import grouped_matmul

    starts = [0, *ends[:-1]]

    def loop():
        for g, (s, e) in enumerate(zip(starts, ends, strict=True)):
            if e > s:
                torch.mm(a[s:e], b[g], out=out[s:e])

    return {
        "cumm": lambda: grouped_matmul(a, b, offs, out=out),
        "torch._grouped_mm": lambda: torch._grouped_mm(a, b, offs=offs),
        "cuBLAS loop": loop,
    }


def _shape(E: int, N: int, K: int, skewed: bool, tokens: int, rounds: int, reps: int) -> dict:
    import torch

    counts = token_counts(E, tokens, skewed, seed=E + N)
    T = sum(counts)
    offs = torch.tensor(counts, device="cuda").cumsum(0).to(torch.int32)
    ends = offs.tolist()
    starts = [0, *ends[:-1]]
    a = torch.randn(T, K, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(E, N, K, device="cuda", dtype=torch.bfloat16).transpose(1, 2)  # (E, N, K) weights
    out = torch.empty(T, N, device="cuda", dtype=torch.bfloat16)
    methods = _methods(a, b, offs, out, ends)
    errors = {}
    check = [g for g in range(E) if ends[g] > starts[g]][:3]
    for name, fn in list(methods.items()):
        try:
            out.fill_(float("nan"))
            res = fn()
            res = out if res is None else res
            torch.cuda.synchronize()
            err = 0.0
            for g in check:
                s, e = starts[g], ends[g]
                ref = a[s:e].double() @ b[g].double()
                err = max(err, float((res[s:e].double() - ref).norm() / ref.norm()))
            errors[name] = err
        except Exception as ex:  # e.g. a torch without _grouped_mm for these layouts
            errors[name] = f"{type(ex).__name__}: {ex}"[:120]
            del methods[name]
    times = {n: [] for n in methods}
    for _ in range(rounds):  # interleaved: every method once per round
        for n, fn in methods.items():
            times[n].append(_time(fn, reps))
    flops = 2.0 * T * N * K
    row = dict(experts=E, N=N, K=K, tokens=T, skewed=skewed, empty=counts.count(0))
    for n in ("cumm", "torch._grouped_mm", "cuBLAS loop"):
        if n in times:
            ms = statistics.median(times[n])
            row[n] = dict(ms=ms, tflops=flops / ms / 1e9, rel_err=errors[n])
        else:
            row[n] = dict(error=errors[n])
    return row


def run(rounds: int = 5, reps: int = 10, experts: Sequence[int] = EXPERTS, tokens: int = TOKENS) -> list[dict]:
    """One row per shape: each method's median ms, TFLOP/s and relative error against float64 (or its error)."""
    return [_shape(E, N, K, skewed, tokens, rounds, reps) for E in experts for N, K in NK for skewed in (False, True)]


def _cell(r: dict, n: str) -> str:
    m = r[n]
    return f"{m['tflops']:.0f} (err {m['rel_err']:.1e})" if "tflops" in m else f"n/a ({m['error']})"


def _ratio(r: dict, n: str) -> str:
    return f"{r['cumm']['tflops'] / r[n]['tflops']:.2f}" if "tflops" in r[n] and "tflops" in r["cumm"] else "-"


def format_rows(rows: Sequence[dict]) -> str:
    """A markdown table: TFLOP/s of each method, and cumm's ratio to torch._grouped_mm and to the loop."""
    head = (
        "| experts | N x K | tokens | split | cumm TFLOP/s | torch._grouped_mm | cuBLAS loop | x grouped_mm | x loop |"
    )
    lines = [head, "|" + "---|" * 9]
    for r in rows:
        split = f"skewed ({r['empty']} empty)" if r["skewed"] else "balanced"
        lines.append(
            f"| {r['experts']} | {r['N']} x {r['K']} | {r['tokens']} | {split} | {_cell(r, 'cumm')} | "
            f"{_cell(r, 'torch._grouped_mm')} | {_cell(r, 'cuBLAS loop')} | {_ratio(r, 'torch._grouped_mm')} | "
            f"{_ratio(r, 'cuBLAS loop')} |"
        )
    return "\n".join(lines)
