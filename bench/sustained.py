"""Throughput held for seconds, with the SM clock and board power: where the power limit, not the kernel, decides.

    PYTHONPATH=. python3 bench/sustained.py [--dtype bfloat16] [--size 4096 | --shape MxNxK] [--secs 5]
        [--rounds 2] [--kernels wgmma_ws,wgmma_ws:GM=16,cublas] [--kernel-file FILE.py] [--markdown PATH]

``python -m cumm bench`` times short bursts, after which the card cools between samples. Here each candidate
runs back to back for ``--secs`` seconds (CUDA-event samples of 20 products, operands rotated between two sets
larger than the L2 together) while ``nvidia-smi`` reads the SM clock and the board power every 100 ms; the first
third of the readings (the clock settling) is dropped. Candidates take turns over ``--rounds`` rounds. Reported
per candidate: the median TFLOP/s, clock and power, and TFLOP/s per GHz (the work done per cycle, which the power
limit does not move: a kernel can lead per cycle and still trail in TFLOP/s if it draws more power per cycle).

A candidate is a rung (``auto``, ``wgmma_ws``), a rung with overrides (``wgmma_ws:GM=16,STAGES=3``) or
``cublas``: torch.matmul at the same dtype (TF32 off for float32) when torch is importable, else cupy.matmul.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import time

import cupy

import cumm
from cumm.tools.bench import parse_shape


def parse_candidate(text: str) -> tuple[str, dict[str, int] | None]:
    """``"wgmma_ws:GM=16,STAGES=3"`` -> ``("wgmma_ws", {"GM": 16, "STAGES": 3})``; ``"cublas"`` -> ``("cublas",
    None)``. ValueError naming the part that is not ``NAME=INT``."""
    name, _, rest = text.partition(":")
    over: dict[str, int] = {}
    for item in filter(None, rest.split(",")):
        key, eq, value = item.partition("=")
        try:
            if not eq:
                raise ValueError
            over[key.strip()] = int(value)
        except ValueError:
            raise ValueError(f"{text!r}: overrides are NAME=INT separated by commas, got {item!r}") from None
    return name.strip(), over or None


def split_candidates(text: str) -> list[str]:
    """``"wgmma_ws,wgmma_ws:GM=16,STAGES=3,cublas"`` -> ``["wgmma_ws", "wgmma_ws:GM=16,STAGES=3", "cublas"]``: an
    item ``NAME=INT`` continues the overrides of the candidate before it."""
    names: list[str] = []
    for item in filter(None, (t.strip() for t in text.split(","))):
        if "=" in item and ":" not in item and names and ":" in names[-1]:
            names[-1] += "," + item
        else:
            names.append(item)
    return names


def _operands(shape: tuple[int, int, int], dtype: str, use_torch: bool):
    """Two operand sets (M x K and K x N) and an M x N output of ``dtype``: torch tensors when torch is used
    (cumm takes them as they are), else cupy arrays."""
    m, n, k = shape
    if use_torch:
        import torch

        tdt = getattr(torch, dtype)
        g = torch.Generator(device="cuda").manual_seed(0)
        sets = [
            tuple(torch.randn(r, c, device="cuda", generator=g).to(tdt) for r, c in ((m, k), (k, n))) for _ in range(2)
        ]
        return sets, torch.empty(m, n, device="cuda", dtype=tdt)
    from cumm.tools.bench import np_dtype

    cdt = np_dtype(dtype)
    rng = cupy.random.default_rng(0)
    sets = [tuple(rng.standard_normal(s, dtype=cupy.float32).astype(cdt) for s in ((m, k), (k, n))) for _ in range(2)]
    return sets, cupy.empty((m, n), dtype=cdt)


def _product(name: str, config, use_torch: bool):
    if name != "cublas":
        return lambda a, b, out: cumm.matmul(a, b, kernel=name, config=config, out=out)
    if use_torch:
        import torch

        torch.backends.cuda.matmul.allow_tf32 = False  # cuBLAS in true FP32 for float32 operands
        return lambda a, b, out: torch.matmul(a, b, out=out)
    return lambda a, b, out: cupy.matmul(a, b, out=out)


def _hold(run, sets, out, secs: float, device: int) -> dict[str, float]:
    """Run products back to back for ``secs`` seconds: median ms per product, SM clock (MHz), power (W)."""
    for i in range(4):  # warm-up: compiles, tensor maps, cached calls
        run(*sets[i % 2], out)
    cupy.cuda.Device().synchronize()
    smi = subprocess.Popen(
        [
            "nvidia-smi",
            "-i",
            str(device),
            "--query-gpu=clocks.sm,power.draw",
            "--format=csv,noheader,nounits",
            "-lms",
            "100",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    samples: list[float] = []
    t0 = time.time()
    try:
        while time.time() - t0 < secs:
            start.record()
            for i in range(20):
                run(*sets[i % 2], out)
            end.record()
            end.synchronize()
            samples.append(cupy.cuda.get_elapsed_time(start, end) / 20)
    finally:
        smi.terminate()
        text, _ = smi.communicate()
    readings = [tuple(float(v) for v in line.split(",")) for line in text.splitlines() if line.count(",") == 1]
    readings = readings[len(readings) // 3 :]
    if not readings:
        raise RuntimeError("nvidia-smi returned no clock and power readings")
    return dict(
        ms=statistics.median(samples),
        mhz=statistics.median(r[0] for r in readings),
        watts=statistics.median(r[1] for r in readings),
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dtype", default="bfloat16", choices=("float32", "float16", "bfloat16"))
    p.add_argument("--size", type=int, default=4096, help="N for an N x N x N product")
    p.add_argument("--shape", default=None, help="M x N x K instead of --size, e.g. 2816x6144x4096")
    p.add_argument("--secs", type=float, default=5.0)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--kernels", default="wgmma_ws,cublas", help="candidates, comma-separated: see the module doc")
    p.add_argument("--kernel-file", action="append", default=[], help="import this file first (user kernels)")
    p.add_argument("--markdown", default=None)
    a = p.parse_args()
    if a.kernel_file:
        from cumm.tools.cli import load_kernel_files

        load_kernel_files(a.kernel_file)
    try:
        candidates = [(text, *parse_candidate(text)) for text in split_candidates(a.kernels)]
    except ValueError as e:
        p.error(f"--kernels: {e}")
    try:
        import torch  # noqa: F401

        use_torch = True
    except ImportError:
        use_torch = False
    try:
        shape = parse_shape(a.shape) if a.shape else (a.size,) * 3
    except ValueError as e:
        p.error(f"--shape: {e}")
    flop = 2 * shape[0] * shape[1] * shape[2]
    what = f"{a.size}^3" if not a.shape else "x".join(map(str, shape))
    how = f"--size {a.size}" if not a.shape else f"--shape {a.shape}"
    sets, out = _operands(shape, a.dtype, use_torch)
    device = cupy.cuda.Device().id
    results: dict[str, list[dict[str, float]]] = {text: [] for text, _, _ in candidates}
    for _ in range(a.rounds):
        for text, name, config in candidates:
            r = _hold(_product(name, config, use_torch), sets, out, a.secs, device)
            results[text].append(r)
            tflops = flop / r["ms"] / 1e9
            print(f"{text:28s} {tflops:7.1f} TFLOP/s  {r['mhz']:6.0f} MHz  {r['watts']:5.0f} W", flush=True)
    name = cupy.cuda.runtime.getDeviceProperties(device)["name"].decode()
    lines = [
        f"# Sustained {a.dtype} {what} on {name}",
        "",
        f"`PYTHONPATH=. python3 bench/sustained.py --dtype {a.dtype} {how} --secs {a.secs:g} --rounds "
        f"{a.rounds} --kernels {a.kernels}`",
        "",
        "Each candidate held for the seconds given, the candidates taking turns; medians over the rounds' samples "
        "(clock and power: nvidia-smi every 100 ms, the first third of each hold dropped).",
        "",
        "| candidate | TFLOP/s | x cublas | SM clock MHz | power W | TFLOP/s per GHz |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    med = {
        text: {k: statistics.median(r[k] for r in rs) for k in ("ms", "mhz", "watts")} for text, rs in results.items()
    }
    base = med.get("cublas")
    for text, m in med.items():
        tf = flop / m["ms"] / 1e9
        ratio = f"{base['ms'] / m['ms']:.3f}" if base else "-"
        lines.append(f"| {text} | {tf:.1f} | {ratio} | {m['mhz']:.0f} | {m['watts']:.0f} | {tf / m['mhz'] * 1e3:.1f} |")
    report = "\n".join(lines) + "\n"
    print(report)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(report)


if __name__ == "__main__":
    main()
