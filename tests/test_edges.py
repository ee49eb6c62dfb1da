"""Edge strips (cumm/plan/edges.py): the split rule and slicing (CPU), the kernels' offline compile (CPU), results
against float64 with NaN-poisoned outputs on every GEMM kernel (GPU)."""

from __future__ import annotations

import math
import re

import pytest

import cumm
from cumm.core.spec import cdiv
from cumm.ladder import REGISTRY
from cumm.plan import edges as _edges
from cumm.plan import plan as _plan

from .conftest import rel_err

TOL = 1e-5
H200_SLOTS = 264  # warptile's 128 x 128 tiles, two blocks per SM, 132 SMs


def _grid(bm, bn):
    return lambda m, n: cdiv(m, bm) * cdiv(n, bn)


# ----------------------------------------------------------------------------------------------------------
# The rule (no GPU)
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("M", "N", "want"),
    [
        ((4097, 4097, (4096, 4096))),  # 1089 blocks = 5 waves of 264; 1024 = 4
        ((4096, 4096, (4096, 4096))),  # on the tile grid: nothing to strip
        ((4095, 4095, (4095, 4095))),  # remainders of 127: partial tiles doing real work, not strips
        ((2049, 2049, (2048, 2048))),  # 289 blocks = 2 waves; 256 = 1
        ((1025, 1025, (1025, 1025))),  # 81 and 64 blocks: one wave either way, strips would only add work
        ((4096 + 16, 4097, (4096, 4096))),  # 16 rows: the thickest strip
        ((4096 + 17, 4097, (4113, 4096))),  # 17 rows: too thick; the thin column alone still saves a wave
        ((4096 + 16, 4096, (4112, 4096))),  # 1056 blocks: 4 waves with or without the strip
        ((100, 4097, (100, 4097))),  # M < BM: no full tile in that direction
    ],
)
def test_split_rule(M, N, want):
    assert _edges.split(M, N, 128, 128, _grid(128, 128), H200_SLOTS) == want


def test_no_row_strip_under_tiles_no_thicker_than_a_strip():
    """skinny's 4-row blocks: a remainder of rows is not a strip (it would be a strip of whole tiles); columns are."""
    assert _edges.split(7, 4096 + 3, 4, 64, _grid(4, 64), 1) == (7, 4096)
    assert _edges.split(7, 4096, 16, 64, _grid(16, 64), 1) == (7, 4096)


def test_split_only_in_the_thin_direction():
    # 4097 x 4000 with 128 x 128 tiles: 33 x 32 = 1056 blocks = exactly 4 waves of 264: nothing saved
    assert _edges.split(4097, 4000, 128, 128, _grid(128, 128), H200_SLOTS) == (4097, 4000)
    # one slot per wave: every saved block saves a wave; the 4000 columns (remainder 32) stay whole
    assert _edges.split(4097, 4000, 128, 128, _grid(128, 128), 1) == (4096, 4000)
    assert _edges.split(5, 4097, 128, 128, _grid(128, 128), 1) == (5, 4096)
    assert _edges.split(4097, 4097, 128, 128, _grid(128, 128), 0) == (4097, 4097)


@pytest.mark.parametrize("K", [1, 31, 32, 33, 1000, 4097, 2**20 + 3])
@pytest.mark.parametrize("L", [1, 128, 4096, 100_000])
def test_slices_cover_k_with_whole_slabs(K, L):
    S, kc = _edges.slices(L, K, 132)
    assert kc % _edges.KT == 0 and kc >= _edges.KT
    assert (S - 1) * kc < K <= S * kc  # every slice non-empty, together all of K
    assert S <= cdiv(K, _edges.KT)
    if cdiv(L, _edges.JB) >= _edges.BLOCKS_PER_SM * 132:
        assert S == 1  # enough blocks along the strip already


def test_module_constants_match_the_kernel():
    src = _edges.source()
    for name, value in (("EDGE_ROWS", _edges.EDGE_ROWS), ("EDGE_JB", _edges.JB), ("EDGE_KT", _edges.KT)):
        assert re.search(rf"#define {name} {value}\b", src), name
    for name in _edges.NAMES:
        assert f"void __launch_bounds__(EDGE_JB)\n    {name}(" in src


# ----------------------------------------------------------------------------------------------------------
# GPU: every GEMM kernel with strips forced (one block slot per wave), against float64
# ----------------------------------------------------------------------------------------------------------

