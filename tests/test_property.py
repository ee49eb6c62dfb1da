"""Property-based differential tests of cumm.matmul (hypothesis): random shapes (1 to a few thousand, primes),
dtypes, layouts (transposed and offset views, 1-D operands), broadcast batches, alpha and beta, an ``out`` of the
inputs' dtype or float32, and kernel "auto" or any rung of the dtype. Every example is checked against a float64
product of the same (rounded) inputs, with the dtype's tolerance relative to cuBLAS's own error on the same inputs.

Profiles (tests/conftest.py): the default runs a fixed budget with the GPU suite; ``pytest
--hypothesis-profile=long tests/test_property.py`` runs >= 50,000 examples (mostly small shapes, so the few kernel
configurations they need stay compiled) and prints the count. A failure shrinks to a minimal case, which belongs
in REGRESSIONS below. Without a GPU, the harness itself (strategies, layouts, reference, tolerance) runs against
numpy standing in for cumm and cuBLAS.
"""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cumm

from .conftest import GPU_SKIP_REASON, PROPERTY_EXAMPLES

DTYPES = ("float32", "float16", "bfloat16")
# every rung cumm.matmul runs for the dtype (FP8 rungs run through cumm.scaled_matmul, not here)
RUNGS = {dt: [k for k in cumm.kernels(dtype=dt) if not k.startswith("fp8")] for dt in DTYPES}
SMALL_PRIMES = (2, 3, 5, 7, 11, 13, 17, 31, 61, 127)
LARGE = (257, 509, 1000, 1021, 1024, 2048, 2053, 3001, 4093, 4096, 4097)
LAYOUTS = ("c", "t", "offset", "t_offset")  # row-major, transposed view, misaligned view of a wider buffer, both
OUT_LAYOUTS = ("c", "offset", "t")
U = {"float32": 2.0**-24, "float16": 2.0**-11, "bfloat16": 2.0**-8}  # unit roundoff of a result dtype


@st.composite
def cases(draw) -> dict:
    """One call: dtype, kernel, shapes (at most one large dimension), batches, layouts, alpha, beta, out."""
    dt = draw(st.sampled_from(DTYPES))
    kernel = draw(st.one_of(st.just("auto"), st.sampled_from(RUNGS[dt])))
    small = st.one_of(st.integers(1, 64), st.sampled_from(SMALL_PRIMES))
    M, N, K = draw(small), draw(small), draw(small)
    big = draw(st.sampled_from(("", "", "", "", "M", "N", "K")))
    if big:
        v = draw(st.one_of(st.sampled_from(LARGE), st.integers(65, 4097)))
        M, N, K = (v if big == "M" else M), (v if big == "N" else N), (v if big == "K" else K)
    # batches: a common batch shape, each operand keeping a suffix of it with some dimensions set to 1
    batch = tuple(draw(st.lists(st.integers(1, 3), max_size=2 if not big else 1)))

    def operand_batch():
        keep = draw(st.integers(0, len(batch)))
        dims = batch[len(batch) - keep :]
        return tuple(draw(st.sampled_from((d, 1))) for d in dims)

    ba, bb = operand_batch(), operand_batch()
    vec = "" if ba or bb else draw(st.sampled_from(("", "", "", "", "a", "b")))  # a 1-D operand (numpy's rules)
    c = {
        "dt": dt,
        "kernel": kernel,
        "a": (*ba, K) if vec == "a" else (*ba, M, K),
        "b": (*bb, K) if vec == "b" else (*bb, K, N),
        "la": draw(st.sampled_from(LAYOUTS)) if vec != "a" else draw(st.sampled_from(("c", "offset"))),
        "lb": draw(st.sampled_from(LAYOUTS)) if vec != "b" else draw(st.sampled_from(("c", "offset"))),
        "alpha": draw(st.sampled_from((1.0, 1.0, -0.5, 2.0))),
        "beta": draw(st.sampled_from((0.0, 0.0, 1.0, -0.75))),
    }
    out = draw(st.sampled_from(("none", "same", "float32")))
    if c["beta"] != 0.0 and out == "none":
        out = "same"
    c["out"] = out
    c["lo"] = draw(st.sampled_from(OUT_LAYOUTS)) if out != "none" else "c"
    return c


def _np_dtype(xp, dt: str):
    if dt == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return xp.dtype(dt)


