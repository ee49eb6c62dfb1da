"""cumm.multi_dot and the fused3 chain kernel.

GPU tests (marker ``gpu``) compare against float64 references on random normal data, with the output
NaN-poisoned first so that an element the kernel never writes fails. CPU tests cover the parenthesization
dynamic program, argument errors that need no GPU, the auto rule, and offline compiles of fused3.

Tolerance: 1e-5 relative (Frobenius) error, as for cumm.matmul. A chain adds the rounding of two float32
products, but on random normal data each contributes about sqrt(depth) * 2^-24 (here < 3e-6 for depths up to
4096), and T = A @ B's relative error carries into E unamplified, so 1e-5 holds without loosening.
"""

from __future__ import annotations

import functools
import math
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cumm
from cumm.api import multi_dot as _chain
from cumm.ladder import get_spec
from cumm.plan import chain_order as order
from cumm.plan import chain_plans as plans
from cumm.plan import chain_rules as rules
from cumm.plan import operands as _operands
from cumm.runtime import launch, tmaps

from .conftest import rel_err

# the chain kernels' named configurations (their specs' data)
CONFIGS = get_spec("fused3").configs
TC_CONFIGS = get_spec("fused3_tc").configs
WG_CONFIGS = get_spec("fused3_wg").configs

TOL = 1e-5
gpu = pytest.mark.gpu

SQUARE = (1, 2, 127, 128, 512, 513)
CHAINS = [(4096, 64, 4096, 64), (1, 300, 7, 1), (33, 1, 65, 17), (257, 129, 3, 200)]
# Forced fused3: ones, a single row or column, p across several chunks of T (256 columns for bm16, 512 for
# bm32), n wider than a cluster's panels (several panels per rank), k not a multiple of the slab; 4097 rows
# or inner columns.
ODD = [
    (1, 1, 1, 1),
    (5, 1, 3, 7),
    (3, 7, 1, 5),
    (2, 5, 3, 1),
    (1, 1, 600, 1),
    (70, 33, 600, 9),
    (97, 1000, 513, 1100),
    (600, 65, 1031, 130),
    (31, 3, 257, 33),
    (513, 17, 1025, 4),
    (4097, 3, 67, 5),
    (7, 4097, 5, 131),
]


KERNELS = ["auto", "fused3", "fused3_tc", "fused3_wg", "pairwise"]


def _runs(kernel: str) -> bool:
    """Whether the current GPU runs ``kernel`` (fused3_wg: compute capability 9.0 only)."""
    import cupy

    spec = cumm.kernel_spec(kernel) if kernel in cumm.kernels("chain") else None
    return spec is None or spec.supports(int(cupy.cuda.Device().compute_capability))


def _skip_unless_runs(kernel: str) -> None:
    if not _runs(kernel):
        pytest.skip(f"{kernel} does not run on this GPU (compute capability 9.0 only)")


def _chain_arrays(rng, dims):
    import cupy

    return [rng.standard_normal((dims[i], dims[i + 1]), dtype=cupy.float32) for i in range(len(dims) - 1)]


def _ref(arrays):
    """float64 product in the cheapest order (numpy.linalg.multi_dot on the host for long chains)."""
    import cupy

    if len(arrays) > 3:
        return cupy.asarray(np.linalg.multi_dot([cupy.asnumpy(x).astype(np.float64) for x in arrays]))
    x = arrays[0].astype(cupy.float64)
    for y in arrays[1:]:
        x = x @ y.astype(cupy.float64)
    return x


def _poisoned(m, n):
    import cupy

    return cupy.full((m, n), math.nan, dtype=cupy.float32)


def chain_err(out, arrays, ref) -> float:
    """‖out - ref‖ / max(‖ref‖, ‖|A|·|B|·…‖ / sqrt(product of the inner dimensions)).

    For random normal data the second term is about half the first's expected size, so for any output with more
    than a handful of elements this is rel_err. A 1 x 1 chain such as (1, 300)·(300, 7)·(7, 1) is one sum whose
    value can cancel to almost nothing while its rounding error keeps the size of its terms: measured against
    |ref| alone its error is unbounded (two such chains failed at 1e-5 in three H200 suite runs: 2.4e-5
    and 2.7e-5), against the terms' expected size it is not. NaN anywhere still fails (the norm is NaN).
    """
    import cupy

    mag = abs(arrays[0].astype(cupy.float64))
    inner = 1
    for y in arrays[1:]:
        inner *= y.shape[0]
        mag = mag @ abs(y.astype(cupy.float64))
    scale = max(float(cupy.linalg.norm(ref)), float(cupy.linalg.norm(mag)) / math.sqrt(inner))
    return float(cupy.linalg.norm(out.astype(cupy.float64) - ref)) / scale


def _check(arrays, kernel, ref=None):
    _skip_unless_runs(kernel)
    m, n = arrays[0].shape[0], arrays[-1].shape[1]
    out = _poisoned(m, n)
    e = cumm.multi_dot(arrays, kernel=kernel, out=out)
    assert e is out
    err = chain_err(out, arrays, _ref(arrays) if ref is None else ref)
    shapes = " . ".join(str(x.shape) for x in arrays)
    assert err < TOL, f"{kernel} {shapes}: relative error {err:.3e}"
    return out


# ---------------------------------------------------------------------------------------------------
# GPU
# ---------------------------------------------------------------------------------------------------


@gpu
@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("n", SQUARE)
def test_square(n, kernel, rng):
    _check(_chain_arrays(rng, (n, n, n, n)), kernel)


@gpu
@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("dims", CHAINS, ids=lambda d: "x".join(map(str, d)))
def test_non_square(dims, kernel, rng):
    _check(_chain_arrays(rng, dims), kernel)


@gpu
@pytest.mark.parametrize("dims", ODD, ids=lambda d: "x".join(map(str, d)))
@pytest.mark.parametrize("kernel", ["fused3", "fused3_tc", "fused3_wg"])
def test_fused_odd_shapes(dims, kernel, rng):
    _check(_chain_arrays(rng, dims), kernel)


