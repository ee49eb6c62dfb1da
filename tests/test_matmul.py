"""cumm.matmul on the GPU: every kernel against a float64 reference on every kind of shape."""

from __future__ import annotations

import math

import pytest

import cumm

from .conftest import check_alpha_beta, rel_err

pytestmark = pytest.mark.gpu
TOL = 1e-5
SHAPES = [  # (M, N, K): ones, primes, off-grid, skinny, K = 1, a full tile grid
    (1, 1, 1),
    (1, 257, 1),
    (127, 131, 137),
    (4097, 33, 65),
    (1024, 1024, 1),
    (2048, 2048, 2048),
    (33, 4097, 7),
    (129, 1, 300),
    (3, 5, 4099),
]
KERNELS = cumm.kernels(dtype="float32") + ["auto"]


def _operands(rng, M, N, K):
    import cupy

    a = rng.standard_normal((M, K), dtype=cupy.float32)
    b = rng.standard_normal((K, N), dtype=cupy.float32)
    ref = a.astype(cupy.float64) @ b.astype(cupy.float64)
    return a, b, ref


def _poisoned(M, N):
    import cupy

    return cupy.full((M, N), math.nan, dtype=cupy.float32)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_against_float64(kernel, shape, rng):
    M, N, K = shape
    a, b, ref = _operands(rng, M, N, K)
    out = _poisoned(M, N)
    c = cumm.matmul(a, b, kernel=kernel, out=out)
    assert c is out
    err = rel_err(c, ref)
    assert err < TOL, f"{kernel} {shape}: relative error {err:.3e}"


@pytest.mark.parametrize("kernel", KERNELS)
def test_unaligned_and_strided_operands(kernel, rng):
    """Views whose pointers or leading dimensions forbid 16-byte accesses take the scalar path."""
    import cupy

    M, N, K = 131, 67, 93
    big_a = rng.standard_normal((M + 1, K + 3), dtype=cupy.float32)
    big_b = rng.standard_normal((K, N + 5), dtype=cupy.float32)
    a = big_a[1:, 1 : K + 1]  # offset by 1 float: misaligned, row stride K + 3
    b = big_b[:, 2 : N + 2]
    ref = a.astype(cupy.float64) @ b.astype(cupy.float64)
    big_out = _poisoned(M, N + 1)
    out = big_out[:, 1:]  # row-strided, misaligned output
    cumm.matmul(a, b, kernel=kernel, out=out)
    assert rel_err(out, ref) < TOL
    assert cupy.isnan(big_out[:, 0]).all(), "wrote outside out"
    t = rng.standard_normal((K, M), dtype=cupy.float32).T  # column-major: copied
    assert rel_err(cumm.matmul(t, b, kernel=kernel), t.astype(cupy.float64) @ b.astype(cupy.float64)) < TOL


@pytest.mark.parametrize("kernel", KERNELS)
def test_alpha_beta(kernel, rng):
    check_alpha_beta(rng, 257, 129, 67, TOL, kernel=kernel)


def test_empty_dimensions(rng):
    import cupy

    a = rng.standard_normal((5, 0), dtype=cupy.float32)
    b = rng.standard_normal((0, 7), dtype=cupy.float32)
    assert (cumm.matmul(a, b) == 0).all() and cumm.matmul(a, b).shape == (5, 7)
    c0 = rng.standard_normal((5, 7), dtype=cupy.float32)
    out = c0.copy()
    cumm.matmul(a, b, out=out, beta=0.5)
    assert cupy.allclose(out, 0.5 * c0)
    assert cumm.matmul(
        rng.standard_normal((0, 3), dtype=cupy.float32), rng.standard_normal((3, 4), dtype=cupy.float32)
    ).shape == (0, 4)
    assert cumm.matmul(
        rng.standard_normal((2, 3), dtype=cupy.float32), rng.standard_normal((3, 0), dtype=cupy.float32)
    ).shape == (2, 0)


