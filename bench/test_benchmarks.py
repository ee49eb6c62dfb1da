"""pytest-benchmark suite: every kernel of the ladder, and cuBLAS (cupy.matmul, FP32) as the baseline; bf16 rungs
beside torch.matmul, and a batch of bf16 products (test_bf16_batched_gemm).

    pytest --benchmark-only [--cumm-sizes 512,1024] [--benchmark-json results.json]

How a round is timed: the benchmark's timer synchronizes the device before it reads the clock, and a round
is ``iterations`` back-to-back calls (about ROUND_S of GPU work) rotating over input sets that together
exceed twice the L2 cache. pytest-benchmark divides the round by ``iterations``, so the synchronizations and
the launch latency are amortized and the per-call time is the device's. Warm-up rounds are excluded. Every
kernel is checked against a float64 product before it is timed; a wrong one fails and is not timed.

extra_info: tflops (from the median), cublas_tflops (same size, measured once per session the same way),
ratio (tflops / cublas_tflops), rel_err.
"""

from __future__ import annotations

import itertools
import statistics
import time

import cupy
import pytest

import cumm
from cumm.runtime import timing as _timing
from cumm.tools import bench as _bench

ROUND_S = 0.02  # GPU work per round: long enough that two synchronizations are noise
ROUNDS = 20
BUDGET_S = 2.0  # slow kernels (naive at 4096) get fewer rounds, but at least _timing.MIN_RUNS


def synchronized_clock() -> float:
    """perf_counter once the device has finished all queued work, so a round's time covers its GPU work."""
    cupy.cuda.Device().synchronize()
    return time.perf_counter()


pytestmark = pytest.mark.benchmark(timer=synchronized_clock)


class Workload:
    """Rotating input sets for one square size, with the float64 reference of the first set."""

    def __init__(self, rng, size: int, dtype: str = "float32"):
        self.sets = _bench.input_sets(rng, size, size, size, dtype=dtype)
        self.ref, self.ref_norm = _bench.reference(*self.sets[0][:2])

    def rotating(self, call):
        nxt = itertools.cycle(self.sets).__next__
        return lambda: call(*nxt())


def _plan(fn) -> tuple[int, int]:
    """(iterations per round, rounds) from a quick CUDA-event estimate of one call."""
    est_ms = _timing.time_ms(fn, warmup=2, repeat=5, budget_s=0.5)
    iterations = max(1, round(ROUND_S * 1e3 / est_ms))
    rounds = min(ROUNDS, max(_timing.MIN_RUNS, int(BUDGET_S * 1e3 / (est_ms * iterations))))
    return iterations, rounds


@pytest.fixture(scope="session")
def workload():
    try:
        _bench.check_tf32()
    except _bench.BenchError as e:
        pytest.fail(str(e), pytrace=False)
    rng = cupy.random.default_rng()
    cache: dict[tuple[int, str], Workload] = {}

    def get(size: int, dtype: str = "float32") -> Workload:
        if (size, dtype) not in cache:
            cache[(size, dtype)] = Workload(rng, size, dtype)
        return cache[(size, dtype)]

    return get


@pytest.fixture(scope="session")
def cublas_tflops(workload):
    """cuBLAS TFLOP/s per size, measured once per session with the same rounds as the benchmarks."""
    cache: dict[int, float] = {}

    def get(size: int) -> float:
        if size not in cache:
            fn = workload(size).rotating(_bench.kernel_call(_bench.CUBLAS))
            iterations, rounds = _plan(fn)
            per_call = []
            for _ in range(rounds):
                t0 = synchronized_clock()
                for _ in range(iterations):
                    fn()
                per_call.append((synchronized_clock() - t0) / iterations)
            cache[size] = _bench.tflops(size, size, size, statistics.median(per_call) * 1e3)
        return cache[size]

    return get