# (the strips are float32 machinery: the half rungs' products run unsplit)
TILED = [n for n, s in REGISTRY.items() if s.kind == "gemm" and {"BM", "BN"} <= set(s.params) and "float32" in s.dtypes]
# rows of a remainder become a strip only under tiles thicker than a strip (EDGE_ROWS): not skinny's BM = 4
THICK = [n for n in TILED if REGISTRY[n].resolve(None, 90)["BM"] > _edges.EDGE_ROWS]


def _record_runs(monkeypatch) -> list:
    """The (mm, nn) of every _edges.run call from here on; the strips still run."""
    calls = []
    real = _edges.run
    monkeypatch.setattr(_edges, "run", lambda *a, **k: (calls.append(a[3:5]), real(*a, **k))[1])
    return calls


@pytest.fixture
def strips(monkeypatch):
    """Force strips wherever a remainder is thin (a wave of one block), and count how often they ran."""
    monkeypatch.setattr(_plan.Plan, "slots", lambda self, dev: 1)
    return _record_runs(monkeypatch)


def _tile(kernel):
    from cumm.plan.operands import compute_capability

    cfg = REGISTRY[kernel].resolve(None, compute_capability(0))
    return cfg["BM"], cfg["BN"]


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", THICK)
@pytest.mark.parametrize("extra", [(1, 1, 77), (16, 3, 1), (5, 0, 4097), (0, 13, 300)])
def test_strips_against_float64(kernel, extra, strips, rng):
    import cupy

    bm, bn = _tile(kernel)
    M, N, K = bm + extra[0], 2 * bn + extra[1], extra[2]
    a = rng.standard_normal((M, K), dtype=cupy.float32)
    b = rng.standard_normal((K, N), dtype=cupy.float32)
    out = cupy.full((M, N), math.nan, dtype=cupy.float32)
    cumm.matmul(a, b, kernel=kernel, out=out)
    assert strips == [(M - extra[0], N - extra[1])]
    err = rel_err(out, a.astype(cupy.float64) @ b.astype(cupy.float64))
    assert err < TOL, f"{kernel} {M}x{N}x{K}: relative error {err:.3e}"


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", ["vectorized", "warptile", "tf32x3"])
def test_strips_with_alpha_beta_and_unaligned_views(kernel, strips, rng):
    import cupy

    bm, bn = _tile(kernel)
    M, N, K = bm + 7, bn + 2, 259
    a = rng.standard_normal((M, K + 1), dtype=cupy.float32)[:, 1:]  # lda = K + 1, pointer off by 4 bytes
    b = rng.standard_normal((K, N + 3), dtype=cupy.float32)[:, 3:]
    c0 = rng.standard_normal((M, N), dtype=cupy.float32)
    out = c0.copy()
    cumm.matmul(a, b, kernel=kernel, out=out, alpha=-0.5, beta=2.0)
    assert strips == [(bm, bn)]
    ref = -0.5 * (a.astype(cupy.float64) @ b.astype(cupy.float64)) + 2.0 * c0.astype(cupy.float64)
    assert rel_err(out, ref) < TOL


@pytest.mark.gpu
def test_strips_run_at_4097_with_real_occupancy(rng, monkeypatch):
    """The case they exist for: 4097 x 4097 (K small, so the test is quick) saves a wave on any GPU with
    fewer than 1089 block slots."""
    import cupy

    calls = _record_runs(monkeypatch)
    a = rng.standard_normal((4097, 64), dtype=cupy.float32)
    b = rng.standard_normal((64, 4097), dtype=cupy.float32)
    out = cupy.full((4097, 4097), math.nan, dtype=cupy.float32)
    cumm.matmul(a, b, kernel="warptile", out=out)
    assert calls == [(4096, 4096)]
    assert rel_err(out, a.astype(cupy.float64) @ b.astype(cupy.float64)) < TOL


@pytest.mark.gpu
def test_strips_off(rng, monkeypatch):
    import cupy

    monkeypatch.setattr(_edges, "ENABLED", False)
    monkeypatch.setattr(_edges, "run", lambda *a, **k: pytest.fail("strips ran with CUMM_EDGES=0"))
    a = rng.standard_normal((4097, 8), dtype=cupy.float32)
    b = rng.standard_normal((8, 4097), dtype=cupy.float32)
    out = cumm.matmul(a, b, kernel="warptile")
    assert rel_err(out, a.astype(cupy.float64) @ b.astype(cupy.float64)) < TOL