@gpu
@pytest.mark.parametrize(
    "config",
    [
        {},
        dict(BM=64, BN=64, WM=32, WN=32),
        dict(BM=32, BN=32, WM=16, WN=16, BK=16),
        dict(BM=128, BN=128, WM=64, WN=32, NUM_THREADS=256, STAGES=3),
        dict(KS=4),
        dict(BM=32, BN=32, WM=16, WN=16, KS=8),
        dict(BK=32, KS=2, STAGES=2),
    ],
    ids=lambda c: "-".join(f"{k}{v}" for k, v in c.items()) or "default",
)
@pytest.mark.parametrize(
    "dims",
    [(37, 45, 777, 600), (513, 129, 300, 70), (1, 1, 1, 1), (300, 2, 3, 301), (4097, 7, 97, 3)],
    ids=lambda d: "x".join(map(str, d)),
)
def test_fused3_tc_configs(config, dims, rng):
    """Persistent fused3_tc: several tile shapes, k-sliced warps (KS), many tiles per block, more blocks than
    tiles."""
    import cupy

    a, b, c = _chain_arrays(rng, dims)
    out = cupy.full((dims[0], dims[3]), math.nan, dtype=cupy.float32)
    plans.fused(a, b, c, out, "fused3_tc", {**TC_CONFIGS["tc32x64"], **config}, cupy.cuda.runtime.getDevice())
    ref = a.astype(cupy.float64) @ b.astype(cupy.float64) @ c.astype(cupy.float64)
    assert rel_err(out, ref) < TOL


# a former named configuration for n = 321 to 640 (128 x 32 tiles, chunks of 32, eight stages), kept in the tests
WG128X32 = dict(BM=128, BN=32, BK=32, CL=2, STAGES=8, TMA=1)


def _check_wg(config, dims, rng):
    """fused3_wg with ``config`` on a fresh chain of ``dims`` (NaN-poisoned output) against float64."""
    import cupy

    _skip_unless_runs("fused3_wg")
    a, b, c = _chain_arrays(rng, dims)
    out = cupy.full((dims[0], dims[3]), math.nan, dtype=cupy.float32)
    plans.fused(a, b, c, out, "fused3_wg", config, cupy.cuda.runtime.getDevice())
    ref = a.astype(cupy.float64) @ b.astype(cupy.float64) @ c.astype(cupy.float64)
    assert rel_err(out, ref) < TOL


@gpu
@pytest.mark.parametrize(
    "config",
    [
        *WG_CONFIGS.values(),
        dict(BM=128, BN=32, BK=8, CL=1, STAGES=2),
        dict(BM=64, BN=128, BK=16, CL=2, STAGES=4),
        dict(BM=256, BN=32, BK=16, CL=8, STAGES=2),
        dict(BM=64, BN=64, BK=24, CL=4, STAGES=3),
        # an odd number of chunks per rank, ranks without chunks, two stages
        dict(WG128X32, TMA=0),
        dict(BM=128, BN=32, BK=8, CL=8, STAGES=2),
        # K split over two or four K groups of a block too (KW), with cp.async
        dict(BM=64, BN=32, BK=32, CL=2, STAGES=3, KW=2),
        dict(BM=128, BN=32, BK=16, CL=1, STAGES=4, KW=2),
        dict(BM=64, BN=32, BK=8, CL=1, STAGES=2, KW=4),
        # chunk j - 1 retired before the proxy fence (RF = 1), with cp.async
        dict(BM=64, BN=32, BK=32, CL=2, STAGES=3, KW=2, RF=1),
        dict(BM=128, BN=64, BK=24, CL=4, STAGES=3, RF=1),
        # x_big's two products as one wgmma of N = 2 BN (MN = 1), with cp.async
        dict(BM=128, BN=32, BK=24, CL=2, STAGES=3, MN=1),
        dict(BM=64, BN=64, BK=24, CL=4, STAGES=3, MN=1),
    ],
    ids=lambda c: "-".join(f"{k}{v}" for k, v in c.items()),
)
@pytest.mark.parametrize(
    "dims",
    [(37, 45, 777, 600), (513, 129, 300, 70), (1, 1, 1, 1), (300, 2, 3, 301), (64, 4096, 64, 4096), (4097, 7, 97, 3)],
    ids=lambda d: "x".join(map(str, d)),
)
def test_fused3_wg_configs(config, dims, rng):
    """Persistent fused3_wg: 1 to 4 warpgroups per tile, tile widths 32 to 128, K split over clusters of 1 to 8
    blocks (more ranks than chunks of K when K is small; chunks not evenly shared with BK = 24), tiles past
    every edge, more clusters than tiles and K much longer than the tile."""
    _check_wg(config, dims, rng)


