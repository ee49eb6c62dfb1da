"""Fused epilogues against the plain product and torch's ways to do the same, bf16 (docs/beyond.md, Fused epilogues).

    PYTHONPATH=. python3 bench/epilogue.py [--shapes 8192x14336x4096,8192x14336x1024,4096x4096x4096]
        [--rounds 3] [--iters 10] [--no-compile] [--json PATH] [--markdown PATH]
    PYTHONPATH=. python3 bench/epilogue.py --warm "cumm bias+gelu"    # compile only (run several in parallel)

For each M x N x K (x: M x K, w: K x N, b: N, all bf16 torch tensors): every variant's result is checked first
(against float64: at most 1.5x the error of torch's own unfused result + 1e-3), then ``--rounds`` interleaved rounds
(every variant once per round, ``--iters`` back-to-back calls timed with CUDA events), the median per variant:

- ``cumm``: the plain product ``cumm.matmul(x, w)``
- ``cumm wgmma_pingpong``: the plain product on the rung auto runs most fused epilogues on (its tiles for the
  shape), so a fused epilogue's cost can be read against its own rung's plain product too
- ``cumm bias+gelu``: ``cumm.matmul(x, w, bias=b, activation="gelu")``
- ``cumm snippet silu``: ``epilogue="v = v / (1.0f + __expf(-v));"`` (no operand)
- ``cumm snippet gate``: the issue's ``v * sigmoid(v) * aux[row * ld_aux + col]`` with an M x N bf16 aux
- ``cumm bias+gelu_tanh``: the same with the tanh approximation, which cuBLASLt's fused GELU computes
- ``cuBLASLt bias+gelu``: ``torch._addmm_activation(b, x, w, use_gelu=True)`` (tanh GELU)
- ``torch.compile``: of ``F.gelu(F.linear(x, w.t(), b))`` (skipped with --no-compile)
- ``eager``: ``F.gelu(x @ w + b)``
- gated MLP ``silu(x @ w1) * (x @ w3)``: ``cumm gated (glu)`` (one product over ``cumm.glu_weight(w1, w3)``, made
  before the timing like any weight, with ``glu="silu"``), ``cumm 2 products`` (the second's epilogue reads the
  first's result), ``eager`` and ``torch.compile`` of the same

Beside each shape: the byte bound on the gain of fusing over eager, (t_plain + extra / BW) / t_plain with the
extra bytes of eager's elementwise passes (bias add: read + write MN, gelu: read + write MN, 2 bytes each) at
``--bw`` GB/s (4800: H200 HBM3e).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

import cumm
from cumm.runtime.timing import torch_rounds_ms

GATE = "v = v * (1.0f / (1.0f + __expf(-v))) * aux[row * ld_aux + col];"
SILU = "v = v / (1.0f + __expf(-v));"
GATED = "v = cumm_silu(h[(long long)row * ld_h + col]) * v;"


def _shape(text: str) -> tuple[int, int, int]:
    m, n, k = (int(t) for t in text.lower().split("x"))
    return m, n, k


def _one(M: int, N: int, K: int, args, rows: list) -> int:
    """Check and time every variant at M x N x K; append its rows. 1 when a result is off."""
    import torch
    import torch.nn.functional as F

    dev = "cuda"
    x = torch.randn(M, K, device=dev, dtype=torch.bfloat16)
    w = torch.randn(K, N, device=dev, dtype=torch.bfloat16) / K**0.5
    w3 = torch.randn(K, N, device=dev, dtype=torch.bfloat16) / K**0.5
    b = torch.randn(N, device=dev, dtype=torch.bfloat16)
    aux = torch.randn(M, N, device=dev, dtype=torch.bfloat16)
    wt = w.t()
    variants = {
        "cumm": lambda: cumm.matmul(x, w),
        "cumm wgmma_pingpong": lambda: cumm.matmul(x, w, kernel="wgmma_pingpong"),
        "cumm bias+gelu": lambda: cumm.matmul(x, w, bias=b, activation="gelu"),
        "cumm bias+gelu_tanh": lambda: cumm.matmul(x, w, bias=b, activation="gelu_tanh"),
        "cumm snippet silu": lambda: cumm.matmul(x, w, epilogue=SILU),
        "cumm snippet gate": lambda: cumm.matmul(x, w, epilogue=GATE, aux=aux),
        "torch.matmul": lambda: x @ w,
        "cuBLASLt bias+gelu": lambda: torch._addmm_activation(b, x, w, use_gelu=True),
        "eager bias+gelu": lambda: F.gelu(x @ w + b),
    }
    if not args.no_compile:
        compiled = torch.compile(lambda x, wt, b: F.gelu(F.linear(x, wt, b)))
        variants["torch.compile bias+gelu"] = lambda: compiled(x, wt, b)
    if not args.no_gated:
        w13 = cumm.glu_weight(w, w3)
        variants["cumm gated (glu)"] = lambda: cumm.matmul(x, w13, glu="silu")
        variants["cumm gated (2 products)"] = lambda: cumm.matmul(
            x, w3, epilogue=GATED, operands={"h": cumm.matmul(x, w)}
        )
        variants["eager gated"] = lambda: F.silu(x @ w) * (x @ w3)
        if not args.no_compile:
            gated = torch.compile(lambda x, w, w3: F.silu(x @ w) * (x @ w3))
            variants["torch.compile gated"] = lambda: gated(x, w, w3)
    if args.warm:  # compile only (a process per variant in parallel fills the disk caches before a timed run)
        for name in args.warm.split(","):
            variants[name]()
        torch.cuda.synchronize()
        return 0
    # references (float64) and checks
    p64 = x.double() @ w.double()
    refs = {
        "plain": p64,
        "bias+gelu": F.gelu(p64 + b.double()),
        "bias+gelu_tanh": F.gelu(p64 + b.double(), approximate="tanh"),
        "silu": F.silu(p64),
        "gate": F.silu(p64) * aux.double(),
        "gated": F.silu(p64) * (x.double() @ w3.double()),
    }
    del p64

    def which(name):
        return (
            "gated"
            if "gated" in name
            else "gate"
            if "gate" in name
            else "silu"
            if "silu" in name
            else "bias+gelu_tanh"
            if "gelu_tanh" in name or "cuBLASLt" in name
            else "bias+gelu"
            if "gelu" in name
            else "plain"
        )

    def err(got, ref):
        return float((got.double() - ref).norm() / ref.norm())

    errors = {name: err(f(), refs[which(name)]) for name, f in variants.items()}
    unfused = {
        "plain": errors["torch.matmul"],
        "bias+gelu": errors["eager bias+gelu"],
        "bias+gelu_tanh": err(F.gelu(x @ w + b, approximate="tanh"), refs["bias+gelu_tanh"]),
        "silu": err(F.silu(x @ w), refs["silu"]),
        "gate": err(F.silu(x @ w) * aux, refs["gate"]),
        "gated": errors.get("eager gated", 1.0),
    }
    del refs
    bad = [n for n, e in errors.items() if e > 1.5 * unfused[which(n)] + 1e-3]
    if bad:
        print(f"{M}x{N}x{K}: results off: {[(n, errors[n]) for n in bad]}", file=sys.stderr)
        return 1
    for f in variants.values():  # warm-up (compiles)
        f()
    torch.cuda.synchronize()
    times = torch_rounds_ms({k: lambda i, f=f: f() for k, f in variants.items()}, args.rounds, args.iters)
    med = {n: statistics.median(t) for n, t in times.items()}
    flop = 2.0 * M * N * K
    plain = med["cumm"]
    bound = (plain + 8.0 * M * N / (args.bw * 1e6)) / plain  # ms: bytes / (GB/s * 1e6)
    for name, ms in med.items():
        rows.append(
            dict(
                shape=f"{M}x{N}x{K}",
                variant=name,
                ms=round(ms, 4),
                tflops=round(flop / ms / 1e9, 1),
                vs_plain=round(ms / plain, 3),
                error=errors[name],
                byte_bound=round(bound, 3),
            )
        )
    print(f"{M}x{N}x{K} (byte bound of fusing over eager: {bound:.3f}x)")
    for name, ms in med.items():
        extra = ""
        if name in ("cumm bias+gelu", "cumm bias+gelu_tanh"):
            extra = "  ".join(
                f"{med[o] / ms:.3f}x vs {o}"
                for o in ("cuBLASLt bias+gelu", "torch.compile bias+gelu", "eager bias+gelu")
                if o in med
            )
        if name.startswith("cumm gated"):
            extra = "  ".join(f"{med[o] / ms:.3f}x vs {o}" for o in ("torch.compile gated", "eager gated") if o in med)
        print(
            f"  {name:26s} {ms:8.4f} ms {flop / ms / 1e9:7.1f} TFLOP/s  {ms / plain:6.3f}x plain  "
            f"err {errors[name]:.2e}  {extra}"
        )
    sys.stdout.flush()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shapes", default="8192x14336x4096,8192x14336x1024,4096x4096x4096")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--bw", type=float, default=4800.0, help="HBM bandwidth, GB/s, for the byte bound")
    p.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    p.add_argument("--no-gated", action="store_true", help="skip the gated MLP")
    p.add_argument("--warm", default=None, metavar="NAMES", help="only run these variants once (compiles), untimed")
    p.add_argument("--json", default=None)
    p.add_argument("--markdown", default=None)
    args = p.parse_args(argv)
    import torch

    torch.manual_seed(0)
    rows = []
    for M, N, K in (_shape(s) for s in args.shapes.split(",")):
        if _one(M, N, K, args, rows):
            return 1
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "rows": rows, "argv": sys.argv}, f, indent=1)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(
                "| shape | variant | ms | TFLOP/s | x plain | error | byte bound |\n|---|---|---|---|---|---|---|\n"
            )
            for r in rows:
                f.write(
                    f"| {r['shape']} | {r['variant']} | {r['ms']} | {r['tflops']} | {r['vs_plain']} | "
                    f"{r['error']:.1e} | {r['byte_bound']} |\n"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