@pytest.mark.parametrize("kernel", [_bench.CUBLAS, *cumm.kernels(dtype="float32")])
def test_sgemm(benchmark, kernel: str, size: int, workload, cublas_tflops):
    w = workload(size)
    call = _bench.kernel_call(kernel)
    err = _bench.verify(call, w.sets[0], w.ref, w.ref_norm)
    assert err < _bench.TOLERANCES["float32"], (
        f"{kernel} at {size}^3: relative error {err:.2e} against float64; not timed"
    )

    fn = w.rotating(call)
    iterations, rounds = _plan(fn)
    benchmark.group = f"{size}x{size}x{size}"
    benchmark.extra_info.update(kernel=kernel, M=size, N=size, K=size, rel_err=err)
    benchmark.pedantic(fn, rounds=rounds, iterations=iterations, warmup_rounds=1)
    if benchmark.stats:  # None under --benchmark-disable
        tf = _bench.tflops(size, size, size, benchmark.stats.stats.median * 1e3)
        base = cublas_tflops(size)
        benchmark.extra_info.update(tflops=round(tf, 3), cublas_tflops=round(base, 3), ratio=round(tf / base, 4))


@pytest.mark.parametrize("kernel", [_bench.CUBLAS, *cumm.kernels(dtype="bfloat16")])
def test_bf16_gemm(benchmark, kernel: str, size: int, workload):
    """The half-precision rungs on bfloat16 inputs (bfloat16 C), cuBLAS through torch.matmul beside them."""
    w = workload(size, "bfloat16")
    try:
        call = _bench.kernel_call(kernel, "bfloat16")
    except _bench.BenchError as e:
        pytest.skip(str(e))
    err = _bench.verify(call, w.sets[0], w.ref, w.ref_norm)
    tol = _bench.TOLERANCES["bfloat16"]
    assert err < tol, f"{kernel} at {size}^3 (bf16): relative error {err:.2e} against float64; not timed"
    fn = w.rotating(call)
    iterations, rounds = _plan(fn)
    benchmark.group = f"bf16 {size}x{size}x{size}"
    benchmark.extra_info.update(kernel=kernel, M=size, N=size, K=size, rel_err=err, dtype="bfloat16")
    benchmark.pedantic(fn, rounds=rounds, iterations=iterations, warmup_rounds=1)


BATCHED = (32, 512, 512, 128)  # (batch, M, N, K): attention-like products, one launch over the batch


@pytest.mark.parametrize("kernel", [_bench.CUBLAS, "wgmma_ws", "auto"])
def test_bf16_batched_gemm(benchmark, kernel: str):
    """A batch of bfloat16 products in one call: wgmma_ws walks the batch's tiles as one run; cuBLAS's batched GEMM
    (torch.matmul on the same (batch, M, K) @ (batch, K, N) memory) beside it."""
    nb, M, N, K = BATCHED
    try:
        call = _bench.kernel_call(kernel, "bfloat16")
    except _bench.BenchError as e:
        pytest.skip(str(e))
    rng = cupy.random.default_rng()
    dt = _bench.np_dtype("bfloat16")
    sets = [
        (
            rng.standard_normal((nb, M, K), dtype=cupy.float32).astype(dt),
            rng.standard_normal((nb, K, N), dtype=cupy.float32).astype(dt),
            cupy.empty((nb, M, N), dtype=dt),
        )
        for _ in range(4)  # 4 x 21 MB: past the L2
    ]
    ref, ref_norm = _bench.reference(*sets[0][:2])
    err = _bench.verify(call, sets[0], ref, ref_norm)
    tol = _bench.TOLERANCES["bfloat16"]
    assert err < tol, f"{kernel} on {nb} x {M}x{N}x{K} (bf16): relative error {err:.2e} against float64; not timed"
    nxt = itertools.cycle(sets).__next__

    def fn():
        call(*nxt())

    iterations, rounds = _plan(fn)
    benchmark.group = f"bf16 batched {nb} x {M}x{N}x{K}"
    benchmark.extra_info.update(kernel=kernel, batch=nb, M=M, N=N, K=K, rel_err=err, dtype="bfloat16")
    benchmark.pedantic(fn, rounds=rounds, iterations=iterations, warmup_rounds=1)
    if benchmark.stats:
        benchmark.extra_info.update(tflops=round(2 * nb * M * N * K / benchmark.stats.stats.median / 1e12, 3))
