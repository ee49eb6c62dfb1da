"""A batched product against a Python loop of 2-D calls, and cumm's host time per call beside cupy's (and torch's);
or, with --device, the device throughput of batched products beside cuBLAS's batched product at the same dtype.

    PYTHONPATH=. python3 bench/batched.py [--batch 64] [--n 256] [--kernels auto,tf32x3,warptile]
    PYTHONPATH=. python3 bench/batched.py --device 64x256,8x1024,2x4096 [--kernels tf32x3,wgmma_tf32x3,auto]
    PYTHONPATH=. python3 bench/batched.py --device 96x512x512x64,64x1024 --dtype bf16 [--kernels wgmma_ws,auto,loop]
    PYTHONPATH=. python3 bench/batched.py --device 96x512x512x64 --dtype bf16 --transposed-b

--device: for each BATCHxN (BATCH products of N x N x N) or BATCHxMxNxK; every kernel's result checked first
(float32: relative error under 1e-5 against float64; fp16 / bf16: at most 1.5x cuBLAS's own), then three
interleaved rounds of back-to-back launches (CUDA events, two operand sets in turn), the median. cuBLAS is
cupy.matmul in FP32 and torch.matmul (batched GEMM) for fp16 / bf16. "loop": cumm.matmul on one product at a
time (kernel="auto"), what a batch cost before a rung ran the dtype's batches in one launch. --transposed-b: B is
given as the transposed view of a (batch, N, K) array, as attention's q @ k.transpose(-1, -2) passes it (cuBLAS
gets the same view).

For each kernel: ``cumm.matmul`` on a (batch, n, n) @ (batch, n, n) product (one launch) against ``batch`` calls
of ``cumm.matmul`` on the 2-D slices, each timed as a user sees it (wall clock of the Python call with the
device synchronized, cumm.runtime.timing.host_us), after both were checked against float64; then cupy.matmul on the
same batch for reference.
"""

from __future__ import annotations

import argparse
import sys

