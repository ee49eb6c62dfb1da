"""Run every kernel on the shapes given, checking results, for compute-sanitizer.

    compute-sanitizer --tool memcheck python3 bench/sanitize.py
    compute-sanitizer --tool racecheck python3 bench/sanitize.py --shapes 127x131x137

CuPy's memory pool is switched off so each array is its own allocation and memcheck sees exact bounds.
Both the 16-byte path (contiguous operands) and the scalar path (misaligned views) run, and split-K
(split_k=3) for kernels that support it.
"""

from __future__ import annotations

import argparse

import cupy

import cumm

cupy.cuda.set_allocator(None)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--shapes", default="127x131x137,4097x4095x33,2049x2050x33")  # the last: edge strips
    p.add_argument("--kernels", default=",".join(cumm.kernels()))
    a = p.parse_args()
    rng = cupy.random.default_rng(0)
    worst = 0.0
    for shape in a.shapes.split(","):
        M, N, K = map(int, shape.split("x"))
        for kernel in a.kernels.split(","):
            splits = (1, 3) if cumm.kernel_spec(kernel).split_k else (1,)  # split-K: slices and the reduction
            for aligned, split in [(al, sp) for al in (True, False) for sp in splits]:
                if aligned:
                    A = rng.standard_normal((M, K), dtype=cupy.float32)
                    B = rng.standard_normal((K, N), dtype=cupy.float32)
                else:  # views one float past a 16-byte boundary: the scalar path
                    A = rng.standard_normal((M, K + 1), dtype=cupy.float32)[:, 1:]
                    B = rng.standard_normal((K, N + 1), dtype=cupy.float32)[:, 1:]
                C = cupy.full((M, N), cupy.nan, dtype=cupy.float32)
                cumm.matmul(A, B, kernel=kernel, out=C, split_k=split)
                ref = A.astype(cupy.float64) @ B.astype(cupy.float64)
                label = f"{kernel:20s} {shape:16s} {'aligned' if aligned else 'scalar':8s} split {split}"
                worst = record(label, C, ref, worst)
    finish(worst)


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