# fused3_wg with the copy engine (TMA = 1): 128-, 64- and 32-byte swizzles (BK 64, 32, 16, 8), 1 to 4 warpgroups,
# 2 to 8 stages
TMA_CONFIGS = [
    *WG_CONFIGS.values(),
    WG128X32,
    dict(BM=64, BN=64, BK=32, CL=2, STAGES=3, TMA=1),
    dict(BM=128, BN=64, BK=32, CL=2, STAGES=5, TMA=1),
    dict(BM=64, BN=128, BK=16, CL=2, STAGES=4, TMA=1),
    dict(BM=128, BN=32, BK=8, CL=8, STAGES=2, TMA=1),
    dict(BM=256, BN=32, BK=16, CL=4, STAGES=3, TMA=1),
    # BK = 64: X's chunk in two boxes, big * big in two accumulators, 2 warpgroups
    dict(BM=128, BN=32, BK=64, CL=2, STAGES=3, TMA=1),
    # K groups within a block (KW): one block per tile or a cluster too, 2 or 4 groups, 1 or 2
    # warpgroups per group
    dict(BM=64, BN=32, BK=32, CL=2, STAGES=3, TMA=1, KW=2),
    dict(BM=64, BN=32, BK=16, CL=1, STAGES=2, TMA=1, KW=4),
    dict(BM=128, BN=32, BK=32, CL=1, STAGES=2, TMA=1, KW=2),
    # chunk j - 1 retired before the proxy fence (RF = 1): two warpgroups per K group, four K groups
    dict(BM=128, BN=64, BK=32, CL=2, STAGES=4, TMA=1, RF=1),
    dict(BM=64, BN=32, BK=16, CL=1, STAGES=2, TMA=1, KW=4, RF=1),
    # the first phase-2 tile's C split in the grid barrier's wait (PC = 1, kw64x32's; and without it):
    # one, two or four K groups, a cluster, RF = 1
    dict(BM=64, BN=32, BK=64, CL=1, STAGES=2, TMA=1, KW=2, PC=0),
    dict(BM=64, BN=32, BK=64, CL=2, STAGES=2, TMA=1, RF=1, PC=1),
    dict(BM=128, BN=64, BK=32, CL=2, STAGES=4, TMA=1, PC=1),
    dict(BM=64, BN=32, BK=16, CL=1, STAGES=2, TMA=1, KW=4, PC=1),
    # x_big's two products as one wgmma of N = 2 BN (MN = 1; wg128x64's) and without it: N = 64 and
    # 128, BK = 64's two big accumulators, K groups with PC = 1, eight stages, RF = 1
    dict(WG_CONFIGS["wg128x64"], MN=0),
    dict(BM=64, BN=32, BK=64, CL=1, STAGES=2, TMA=1, KW=2, PC=1, MN=1),
    dict(BM=128, BN=32, BK=32, CL=2, STAGES=8, TMA=1, MN=1),
    dict(BM=64, BN=32, BK=16, CL=1, STAGES=2, TMA=1, KW=4, RF=1, MN=1),
]


@gpu
@pytest.mark.parametrize("config", TMA_CONFIGS, ids=lambda c: "-".join(f"{k}{v}" for k, v in c.items()))
@pytest.mark.parametrize(
    "dims",
    [
        (37, 44, 300, 72),
        (513, 128, 4, 8),
        (1, 4, 4, 4),
        (4097, 8, 100, 4),
        (1024, 256, 1024, 256),
        (37, 45, 300, 72),
        (37, 45, 777, 600),
        (2049, 12, 260, 300),
    ],
    ids=lambda d: "x".join(map(str, d)),
)
def test_fused3_wg_tma(config, dims, rng):
    """Chunks by the copy engine: aligned operands with tails in every dimension (the boxes' zero fill), chains
    with one chunk and ranks with none, blocks that walk several tiles (the stages' mbarrier phases go on across
    tiles and phases); with A, or every operand, unaligned the same tiles run with cp.async (TMA = 0). PC = 1:
    blocks whose first phase-2 tile has C split ahead (K groups with 0 to 4 chunks), with no phase-1 tile
    (37x44x300x72, 4097x8x100x4), with several tiles of each phase after it (2049x12x260x300), and chains whose
    K groups have more chunks than fit (1024x256x1024x256, 37x45x777x600: every tile as with PC = 0)."""
    _check_wg(config, dims, rng)


