"""Every bad argument gets a clear exception: its type, and the words that say what is wrong and what would be right.

One table of cases; those that need no GPU array run on the CPU (CI), the others carry the ``gpu`` marker.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import cumm

gpu = pytest.mark.gpu


def _g(shape, dtype="float32"):
    import cupy

    return cupy.ones(shape, dtype=dtype)


def _host():
    return np.ones((4, 4), np.float32)


# (id, call, exception type, regex the message must match); "gpu" cases build cupy arrays
CPU_CASES = [
    (
        "host-a",
        lambda: cumm.matmul(_host(), _host()),
        TypeError,
        r"a must be a GPU array.*numpy\.ndarray.*cupy\.asarray",
    ),
    ("list-a", lambda: cumm.matmul([[1.0]], [[1.0]]), TypeError, r"a must be a GPU array.*builtins\.list"),
    ("none-a", lambda: cumm.matmul(None, None), TypeError, r"a must be a GPU array.*NoneType"),
    ("scalar-a", lambda: cumm.matmul(2.0, 3.0), TypeError, r"a must be a GPU array.*builtins\.float"),
    ("split-k-zero", lambda: cumm.matmul(None, None, split_k=0), ValueError, r"split_k must be at least 1"),
    ("split-k-float", lambda: cumm.matmul(None, None, split_k=1.5), TypeError, r"split_k must be an int >= 1"),
    (
        "split-k-naive",
        lambda: cumm.matmul(None, None, kernel="naive", split_k=2),
        ValueError,
        r"'naive' does not support split_k=2.*warptile",
    ),
    (
        "split-k-unknown-kernel",
        lambda: cumm.matmul(None, None, kernel="nope", split_k=2),
        ValueError,
        r"unknown kernel 'nope'",
    ),
    ("spec-unknown", lambda: cumm.kernel_spec("nope"), ValueError, r"unknown kernel 'nope'.*naive"),
    ("compile-bad-arch", lambda: cumm.compile("naive", arch="ampere"), ValueError, r"arch must look like 'sm_80'"),
    ("compile-bad-param", lambda: cumm.compile("naive", {"BX": 4}), cumm.ConfigError, r"no parameter\(s\) \['BX'\]"),
    (
        "compile-bad-value",
        lambda: cumm.compile("naive", {"BS": "16"}),
        cumm.ConfigError,
        r"BS must be a non-negative integer",
    ),
    ("compile-constraint", lambda: cumm.compile("naive", {"BS": 64}), cumm.ConfigError, r"at most 1024 threads"),
    ("multi-dot-one", lambda: cumm.multi_dot([None]), ValueError, r"at least two arrays"),
    (
        "multi-dot-kernel",
        lambda: cumm.multi_dot([None, None], kernel="nope"),
        ValueError,
        r"unknown kernel 'nope' for multi_dot",
    ),
]

GPU_CASES = [
    (
        "config-str",
        lambda: cumm.matmul(_g((4, 4)), _g((4, 4)), config="BM=3"),
        TypeError,
        r"config must be a mapping of parameter names to ints",
    ),
    (
        "config-unknown",
        lambda: cumm.matmul(_g((4, 4)), _g((4, 4)), kernel="naive", config={"BX": 1}),
        cumm.ConfigError,
        r"no parameter\(s\) \['BX'\]",
    ),
    ("alpha-str", lambda: cumm.matmul(_g((4, 4)), _g((4, 4)), alpha="2"), TypeError, r"alpha must be a real number"),
    ("alpha-nan", lambda: cumm.matmul(_g((4, 4)), _g((4, 4)), alpha=math.nan), ValueError, r"alpha must be finite"),
    ("beta-none", lambda: cumm.matmul(_g((4, 4)), _g((4, 4)), beta=None), TypeError, r"beta must be a real number"),
    ("beta-without-out", lambda: cumm.matmul(_g((4, 4)), _g((4, 4)), beta=1.0), ValueError, r"beta=1.0 needs out="),
    ("kernel-int", lambda: cumm.matmul(_g((4, 4)), _g((4, 4)), kernel=3), TypeError, r"kernel must be a str"),
    (
        "kernel-unknown",
        lambda: cumm.matmul(_g((4, 4)), _g((4, 4)), kernel="nope"),
        ValueError,
        r"unknown kernel 'nope'",
    ),
    (
        "kernel-chain",
        lambda: cumm.matmul(_g((4, 4)), _g((4, 4)), kernel="fused3"),
        ValueError,
        r"'fused3' is not a matrix-product kernel",
    ),
    (
        "inner-mismatch",
        lambda: cumm.matmul(_g((4, 5)), _g((4, 4))),
        ValueError,
        r"shapes \(4, 5\) and \(4, 4\) do not align",
    ),
    (
        "dtype-f64",
        lambda: cumm.matmul(_g((4, 4), "float64"), _g((4, 4), "float64")),
        TypeError,
        r"a has dtype float64; supported dtypes",
    ),
    ("dtype-int", lambda: cumm.matmul(_g((4, 4)), _g((4, 4), "int32")), TypeError, r"b has dtype int32"),
    (
        "out-shape",
        lambda: cumm.matmul(_g((4, 4)), _g((4, 4)), out=_g((4, 5))),
        ValueError,
        r"out has shape \(4, 5\).*needs \(4, 4\)",
    ),
    (
        "out-dtype",
        lambda: cumm.matmul(_g((4, 4)), _g((4, 4)), out=_g((4, 4), "float64")),
        TypeError,
        r"out has dtype float64",
    ),
    (
        "out-host",
        lambda: cumm.matmul(_g((4, 4)), _g((4, 4)), out=_host()),
        TypeError,
        r"a is a cupy\.ndarray but out is a numpy\.ndarray",
    ),
    # (a transposed out is written through a row-major staging array: tests/test_out_layout.py)
    ("b-host", lambda: cumm.matmul(_g((4, 4)), _host()), TypeError, r"b must be a GPU array.*numpy\.ndarray"),
    ("multi-dot-align", lambda: cumm.multi_dot([_g((4, 5)), _g((4, 4))]), ValueError, r"do not align"),
    ("multi-dot-3d", lambda: cumm.multi_dot([_g((2, 4, 4)), _g((4, 4))]), ValueError, r"must be 2-D"),
    (
        "split-k-negative",
        lambda: cumm.matmul(_g((4, 4)), _g((4, 4)), split_k=-1),
        ValueError,
        r"split_k must be at least 1",
    ),
]


def _run(call, exc, pattern):
    with pytest.raises(exc, match=pattern):
        call()


@pytest.mark.parametrize("call, exc, pattern", [c[1:] for c in CPU_CASES], ids=[c[0] for c in CPU_CASES])
def test_bad_input_without_a_gpu(call, exc, pattern):
    _run(call, exc, pattern)


@gpu
@pytest.mark.parametrize("call, exc, pattern", [c[1:] for c in GPU_CASES], ids=[c[0] for c in GPU_CASES])
def test_bad_input(call, exc, pattern):
    _run(call, exc, pattern)


def test_the_table_is_long_enough():
    assert len(CPU_CASES) + len(GPU_CASES) >= 25


@gpu
@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, 1e39])
@pytest.mark.parametrize("which", ["alpha", "beta"])
def test_a_cached_call_still_checks_alpha_and_beta(which, value):
    """The cached path takes alpha and beta as they are: a value it cannot pass on (not finite, or beyond float32,
    which the kernels would see as inf) goes to the checks after a call of the same shape was cached."""
    a, b = _g((8, 8)), _g((8, 8))
    out = _g((8, 8))
    cumm.matmul(a, b, out=out, alpha=1.0, beta=0.5)  # cached
    with pytest.raises(ValueError, match=rf"{which} must be (finite|within float32's range)"):
        cumm.matmul(a, b, out=out, **{"alpha": 1.0, "beta": 0.5, which: value})
    try:
        import torch
    except ImportError:
        return
    ta, tb, to = (torch.from_dlpack(x) for x in (a, b, out))
    cumm.matmul(ta, tb, out=to, alpha=1.0, beta=0.5)
    with pytest.raises(ValueError, match=rf"{which} must be (finite|within float32's range)"):
        cumm.matmul(ta, tb, out=to, **{"alpha": 1.0, "beta": 0.5, which: value})
