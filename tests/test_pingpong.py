"""wgmma_pingpong (22_wgmma_pingpong): two consumer warpgroups on different tiles, taking turns on the tensor cores.
On the GPU: each tile shape against float64 and cuBLAS's own error on odd shapes (a block with one tile, so one
warpgroup idles; blocks with an odd number of tiles; rows past M, columns past N), alpha and beta into half and
float32 results, transposed operands read in place, a batch walked as one run, the fused epilogue; offline: the
compiles and the spec's refusals."""

from __future__ import annotations

import math

import pytest

import cumm

from .test_cluster_split_k import (
    _operands,
    check_against_float64_and_cublas,
    check_beta_with_a_half_result_and_a_guard_band,
)
from .test_half import HALF, _cublas, _err, _inputs, _ref

NAME = "wgmma_pingpong"
CONFIGS = [
    None,  # the defaults: 128 x 128 tiles, 6 stages
    dict(BM=64, BN=256, STAGES=4),
    dict(BM=128, BN=64, STAGES=8, GM=4),
    dict(BM=64, BN=64, STAGES=8),
    dict(BM=64, BN=192, STAGES=5, EPI=0),
    dict(BM=128, BN=192, STAGES=4),  # the wide tiles: 192 accumulators a thread under setmaxnreg 240
    dict(BM=128, BN=128, STAGES=4, GM=4),  # the tuned 4096^3 entry the tie route runs fused epilogues on
]
WIDE = dict(BM=128, BN=192, STAGES=4)


def _id(c) -> str:
    return "defaults" if c is None else "_".join(f"{k}{v}" for k, v in c.items())


@pytest.mark.parametrize("config", CONFIGS, ids=_id)
def test_compiles_without_spills(config):
    k = cumm.compile(NAME, config, arch="sm_90a")
    assert k.spill_stores == 0 and k.spill_loads == 0, k


@pytest.mark.parametrize(
    "config, match",
    [
        (dict(BM=192), r"BM is 64 or 128"),
        (dict(BN=96), r"BN % 64 == 0"),
        (dict(BM=128, BN=256), r"more than 192 spill"),
        (dict(NUM_THREADS=256), r"NUM_THREADS is 384"),
        (dict(STAGES=1), r"at least two stages"),
        (dict(EPI=2), r"EPI is 0"),
        (dict(STAGES=8), r"227 KB"),
    ],
)
def test_refused_configurations(config, match):
    with pytest.raises(ValueError, match=match):
        cumm.compile(NAME, config, arch="sm_90a")


def test_raced_not_the_top_rung():
    """auto runs it where a tuned entry says it won (or for a fused epilogue at short K: plan/epilogue.py)."""
    from cumm.plan.auto import top

    spec = cumm.kernel_spec(NAME)
    assert spec.raced and not spec.top and not spec.branch and spec.reads_transposed and spec.schedules_batch
    assert top(90, dtype="bfloat16") == "wgmma_ws"


def test_auto_runs_it_for_a_fused_epilogue_at_short_k():
    """In place of the top rung, at K <= 2048 (its spec's epilogue_max_k) and deeper where its spec's
    epilogue_shapes says so; a tuned entry's own rung keeps the call."""
    from cumm.plan.routes import short_k_route

    assert cumm.kernel_spec(NAME).epilogue_max_k == 2048
    for dt in HALF:
        assert short_k_route("wgmma_ws", 2048, dt, 90) == NAME
        assert short_k_route("wgmma_ws", 2049, dt, 90) == "wgmma_ws"
        # deeper: where its 128 x 192 tiles fill the rounds (spec.epilogue_shapes)
        assert short_k_route("wgmma_ws", 4096, dt, 90, 8192, 14336, 132) == NAME
        assert short_k_route("wgmma_ws", 4096, dt, 90, 4096, 4096, 132) == "wgmma_ws"
        assert short_k_route("wgmma_swap_ab", 1024, dt, 90) == "wgmma_swap_ab"
        assert short_k_route("mma_swizzled_pipeline", 1024, dt, 80) == "mma_swizzled_pipeline"  # sm_90a only


