"""Products of transposed views, as linear layers pass them (``x @ w.T``, ``x.T @ w``), against torch.matmul on
the same views (cuBLAS reads them in place) and against cumm on row-major operands of the same product.

    PYTHONPATH=. python3 bench/transposed.py [--dtype bf16] [--shapes 128x4096x4096,4096x4096x4096]
        [--markdown PATH]

For each M x N x K: x (M x K) and w (N x K) row-major, as torch.nn.Linear holds them. Cases: ``torch x@w.T``
(the baseline), ``cumm x@w.T`` (w.T is column-major: wgmma_ws reads it in place when its columns start on 16
bytes, other rungs get a row-major copy from kernels/auxiliary/transpose.cu), ``cumm x@wt`` (wt = w.T made
contiguous beforehand: the row-major product), ``cumm x.T@w.T`` (x given as the transposed view of a contiguous
x.T: both operands column-major). Every result is checked against float64 first
(relative error at most 1.5 x torch's own on the same inputs). Timing: calls queued back to back, CUDA events
around blocks of 20 calls (so a call's host time counts when it exceeds its device time, as it would for a user),
operand sets rotated past the L2, the median of 15 blocks after 3 warm-up calls per set; us per call and the
ratio to torch's x @ w.T.
"""

from __future__ import annotations

import argparse
import statistics
import sys

from cumm.runtime import timing as _timing

DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


def _time_us(fn, nsets: int, blocks: int = 15, per: int = 20) -> float:
    import torch

    for i in range(3 * nsets):
        fn(i % nsets)
    torch.cuda.synchronize()
    out = []
    for _ in range(blocks):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for i in range(per):
            fn(i % nsets)
        e.record()
        e.synchronize()
        out.append(s.elapsed_time(e) * 1e3 / per)
    return statistics.median(out)


def _shape(M: int, N: int, K: int, dt, l2: int) -> list[dict]:
    import torch

    import cumm

    nsets = _timing.rotation_sets(dt.itemsize * (M * K + N * K + M * N), l2)
    g = torch.Generator(device="cuda").manual_seed(0)
    xs = [torch.randn(M, K, device="cuda", generator=g).to(dt) for _ in range(nsets)]
    ws = [torch.randn(N, K, device="cuda", generator=g).to(dt) for _ in range(nsets)]
    wts = [w.t().contiguous() for w in ws]
    xts = [x.t().contiguous() for x in xs]  # xts[i].t() is xs[i], column-major
    outs = [torch.empty(M, N, device="cuda", dtype=dt) for _ in range(nsets)]
    ref = xs[0].double() @ ws[0].double().t()
    norm = float(ref.norm())
    cases = {
        "torch x@w.T": lambda i: torch.matmul(xs[i], ws[i].t(), out=outs[i]),
        "cumm x@w.T": lambda i: cumm.matmul(xs[i], ws[i].t(), out=outs[i]),
        "cumm x@wt": lambda i: cumm.matmul(xs[i], wts[i], out=outs[i]),
        "cumm x.T@w.T": lambda i: cumm.matmul(xts[i].t(), ws[i].t(), out=outs[i]),
    }
    rows: list[dict] = []
    for name, fn in cases.items():
        outs[0].fill_(float("nan"))
        fn(0)
        e = float((outs[0].double() - ref).norm()) / norm
        if rows and not e <= max(1.5 * rows[0]["err"], 1e-6 if dt == torch.float32 else 0.0):
            raise SystemExit(f"{name} at {M}x{N}x{K}: relative error {e:.3e} against torch's {rows[0]['err']:.3e}")
        rows.append(dict(shape=f"{M}x{N}x{K}", case=name, us=_time_us(fn, nsets), err=e))
    for r in rows:
        r["ratio"] = rows[0]["us"] / r["us"]
    return rows


def run(shapes: list[tuple[int, int, int]], dtype: str) -> list[dict]:
    import cupy
    import torch

    l2 = cupy.cuda.Device().attributes["L2CacheSize"]
    return [r for M, N, K in shapes for r in _shape(M, N, K, getattr(torch, dtype), l2)]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dtype", default="bf16", choices=tuple(DTYPES))
    p.add_argument("--shapes", default="128x4096x4096,1024x4096x4096,4096x4096x4096,8192x14336x4096")
    p.add_argument("--markdown", default=None)
    a = p.parse_args(argv)
    why = _timing.gpu_unavailable()
    if why:
        print(f"transposed.py: {why}", file=sys.stderr)
        return 1
    try:
        import torch
    except ImportError:
        print("transposed.py: the baseline is torch.matmul; install torch", file=sys.stderr)
        return 1
    shapes = [tuple(int(v) for v in s.split("x")) for s in a.shapes.split(",")]
    rows = run(shapes, DTYPES[a.dtype])
    cmd = "PYTHONPATH=. python3 bench/transposed.py " + " ".join(argv if argv is not None else sys.argv[1:])
    lines = [
        f"## {DTYPES[a.dtype]} products of transposed views on {torch.cuda.get_device_name()}",
        "",
        f"`{cmd}`",
        "",
        "| shape (M x N x K) | case | us per call | x torch x@w.T | rel. error |",
        "|---|---|---:|---:|---:|",
    ]
    lines += [f"| {r['shape']} | {r['case']} | {r['us']:.1f} | {r['ratio']:.2f} | {r['err']:.1e} |" for r in rows]
    text = "\n".join(lines)
    print(text)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
