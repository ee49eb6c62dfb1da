"""The tuner times first what the tables give a rung at the shape now, and times a suite's q @ k^T with B transposed
as the suite runs it (CPU: candidates, the plan, the suite's keys; GPU: a tune with B transposed)."""

from __future__ import annotations

import json
import math

import pytest

from cumm.ladder import get_spec
from cumm.plan import store as _store
from cumm.runtime.render import TRANSPOSED_B, Variant, dtype_flag
from cumm.tools import candidates as _cand
from cumm.tools import cli as _cli
from cumm.tools import space as _space
from cumm.tools import tune as _tune
from cumm.tools import tune_operands as _operands
from cumm.tools import tune_search as _search
from cumm.tools.suite import load

ONE_WG_128x64 = dict(BM=128, BN=64, STAGES=8, WGS=1, GM=4, CL=1, EPI=1, SK=0, NUM_THREADS=256)


@pytest.fixture
def own_cache(tmp_path, monkeypatch):
    """A private CUMM_CACHE_DIR (the shipped tables stay), fresh caches."""
    monkeypatch.setenv("CUMM_CACHE_DIR", str(tmp_path))
    _store.clear_caches()
    yield tmp_path
    _store.clear_caches()


def test_a_prior_configuration_is_timed_first_and_a_refused_one_left_out():
    """``prior`` goes before the seeds (the budget always times the first), as matmul runs it at the shape; one the
    spec refuses (a BM it has no tiles for, a parameter it does not have) is left out."""
    spec = get_spec("wgmma_ws")
    got = _cand.candidates("wgmma_ws", 1024, 1024, 8192, max_configs=4, compile=False, prior=[ONE_WG_128x64])
    assert got.configs[0] == {**spec.default_config(90), **ONE_WG_128x64}
    assert spec.default_config(90) in got.configs[1:]
    for bad in ({**ONE_WG_128x64, "BM": 100}, {**ONE_WG_128x64, "UNKNOWN": 1}):
        first = _cand.candidates("wgmma_ws", 1024, 1024, 8192, max_configs=4, compile=False, prior=[bad]).configs[0]
        assert first == _cand.candidates("wgmma_ws", 1024, 1024, 8192, max_configs=4, compile=False).configs[0]


def test_the_prior_is_the_tables_nearest_entry_of_the_rung(own_cache, monkeypatch):
    """prior_configs: the configuration of the rung's nearest entry in the tables (the shipped H200 table's
    one-warpgroup 128 x 64 tiles at bf16 1024 x 1024 x 8192), none without tables."""
    prior = _search.prior_configs(_space.H200, "wgmma_ws", "bfloat16", (1024, 1024, 8192))
    entry = _store.lookup("NVIDIA H200", 90, "bfloat16", 1024, 1024, 8192, kernel="wgmma_ws")
    assert entry is not None and prior == [entry["config"]]
    assert (entry["config"]["BM"], entry["config"]["BN"], entry["config"]["WGS"]) == (128, 64, 1)
    monkeypatch.setattr(_store, "shipped_tables", lambda: [])
    _store.clear_caches()
    assert _search.prior_configs(_space.H200, "wgmma_ws", "bfloat16", (1024, 1024, 8192)) == []


def test_a_suites_transposed_b_keys():
    """The llm suite's q @ k^T batches (and nothing else) are timed with B transposed; a key the suite also gives
    row-major is not."""
    llm = load("llm")
    assert llm.transposed_b() == {(131072, 512, 128), (65536, 2048, 128), (131072, 4096, 128)}
    assert llm.transposed_b() <= set(llm.tuned_shapes())


def test_a_key_given_both_ways_is_tuned_row_major(tmp_path):
    doc = {
        "name": "both",
        "description": "one key, both layouts",
        "shapes": [
            {"name": "qk", "category": "attention", "M": 256, "N": 256, "K": 128, "batch": 8, "b_transposed": True},
            {"name": "rows", "category": "llm", "M": 2048, "N": 256, "K": 128},
            {"name": "qk2", "category": "attention", "M": 512, "N": 512, "K": 64, "batch": 2, "b_transposed": True},
        ],
    }
    f = tmp_path / "both.json"
    f.write_text(json.dumps(doc))
    assert load(str(f)).transposed_b() == {(1024, 512, 64)}


def test_run_as_a_transposed_b():
    """A rung that reads B^T in place compiles its transposed variant and takes no pitch rule (matmul's is for
    row-major operands); one that does not gets matmul's row-major copy: the plain variant and its pitches."""
    flags = _operands.MatmulOperands.flags("bfloat16", 4096, 4096, 128)
    ws, csk = get_spec("wgmma_ws"), get_spec("wgmma_cluster_split_k")
    got, pitches = _operands.run_as(ws, "bfloat16", flags, 4096, 128, True)
    assert Variant(*got).layout == TRANSPOSED_B and pitches is None
    assert Variant(*got)._replace(layout=0) == Variant(*flags)
    assert _operands.run_as(csk, "bfloat16", flags, 4096, 128, True) == (flags, (256, 8192))
    assert _operands.run_as(ws, "bfloat16", flags, 4096, 128, False) == (flags, (256, 8192))
    assert flags[4] == dtype_flag("bfloat16", "bfloat16")


def test_the_plan_of_a_suite_marks_its_transposed_b(capsys, tmp_path):
    doc = {
        "name": "qk",
        "description": "q @ k^T",
        "shapes": [
            {"name": "qk", "category": "attention", "M": 512, "N": 512, "K": 128, "batch": 4, "b_transposed": True}
        ],
    }
    f = tmp_path / "qk.json"
    f.write_text(json.dumps(doc))
    argv = ["tune", "--plan", "--no-compile", "--dtype", "bf16", "--rungs", "wgmma_ws", "--max-configs", "1"]
    assert _cli.main([*argv, "--suite", str(f)]) == 0
    assert "wgmma_ws 2048x512x128 (B^T): 1 candidates" in capsys.readouterr().out


def test_fp8_refuses_a_transposed_b():
    """An argument error, before any GPU is needed."""
    with pytest.raises(ValueError, match="b_transposed is for float32 and the half dtypes"):
        _search.tune("fp8_wgmma", 256, 256, 256, dtype="fp8", b_transposed=True, progress=False)


@pytest.mark.gpu
def test_tune_with_b_transposed_times_and_keeps_it(own_cache):
    """A tune with B transposed verifies against float64 of the transposed operands, says so in its entry, and the
    race of rungs takes the same operands."""
    import cupy

    from cumm.tools.tune_race import race

    if int(cupy.cuda.Device().compute_capability) < 90:
        pytest.skip("wgmma_ws runs on compute capability 9.0")
    res = _search.tune("wgmma_ws", 512, 1024, 128, dtype="bfloat16", max_configs=2, save=False, progress=False,
                       b_transposed=True)  # fmt: skip
    assert res.b_transposed and res.entry["b_transposed"] is True and res.rel_err < 1e-2
    assert all(math.isfinite(t) and t > 0 for t in race([res], rounds=1))
    shape = (512, 1024, 128)
    assert _tune.tune_shapes(None, [shape], False, 1, "bfloat16", ["wgmma_ws", "wgmma_pingpong"], {shape}) == 0
    _store.clear_caches()
    mine = [e for e in json.loads((own_cache / "tuned.json").read_text())["entries"].values() if e["shape"] == [*shape]]
    assert {e["kernel"] for e in mine} == {"wgmma_ws", "wgmma_pingpong"} and all(e["b_transposed"] for e in mine)