@gpu
@pytest.mark.parametrize("bk", [8, 16, 32])
def test_tensor_maps_from_template_match_the_driver(bk):
    """A map made from its spec's first one (moved by the driver) is the map the driver encodes for that address,
    at addresses that differ from the first's in low and high bits; a map whose arena row was handed on is made
    again."""
    import cupy

    _skip_unless_runs("fused3_wg")
    x = cupy.empty((1000, 1000), cupy.float32)
    spec = tmaps.MapSpec(0, 1000, 1000, 1000, bk, 128, {8: 1, 16: 2, 32: 3}[bk])
    maps, arena = tmaps.Maps(spec), tmaps.arena

    def made(ptr):
        with arena.lock:
            address = maps.known.get(ptr) or maps.make(ptr)
        return arena.rows[(address - arena.base) // 128]

    for offset in (0, 16, 4096, 12345 * 16, (1 << 20) + 32, (1 << 33) + 16 * 777, 0):
        ref = tmaps.aligned_map()
        tmaps.encode(x.data.ptr + offset, spec, ref)
        assert np.array_equal(made(x.data.ptr + offset), ref), hex(offset)
    other = tmaps.Maps(spec)
    with arena.lock:
        for i in range(arena.ROWS):  # every row handed on
            arena.take(other, i)
    assert x.data.ptr not in maps.known


@gpu
def test_fused3_wg_tma_maps_follow_pointers(rng):
    """The tensor maps are cached per set of pointers: calls that alternate between arrays (and an output view
    at an offset) each read their own operands."""
    import cupy

    _skip_unless_runs("fused3_wg")
    cfg, dev = TMA_CONFIGS[0], cupy.cuda.runtime.getDevice()
    sets = [_chain_arrays(rng, (96, 64, 128, 40)) for _ in range(3)]
    outs = [cupy.full((96, 40), math.nan, dtype=cupy.float32) for _ in sets]
    for _ in range(2):
        for x, out in zip(sets, outs, strict=True):
            out.fill(math.nan)
            plans.fused(*x, out, "fused3_wg", cfg, dev)
    for x, out in zip(sets, outs, strict=True):
        assert rel_err(out, _ref(x)) < TOL


@gpu
@pytest.mark.parametrize("config", sorted(CONFIGS))
@pytest.mark.parametrize(
    "dims", [(37, 45, 777, 600), (513, 129, 300, 70), (64, 64, 64, 64)], ids=lambda d: "x".join(map(str, d))
)
def test_every_config(config, dims, rng):
    """Each configuration directly, whatever the auto rule picks for the shape."""
    import cupy

    arrays = _chain_arrays(rng, dims)
    out = _poisoned(dims[0], dims[-1])
    plans.fused(*arrays, out, "fused3", config, cupy.cuda.runtime.getDevice())
    assert rel_err(out, _ref(arrays)) < TOL, config


@gpu
@pytest.mark.parametrize("kernel", KERNELS)
def test_unaligned_and_strided(kernel, rng):
    """Views whose pointers or leading dimensions forbid 16-byte accesses take the scalar paths."""
    import cupy

    _skip_unless_runs(kernel)
    m, k, p, n = 131, 67, 93, 45
    a = rng.standard_normal((m + 1, k + 3), dtype=cupy.float32)[1:, 1 : k + 1]
    b = rng.standard_normal((k, p + 5), dtype=cupy.float32)[:, 2 : p + 2]
    c = rng.standard_normal((p, n + 1), dtype=cupy.float32)[:, 1:]
    big_out = _poisoned(m, n + 1)
    out = big_out[:, 1:]
    cumm.multi_dot([a, b, c], kernel=kernel, out=out)
    assert rel_err(out, _ref([a, b, c])) < TOL
    assert cupy.isnan(big_out[:, 0]).all(), "wrote outside out"
    t = rng.standard_normal((p, k), dtype=cupy.float32).T  # column-major: copied
    assert rel_err(cumm.multi_dot([a, t, c], kernel=kernel), _ref([a, t, c])) < TOL


@gpu
def test_two_arrays(rng):
    import cupy

    a, b = _chain_arrays(rng, (129, 65, 33))
    _check([a, b], "auto")
    _check([a, b], "pairwise")
    assert cumm.multi_dot((a, b)).shape == (129, 33)
    e = cumm.multi_dot([a, b])
    assert e.dtype == cupy.float32 and rel_err(e, _ref([a, b])) < TOL


@gpu
@pytest.mark.parametrize("kernel", ["auto", "pairwise"])
@pytest.mark.parametrize(
    "dims",
    [(40, 300, 20, 500, 10), (10, 200, 30, 400, 5, 123), (7, 1, 9, 1, 300), (128, 128, 128, 128, 128, 128)],
    ids=lambda d: "x".join(map(str, d)),
)
def test_long_chains(dims, kernel, rng):
    """Four and five arrays against numpy.linalg.multi_dot on float64 copies."""
    _check(_chain_arrays(rng, dims), kernel)


@gpu
def test_empty_dimensions(rng):
    import cupy

    arrays = _chain_arrays(rng, (5, 0, 3, 7))
    for kernel in filter(_runs, KERNELS):
        e = cumm.multi_dot(arrays, kernel=kernel, out=_poisoned(5, 7))
        assert e.shape == (5, 7) and (e == 0).all()
    assert cumm.multi_dot(_chain_arrays(rng, (0, 4, 3, 7))).shape == (0, 7)
    assert cumm.multi_dot(_chain_arrays(rng, (4, 3, 6, 0))).shape == (4, 0)
    assert (cumm.multi_dot(_chain_arrays(rng, (4, 3, 0, 2, 5))) == 0).all()
    assert cumm.multi_dot(_chain_arrays(rng, (4, 3, 2))).dtype == cupy.float32


@gpu
@pytest.mark.parametrize("pdl", [True, False], ids=["pdl", "no-pdl"])
def test_back_to_back_persistent(pdl, rng, monkeypatch):
    """Persistent chains queued back to back with no synchronization between them, as a loop issues them: with
    programmatic dependent launch (compute capability 9.0+) each may start before its predecessor has finished,
    and must still read that predecessor's output (the next chain's A is the last one's E), share the stream's
    barrier word and scratch T, and hand over to kernels that know nothing of PDL (a cupy operation on E)."""
    import cupy

    monkeypatch.setattr(launch, "PDL", pdl)
    monkeypatch.setattr(plans, "_launches", {})  # launches are planned with the PDL setting of their time
    monkeypatch.setattr(_chain, "_fast", {})  # (and multi_dot's fast path keeps them)
    n, dev = 384, cupy.cuda.runtime.getDevice()
    x = [rng.standard_normal((n, n), dtype=cupy.float32) / math.sqrt(n) for _ in range(3)]
    calls = {k: functools.partial(cumm.multi_dot, kernel=k) for k in ("fused3_wg", "fused3_tc") if _runs(k)}
    if _runs("fused3_wg"):  # and the copy engine's chunks, whose reads of A go through another proxy
        calls["fused3_wg TMA=1"] = lambda y, out: plans.fused(*y, out, "fused3_wg", TMA_CONFIGS[0], dev) and out
    kernels = list(calls)
    steps, outs = [], []
    a = x[0]
    for i in range(12):  # E_i = E_{i-1} @ B @ C; every third one is scaled by a cupy kernel in between
        kernel = kernels[i % len(kernels)]
        e = multi = calls[kernel]([a, x[1], x[2]], out=_poisoned(n, n))
        if i % 3 == 2:
            e = multi * 0.5
        steps.append(kernel)
        outs.append(e)
        a = e
    cupy.cuda.get_current_stream().synchronize()
    ref = x[0].astype(cupy.float64)
    b, c = x[1].astype(cupy.float64), x[2].astype(cupy.float64)
    for i, (kernel, e) in enumerate(zip(steps, outs, strict=True)):
        ref = ref @ b @ c * (0.5 if i % 3 == 2 else 1.0)
        assert rel_err(e, ref) < TOL * (i + 1), f"step {i} ({kernel}): relative error {rel_err(e, ref):.2e}"


def test_pdl_safe():
    """PDL only where an early start cannot leave a grid-barrier kernel's clusters without room."""
    assert launch.pdl_safe(1, 264, 264) and launch.pdl_safe(2, 128, 132)
    assert not launch.pdl_safe(2, 132, 132) and not launch.pdl_safe(4, 120, 248)


@gpu
def test_back_to_back_every_cluster_resident(rng):
    """A grid of every resident cluster of 4 (two blocks per multiprocessor) queued back to back: with PDL it
    had hung at the grid barrier on the H200 (the device traps after ~4 s); each result is checked."""
    import cupy

    _skip_unless_runs("fused3_wg")
    cfg, dev, n = dict(BM=64, BN=32, BK=32, CL=4, STAGES=4, TMA=1), cupy.cuda.runtime.getDevice(), 512
    sets = [_chain_arrays(rng, (n, n, n, n)) for _ in range(3)]
    outs = [_poisoned(n, n) for _ in sets]
    for i in range(60):
        plans.fused(*sets[i % 3], outs[i % 3], "fused3_wg", cfg, dev)
    for x, out in zip(sets, outs, strict=True):
        assert rel_err(out, _ref(x)) < TOL


def _counted(monkeypatch, module, name):
    """Count the calls of module.<name> (still calling it)."""
    calls = []
    real = getattr(module, name)

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return calls


@gpu
@pytest.mark.parametrize("kernel", KERNELS)
def test_fast_path(kernel, rng, monkeypatch):
    """A three-array call whose key (kernel, shapes, strides, devices, misalignment) a checked call has had is
    launched by the fast path: right on new arrays (new pointers), with strided and misaligned views, with
    out=None; and never past a check that depends on the pointers (out overlapping an input) or on anything
    else outside the key (a dtype)."""
    import cupy

    _skip_unless_runs(kernel)
    monkeypatch.setattr(_chain, "_fast", {})
    checked = _counted(monkeypatch, plans, "operands")  # (the checked path's, never the fast path's)
    dims = (131, 97, 93, 145)  # (auto fuses it: A @ B first costs fewer multiply-adds)
    m, k, p, n = dims
    _check(_chain_arrays(rng, dims), kernel)
    if kernel == "pairwise":
        assert not _chain._fast
        return
    assert len(_chain._fast) == 1 and len(checked) == 1
    for _ in range(3):
        _check(_chain_arrays(rng, dims), kernel)
    assert len(checked) == 1, "the fast path was not taken"

    def views():  # misaligned pointers and leading dimensions not a multiple of 4 (the scalar paths)
        a = rng.standard_normal((m + 1, k + 3), dtype=cupy.float32)[1:, 1 : k + 1]
        b = rng.standard_normal((k, p + 5), dtype=cupy.float32)[:, 2 : p + 2]
        c = rng.standard_normal((p, n + 1), dtype=cupy.float32)[:, 1:]
        return [a, b, c], _poisoned(m, n + 1)

    for _ in range(3):
        x, big = views()
        out = cumm.multi_dot(x, kernel=kernel, out=big[:, 1:])
        assert rel_err(out, _ref(x)) < TOL and cupy.isnan(big[:, 0]).all()
        assert len(checked) == 2, "a second key: one checked call, then the fast path"
    for _ in range(3):
        x = _chain_arrays(rng, dims)
        e = cumm.multi_dot(x, kernel=kernel)
        assert e.shape == (m, n) and e.dtype == cupy.float32 and rel_err(e, _ref(x)) < TOL
    assert len(checked) == 3

    n = 64  # out overlapping an input, with the shapes and strides of a remembered call
    sq = _chain_arrays(rng, (n, n, n, n))
    _check(sq, kernel)
    buf = rng.standard_normal(3 * n * n, dtype=cupy.float32)
    a, out = buf[: n * n].reshape(n, n), buf[n * n // 2 : 3 * n * n // 2].reshape(n, n)
    with pytest.raises(ValueError, match=r"overlaps arrays\[0\]"):
        cumm.multi_dot([a, sq[1], sq[2]], kernel=kernel, out=out)
    with pytest.raises(ValueError, match=r"overlaps arrays\[2\]"):
        cumm.multi_dot([sq[0], sq[1], out], kernel=kernel, out=out)
    with pytest.raises(TypeError, match=r"arrays\[1\] has dtype float64"):
        cumm.multi_dot([sq[0], sq[1].astype(cupy.float64), sq[2]], kernel=kernel, out=_poisoned(n, n))
    with pytest.raises(ValueError, match=r"unknown kernel \['auto'\]"):
        cumm.multi_dot(sq, kernel=["auto"], out=_poisoned(n, n))
    out, c = buf[n * n : 2 * n * n].reshape(n, n), buf[2 * n * n :].reshape(n, n)  # adjacent, no overlap
    out.fill(math.nan)
    cumm.multi_dot([a, sq[1], c], kernel=kernel, out=out)
    assert rel_err(out, _ref([a, sq[1], c])) < TOL
    assert len(checked) == 4


def test_fast_path_host_logic():
    """Without a GPU: anything but three float32 cupy arrays (and out None or one) has no fast-path key, and the
    spans bound a matrix's bytes as cupy.may_share_memory does."""
    a = np.ones((3, 4), dtype=np.float32)
    assert _chain._fast_call([a, a.T, a], "auto", None) == (None, None)
    assert _chain._fast_call(iter([a, a.T, a]), "auto", None) == (None, None)
    byte_bounds = getattr(np, "byte_bounds", None) or np.lib.array_utils.byte_bounds  # (moved in NumPy 2.0)
    for x in (
        a,
        np.ones((5, 7), np.float32)[1:, 2:5],
        np.ones((1, 9), np.float32),
        np.ones((6, 1), np.float32),
        np.ones((6, 3), np.float32)[:, 1:2],
    ):
        low, high = byte_bounds(x)
        assert _operands.span(x) == high - low


@gpu
def test_device_errors(rng):
    import cupy

    a, b, c = _chain_arrays(rng, (4, 3, 5, 2))
    with pytest.raises(ValueError, match=r"\(4, 3\) \(arrays\[0\]\) and \(5, 2\) \(arrays\[1\]\)"):
        cumm.multi_dot([a, c])
    with pytest.raises(ValueError, match=r"\(3, 5\) \(arrays\[1\]\) and \(3, 5\) \(arrays\[2\]\)"):
        cumm.multi_dot([a, b, b])
    with pytest.raises(TypeError, match=r"arrays\[1\] has dtype float64.*float32"):
        cumm.multi_dot([a, b.astype(cupy.float64), c])
    with pytest.raises(ValueError, match="2-D"):
        cumm.multi_dot([a, b[0], c])
    with pytest.raises(ValueError, match=r"out has shape \(4, 5\).*\(4, 2\)"):
        cumm.multi_dot([a, b, c], out=cupy.empty((4, 5), dtype=cupy.float32))
    with pytest.raises(TypeError, match="out has dtype"):
        cumm.multi_dot([a, b, c], out=cupy.empty((4, 2), dtype=cupy.float64))
    with pytest.raises(TypeError, match="out is a numpy.ndarray: pass arrays of one kind"):
        cumm.multi_dot([a, b, c], out=np.empty((4, 2), dtype=np.float32))
    out_t = cupy.full((2, 4), cupy.nan, dtype=cupy.float32).T  # staged as cupy.matmul does (refused before)
    cumm.multi_dot([a, b, c], kernel="fused3", out=out_t)
    ref = a.astype(cupy.float64) @ b.astype(cupy.float64) @ c.astype(cupy.float64)
    assert float(cupy.linalg.norm(out_t - ref) / cupy.linalg.norm(ref)) < 1e-5
    sq = rng.standard_normal((3, 3), dtype=cupy.float32)
    for kernel in filter(_runs, KERNELS):
        with pytest.raises(ValueError, match=r"overlaps arrays\[2\]"):
            cumm.multi_dot([sq.copy(), sq.copy(), sq], kernel=kernel, out=sq)
    with pytest.raises(ValueError, match="exactly three"):
        cumm.multi_dot([a, b], kernel="fused3")
    with pytest.raises(ValueError, match="exactly three"):
        cumm.multi_dot([a, b, c, c.T], kernel="fused3")
    with pytest.raises(ValueError, match="unknown kernel 'nope'"):
        cumm.multi_dot([a, b, c], kernel="nope")
    with pytest.raises(ValueError, match="not a matrix-product kernel"):
        cumm.matmul(a, b, kernel="fused3")
    if cupy.cuda.runtime.getDeviceCount() > 1:
        with cupy.cuda.Device(1):
            c1 = cupy.asarray(c)
        with pytest.raises(ValueError, match="device"):
            cumm.multi_dot([a, b, c1])


# ---------------------------------------------------------------------------------------------------
# CPU
# ---------------------------------------------------------------------------------------------------


def _brute(dims, i, j):
    """Least multiply-adds for matrices i..j by trying every parenthesization."""
    if i == j:
        return 0
    return min(_brute(dims, i, s) + _brute(dims, s + 1, j) + dims[i] * dims[s + 1] * dims[j + 1] for s in range(i, j))


def _order_cost(dims, node):
    """(rows, cols, multiply-adds) of a nested-pair parenthesization."""
    if isinstance(node, int):
        return dims[node], dims[node + 1], 0
    r1, c1, f1 = _order_cost(dims, node[0])
    r2, c2, f2 = _order_cost(dims, node[1])
    assert c1 == r2
    return r1, c2, f1 + f2 + r1 * c1 * c2


def _leaves(node):
    return [node] if isinstance(node, int) else _leaves(node[0]) + _leaves(node[1])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=300), min_size=3, max_size=8))