def test_auto_runs_it_deeper_where_the_tuned_table_ties_it_with_the_top_rung(tmp_path, monkeypatch):
    """Deeper than epilogue_max_k (and where epilogue_shapes does not take the shape), a fused call under auto goes
    here with its tuned configuration when the tuned table raced it and the top rung at the call's shape (within
    TIE_DISTANCE) and its plain product ran within EPILOGUE_TIE of the top rung's; not for a batch, an epilogue
    reading an M x N operand, a caller's named rung, or another dtype's entries."""
    import dataclasses

    from cumm.ladder import get_spec
    from cumm.plan import auto as _auto
    from cumm.plan import epilogue as E
    from cumm.plan import routes as RT
    from cumm.plan import store as _store

    monkeypatch.setenv("CUMM_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(_store, "shipped_tables", lambda: [])
    monkeypatch.setattr(_auto, "device_key", lambda device_id: ("NVIDIA H200", 90))
    monkeypatch.setattr(RT, "compute_capability", lambda dev: 90)
    monkeypatch.setattr(RT, "multiprocessors", lambda dev: 132)
    _store.clear_caches()
    tuned = dict(BM=128, BN=128, STAGES=4, GM=4)

    def entry(kernel, shape, ms, tile=None, dtype="bfloat16"):
        cfg = get_spec(kernel).resolve(tile, 90)
        return _store.make_entry("NVIDIA H200", 90, kernel, dtype, shape, cfg, ms, 2 * math.prod(shape) / ms / 1e9)

    bias = E.Epilogue("v += bias[col];", "", (("bias", "bfloat16"),), "bias")
    matrix = dataclasses.replace(bias, reads_matrix=True)

    def ask(shape, epi=bias, auto=True, batch=(), dtype="bfloat16"):
        return RT.routes("wgmma_ws", auto, None, batch, dtype, 0, shape, epi)

    try:
        sq, wide = (4096, 4096, 4096), (2048, 8192, 4096)
        assert ask(sq) == ("wgmma_ws", None, None)  # no table: the top rung
        _store.save_entries([entry("wgmma_ws", sq, 0.2119), entry(NAME, sq, 0.2124, tuned)])
        _store.save_entries([entry("wgmma_ws", wide, 0.2000), entry(NAME, wide, 0.2060, tuned)])  # 3 % slower
        want = get_spec(NAME).resolve(tuned, 90)
        assert ask(sq)[0] == NAME and ask(sq)[2] == want
        assert ask((4096, 4096, 3584))[2] == want  # within TIE_DISTANCE of the tuned shape
        assert ask((2048, 4096, 4096))[0] == "wgmma_ws"  # a log2 unit away: another shape
        assert ask(wide)[0] == "wgmma_ws"  # its plain product slower there
        assert ask(sq, epi=matrix)[0] == "wgmma_ws"
        assert ask(sq, auto=False)[0] == "wgmma_ws"
        assert ask((1024, 4096, 4096), batch=(4,))[0] == "wgmma_ws"
        assert ask(sq, dtype="float16")[0] == "wgmma_ws"  # (the entries are bf16's)
        assert ask((4096, 4096, 1024))[::2] == (NAME, None)  # short K: the short-K route, its own tiles
    finally:
        _store.clear_caches()


# K % 8 == 0 for the copy engine (K = 1 checks the fallback); 1 x 1 x 8: one tile, warpgroup 1 idle; 3 tiles of
# 128 x 128 on a block (300 x 200 with 64-wide tiles...): odd counts of items; 4097 rows: a last tile row of one
GPU_SHAPES = [
    (1, 8, 8),
    (64, 64, 64),
    (127, 131, 136),
    (300, 200, 520),
    (1000, 77, 1000),
    (4097, 300, 256),
    (2048, 2048, 2048),
    (300, 1000, 4104),
    (5, 77, 1),  # K = 1: a's rows are off 16 bytes, so its fallback runs (the helper checks which)
]


@pytest.mark.gpu
@pytest.mark.parametrize("dt", HALF)
@pytest.mark.parametrize("config", CONFIGS, ids=_id)
@pytest.mark.parametrize("shape", GPU_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_against_float64_and_cublas(shape, config, dt, rng, sm90):
    check_against_float64_and_cublas(NAME, shape, config, dt, rng)


@pytest.mark.gpu
@pytest.mark.parametrize("dt", HALF)
def test_beta_with_a_half_result_and_a_guard_band(dt, rng, sm90):
    check_beta_with_a_half_result_and_a_guard_band(NAME, 300, 1000, 2000, dt, rng)


@pytest.mark.gpu
@pytest.mark.parametrize("dt", HALF)
@pytest.mark.parametrize("config", [None, dict(BM=64, BN=256, STAGES=4)], ids=_id)
def test_a_batch_of_transposed_keys(config, dt, rng, sm90):
    """Attention's q @ k^T: a batch of 5 products, k^T a transposed view read in place (CUMM_TB), the batch's tiles
    one run; and x @ w with w shared by the batch (a broadcast operand)."""
    import cupy

    q = cupy.stack([_inputs(rng, 300, 8, 128, dt)[0] for _ in range(5)])
    k = cupy.stack([_inputs(rng, 500, 8, 128, dt)[0] for _ in range(5)])
    out = cupy.full((5, 300, 500), math.nan, dtype=q.dtype)
    cumm.matmul(q, k.transpose(0, 2, 1), kernel=NAME, config=config, out=out)
    w = _inputs(rng, 12, 264, 1000, dt)[1]
    x = cupy.stack([_inputs(rng, 12, 264, 1000, dt)[0] for _ in range(5)])
    out2 = cupy.full((5, 12, 264), math.nan, dtype=q.dtype)
    cumm.matmul(x, w, kernel=NAME, config=config, out=out2)
    for z in range(5):
        ref = _ref(q[z], k[z].T)
        assert _err(out[z], ref) <= 1.5 * _err(_cublas(q[z], k[z].T), ref) + 1e-7
        ref = _ref(x[z], w)
        assert _err(out2[z], ref) <= 1.5 * _err(_cublas(x[z], w), ref) + 1e-7


def test_wide_tiles_where_their_rounds_cost_no_more():
    """_wide_tiles (shape_config): 128 x 192 where its rounds cost at most 5 % more than 128 x 128's and K >= 512;
    the deep-K epilogue route (epilogue_shapes) follows it."""
    spec = cumm.kernel_spec(NAME)
    d = dict(spec.defaults)
    wide = {"BN": 192, "STAGES": 4}
    assert spec.shape_config(d, 8192, 14336, 1024, 132) == wide  # 4800 tiles against 7168: 1.009x
    assert spec.shape_config(d, 8192, 4096, 4096, 132) == wide  # 11 rounds against 16: 1.031x
    assert spec.shape_config(d, 512, 5120, 5120, 132) == wide  # one round of 108 against two of 160
    assert spec.shape_config(d, 4096, 4096, 4096, 132) == {}  # 6 rounds of 704 against 8 of 1024: 1.125x
    assert spec.shape_config(d, 2048, 4096, 14336, 132) == {}
    assert spec.shape_config(d, 32 * 4096, 4096, 128, 132) == {}  # K = 128: the stores decide
    assert spec.shape_config(dict(d, BN=64), 8192, 14336, 1024, 132) == {}  # a configuration given: kept
    assert spec.epilogue_shapes(8192, 14336, 4096, 132) and not spec.epilogue_shapes(4096, 4096, 4096, 132)
    spec.check(dict(d, **wide))  # it fits: 4 stages and the staging tiles in 227 KB


@pytest.mark.gpu
@pytest.mark.parametrize("config", [None, WIDE], ids=_id)
@pytest.mark.parametrize("act", ["gelu", "gelu_tanh", "silu"])
def test_fused_bias_and_activation(act, config, rng, sm90):
    """The epilogue hook on both of its store paths (the TMA store, a chunk at a time, with tiles wholly inside C
    and edge tiles; and the direct stores of a tile whose columns end off 16 bytes: N = 1001, b's rows padded)
    against float64, beside cuBLAS's error on the plain product."""
    import cupy

    from .test_epilogue import _acts, _f64

    for M, N, K in [(777, 1536, 1000), (257, 1001, 520), (300, 1000, 600)]:
        a, b = _operands(rng, M, N, K, "bfloat16")
        bias = cupy.asarray(rng.standard_normal(N, dtype="float32")).astype(a.dtype)
        out = cupy.full((M, N), math.nan, dtype=a.dtype)
        cumm.matmul(a, b, kernel=NAME, config=config, bias=bias, activation=act, out=out)
        ref = _acts()[act](_ref(a, b) + _f64(bias)[None, :])
        assert _err(out, ref) <= 1.5 * _err(_cublas(a, b), _ref(a, b)) + 1e-7
