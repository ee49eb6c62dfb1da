"""Time cumm.multi_dot on A @ B @ C against cupy's and torch's ``a @ b @ c`` (two cuBLAS calls, true FP32).

    PYTHONPATH=. python3 bench/chain.py [--sizes 128,256,512,1024,2048,4096] [--no-extra] [--rounds 5]
                                        [--json PATH] [--markdown PATH]

Methods: cupy ``cupy.matmul(cupy.matmul(a, b), c, out=e)``; torch ``torch.matmul(torch.matmul(a, b), c,
out=e)`` on the same memory (DLPack, ``allow_tf32 = False``; only where torch is importable and shares CuPy's
stream); ``cumm.multi_dot([a, b, c], kernel=K, out=e)`` for K = each chain kernel the device runs
(``cumm.kernels("chain")``: fused3, fused3_tc and fused3_wg on sm_90), auto and pairwise. Every method writes
into a preallocated ``e`` (no method allocates its result) and rotates over enough input sets to exceed twice
the L2 cache.

Before anything is timed, every method is checked against a float64 product (its output NaN-poisoned first; a
relative error not below 1e-5 is FAIL and is not timed) and then warmed up: WARM_S of calls each, so that
one-time costs (cuBLAS handle and heuristics, CuPy's pool growth, kernel compiles, plan caches) are paid by
every method before any is timed. Three timings (cumm.runtime.timing):

* loop: wall-clock time per call of a Python loop of calls, the GPU synchronized at both ends
  (``host_us``): what a caller sees, the host included. Measured in ROUNDS interleaved rounds (each round
  times every method once, the order rotated from round to round), reported as the median of the rounds,
  so that a change in the host's speed during the run falls on every method alike.
* device: calls queued behind a spinning kernel, one event between consecutive calls (``back_to_back_ms``):
  the GPU's time per call, whatever the host costs.
* events: an event pair around each call behind an untimed leader (``sample_ms``, as ``python -m cumm bench``).
  Where the host is slower than the GPU this times part of the host's work too; kept for comparison with
  earlier tables.

speedup = cupy / auto in each timing.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time

import cupy

import cumm
from cumm.runtime import timing as _timing

SQUARE = (128, 256, 512, 1024, 2048, 4096)
EXTRA = [(4096, 64, 4096, 64)]
TOL = 1e-5
L2_FALLBACK_BYTES = 60 * 2**20  # H200; only if the device does not report its L2 size
WARM_S = 0.2  # warm-up per method and chain, at least WARM_CALLS calls
WARM_CALLS = 20
ROUNDS = 7
LOOP_CALLS, LOOP_BUDGET_S = 100, 0.15  # calls per loop measurement (fewer for slow calls, at least 20)
HOST_CHECK_ADDS = 2000  # the fixed pure-Python work timed in each round: the host's speed at that moment
RUNS, RUN_BUDGET_S = 100, 0.5  # events and device: timed calls per method (fewer for slow calls, at least 20)
MIN_RUNS = 20
TF32_VARS = ("CUPY_TF32", "NVIDIA_TF32_OVERRIDE")
TIMINGS = {"us": "loop", "device_us": "device", "event_us": "events"}


def _sets(rng, dims):
    dev = cupy.cuda.Device()
    l2 = dev.attributes.get("L2CacheSize") or L2_FALLBACK_BYTES
    free = cupy.cuda.runtime.memGetInfo()[0] + cupy.get_default_memory_pool().free_bytes()
    m, k, p, n = dims
    operand = 4 * (m * k + k * p + p * n)
    count = _timing.n_input_sets(operand, operand + 4 * m * n, l2, free)
    f32 = cupy.float32
    return [
        ([rng.standard_normal((dims[i], dims[i + 1]), dtype=f32) for i in range(3)], cupy.empty((m, n), f32))
        for _ in range(count)
    ]


def _torch():
    """torch with FP32 matmul (no TF32), or None where it is absent, has no GPU or does not share CuPy's stream."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    # one stream for both libraries, so that CuPy's events and synchronizations cover torch's kernels
    if torch.cuda.current_stream().cuda_stream != cupy.cuda.get_current_stream().ptr:
        print("torch: not timed (its current stream is not CuPy's)", file=sys.stderr)
        return None
    return torch


def _methods(cc: int, torch) -> dict:
    methods = {"cupy": lambda x, e: cupy.matmul(cupy.matmul(x[0], x[1]), x[2], out=e)}
    if torch is not None:
        methods["torch"] = lambda x, e: torch.matmul(torch.matmul(x[0], x[1]), x[2], out=e)
    # the chain kernels this device runs (fused3, fused3_tc, fused3_wg on sm_90), then multi_dot's own choice
    kernels = [k for k in cumm.kernels("chain") if cumm.kernel_spec(k).supports(cc)] + ["auto", "pairwise"]
    for k in kernels:
        methods[k] = lambda x, e, k=k: cumm.multi_dot(x, kernel=k, out=e)
    return methods