def test_chain_order_is_optimal(dims):
    best = _brute(dims, 0, len(dims) - 2)
    cost, _ = order.chain_cost(dims)
    assert cost == best
    best_order = order.chain_order(dims)
    assert _leaves(best_order) == list(range(len(dims) - 1))
    r, c, f = _order_cost(dims, best_order)
    assert (r, c, f) == (dims[0], dims[-1], best)


def test_chain_order_examples():
    assert order.chain_order([10, 20]) == 0
    assert order.chain_order([4096, 64, 4096, 64]) == (0, (1, 2))  # A @ (B @ C): 64x fewer multiply-adds
    assert order.chain_order([64, 4096, 64, 4096]) == ((0, 1), 2)
    # the textbook example (CLRS 15.2): 15125 scalar multiplications, ((A1 (A2 A3)) ((A4 A5) A6))
    dims = [30, 35, 15, 5, 10, 20, 25]
    assert order.chain_cost(dims)[0] == 15125
    assert order.chain_order(dims) == ((0, (1, 2)), ((3, 4), 5))
    for _ in range(20):
        d = [random.randint(1, 50) for _ in range(random.randint(3, 7))]
        assert order.chain_cost(d)[0] == _brute(d, 0, len(d) - 2)


def test_errors_without_gpu():
    a = np.ones((3, 4), dtype=np.float32)
    with pytest.raises(TypeError, match=r"cupy\.asarray\(arrays\[0\]\)"):
        cumm.multi_dot([a, a.T])
    with pytest.raises(ValueError, match="at least two arrays, got 1"):
        cumm.multi_dot([a])
    with pytest.raises(ValueError, match="at least two arrays, got 0"):
        cumm.multi_dot([])
    with pytest.raises(ValueError, match="unknown kernel"):
        cumm.multi_dot([a, a.T], kernel="fused")


