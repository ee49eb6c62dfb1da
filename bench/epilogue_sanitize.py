"""Fused epilogues under compute-sanitizer: named epilogues and a snippet on odd shapes (ragged edges, the edges
of the operands the epilogue reads), each result checked against float64.

    compute-sanitizer --tool memcheck python3 bench/epilogue_sanitize.py
    compute-sanitizer --tool racecheck python3 bench/epilogue_sanitize.py --kernels wgmma_ws
    compute-sanitizer --tool racecheck python3 bench/epilogue_sanitize.py --kernels wgmma_pingpong \
        --config BM=128,BN=192,STAGES=4

CuPy's memory pool is off: each operand (bias, residual, aux) is its own allocation, so a read past its end is
reported.
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
                print(
                    f"{kernel} {dt} {batch}{M}x{N}x{K}: named {e1:.2e} snippet {e2:.2e} gelu_tanh {e3:.2e}", flush=True
                )
                worst = max(worst, e1 / tol, e2 / tol, e3 / tol)
    print("OK" if worst < 1 else "FAILED")
    return 0 if worst < 1 else 1


if __name__ == "__main__":
    sys.exit(main())