def _operands(name: str, sets, torch):
    """The input sets as the method takes them: torch tensors on the same memory for torch."""
    if name != "torch":
        return sets
    return [([torch.from_dlpack(a) for a in x], torch.from_dlpack(e)) for x, e in sets]


def _rotating(fn, sets):
    state = {"i": 0}

    def call():
        x, e = sets[state["i"] % len(sets)]
        state["i"] += 1
        fn(x, e)

    return call


def _check(fn, ops, sets, ref, ref_norm) -> float | None:
    """Relative error of one call against the float64 ``ref``, its output NaN-poisoned first; None for NaN.
    ``ops`` are ``sets`` as the method takes them (the same memory), so the result is read from ``sets``."""
    sets[0][1].fill(math.nan)
    fn(*ops[0])
    err = float(cupy.linalg.norm(sets[0][1].astype(cupy.float64) - ref)) / ref_norm
    return err if math.isfinite(err) else None


def host_check_us() -> float:
    """Microseconds of HOST_CHECK_ADDS additions in a Python loop (best of 3): no GPU, so it moves only with
    the host's speed, which changes between runs and within one (the host-bound columns move with it)."""
    best = math.inf
    for _ in range(3):
        t0 = time.perf_counter()
        s = 0
        for i in range(HOST_CHECK_ADDS):
            s += i
        best = min(best, (time.perf_counter() - t0) * 1e6)
    return best


def _warm(call) -> float:
    """WARM_S of calls (at least WARM_CALLS); returns the last wall-clock us per call as an estimate."""
    est = _timing.host_us(call, WARM_CALLS, 1)
    extra = int(WARM_S * 1e6 / max(est, 1.0)) - WARM_CALLS
    if extra > 0:
        est = _timing.host_us(call, extra, 0)
    return est


def _measure_chain(dims, rng, methods, torch, rounds: int) -> dict:
    sets = _sets(rng, dims)
    x = sets[0][0]
    ref = (x[0].astype(cupy.float64) @ x[1].astype(cupy.float64)) @ x[2].astype(cupy.float64)
    ref_norm = float(cupy.linalg.norm(ref))
    row = {"shape": "x".join(map(str, dims)), "dims": list(dims)}
    calls, est = {}, {}
    for name, fn in methods.items():  # check and warm every method before any is timed
        ops = _operands(name, sets, torch)
        try:
            err = _check(fn, ops, sets, ref, ref_norm)
        except (ValueError, RuntimeError) as exc:  # e.g. a fused kernel this device cannot run
            row[name] = {"status": f"n/a ({type(exc).__name__}: {str(exc).splitlines()[0][:80]})"}
            continue
        row[name] = {"rel_err": err, "status": "ok" if err is not None and err < TOL else "FAIL"}
        if row[name]["status"] == "ok":
            calls[name] = _rotating(fn, ops)
            est[name] = _warm(calls[name])
    names = list(calls)
    loops: dict[str, list[float]] = {name: [] for name in names}
    checks = []
    for r in range(rounds if names else 0):  # interleaved: every method once per round, the order rotated
        checks.append(host_check_us())
        for name in names[r % len(names) :] + names[: r % len(names)]:
            n_calls = _timing.planned_runs(est[name] / 1e3, LOOP_CALLS, LOOP_BUDGET_S, MIN_RUNS)
            loops[name].append(_timing.host_us(calls[name], n_calls, 2))
    for name in names:
        call = calls[name]
        runs = _timing.planned_runs(est[name] / 1e3, RUNS, RUN_BUDGET_S, MIN_RUNS)
        events = _timing.sample_ms(call, warmup=3, repeat=runs, budget_s=RUN_BUDGET_S, min_runs=MIN_RUNS)
        # the spin must outlast the host's queueing of the timed calls: est, the wall clock per call, bounds a
        # call's host side (no host path here takes 1 ms)
        spin_ms = max(_timing.SPIN_MS, 3e-3 * min(est[name], 1000.0) * runs)
        device = _timing.back_to_back_ms(lambda i, call=call: call(), runs, spin_ms=spin_ms)
        row[name].update(
            us=statistics.median(loops[name]), us_rounds=loops[name], device_us=statistics.median(device) * 1e3,
            event_us=statistics.median(events) * 1e3, runs=runs,
        )  # fmt: skip
    row["host_check_us"] = statistics.median(checks)
    for key in TIMINGS:
        cu, au = row["cupy"].get(key), row["auto"].get(key)
        row["speedup" + ("" if key == "us" else "_" + TIMINGS[key])] = cu / au if cu and au else None
    return row