def test_registry():
    assert "fused3" in cumm.kernels("chain")
    assert "fused3" not in cumm.kernels()
    assert "multi_dot" in cumm.__all__
    spec = cumm.kernel_spec("fused3")
    for name, cfg in CONFIGS.items():
        assert not spec.violations(spec.resolve(cfg, 90)), name
    assert spec.resolve(None, 80)["CL"] == 1 and spec.resolve(None, 90)["CL"] == 4
    bad = spec.violations(dict(spec.resolve(None, 90), BK=48))
    assert any("BN % BK" in v for v in bad)
    with pytest.raises(cumm.ConfigError, match="227 KB"):
        spec.resolve(dict(BM=64, BN=128, PCH=8), 90)
    assert spec.grid(spec.resolve(CONFIGS["bm32"], 90), 512, 512, 512) == (64, 1, 1)  # 16 clusters of 4
    assert spec.grid(spec.resolve(CONFIGS["bm16"], 90), 100, 1, 1) == (56, 1, 1)  # 7 clusters of 8
    assert spec.block(spec.resolve(CONFIGS["bm32"], 90)) == (256, 1, 1)


def test_auto_rule():
    def sel(m, k, p, n, cc):
        got = rules.select(m, k, p, n, cc, lambda kernel, c: get_spec(kernel).supports(c))
        return got and got[1]

    assert sel(512, 512, 512, 512, 90) == "kw64x32"  # fused3_wg from n = 321 to 4096 on sm_90 (H200 sweeps)
    assert sel(384, 384, 384, 384, 90) == "kw64x32"
    assert sel(513, 513, 513, 513, 90) == "wg128x64"
    assert sel(640, 640, 640, 640, 90) == "wg128x64"
    assert sel(704, 704, 704, 704, 90) == "wg128x64"
    assert sel(768, 768, 768, 768, 90) == "wg64x32"
    assert sel(896, 896, 896, 896, 90) == "wg64x32"
    assert sel(960, 960, 960, 960, 90) == "wg128x64"
    assert sel(1024, 1024, 1024, 1024, 90) == "wg128x64"
    assert sel(256, 256, 256, 256, 90) == "tc32x32"  # fused3_tc as fast at n = 256
    assert sel(192, 192, 192, 192, 90) == "tc32x32"
    assert sel(160, 160, 160, 160, 90) == "bm16"  # clusters win the smallest chains
    assert sel(128, 128, 128, 128, 90) == "bm16"
    assert sel(2048, 2048, 2048, 2048, 90) == "wg128x64"
    assert sel(3072, 3072, 3072, 3072, 90) == "wg128x64"
    assert sel(4096, 4096, 4096, 4096, 90) == "wg128x64"  # (with the copy engine: 3511 us, pairwise 4326)
    assert sel(4097, 4097, 4097, 4097, 90) is None  # past what was measured: two tf32x3 GEMMs
    assert sel(3072, 3072, 3072, 3072, 80) == "tc128x128"
    assert sel(4096, 64, 4096, 64, 90) is None  # A @ (B @ C) is 64x cheaper than the fused order
    assert sel(512, 512, 512, 512, 80) == "tc32x32"  # no clusters or wgmma before sm_90, tensor cores from sm_80
    assert sel(1024, 1024, 1024, 1024, 80) == "tc64x64"
    assert sel(128, 128, 128, 128, 80) == "tc32x32"
    assert sel(512, 512, 512, 512, 100) == "tc32x32"  # wgmma is sm_90a only
    assert sel(512, 512, 512, 512, 75) is None
    assert sel(1, 300, 7, 1, 90) == "bm16"
    assert sel(5, 0, 3, 7, 90) is None
    for name in TC_CONFIGS.values():
        cumm.kernel_spec("fused3_tc").check(cumm.kernel_spec("fused3_tc").resolve(name, 90))
    assert rules.forced("fused3_wg", 1, 2 * 64**3) == "kw64x32"
    assert rules.forced("fused3_wg", 1, 2 * 4096**3) == "wg128x64"
    assert {name for _, name in rules.FUSED3_WG.steps if name} == set(WG_CONFIGS)