@pytest.mark.parametrize("kernel", ["warptile", "double_buffer"])
def test_non_default_configs(kernel, rng):
    """A sample of valid configurations, including one with more than 48 KB of dynamic shared memory."""
    configs = [
        dict(BM=64, BN=64, BK=16, WM=32, WN=32, WNITER=2, TM=4, TN=4, NUM_THREADS=128),
        dict(BM=128, BN=128, BK=8, WM=64, WN=64, WNITER=2, TM=8, TN=4, NUM_THREADS=128, MINB=1),
        dict(BM=256, BN=128, BK=32, WM=64, WN=64, WNITER=4, TM=4, TN=4, NUM_THREADS=256, MINB=1),
    ]
    for cfg in configs:
        spec = cumm.kernel_spec(kernel)
        assert not spec.violations(spec.resolve(cfg)), cfg
        a, b, ref = _operands(rng, 301, 517, 211)
        out = _poisoned(301, 517)
        cumm.matmul(a, b, kernel=kernel, config=cfg, out=out)
        assert rel_err(out, ref) < TOL, cfg


def test_device_errors(rng):
    import cupy

    a = rng.standard_normal((4, 3), dtype=cupy.float32)
    b = rng.standard_normal((5, 2), dtype=cupy.float32)
    with pytest.raises(ValueError, match=r"\(4, 3\).*\(5, 2\)"):
        cumm.matmul(a, b)
    with pytest.raises(TypeError, match="float32"):
        cumm.matmul(a.astype(cupy.float64), b)
    with pytest.raises(ValueError, match="at least one dimension"):  # (1-D and N-D follow numpy: test_batched)
        cumm.matmul(a[0, 0], b)
    with pytest.raises(ValueError, match=r"shapes \(3,\) and \(5, 2\) do not align"):
        cumm.matmul(a[0], b)
    b = rng.standard_normal((3, 2), dtype=cupy.float32)
    with pytest.raises(ValueError, match=r"out has shape"):
        cumm.matmul(a, b, out=cupy.empty((4, 3), dtype=cupy.float32))
    with pytest.raises(TypeError, match="out has dtype"):
        cumm.matmul(a, b, out=cupy.empty((4, 2), dtype=cupy.float64))
    out_t = cupy.full((2, 4), cupy.nan, dtype=cupy.float32).T  # written through a row-major staging array
    cumm.matmul(a, b, out=out_t)  # (as cupy.matmul does; it was refused before: tests/test_out_layout.py)
    assert cupy.allclose(out_t, a.astype(cupy.float64) @ b.astype(cupy.float64), rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="overlaps"):
        sq = rng.standard_normal((3, 3), dtype=cupy.float32)
        cumm.matmul(sq, sq, out=sq)
    with pytest.raises(ValueError, match="needs out"):
        cumm.matmul(a, b, beta=1.0)
    with pytest.raises(ValueError, match="unknown kernel 'nope'.*naive"):
        cumm.matmul(a, b, kernel="nope")
    with pytest.raises(cumm.ConfigError, match="no parameter"):
        cumm.matmul(a, b, kernel="smem", config={"BX": 4})
    with pytest.raises(cumm.ConfigError, match="BS=64"):
        cumm.matmul(a, b, kernel="smem", config={"BS": 64})
    with pytest.raises(cumm.SharedMemoryError, match="bytes of shared memory"):
        cumm.matmul(
            a,
            b,
            kernel="double_buffer",
            config=dict(BM=512, BN=512, BK=32, WM=128, WN=128, WNITER=4, TM=8, TN=8, NUM_THREADS=512, MINB=1),
        )
    if cupy.cuda.runtime.getDeviceCount() > 1:
        with cupy.cuda.Device(1):
            b1 = cupy.asarray(b)
        with pytest.raises(ValueError, match="device"):
            cumm.matmul(a, b1)


def test_a_new_thread_reuses_a_cached_call(rng):
    """A thread whose first CUDA call is cumm's cached one-launch call (made by another thread) has no current
    context of its own until cumm makes one (it raised CUDA_ERROR_INVALID_CONTEXT before); multi_dot likewise."""
    import threading

    import cupy

    a = rng.standard_normal((512, 512), dtype=cupy.float32)
    ref = a.astype(cupy.float64) @ a.astype(cupy.float64)
    out = cupy.empty_like(a)
    cumm.matmul(a, a, out=out)  # cached here
    chain = cumm.multi_dot([a, a, a])
    results, errors = {}, []

    def work():
        try:
            cumm.matmul(a, a, out=out)  # no CUDA call in this thread before it
            results["chain"] = cumm.multi_dot([a, a, a])
            cupy.cuda.Device().synchronize()
        except Exception as e:  # reported below, with the thread's traceback text
            errors.append(repr(e))

    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert not errors, errors
    assert rel_err(out, ref) < TOL and rel_err(results["chain"], chain.astype(cupy.float64)) < TOL