def _array(xp, rng, shape: tuple, dt: str, layout: str):
    """Random normal data of ``shape`` and dtype ``dt`` laid out as ``layout`` (a view, never a copy)."""
    t = "t" in layout and len(shape) >= 2
    store = (*shape[:-2], shape[-1], shape[-2]) if t else shape
    if "offset" in layout:  # one more row and column: the view starts one element in, rows of an odd stride
        store = (*store[:-2], store[-2] + 1, store[-1] + 1) if len(store) >= 2 else (store[-1] + 1,)
    base = xp.asarray(rng.standard_normal(store, dtype=np.float32)).astype(_np_dtype(xp, dt))
    x = base
    if "offset" in layout:
        x = x[..., 1:, 1:] if len(store) >= 2 else x[1:]
    if t:
        x = x.swapaxes(-1, -2)
    assert x.shape == shape
    return x


def _err(xp, c, ref) -> float:
    d = c.astype(np.float32).astype(np.float64) - ref
    den = float(xp.linalg.norm(ref))
    return float(xp.linalg.norm(d)) / den if den else float(xp.linalg.norm(d))


def _f64(x):
    return x.astype(np.float32).astype(np.float64)


def check_case(c: dict, xp, rng, engine, cublas) -> None:
    """Run ``engine`` (cumm.matmul, or a stand-in) on case ``c`` and compare with float64 and with ``cublas``."""
    dt = c["dt"]
    a = _array(xp, rng, c["a"], dt, c["la"])
    b = _array(xp, rng, c["b"], dt, c["lb"])
    ref = xp.matmul(_f64(a), _f64(b))
    rd = dt if c["out"] in ("none", "same") else "float32"  # the result's dtype
    alpha, beta = c["alpha"], c["beta"]
    out, c0 = None, None
    if c["out"] != "none":
        out = _array(xp, rng, ref.shape, rd, c["lo"]) if ref.ndim >= 1 else None
        if out is None:  # two vectors: a 0-d out
            out = xp.asarray(rng.standard_normal((1,), dtype=np.float32)).astype(_np_dtype(xp, rd)).reshape(())
        if beta == 0.0:
            out.fill(math.nan)  # must not be read
        c0 = _f64(out.copy())
    got = engine(a, b, kernel=c["kernel"], out=out, alpha=alpha, beta=beta)
    if out is not None:
        assert got is out, "matmul(out=out) returns out"
    assert got.shape == ref.shape and got.dtype == _np_dtype(xp, rd), (got.shape, got.dtype, ref.shape, rd)
    want = alpha * ref + (beta * c0 if beta != 0.0 else 0.0)
    # cuBLAS on the same inputs, accumulating as cumm does: in the inputs' dtype, or float32 for a float32 result
    p = cublas(a, b) if rd == dt else cublas(a.astype(np.float32), b.astype(np.float32))
    base = alpha * p.astype(np.float32) + (np.float32(beta) * c0.astype(np.float32) if beta != 0.0 else 0.0)
    base = xp.asarray(base).astype(_np_dtype(xp, rd))
    ours, theirs = _err(xp, got, want), _err(xp, base, want)
    K = c["a"][-1]
    # the accumulation's error bound is relative to |alpha| |A| |B| + |beta| |C|, not to the result: where the sum
    # cancels (a short dot product near 0), cuBLAS's error can be small by the luck of its order while a correct
    # kernel's is not (shrunk on the H200: (1, 5) @ (5, 1), 2.2e-6 against cuBLAS's 2.9e-8)
    mag = abs(alpha) * xp.matmul(xp.abs(_f64(a)), xp.abs(_f64(b))) + (abs(beta) * xp.abs(c0) if beta != 0.0 else 0.0)
    den = float(xp.linalg.norm(want))
    scale = max(1.0, float(xp.linalg.norm(mag)) / den) if den else 1.0
    # float32 products run on 3xTF32 rungs (auto's choice on Hopper): each product drops the low x low term of its
    # split, about 2^-21 of |a||b| (a 1 x 1 x 1 product: 2.9e-7 on the H200, where one float32 rounding is 6e-8)
    unit = 2.0**-21 if dt == "float32" else U["float32"]
    tol = 1.5 * theirs + U[rd] + 2 * math.sqrt(K) * unit * scale
    assert not bool(xp.isnan(got.astype(np.float32)).any()) or bool(xp.isnan(want).any()), "NaN in the result"
    assert ours <= tol, f"{c}: error {ours:.3e} against cuBLAS's {theirs:.3e} (tolerance {tol:.3e})"


