"""Fused epilogues under compute-sanitizer: named epilogues and a snippet on odd shapes (ragged edges, the edges
of the operands the epilogue reads), each result checked against float64.

    compute-sanitizer --tool memcheck python3 bench/epilogue_sanitize.py
    compute-sanitizer --tool racecheck python3 bench/epilogue_sanitize.py --kernels wgmma_ws
    compute-sanitizer --tool racecheck python3 bench/epilogue_sanitize.py --kernels wgmma_pingpong \
        --config BM=128,BN=192,STAGES=4

CuPy's memory pool is off: each operand (bias, residual, aux) is its own allocation, so a read past its end is
reported. The 16-bit rungs also write an FP8 C (torch float8_e4m3fn, rows an odd number of bytes apart: byte
stores) of the named epilogue, against float64 within e4m3's rounding; run with PYTORCH_NO_CUDA_MEMORY_CACHING=1
so that torch's tensors are their own allocations too (without torch: skipped, said so).
"""

from __future__ import annotations

import argparse
import sys

import cupy

import cumm
from cumm.ladder import REGISTRY
from cumm.runtime.render import supports_batch

cupy.cuda.set_allocator(None)
RUNGS = {
    "blocktile_2d": "float32",
    "double_buffer": "float32",
    "wgmma_tf32x3": "float32",
    "mma_swizzled_pipeline": "bfloat16",
    "wgmma_ws": "bfloat16",
    "wgmma_pingpong": "bfloat16",
}


def _dt(name):
    if name == "bfloat16":
        import ml_dtypes

        return ml_dtypes.bfloat16
    return cupy.dtype(name)


def _f64(x):
    return cupy.asarray(x).astype(cupy.float32).astype(cupy.float64)


FP8_TOL = 4e-2  # e4m3 keeps 3 bits of mantissa: a relative rounding error of at most 2^-4 an element


def _fp8_c(a, b, bias, res, kernel, config, dt) -> float:
    """The named epilogue into FP8 Cs (scale 2^-3) whose rows are N + 3 bytes apart (byte stores) and a multiple of
    16 bytes apart (the TMA rungs' copy-engine store of bytes, a tile across N stored directly), dequantized,
    against float64 (the larger error); 0 without torch."""
    try:
        import torch
    except ImportError:
        print("  (no torch: the FP8 C is not run)")
        return 0.0
    ta, tb, tbias, tres = (torch.from_dlpack(x) for x in (a, b, bias, res))
    N = res.shape[-1]
    s = torch.full((), 0.125, device="cuda")
    ref = (ta.double() @ tb.double() + tbias.double()).clamp(min=0) + tres.double()
    worst = 0.0
    for pitch in (N + 3, (N + 31) // 16 * 16):
        c8 = torch.full((*res.shape[:-1], pitch), 0xFF, dtype=torch.uint8, device="cuda").view(torch.float8_e4m3fn)
        c8 = c8[..., :N]
        kw = dict(bias=tbias, activation="relu", residual=tres, out=c8, scale_result=s)
        cumm.matmul(ta, tb, kernel=kernel, config=config, **kw)
        worst = max(worst, float((c8.double() / 0.125 - ref).norm() / ref.norm()))
    return worst


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--kernels", default=",".join(RUNGS))
    p.add_argument("--shapes", default="129x256x65,257x131x300")
    p.add_argument("--config", default="", help="overrides of every kernel's default tiles, e.g. BN=192,STAGES=4")
    args = p.parse_args(argv)
    config = {k: int(v) for k, v in (kv.split("=") for kv in args.config.split(",") if kv)}
    rng = cupy.random.default_rng(1)
    worst = 0.0
    for kernel in args.kernels.split(","):
        dt = RUNGS[kernel]
        tol = 1e-5 if dt == "float32" else 1.5e-2
        for shape in args.shapes.split(","):
            M, N, K = (int(t) for t in shape.split("x"))
            for batch in ((), (2,)) if supports_batch(REGISTRY[kernel]) else ((),):
                a = rng.standard_normal(batch + (M, K), dtype="float32").astype(_dt(dt))
                b = rng.standard_normal((K, N), dtype="float32").astype(_dt(dt))
                bias = rng.standard_normal((M, 1), dtype="float32").astype(_dt(dt))
                res = rng.standard_normal(batch + (M, N), dtype="float32").astype(_dt(dt))
                aux = rng.standard_normal((M, N), dtype="float32")
                p64 = _f64(a) @ _f64(b)
                got = cumm.matmul(a, b, kernel=kernel, config=config, bias=bias, activation="relu", residual=res)
                ref = cupy.maximum(p64 + _f64(bias), 0) + _f64(res)
                e1 = float(cupy.linalg.norm(_f64(got) - ref) / cupy.linalg.norm(ref))
                got = cumm.matmul(
                    a, b, kernel=kernel, config=config, epilogue="v = v * aux[row * ld_aux + col];", aux=aux
                )
                ref = p64 * _f64(aux)
                e2 = float(cupy.linalg.norm(_f64(got) - ref) / cupy.linalg.norm(ref))
                # a per-column bias with gelu_tanh (one expression of the accumulator: act_ab, include/epilogue.cuh)
                bcol = rng.standard_normal((N,), dtype="float32").astype(_dt(dt))
                got = cumm.matmul(a, b, kernel=kernel, config=config, bias=bcol, activation="gelu_tanh")
                u = p64 + _f64(bcol)
                ref = 0.5 * u * (1 + cupy.tanh(0.7978845608028654 * (u + 0.044715 * u**3)))
                e3 = float(cupy.linalg.norm(_f64(got) - ref) / cupy.linalg.norm(ref))
                e4 = _fp8_c(a, b, bias, res, kernel, config, dt) if dt != "float32" else 0.0
                print(
                    f"{kernel} {dt} {batch}{M}x{N}x{K}: named {e1:.2e} snippet {e2:.2e} gelu_tanh {e3:.2e} "
                    f"fp8 C {e4:.2e}",
                    flush=True,
                )
                worst = max(worst, e1 / tol, e2 / tol, e3 / tol, e4 / FP8_TOL)
    print("OK" if worst < 1 else "FAILED")
    return 0 if worst < 1 else 1


if __name__ == "__main__":
    sys.exit(main())