def test_wg_maps():
    """fused3_wg's tensor-map arguments mirror CUMM_WG_ARGS (A, B, T, C): boxes of X's chunk (BK x BM, rows
    swizzled) and Y's (BN x BK); none without TMA."""
    spec, cfg = tmaps.MapSpec, dict(WG128X32, TMA=1)
    ints = (37, 44, 300, 72, 48, 300, 76, 72, 300)  # m k p n lda ldb ldc lde ldt
    assert plans.tensor_maps(cfg, ints) == (
        spec(0, 44, 37, 48, 32, 128, 3),
        spec(1, 300, 44, 300, 32, 32, 0),
        spec(4, 300, 37, 300, 32, 128, 3),
        spec(2, 72, 300, 76, 32, 32, 0),
    )
    assert plans.tensor_maps(dict(cfg, BK=16), ints)[0].swizzle == 2
    assert plans.tensor_maps(dict(cfg, BK=8), ints)[2].swizzle == 1
    assert plans.tensor_maps(dict(cfg, TMA=0), ints) == ()


def test_tensor_maps_host_logic(monkeypatch):
    """_Maps and the arena without a GPU (a stand-in for the driver's two calls): the first map is encoded, later
    ones are the first moved by the driver's replace call; maps are kept by pointer until their arena row is
    handed on."""

    def encode(ptr, spec, out):  # the address in word 0, the spec in words 2 and 3
        out[:] = 0
        out[0], out[2], out[3] = ptr, spec.cols, spec.box_rows

    replaced = []

    def replace(address, ptr):
        replaced.append(ptr)
        tmaps.arena.rows[(address - tmaps.arena.base) // 128][0] = ptr
        return 0

    monkeypatch.setattr(tmaps, "encode", encode)
    monkeypatch.setattr(tmaps, "driver_fn", lambda name, argtypes: replace)
    monkeypatch.setattr(tmaps, "arena", tmaps.Arena())
    arena = tmaps.arena
    spec = tmaps.MapSpec(0, 300, 37, 300, 32, 128, 3)
    maps = tmaps.Maps(spec)
    ptrs = [0x7F0000000000 + 256 * i for i in range(5)] + [0x7F0000000000 + (1 << 33) + 16]
    with arena.lock:
        addresses = [maps.make(p) for p in ptrs]
    assert replaced == ptrs[1:]
    for p, address in zip(ptrs, addresses, strict=True):
        ref = tmaps.aligned_map()
        encode(p, spec, ref)
        assert maps.known[p] == address and address % 64 == 0
        assert np.array_equal(arena.rows[(address - arena.base) // 128], ref)
    with arena.lock:
        other = tmaps.Maps(spec)
        for i in range(arena.ROWS - len(ptrs)):  # hand every other row out once: the first map's row is next
            arena.take(other, i)
        assert ptrs[0] in maps.known
        arena.take(other, -1)
    assert ptrs[0] not in maps.known and ptrs[1] in maps.known


@pytest.mark.parametrize("config", sorted(WG_CONFIGS))
def test_wg_configs_compile(config):
    """Each named fused3_wg configuration compiles for sm_90a (unaligned operands run it with TMA = 0, as
    multi_dot does); ptxas's spills stay as small as measured (the 255-register configurations spill 32-96
    bytes, docs/chain.md)."""
    for aligned in (True, False):
        cfg = WG_CONFIGS[config]
        cfg = cfg if aligned else plans.cp_async_config(cfg)  # as multi_dot runs it
        r = cumm.compile("fused3_wg", cfg, arch="sm_90", aligned=aligned)
        if not r.log:
            pytest.skip(f"NVRTC {'.'.join(map(str, _nvrtc_version()))} returned no ptxas report")
        assert r.arch == "sm_90a" and r.registers > 0 and r.spill_bytes <= 128, (config, aligned, r.spill_bytes)
        assert r.dynamic_shared_bytes == cumm.kernel_spec("fused3_wg").smem(r.config)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("config", [None, *sorted(CONFIGS)])
def test_offline_compile_no_spills(arch, config):
    over = None if config is None else dict(CONFIGS[config])
    if over is not None and arch == "sm_80":  # what _chain runs without clusters
        over = plans.no_cluster(over)
    for aligned in (True, False):
        r = cumm.compile("fused3", over, arch=arch, aligned=aligned)
        if not r.log:  # seen with NVRTC 13.2 on the H200 machine: no ptxas report, so nothing to check
            pytest.skip(f"NVRTC {'.'.join(map(str, _nvrtc_version()))} returned no ptxas report")
        assert r.registers > 0 and r.spill_bytes == 0 and r.stack_bytes == 0, (config, arch, aligned, r.registers)
        assert r.dynamic_shared_bytes == cumm.kernel_spec("fused3").smem(r.config)


def _nvrtc_version():
    from cupy.cuda import nvrtc

    return nvrtc.getVersion()


def test_launch_structures_match_cuda_h():
    """The ctypes mirrors of cuda.h's CUlaunchConfig and CUlaunchAttribute that the PDL launch passes to
    cuLaunchKernelEx: sizes and field offsets as the C compiler lays them out on 64-bit Linux."""
    import ctypes

    cfg, attr = launch.LaunchConfig, launch.LaunchAttribute
    assert ctypes.sizeof(cfg) == 56 and ctypes.sizeof(attr) == 72
    assert (cfg.smem.offset, cfg.stream.offset, cfg.attrs.offset, cfg.num_attrs.offset) == (24, 32, 40, 48)
    assert attr.value.offset == 8 and launch.PROGRAMMATIC_STREAM_SERIALIZATION == 6


@pytest.mark.parametrize("kernel", sorted(n for n in cumm.kernels("chain") if get_spec(n).persistent))
def test_persistent_kernels_wait_first(kernel):
    """A PDL launch may start while its predecessor still runs: every persistent kernel's first statement must be
    the dependency wait (before it reads its inputs, the barrier word or the scratch the predecessor uses)."""
    from cumm.runtime.render import render

    spec = cumm.kernel_spec(kernel)
    _, src = render(spec, spec.resolve({}, 90), (1, 1, 1))
    body = src[src.index("{", src.index('extern "C" __global__')) + 1 :]
    assert body.split(";")[0].strip() == "cumm_grid_dependency_wait()", body[:200]
    assert "griddepcontrol.wait" in src


def test_cluster_needs_sm90():
    with pytest.raises(cumm.CompileError, match="thread block clusters"):
        cumm.compile("fused3", {"CL": 4, "PCH": 1}, arch="sm_80")


def test_cp_async_config():
    """Chains with an unaligned operand run the named configuration's tiles by cp.async, in chunks of at most 32
    of K with as many bytes in flight (the cp.async k-loop spills with chunks of 64), and C split chunk by chunk
    (PC = 0: PC = 1 copies C with the copy engine) and three wgmma per k-step (MN = 0: with MN = 1 that k-loop
    spills)."""
    assert plans.cp_async_config(WG_CONFIGS["wg64x32"]) == dict(
        WG_CONFIGS["wg64x32"], TMA=0, PC=0, MN=0, BK=32, STAGES=4
    )
    assert plans.cp_async_config(WG_CONFIGS["wg128x64"]) == dict(WG_CONFIGS["wg128x64"], TMA=0, PC=0, MN=0)
    assert plans.cp_async_config(WG_CONFIGS["kw64x32"]) == dict(  # K groups -> a cluster of 2
        WG_CONFIGS["kw64x32"], TMA=0, PC=0, MN=0, BK=32, STAGES=4, KW=1, CL=2
    )
    assert plans.cp_async_config(dict(BM=64, BN=32, BK=64, CL=1, STAGES=2, TMA=1, KW=2, PC=1))["PC"] == 0
    assert plans.cp_async_config(dict(BM=64, BN=32, BK=16, CL=2, STAGES=2, TMA=1, KW=4))["CL"] == 8
    # no valid cluster for that split (more than 8 blocks): the K groups stay (correct with cp.async too, tested)
    assert plans.cp_async_config(dict(BM=64, BN=32, BK=16, CL=4, STAGES=2, TMA=1, KW=4))["KW"] == 4
    spec = get_spec("fused3_wg")
    for cfg in WG_CONFIGS.values():
        assert not spec.violations(spec.resolve(plans.cp_async_config(cfg), 90))
