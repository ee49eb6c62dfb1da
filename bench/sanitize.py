"""Run every kernel on the shapes given, checking results, for compute-sanitizer.

    compute-sanitizer --tool memcheck python3 bench/sanitize.py
    compute-sanitizer --tool racecheck python3 bench/sanitize.py --shapes 127x131x137
    compute-sanitizer --tool racecheck python3 bench/sanitize.py --dtype bfloat16 --kernels wgmma_ws --beta 0.5
    compute-sanitizer --tool memcheck python3 bench/sanitize.py --dtype bfloat16 --kernels wgmma_ws --batch 3
    compute-sanitizer --tool racecheck python3 bench/sanitize.py --dtype float16 --kernels wgmma_ws --batch 3 \
        --config BM=128,BN=128,WGS=1,SK=0,NUM_THREADS=256

CuPy's memory pool is switched off so each array is its own allocation and memcheck sees exact bounds.
Both the 16-byte path (contiguous operands) and the scalar path (misaligned views) run, and split-K
(split_k=3) for kernels that support it; for kernels with 16-byte loads also the repacked path (misaligned
views copied into padded buffers, the output computed in a padded buffer and copied back into a view with an
odd leading dimension), forced at these sizes. For the half rungs, --beta gives C random normal values to add
(beta times them) instead of NaN, and --batch B runs batches of B products (and, as a third mode, a batch
whose a is one matrix for every product: read in place with batch stride 0).
"""

from __future__ import annotations

import argparse

import cupy

import cumm
from cumm.plan import repack as _repack

cupy.cuda.set_allocator(None)
DEFAULT_FRACTION = _repack.MAX_COPY_FRACTION


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--shapes", default="127x131x137,4097x4095x33,2049x2050x33")  # the last: edge strips
    p.add_argument("--kernels", default=None, help="default: every rung of --dtype")
    p.add_argument("--dtype", default="float32", choices=("float32", "float16", "bfloat16"))
    p.add_argument("--beta", type=float, default=0.0, help="half rungs: C starts as random normals, times beta")
    p.add_argument("--batch", type=int, default=0, help="half rungs: batches of this many products (0: 2-D)")
    p.add_argument("--config", default=None, help="half rungs: overrides of the kernel's tiles, e.g. WGS=1,BN=128")
    a = p.parse_args()
    if a.dtype != "float32":
        return half(a)
    a.kernels = a.kernels or ",".join(cumm.kernels(dtype="float32"))
    rng = cupy.random.default_rng(0)
    worst = 0.0
    for shape in a.shapes.split(","):
        M, N, K = map(int, shape.split("x"))
        for kernel in a.kernels.split(","):
            spec = cumm.kernel_spec(kernel)
            splits = (1, 3) if spec.split_k else (1,)  # split-K: slices and the reduction
            modes = ["aligned", "scalar"] + ["repacked"] * bool(spec.vector_loads)
            runs = [(mode, sp) for mode in modes for sp in (splits if mode != "repacked" else (1,))]
            for mode, split in runs:
                _repack.MAX_COPY_FRACTION = float("inf") if mode == "repacked" else DEFAULT_FRACTION
                if mode == "aligned":
                    A = rng.standard_normal((M, K), dtype=cupy.float32)
                    B = rng.standard_normal((K, N), dtype=cupy.float32)
                else:  # views one float past a 16-byte boundary: the scalar path, or repacked copies of them
                    A = rng.standard_normal((M, K + 1), dtype=cupy.float32)[:, 1:]
                    B = rng.standard_normal((K, N + 1), dtype=cupy.float32)[:, 1:]
                C = cupy.full((M, N), cupy.nan, dtype=cupy.float32)
                if mode == "repacked":  # ldc = N + 3, pointer 4 bytes in
                    C = cupy.full((M, N + 3), cupy.nan, dtype=cupy.float32)[:, 1 : N + 1]
                cumm.matmul(A, B, kernel=kernel, out=C, split_k=split)
                ref = A.astype(cupy.float64) @ B.astype(cupy.float64)
                label = f"{kernel:20s} {shape:16s} {mode:8s} split {split}"
                worst = record(label, C, ref, worst)
    finish(worst)


def half(a) -> None:
    """The half-precision rungs: aligned operands, and views one element past a 16-byte boundary (the TMA rungs
    then run their fallback), against float64 of the rounded inputs, with the benchmark's tolerance."""
    from cumm.tools import bench as _bench

    rng = cupy.random.default_rng(0)
    dt = _bench.np_dtype(a.dtype)
    config = {k: int(v) for k, v in (kv.split("=") for kv in a.config.split(","))} if a.config else None
    worst = 0.0
    for shape in a.shapes.split(","):
        M, N, K = map(int, shape.split("x"))
        for kernel in (a.kernels or ",".join(cumm.kernels(dtype=a.dtype))).split(","):
            nb = (a.batch,) if a.batch else ()
            for mode in ("aligned", "scalar") + (("broadcast",) if a.batch else ()):
                extra = int(mode == "scalar")
                na = (1,) if mode == "broadcast" else nb
                A = rng.standard_normal((*na, M, K + extra), dtype=cupy.float32).astype(dt)[..., extra:]
                B = rng.standard_normal((*nb, K, N + extra), dtype=cupy.float32).astype(dt)[..., extra:]
                f64 = cupy.float64
                if a.beta:
                    C = rng.standard_normal((*nb, M, N), dtype=cupy.float32).astype(dt)
                    ref = a.beta * C.astype(cupy.float32).astype(f64)
                else:
                    C = cupy.full((*nb, M, N), cupy.nan, dtype=cupy.float32).astype(dt)
                    ref = 0.0
                cumm.matmul(A, B, kernel=kernel, config=config, out=C, beta=a.beta)
                ref = ref + A.astype(cupy.float32).astype(f64) @ B.astype(cupy.float32).astype(f64)
                err = float(cupy.linalg.norm(C.astype(cupy.float32).astype(f64) - ref) / cupy.linalg.norm(ref))
                print(f"{kernel:24s} {a.dtype} {shape:16s} {mode:8s} err {err:.2e}")
                worst = max(worst, err) if err == err else float("inf")
    cupy.cuda.Device().synchronize()
    print(f"worst relative error {worst:.2e}")
    if not worst < _bench.TOLERANCES[a.dtype]:
        raise SystemExit(f"FAILED: relative error above {_bench.TOLERANCES[a.dtype]}")


def record(label: str, out, ref, worst: float) -> float:
    """Print ``out``'s relative error against the float64 ``ref``; the worst so far (inf once a NaN shows)."""
    err = float(cupy.linalg.norm(out - ref) / cupy.linalg.norm(ref))
    print(f"{label} err {err:.2e}")
    return max(worst, err) if err == err else float("inf")


def finish(worst: float) -> None:
    cupy.cuda.Device().synchronize()
    print(f"worst relative error {worst:.2e}")
    if not worst < 1e-5:
        raise SystemExit("FAILED: relative error above 1e-5")


if __name__ == "__main__":
    main()