def _cublas_gpu(a, b):
    """cuBLAS: torch.matmul when torch is importable, else cupy.matmul (which broadcasts batches too)."""
    import cupy

    try:
        import torch
    except ImportError:
        return cupy.matmul(a, b)
    return cupy.from_dlpack(torch.matmul(torch.from_dlpack(a), torch.from_dlpack(b)))


_rngs: list = []


def _gpu_rng():
    import cupy

    if not _rngs:
        seed = int(np.random.SeedSequence().entropy % 2**31)
        print(f"random seed {seed}")
        _rngs.append(cupy.random.default_rng(seed))
    return _rngs[0]


def _run_gpu(c: dict) -> None:
    import cupy

    check_case(c, cupy, _gpu_rng(), cumm.matmul, _cublas_gpu)


@pytest.mark.gpu
@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(c=cases())
def test_matmul_against_float64_and_cublas(c):
    """The example budget is the profile's (tests/conftest.py): default in the GPU suite, ``long`` for a device
    session."""
    PROPERTY_EXAMPLES[0] += 1
    if PROPERTY_EXAMPLES[0] % 5000 == 0:  # progress past pytest's capture, for a long run cut off by a time limit
        sys.__stderr__.write(f"hypothesis: {PROPERTY_EXAMPLES[0]} examples so far\n")
    _run_gpu(c)


# Minimal cases hypothesis shrank failures to, run on every GPU suite (add new ones here).
REGRESSIONS: list[dict] = [
    # shrunk on the H200: a batch of one 1-row product into a transposed out view (strides (8, 4, 4)), refused as not
    # C-contiguous though its row stride is never used
    dict(dt="float32", kernel="auto", a=(1, 1), b=(1, 1, 2), la="c", lb="c", alpha=1.0, beta=0.0, out="same", lo="t"),
    dict(dt="float32", kernel="naive", a=(1,), b=(1,), la="c", lb="c", alpha=1.0, beta=0.0, out="none", lo="c"),
    dict(dt="bfloat16", kernel="wgmma_ws", a=(1, 1), b=(1, 1), la="t", lb="t", alpha=1.0, beta=1.0, out="same", lo="t"),
    dict(
        dt="float16",
        kernel="mma",
        a=(2, 1, 5, 3),
        b=(3, 7),
        la="t_offset",
        lb="offset",
        alpha=-0.5,
        beta=-0.75,
        out="float32",
        lo="offset",
    ),  # fmt: skip
]


@pytest.mark.gpu
@pytest.mark.parametrize("c", REGRESSIONS, ids=lambda c: f"{c['dt']}-{c['kernel']}-{c['a']}x{c['b']}")
def test_regressions(c):
    _run_gpu(c)


# ---------------------------------------------------------------------------------------------------
# The harness on the host: numpy stands in for cumm (float32 accumulation) and for cuBLAS
# ---------------------------------------------------------------------------------------------------


def _numpy_matmul(a, b, *, kernel, out, alpha, beta):
    """What cumm.matmul computes, in numpy: FP32 accumulation, alpha, beta, one rounding to the result dtype."""
    acc = np.matmul(a.astype(np.float32), b.astype(np.float32))
    v = np.float32(alpha) * acc
    if out is None:
        return np.asarray(v).astype(a.dtype)
    if beta != 0.0:
        v = v + np.float32(beta) * out.astype(np.float32)
    out[...] = v
    return out


def _numpy_cublas(a, b):
    return np.asarray(np.matmul(a.astype(np.float32), b.astype(np.float32))).astype(a.dtype)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(c=cases())
def test_harness_on_host(c):
    """The strategies make valid calls and the tolerance passes a correct product (numpy's) for every case."""
    check_case(c, np, np.random.default_rng(0), _numpy_matmul, _numpy_cublas)


def test_harness_catches_a_wrong_product():
    """A product off in one element fails the check: the tolerance is not vacuous."""
    c = dict(dt="bfloat16", kernel="auto", a=(33, 40), b=(40, 17), la="c", lb="t", alpha=1.0, beta=0.0, out="none")
    c["lo"] = "c"

    def wrong(a, b, **kw):
        y = _numpy_matmul(a, b, **kw)
        y[5, 3] += 10.0
        return y

    with pytest.raises(AssertionError, match="against cuBLAS"):
        check_case(c, np, np.random.default_rng(0), wrong, _numpy_cublas)


def test_gpu_skip_reason_is_stated():
    """(Documents why the GPU properties skip here.)"""
    assert GPU_SKIP_REASON is None or isinstance(GPU_SKIP_REASON, str)
