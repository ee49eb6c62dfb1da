"""One thread per GPU: does each GPU keep its solo throughput when two threads call cumm.matmul at once?

    PYTHONPATH=. python3 bench/multigpu.py [--size 8192] [--reps 20] [--dtype float32] [--markdown PATH]

For each GPU alone, then for all GPUs at once (one thread each, started together): REPS products of size^3
(kernel="auto") on that GPU's stream, operands rotated between two sets, after a warm-up; a GPU's time is its
CUDA events' span from the first to the last product. The ratio solo / together is the share of its solo
throughput each GPU keeps (1.0: no interference; the host's Python and the launch path are shared).
"""

from __future__ import annotations

import argparse
import threading

import cupy

import cumm
from cumm.api.decision import decision


def _operands(dev: int, n: int, dtype):
    with cupy.cuda.Device(dev):
        rng = cupy.random.default_rng(dev)
        sets = [
            (
                rng.standard_normal((n, n), dtype=cupy.float32).astype(dtype),
                rng.standard_normal((n, n), dtype=cupy.float32).astype(dtype),
            )
            for _ in range(2)
        ]
        outs = [cupy.empty((n, n), dtype=dtype) for _ in range(2)]
    return sets, outs


def _run(dev: int, sets, outs, reps: int, barrier: threading.Barrier | None, result: dict) -> None:
    with cupy.cuda.Device(dev):
        for i in range(3):  # warm-up: compiles, tensor maps, cached calls
            cumm.matmul(*sets[i % 2], out=outs[i % 2])
        cupy.cuda.Device(dev).synchronize()
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        if barrier is not None:
            barrier.wait()
        start.record()
        for i in range(reps):
            cumm.matmul(*sets[i % 2], out=outs[i % 2])
        end.record()
        end.synchronize()
        result[dev] = cupy.cuda.get_elapsed_time(start, end)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--size", type=int, default=8192)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--dtype", default="float32", choices=("float32", "float16", "bfloat16"))
    p.add_argument("--markdown", default=None)
    args = p.parse_args()
    import ml_dtypes

    dtype = {"float32": cupy.float32, "float16": cupy.float16, "bfloat16": ml_dtypes.bfloat16}[args.dtype]
    ngpu = cupy.cuda.runtime.getDeviceCount()
    if ngpu < 2:
        raise SystemExit(f"needs two GPUs; this machine has {ngpu}")
    devs = list(range(ngpu))
    data = {d: _operands(d, args.size, dtype) for d in devs}
    flops = 2.0 * args.size**3 * args.reps
    solo: dict[int, float] = {}
    for d in devs:
        _run(d, *data[d], args.reps, None, solo)
    together: dict[int, float] = {}
    barrier = threading.Barrier(len(devs))
    threads = [threading.Thread(target=_run, args=(d, *data[d], args.reps, barrier, together)) for d in devs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    name = cupy.cuda.runtime.getDeviceProperties(0)["name"]
    name = name.decode() if isinstance(name, bytes) else name
    lines = [
        f"# One thread per GPU: {args.size}^3 {args.dtype}, auto, {args.reps} products per GPU ({name} x {ngpu})",
        "",
        f"Command: `PYTHONPATH=. python3 bench/multigpu.py --size {args.size} --reps {args.reps} --dtype {args.dtype}`",
        "",
        "| GPU | ran | solo ms | TFLOP/s | together ms | TFLOP/s | kept |",
        "|---:|---|---:|---:|---:|---:|---:|",
    ]
    for d in devs:
        a, b = data[d][0][0]
        with cupy.cuda.Device(d):
            ran = decision(a, b, data[d][1][0])
        lines.append(
            f"| {d} | {ran} | {solo[d]:.1f} | {flops / solo[d] / 1e9:.1f} | {together[d]:.1f} | "
            f"{flops / together[d] / 1e9:.1f} | {solo[d] / together[d]:.3f} |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