def run(chains, rounds: int) -> tuple[list[dict], list[str]]:
    rng = cupy.random.default_rng(0)
    cc = int(cupy.cuda.Device().compute_capability)
    torch = _torch()
    methods = _methods(cc, torch)
    rows = []
    for dims in chains:
        rows.append(_measure_chain(dims, rng, methods, torch, rounds))
        print(_line(rows[-1], list(methods), "us"), file=sys.stderr, flush=True)
        cupy.get_default_memory_pool().free_all_blocks()
    return rows, list(methods)


def _cell(cell: dict, key: str) -> str:
    if cell.get(key) is not None:
        return f"{cell[key]:.1f}"
    if cell.get("status", "").startswith("n/a"):
        return "n/a"
    err = cell.get("rel_err")
    return "FAIL (NaN)" if err is None else f"FAIL ({err:.1e})"


def _line(row: dict, names: list[str], key: str) -> str:
    sp = row["speedup" + ("" if key == "us" else "_" + TIMINGS[key])]
    cells = " | ".join(_cell(row[n], key) for n in names)
    check = f" {row['host_check_us']:.1f} |" if key == "us" else ""
    return f"| {row['shape']} | {cells} | {f'{sp:.2f}x' if sp else '-'} |{check}"


def table(rows: list[dict], names: list[str], rounds: int = ROUNDS) -> str:
    out = []
    for key, title in (
        ("us", f"Loop (wall clock per call of a Python loop, host included; median of {rounds} interleaved rounds)"),
        ("device_us", "Device (calls queued behind a spinning kernel; the GPU's time per call)"),
        ("event_us", "Events (an event pair around each call, as `python -m cumm bench`)"),
    ):
        check = key == "us"  # the loop table also gives the host's speed: host_check_us()
        head = [
            "| chain | " + " | ".join(f"{n} us" for n in names) + " | cupy / auto |" + " host check us |" * check,
            "| --- | " + " | ".join("---:" for _ in names) + " | ---: |" + " ---: |" * check,
        ]
        out += [f"{title}:", "", *head, *(_line(r, names, key) for r in rows), ""]
    return "\n".join(out)


def device_info() -> dict:
    dev = cupy.cuda.Device()
    name = cupy.cuda.runtime.getDeviceProperties(dev.id)["name"]
    rt = cupy.cuda.runtime.runtimeGetVersion()
    info = {
        "device": name.decode() if isinstance(name, bytes) else str(name),
        "cc": f"{dev.compute_capability[:-1]}.{dev.compute_capability[-1]}",
        "cupy": cupy.__version__,
        "cuda": f"{rt // 1000}.{rt % 1000 // 10}",
    }
    try:
        import torch

        info["torch"] = torch.__version__
    except ImportError:
        pass
    return info


def check_tf32() -> None:
    for var in TF32_VARS:
        val = os.environ.get(var, "").strip()
        if val not in ("", "0"):
            sys.exit(f"{var}={val!r} is set: cuBLAS would compute the FP32 baselines in TF32; unset it and run again")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default=",".join(map(str, SQUARE)), help="square sizes n (n x n x n x n chains)")
    p.add_argument("--no-extra", action="store_true", help="skip the 4096x64 . 64x4096 . 4096x64 chain")
    p.add_argument("--rounds", type=int, default=ROUNDS, help="interleaved rounds of the loop timing")
    p.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    p.add_argument("--markdown", metavar="PATH", help="also write the tables as markdown")
    a = p.parse_args()
    why = _timing.gpu_unavailable()
    if why:
        sys.exit(why)
    check_tf32()
    chains = [(n, n, n, n) for n in (int(s) for s in a.sizes.split(",") if s.strip())]
    if not a.no_extra:
        chains += EXTRA
    rows, names = run(chains, max(1, a.rounds))
    info = device_info()
    head = (
        f"{info['device']} (cc {info['cc']}), CuPy {info['cupy']}, CUDA {info['cuda']}"
        + (f", torch {info['torch']}" if "torch" in names else "")
        + "; every method checked against float64, then warmed, before any is timed; speedup = cupy / auto"
    )
    text = f"{head}\n\n{table(rows, names, max(1, a.rounds))}"
    print(text)
    if a.markdown:
        command = "PYTHONPATH=. python3 bench/chain.py " + " ".join(sys.argv[1:])
        with open(a.markdown, "w") as f:
            f.write(f"# cumm.multi_dot against a @ b @ c\n\nCommand: `{command}`\n\n{text}")
    if a.json:
        with open(a.json, "w") as f:
            doc = {"device": info, "rounds": a.rounds, "tolerance": TOL, "methods": names, "results": rows}
            json.dump(doc, f, indent=2, allow_nan=False)
            f.write("\n")


if __name__ == "__main__":
    main()
