"""Two GPUs on one host: a call runs on the GPU that holds its arrays (kernels, workspaces and copies there, on
that device's current stream), operands on two devices are refused, and one thread per GPU can call matmul and
multi_dot at once. Skipped, with the reason, where fewer than two GPUs are present."""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor

import pytest

import cumm

from .conftest import rel_err

pytestmark = pytest.mark.multigpu

# (M, N, K, dtype): aligned (the copy-engine rungs on sm_90), unaligned (fallback, padded copies, edge strips),
# deep and narrow (split-K: a workspace), half precision
CASES = [
    (1024, 1024, 1024, "float32"),
    (513, 515, 517, "float32"),
    (64, 64, 4096, "float32"),
    (1024, 768, 512, "bfloat16"),
]


def _dtype(name: str):
    import cupy
    import ml_dtypes

    return cupy.float32 if name == "float32" else ml_dtypes.bfloat16


def _check_case(dev: int, M: int, N: int, K: int, dtype: str, seed: int) -> None:
    """One product on device ``dev``: its result is there and right."""
    import cupy

    with cupy.cuda.Device(dev):
        rng = cupy.random.default_rng(seed)
        a = rng.standard_normal((M, K), dtype=cupy.float32).astype(_dtype(dtype))
        b = rng.standard_normal((K, N), dtype=cupy.float32).astype(_dtype(dtype))
        ref = a.astype(cupy.float64) @ b.astype(cupy.float64)
        out = cupy.full((M, N), math.nan, dtype=a.dtype)
        got = cumm.matmul(a, b, out=out)
        assert got is out and got.device.id == dev
        fresh = cumm.matmul(a, b)
        assert fresh.device.id == dev
        tol = 1e-5 if dtype == "float32" else 1e-2
        assert rel_err(out.astype(cupy.float64), ref) < tol, (dev, M, N, K, dtype)
        assert rel_err(fresh.astype(cupy.float64), ref) < tol


def _check_chain(dev: int, n: int, seed: int) -> None:
    import cupy

    with cupy.cuda.Device(dev):
        rng = cupy.random.default_rng(seed)
        xs = [rng.standard_normal((n, n), dtype=cupy.float32) for _ in range(3)]
        ref = xs[0].astype(cupy.float64) @ xs[1].astype(cupy.float64) @ xs[2].astype(cupy.float64)
        for kernel in ("auto", "pairwise"):
            got = cumm.multi_dot(xs, kernel=kernel)
            assert got.device.id == dev and rel_err(got, ref) < 1e-5, (dev, kernel)


@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c)))
def test_arrays_on_device_1_run_on_device_1(case):
    _check_case(1, *case, seed=1)


def test_multi_dot_on_device_1():
    _check_chain(1, 384, seed=2)


def test_operands_on_two_devices_are_refused_naming_both():
    import cupy

    with cupy.cuda.Device(0):
        a0 = cupy.ones((64, 64), dtype=cupy.float32)
    with cupy.cuda.Device(1):
        a1 = cupy.ones((64, 64), dtype=cupy.float32)
    with pytest.raises(ValueError, match=r"a is on device 0 and b on device 1; put both on one device"):
        cumm.matmul(a0, a1)
    with cupy.cuda.Device(1):
        out1 = cupy.empty((64, 64), dtype=cupy.float32)
    with pytest.raises(ValueError, match=r"out is on device 1 but the inputs are on device 0"):
        cumm.matmul(a0, a0, out=out1)
    with pytest.raises(ValueError, match=r"arrays\[0\] is on device 1 and arrays\[2\] on device 0"):
        cumm.multi_dot([a1, a1, a0])


def test_one_thread_per_gpu():
    """Two threads, one per GPU, each running every case and a chain several times: all right, each on its GPU."""

    def work(dev: int) -> int:
        runs = 0
        for rep in range(3):
            for i, case in enumerate(CASES):
                _check_case(dev, *case, seed=100 * dev + 10 * rep + i)
                runs += 1
            _check_chain(dev, 256, seed=1000 + dev + rep)
            runs += 1
        return runs

    with ThreadPoolExecutor(2) as ex:
        done = list(ex.map(work, (0, 1)))
    assert done == [3 * (len(CASES) + 1)] * 2


@pytest.mark.filterwarnings("error::DeprecationWarning")  # CuPy 14 deprecates cupy.cuda.ExternalStream
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_torch_tensors_on_device_1_while_device_0_is_current(dtype):
    """torch tensors on cuda:1 with device 0 current: the kernels and cumm's cupy copies (a transposed operand is
    copied, a strided one too) run on device 1 on torch's current stream there; the result is there and right."""
    torch = pytest.importorskip("torch", reason="torch is not installed (optional)")
    import cupy

    tdt = getattr(torch, dtype)
    g = torch.Generator(device="cuda:1").manual_seed(3)
    a = torch.randn(300, 200, device="cuda:1", generator=g)[5:261, 3:195].to(tdt)  # 256 x 192, copied row-major
    b = torch.randn(160, 192, device="cuda:1", generator=g).to(tdt).t()  # 192 x 160, not row-major: copied
    ref = a.double() @ b.double()
    side = torch.cuda.Stream(device="cuda:1")
    with torch.cuda.stream(side), cupy.cuda.Device(0):  # (torch's stream context makes cuda:1 current)
        got = cumm.matmul(a, b)
        out = torch.full((256, 160), math.nan, device="cuda:1", dtype=torch.float32)
        again = cumm.matmul(a, b, out=out, alpha=2.0)
        assert cupy.cuda.Device().id == 0  # the caller's current device is left as it was
    side.synchronize()
    assert got.device == a.device and again is out
    tol = 1e-5 if dtype == "float32" else 1e-2
    assert float((got.double() - ref).norm() / ref.norm()) < tol
    assert float((out.double() - 2 * ref).norm() / (2 * ref).norm()) < 1e-5  # a float32 out: the accumulator
