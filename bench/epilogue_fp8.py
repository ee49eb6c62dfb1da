"""An FP8 C from a bf16 product (the next FP8 layer's input): cumm's fused cast against its plain product and torch's
ways to do the same (docs/beyond.md, FP8 output with a scale).

    PYTHONPATH=. python3 bench/epilogue_fp8.py [--shapes 8192x14336x4096,8192x14336x1024,4096x4096x4096]
        [--rounds 5] [--iters 10] [--no-compile] [--json PATH] [--markdown PATH]
    PYTHONPATH=. python3 bench/epilogue_fp8.py --warm      # compile only (run it once before a timed run)

For each M x N x K (x: M x K, w: K x N, b: N, bf16 torch tensors; s: a float32 scale bringing the result's largest
magnitude to half of e4m3's 448), every variant's result is checked first (dequantized, C / s, against float64: at
most 1.05x the error of torch's eager result + 1e-6), then ``--rounds`` interleaved rounds (every variant once per
round, each round starting one variant later, ``--iters`` back-to-back calls timed with CUDA events), the median
per variant:

- ``cumm``: the plain product ``cumm.matmul(x, w)`` (bf16 C), and ``cumm bias+gelu_tanh`` (bf16 C)
- ``cumm fp8``: ``cumm.matmul(x, w, out=c8, scale_result=s)``: the product cast to float8_e4m3fn in its epilogue
- ``cumm bias+gelu_tanh fp8``: the same with ``bias=b, activation="gelu_tanh"``
- ``eager fp8`` / ``eager bias+gelu_tanh fp8``: ``((x @ w) * s).clamp(-448, 448).to(torch.float8_e4m3fn)``, the same
  of ``F.gelu(x @ w + b, approximate="tanh")`` (clamped: torch's cast does not saturate, cvt.rn.satfinite does)
- ``cuBLASLt bias+gelu, cast``: ``torch._addmm_activation(b, x, w, use_gelu=True)`` (tanh GELU), then the cast
- ``torch.compile`` of each eager function (skipped with --no-compile)

cumm writes into a preallocated FP8 ``out`` (its FP8 C is an ``out=``); torch allocates its results.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

import cumm
from cumm.runtime.timing import torch_rounds_ms

E4_MAX = 448.0


def _shape(text: str) -> tuple[int, int, int]:
    m, n, k = (int(t) for t in text.lower().split("x"))
    return m, n, k


def _one(M: int, N: int, K: int, args, rows: list) -> int:
    """Check and time every variant at M x N x K; append its rows. 1 when a result is off."""
    import torch
    import torch.nn.functional as F

    dev, e4 = "cuda", torch.float8_e4m3fn
    x = torch.randn(M, K, device=dev, dtype=torch.bfloat16)
    w = torch.randn(K, N, device=dev, dtype=torch.bfloat16) / K**0.5
    b = torch.randn(N, device=dev, dtype=torch.bfloat16)
    p64 = x.double() @ w.double()
    refs = {"plain": p64, "gelu": F.gelu(p64 + b.double(), approximate="tanh")}
    del p64
    s = {k: (0.5 * E4_MAX / r.abs().max()).float().reshape(()) for k, r in refs.items()}
    c8 = {k: torch.empty(M, N, device=dev, dtype=e4) for k in refs}

    def cast(y, k):
        return (y * s[k]).clamp(-E4_MAX, E4_MAX).to(e4)

    def eager_plain():
        return cast(x @ w, "plain")

    def eager_gelu():
        return cast(F.gelu(x @ w + b, approximate="tanh"), "gelu")

    variants = {
        "cumm": (lambda: cumm.matmul(x, w), "plain"),
        "cumm bias+gelu_tanh": (lambda: cumm.matmul(x, w, bias=b, activation="gelu_tanh"), "gelu"),
        "cumm fp8": (lambda: cumm.matmul(x, w, out=c8["plain"], scale_result=s["plain"]), "plain"),
        "cumm bias+gelu_tanh fp8": (
            lambda: cumm.matmul(x, w, bias=b, activation="gelu_tanh", out=c8["gelu"], scale_result=s["gelu"]),
            "gelu",
        ),
        "eager fp8": (eager_plain, "plain"),
        "eager bias+gelu_tanh fp8": (eager_gelu, "gelu"),
        "cuBLASLt bias+gelu, cast": (lambda: cast(torch._addmm_activation(b, x, w, use_gelu=True), "gelu"), "gelu"),
    }
    if not args.no_compile:
        cp, cg = torch.compile(eager_plain), torch.compile(eager_gelu)
        variants["torch.compile fp8"] = (cp, "plain")
        variants["torch.compile bias+gelu_tanh fp8"] = (cg, "gelu")
    if args.warm:
        for f, _ in variants.values():
            f()
        torch.cuda.synchronize()
        return 0

    def err(got, k):
        y = got.double() / s[k].double() if got.dtype == e4 else got.double()
        return float((y - refs[k]).norm() / refs[k].norm())

    errors = {name: err(f(), k) for name, (f, k) in variants.items()}
    base = {"plain": errors["eager fp8"], "gelu": errors["eager bias+gelu_tanh fp8"]}
    bad = [n for n, (_, k) in variants.items() if "fp8" in n and errors[n] > 1.05 * base[k] + 1e-6]
    if bad:
        print(f"{M}x{N}x{K}: results off: {[(n, errors[n]) for n in bad]} (eager: {base})", file=sys.stderr)
        return 1
    refs.clear()  # (float64 copies of C: free before the timing)
    for f, _ in variants.values():  # warm-up (compiles)
        f()
    torch.cuda.synchronize()
    fns = {n: lambda i, f=f: f() for n, (f, _) in variants.items()}
    times = torch_rounds_ms(fns, args.rounds, args.iters, rotate=True)
    med = {n: statistics.median(t) for n, t in times.items()}
    flop = 2.0 * M * N * K
    plain = med["cumm"]
    print(f"{M}x{N}x{K}")
    for name, ms in med.items():
        rows.append(
            dict(
                shape=f"{M}x{N}x{K}",
                variant=name,
                ms=round(ms, 4),
                tflops=round(flop / ms / 1e9, 1),
                vs_plain=round(ms / plain, 3),
                error=errors[name],
                runs=[round(t, 4) for t in times[name]],
            )
        )
        extra = ""
        if name == "cumm fp8":
            extra = "  ".join(f"{med[o] / ms:.3f}x vs {o}" for o in ("eager fp8", "torch.compile fp8") if o in med)
        if name == "cumm bias+gelu_tanh fp8":
            others = ("cumm bias+gelu_tanh", "cuBLASLt bias+gelu, cast", "eager bias+gelu_tanh fp8")
            extra = "  ".join(
                f"{med[o] / ms:.3f}x vs {o}" for o in (*others, "torch.compile bias+gelu_tanh fp8") if o in med
            )
        print(
            f"  {name:34s} {ms:8.4f} ms {flop / ms / 1e9:7.1f} TFLOP/s  {ms / plain:6.3f}x plain  "
            f"err {errors[name]:.2e}  {extra}"
        )
    sys.stdout.flush()
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shapes", default="8192x14336x4096,8192x14336x1024,4096x4096x4096")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    p.add_argument("--warm", action="store_true", help="run each variant once (compiles), untimed")
    p.add_argument("--json", default=None)
    p.add_argument("--markdown", default=None)
    args = p.parse_args(argv)
    import torch

    torch.manual_seed(0)
    rows: list = []
    for M, N, K in (_shape(t) for t in args.shapes.split(",")):
        if _one(M, N, K, args, rows):
            return 1
    if args.warm:
        return 0
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "rows": rows, "argv": sys.argv}, f, indent=1)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("| shape | variant | ms | TFLOP/s | x plain | error |\n|---|---|---|---|---|---|\n")
            for r in rows:
                f.write(
                    f"| {r['shape']} | {r['variant']} | {r['ms']} | {r['tflops']} | {r['vs_plain']} | "
                    f"{r['error']:.2e} |\n"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
