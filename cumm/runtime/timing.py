"""Timing on the GPU: the one home of CUDA-event timing (the benchmark, the tuner and the chain benchmark use it).

Three ways to time, each for its question:

* :func:`sample_ms`: per-call device time, warm-up excluded, an untimed leader in front so that a short call
  does not time the host's launch latency (``python -m cumm bench``);
* :func:`back_to_back_ms`: many launches queued behind a spinning kernel, so they start back to back and no
  timed launch waits for the host (the tuner; device time of calls far shorter than their host side);
* :func:`host_us`: wall-clock time per call on the host, the GPU synchronized at both ends (what a Python
  loop of calls costs a user);
* :func:`torch_rounds_ms`: torch-side calls (FP8, cuBLASLt's epilogues, torch.compile) in interleaved rounds of
  back-to-back bursts, on torch's stream and events (the FP8 and epilogue benchmarks).

GPU-free helpers (how many input sets to rotate, how many runs fit a budget) are plain arithmetic.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Mapping

DEFAULT_WARMUP = 3
DEFAULT_REPEAT = 20
BUDGET_S = 2.0  # timed runs per call site stop at about this, but never below MIN_RUNS
MIN_RUNS = 3
SPIN_MS = 2.0  # how long the spinning kernel holds the GPU while back_to_back_ms queues its launches
# Before its samples, each call runs alone for this long (the bench's ``--settle``, and the tuner for every
# configuration it times): a card at its power limit sets its clock by what it has just run, so a call timed
# right after a cooler one (a slow rung, the host compiling) borrows clock.
SETTLE_S = 0.1


def gpu_unavailable() -> str | None:
    """None if a CUDA GPU is usable, else why not."""
    try:
        import cupy

        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # no driver, a driver too old for the runtime, no device
        first = str(e).splitlines()[0] if str(e) else ""
        return f"no CUDA GPU available ({type(e).__name__}: {first})"
    return None if n > 0 else "no CUDA GPU available (0 devices)"


def planned_runs(est_ms: float, repeat: int, budget_s: float, min_runs: int = MIN_RUNS) -> int:
    """Timed runs for a call taking about ``est_ms``: ``repeat``, cut to the time budget but kept >= min_runs."""
    affordable = int(budget_s * 1e3 / max(est_ms, 1e-6))
    return min(repeat, max(min_runs, affordable))


def n_input_sets(operand_bytes: int, set_bytes: int, l2_bytes: int, free_bytes: int) -> int:
    """How many (A, B, C) sets to rotate over: enough that the operands exceed 2x L2, at least 2,
    and no more than half the free device memory holds."""
    want = 2 * l2_bytes // operand_bytes + 1
    fit = free_bytes // (2 * set_bytes)
    return max(2, min(want, fit))


def rotation_sets(set_bytes: int, l2_bytes: int) -> int:
    """Input sets to rotate so that consecutive launches do not find their operands in L2 (1 when one set
    is already twice the L2; at most 64, and at most 1 GiB of sets)."""
    if set_bytes >= 2 * l2_bytes:
        return 1
    return int(max(2, min(64, math.ceil(3 * l2_bytes / set_bytes), (1 << 30) // set_bytes)))


def sample_ms(
    fn: Callable[[], object],
    *,
    warmup: int = DEFAULT_WARMUP,
    repeat: int = DEFAULT_REPEAT,
    budget_s: float = BUDGET_S,
    min_runs: int = MIN_RUNS,
) -> list[float]:
    """Per-call device times (ms) of ``fn`` by CUDA events, warm-up excluded.

    Runs ``repeat`` times, fewer if that would exceed ``budget_s`` (never below ``min_runs``).
    """
    import cupy

    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    est, spent = math.inf, 0.0
    for _ in range(max(1, warmup)):  # synchronized: these also estimate a call's time for the budget
        start.record()
        fn()
        end.record()
        end.synchronize()
        est = cupy.cuda.get_elapsed_time(start, end)
        spent += est
        if spent > budget_s * 500:  # a slow kernel: half the budget is enough warming
            break
    runs = planned_runs(est, repeat, budget_s, min_runs)
    events = [(cupy.cuda.Event(), cupy.cuda.Event()) for _ in range(runs)]
    if est < 1.0:
        # An untimed leader keeps the GPU busy while the host queues the timed calls; otherwise each start
        # event would fire on an idle GPU and the host's launch latency would be timed as kernel time.
        fn()
    for s, e in events:
        s.record()
        fn()
        e.record()
    events[-1][1].synchronize()
    return [cupy.cuda.get_elapsed_time(s, e) for s, e in events]


def time_ms(
    fn: Callable[[], object], *, warmup: int = DEFAULT_WARMUP, repeat: int = DEFAULT_REPEAT, budget_s: float = BUDGET_S
) -> float:
    """Median device time (ms) of ``fn`` over ``repeat`` CUDA-event timed runs after ``warmup`` calls."""
    return statistics.median(sample_ms(fn, warmup=warmup, repeat=repeat, budget_s=budget_s))


_SPIN_SRC = r"""
extern "C" __global__ void cumm_spin(unsigned long long ns) {
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns);
}
"""
_spin_kernels: dict[int, object] = {}


def spin(ms: float) -> None:
    """Keep the current device busy for ``ms`` so that the launches queued behind it start back to back."""
    import cupy
    import numpy as np

    dev = cupy.cuda.Device().id
    k = _spin_kernels.get(dev)
    if k is None:
        k = _spin_kernels[dev] = cupy.RawKernel(_SPIN_SRC, "cumm_spin")
    k((1,), (1,), (np.uint64(int(ms * 1e6)),))


def back_to_back_ms(launch: Callable[[int], object], reps: int, *, spin_ms: float = SPIN_MS) -> list[float]:
    """Milliseconds of each of ``reps`` calls ``launch(i)``, queued behind a spinning kernel and event-timed.

    ``launch`` takes the call's index (rotate input sets with it). The spin should outlast the host's time
    to queue the calls; otherwise the first ones wait for the host and their times include it.
    """
    import cupy

    events = [cupy.cuda.Event() for _ in range(reps + 1)]
    spin(spin_ms)
    events[0].record()
    for i in range(reps):
        launch(i)
        events[i + 1].record()
    events[-1].synchronize()
    return [cupy.cuda.get_elapsed_time(events[i], events[i + 1]) for i in range(reps)]


def hold(launch: Callable[[int], object], seconds: float) -> None:
    """Call ``launch(i)``, i = 0, 1, ..., back to back for about ``seconds`` (synchronized every few calls):
    afterwards the card runs at the clock that the call itself sustains."""
    import cupy

    t_end, i = time.perf_counter() + seconds, 0
    while time.perf_counter() < t_end:
        for _ in range(4):
            launch(i)
            i += 1
        cupy.cuda.Device().synchronize()


def host_us(fn: Callable[[], object], calls: int, warmup: int) -> float:
    """Microseconds per call of ``fn`` on the host's clock, the device synchronized before and after."""
    import cupy

    for _ in range(warmup):
        fn()
    cupy.cuda.Device().synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    cupy.cuda.Device().synchronize()
    return (time.perf_counter() - t0) / calls * 1e6


def torch_rounds_ms(
    fns: Mapping[str, Callable[[int], object]], rounds: int, reps: int, rotate: bool = False
) -> dict[str, list[float]]:
    """Per name, the milliseconds per call of ``rounds`` bursts of ``reps`` calls ``fn(i)`` (i = 0 .. reps - 1:
    rotate input sets with it), the names taking turns each round, timed by torch CUDA events on torch's current
    stream (where the calls run). ``rotate``: round r starts at name r (mod their number), so no name always
    follows the same one (the clock under the power cap follows the work before). No warm-up: call each once
    first."""
    import torch

    times: dict[str, list[float]] = {name: [] for name in fns}
    names = list(fns)
    for r in range(rounds):
        k = r % len(names) if rotate else 0
        for name in names[k:] + names[:k]:
            fn = fns[name]
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for i in range(reps):
                fn(i)
            end.record()
            end.synchronize()
            times[name].append(start.elapsed_time(end) / reps)
    return times