import cumm
from cumm.runtime import timing as _timing


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--n", type=int, default=256)
    p.add_argument(
        "--kernels", default=None, help="auto,tf32x3,warptile,double_buffer; --device: tf32x3,wgmma_tf32x3,auto"
    )
    p.add_argument("--calls", type=int, default=200)
    p.add_argument("--device", default=None, metavar="BxN,...", help="device throughput of these batches instead")
    p.add_argument("--dtype", default="fp32", choices=("fp32", "fp16", "bf16"), help="--device: the inputs' dtype")
    p.add_argument("--transposed-b", action="store_true", help="--device: B a transposed view (q @ k.transpose)")
    a = p.parse_args(argv)
    why = _timing.gpu_unavailable()
    if why:
        print(f"batched.py: {why}", file=sys.stderr)
        return 1
    if a.device:
        half = a.dtype != "fp32"
        kernels = a.kernels or ("wgmma_ws,auto,loop" if half else "tf32x3,wgmma_tf32x3,auto")
        return device(a.device, kernels, a.dtype, a.transposed_b)
    a.kernels = a.kernels or "auto,tf32x3,warptile,double_buffer"
    import cupy

    rng = cupy.random.default_rng(0)
    x = rng.standard_normal((a.batch, a.n, a.n), dtype=cupy.float32)
    y = rng.standard_normal((a.batch, a.n, a.n), dtype=cupy.float32)
    ref = cupy.matmul(x.astype(cupy.float64), y.astype(cupy.float64))
    norm = float(cupy.linalg.norm(ref))
    print(f"{a.batch} x ({a.n} x {a.n} x {a.n}), float32; us per batch (host wall clock, device synchronized)")
    print(f"{'kernel':<16} {'batched':>10} {'loop':>10} {'loop/batched':>13} {'rel. error':>11}  ran")
    for k in a.kernels.split(","):
        out = cumm.matmul(x, y, kernel=k)
        err = float(cupy.linalg.norm(out.astype(cupy.float64) - ref)) / norm
        loop_out = cupy.stack([cumm.matmul(x[i], y[i], kernel=k) for i in range(a.batch)])
        err_loop = float(cupy.linalg.norm(loop_out.astype(cupy.float64) - ref)) / norm
        if not (err < 1e-5 and err_loop < 1e-5):
            print(f"{k:<16} FAIL (relative error {err:.2e}, loop {err_loop:.2e})")
            continue
        outs = [cupy.empty((a.n, a.n), cupy.float32) for _ in range(a.batch)]
        xs, ys = [x[i] for i in range(a.batch)], [y[i] for i in range(a.batch)]

        def loop(k=k, outs=outs, xs=xs, ys=ys):
            for i in range(a.batch):
                cumm.matmul(xs[i], ys[i], kernel=k, out=outs[i])

        t_b = _timing.host_us(lambda k=k, out=out: cumm.matmul(x, y, kernel=k, out=out), a.calls, 20)
        t_l = _timing.host_us(loop, max(5, a.calls // 10), 3)
        from cumm.api.decision import decision

        print(f"{k:<16} {t_b:>10.1f} {t_l:>10.1f} {t_l / t_b:>12.1f}x {err:>11.1e}  {decision(x, y, out, kernel=k)}")
    t_c = _timing.host_us(lambda: cupy.matmul(x, y), a.calls, 20)
    print(f"{'cupy.matmul':<16} {t_c:>10.1f}")
    return 0


DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}


def device(batches: str, kernels: str, dtype: str = "fp32", transposed_b: bool = False) -> int:
    """TFLOP/s of batched products (device time) beside cuBLAS's batched product; 1 if a result is wrong."""
    import cupy

    name = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["name"]
    dt = DTYPES[dtype]
    lay = ", B a transposed view" if transposed_b else ""
    print(
        f"{name.decode() if isinstance(name, bytes) else name}: batched {dt}{lay}, device time (back-to-back launches)"
    )
    print("| batch | kernel | ms | TFLOP/s | x cuBLAS | rel. error | ran |\n|---|---|---:|---:|---:|---:|---|")
    rng = cupy.random.default_rng(0)
    bad = 0
    for item in batches.split(","):
        dims = [int(v) for v in item.lower().split("x")]
        if len(dims) not in (2, 4):
            raise SystemExit(f"--device takes BATCHxN or BATCHxMxNxK items, got {item!r}")
        nb, (M, N, K) = dims[0], (dims[1:] if len(dims) == 4 else dims[1:] * 3)
        bad += _device_rows(nb, M, N, K, kernels.split(","), rng, dt, transposed_b)
    return int(bad > 0)


def _cast(x, dt: str):
    import cupy

    if dt == "bfloat16":
        import ml_dtypes

        return x.astype(ml_dtypes.bfloat16)
    return x.astype(cupy.dtype(dt))


def _device_rows(
    nb: int, M: int, N: int, K: int, kernels: list[str], rng, dt: str = "float32", transposed_b: bool = False
) -> int:
    """Print one batch's rows; the number of wrong results. ``transposed_b``: B is the transposed view of a
    (nb, N, K) array."""
    import statistics

    import cupy

    from cumm.api.decision import decision

    xs = [_cast(rng.standard_normal((nb, M, K), dtype=cupy.float32), dt) for _ in range(2)]
    if transposed_b:
        ys = [_cast(rng.standard_normal((nb, N, K), dtype=cupy.float32), dt).swapaxes(-1, -2) for _ in range(2)]
    else:
        ys = [_cast(rng.standard_normal((nb, K, N), dtype=cupy.float32), dt) for _ in range(2)]
    outs = [cupy.empty((nb, M, N), xs[0].dtype) for _ in range(2)]
    ref = cupy.matmul(xs[0].astype(cupy.float64), ys[0].astype(cupy.float64))
    if dt == "float32":
        runs = {"cublas": lambda i: cupy.matmul(xs[i % 2], ys[i % 2], out=outs[i % 2])}
    else:
        import torch

        tx, ty, to = ([torch.from_dlpack(v) for v in vs] for vs in (xs, ys, outs))
        runs = {"cublas": lambda i: torch.matmul(tx[i % 2], ty[i % 2], out=to[i % 2])}
    loops = [[o[j] for j in range(nb)] for o in outs]
    for k in kernels:
        if k == "loop":  # one 2-D call a product
            runs[k] = lambda i: [cumm.matmul(xs[i % 2][j], ys[i % 2][j], out=loops[i % 2][j]) for j in range(nb)]
        else:
            runs[k] = lambda i, k=k: cumm.matmul(xs[i % 2], ys[i % 2], kernel=k, out=outs[i % 2])
    errs, ran, times, bad = {}, {}, {k: [] for k in runs}, 0

    def err():
        return float(cupy.linalg.norm(outs[0].astype(cupy.float64) - ref) / cupy.linalg.norm(ref))

    for k, fn in runs.items():
        outs[0].fill(cupy.nan)
        fn(0)
        cupy.cuda.Device().synchronize()
        errs[k] = err()
        ran[k] = (
            "-" if k == "cublas" else "one call a product" if k == "loop" else decision(xs[0], ys[0], outs[0], kernel=k)
        )
    for k in runs:  # float32: against float64; a half dtype: no worse than 1.5x cuBLAS's own error
        ok = errs[k] < 1e-5 if dt == "float32" else errs[k] <= 1.5 * errs["cublas"] + 1e-7
        bad += not ok
        if not ok:
            ran[k] += " WRONG"
    for _ in range(3):
        for k, fn in runs.items():
            times[k] += _timing.back_to_back_ms(fn, 10)
    base = statistics.median(times["cublas"])
    shape = f"{nb} x {M}^3" if M == N == K else f"{nb} x {M}x{N}x{K}"
    for k in runs:
        ms = statistics.median(times[k])
        tf = 2 * nb * M * N * K / ms / 1e9
        print(f"| {shape} | {k} | {ms:.3f} | {tf:.1f} | {base / ms:.2f} | {errs[k]:.1e} | {ran[k]} |")
    return bad


if __name__ == "__main__":
    raise SystemExit(main())
