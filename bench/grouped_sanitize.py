"""Run cumm.grouped_matmul on small shapes of every layout, checking results, for compute-sanitizer.

    compute-sanitizer --tool memcheck python3 bench/grouped_sanitize.py
    compute-sanitizer --tool racecheck python3 bench/grouped_sanitize.py

CuPy's memory pool is off, so each array is its own allocation and memcheck sees exact bounds. Cases: contiguous
(B row-major and transposed; empty, 1-row and partial-tile groups; K and N off 8: the padded path), masked
(counts below, at and past max_m), and bad device offsets (decreasing, negative, past the end: clamped).
"""

from __future__ import annotations

import cupy
import numpy as np

import cumm

cupy.cuda.set_allocator(None)


def rel(got, ref) -> float:
    return float(cupy.linalg.norm(got.astype(cupy.float64) - ref) / max(float(cupy.linalg.norm(ref)), 1e-30))


def contiguous(rng, T, K, N, ends, transposed, dtype="bfloat16", check=True) -> None:
    G = len(ends)
    a = rng.standard_normal((T, K), dtype=cupy.float32).astype(dtype)
    if transposed:
        b = rng.standard_normal((G, N, K), dtype=cupy.float32).astype(dtype).transpose(0, 2, 1)
    else:
        b = rng.standard_normal((G, K, N), dtype=cupy.float32).astype(dtype)
    out = cupy.full((T, N), np.nan, dtype=dtype)
    cumm.grouped_matmul(a, b, cupy.asarray(ends, dtype=cupy.int32), out=out)
    cupy.cuda.runtime.deviceSynchronize()
    if not check:
        return
    s = 0
    for g, e in enumerate(ends):
        if e > s:
            err = rel(out[s:e], a[s:e].astype(cupy.float64) @ b[g].astype(cupy.float64))
            assert err < 1.5e-2, (T, K, N, g, err)
        s = e


def main() -> None:
    rng_np = np.random.default_rng(3)
    rng = cupy.random.default_rng(7)
    for transposed in (False, True):
        contiguous(rng, 300, 136, 200, [0, 1, 130, 130, 299], transposed)
        contiguous(rng, 77, 13, 9, [30, 31, 77], transposed)  # K, N off 8: padded copies
    contiguous(rng, 200, 128, 128, [50, 20, -7, 150, 10**9], False, check=False)  # bad device offsets: clamped
    # 300 groups: the table takes 3 stages beside the TMA-store epilogue; ends anywhere in a tile (the clip map)
    contiguous(rng, 900, 64, 128, np.cumsum(rng_np.multinomial(900, np.ones(300) / 300)).tolist(), True)
    G, max_m, K, N = 4, 130, 200, 136
    a = rng.standard_normal((G, max_m, K), dtype=cupy.float32).astype("float16")
    b = rng.standard_normal((G, K, N), dtype=cupy.float32).astype("float16")
    out = cupy.zeros((G, max_m, N), dtype="float16")
    cumm.grouped_matmul(a, b, masked_m=cupy.asarray([0, 1, 130, 999], dtype=cupy.int32), out=out)
    cupy.cuda.runtime.deviceSynchronize()
    for g, m in enumerate([0, 1, 130, 130]):
        if m:
            assert rel(out[g, :m], a[g, :m].astype(cupy.float64) @ b[g].astype(cupy.float64)) < 2e-3
    print("grouped sanitize cases ran and matched float64")


if __name__ == "__main__":
    main()
