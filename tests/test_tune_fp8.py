"""Tuning the FP8 rungs (``cumm tune --dtype fp8``) and scaled_matmul's use of their entries. CPU: the candidates
(constraints, promotion, offline sm_90a compiles without spills), configure's choice between a tuned entry and the
rules, the command line. GPU (sm_90a, torch): a small tune saves a verified entry that scaled_matmul then runs."""

from __future__ import annotations

import json
import math

import pytest

import cumm
from cumm.core.dtypes import FP8_DTYPE, FP8_TOLERANCE
from cumm.ladder import REGISTRY
from cumm.plan import scaled as plan
from cumm.plan import store as _store
from cumm.tools import candidates as _cand
from cumm.tools import cli as _cli
from cumm.tools import tune as _tune

E4, E5 = "float8_e4m3fn", "float8_e5m2"
FP8_RUNGS = ["fp8_wgmma", "fp8_block_scaled"]
GPU, CC, SMS = "Test GPU", 90, 132
DEVICE = (GPU, CC)


@pytest.fixture
def table(tmp_path, monkeypatch):
    """A private user table (CUMM_CACHE_DIR), no shipped tables."""
    monkeypatch.setenv("CUMM_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(_store, "shipped_tables", lambda: [])
    _store.clear_caches()
    yield tmp_path
    _store.clear_caches()


def _save(kernel, shape, tiles, gpu=GPU):
    """An FP8 entry of ``kernel`` at ``shape``: the defaults with ``tiles``, stored without the formats."""
    cfg = {k: v for k, v in {**REGISTRY[kernel].defaults, **tiles}.items() if k not in plan.FORMAT_FIELDS}
    _store.save_entries([_store.make_entry(gpu, CC, kernel, FP8_DTYPE, shape, cfg, 0.1, 2 * math.prod(shape) / 1e8)])
    return cfg


# ---- CPU: the candidates -----------------------------------------------------------------------------------


@pytest.mark.parametrize("kernel", FP8_RUNGS)
@pytest.mark.parametrize("shape", [(4096, 4096, 4096), (128, 7168, 16384), (512, 512, 512)])
def test_candidates_keep_the_constraints_formats_and_promotion(kernel, shape):
    spec = REGISTRY[kernel]
    flags = _tune.operands_for(FP8_DTYPE).flags(FP8_DTYPE, *shape)
    c = _cand.candidates(kernel, *shape, flags=flags, max_configs=200, compile=False)
    assert len(c.configs) >= 20, c.counts
    for cfg in c.configs:
        assert not spec.violations(cfg), cfg
        assert cfg["PROMO"] in (1, 2) and (cfg["FA"], cfg["FB"], cfg["OUT"]) == (0, 0, 0), cfg


@pytest.mark.parametrize("kernel", FP8_RUNGS)
def test_sampled_candidates_compile_for_sm_90a_without_spills(kernel):
    cfgs = _cand.candidates(kernel, 4096, 4096, 4096, max_configs=200, compile=False).configs
    for cfg in (cfgs[2], cfgs[len(cfgs) // 2], cfgs[-1]):  # (the defaults and named ones: tests/test_fp8.py)
        k = cumm.compile(kernel, cfg, "sm_90")
        assert k.arch == "sm_90a" and k.spill_bytes == 0, (cfg, k.registers, k.spill_bytes)


# ---- CPU: configure, with and without a tuned entry ---------------------------------------------------------


def test_configure_runs_the_tuned_entry_with_the_call_s_formats(table):
    spec = REGISTRY["fp8_wgmma"]
    tiles = _save("fp8_wgmma", (4096, 4096, 4096), dict(BM=64, BN=128, WGS=1, NUM_THREADS=256, STAGES=8, GM=16))
    cfg, why = plan.configure(spec, E5, E4, "float16", 4000, 4096, False, SMS, K=4096, device=DEVICE)
    assert cfg == {**tiles, "FA": 1, "FB": 0, "OUT": 1} and why == "tuned at 4096x4096x4096"
    assert plan.configure(spec, E4, E4, "bfloat16", 4000, 4096, True, SMS, K=4096, device=DEVICE)[1] == "fast_accum"
    assert plan.configure(spec, E4, E4, "bfloat16", 4000, 4096, False, SMS, {"GM": 4}, K=4096, device=DEVICE)[1] == (
        "config"
    )
    # another GPU, or no device given: the rules
    assert plan.configure(spec, E4, E4, "bfloat16", 4096, 4096, False, SMS, K=4096, device=("Other", CC))[1] == (
        "defaults"
    )
    assert plan.configure(spec, E4, E4, "bfloat16", 4096, 4096, False, SMS, K=4096)[1] == "defaults"
    # the block-scaled rung has its own entries
    block = REGISTRY["fp8_block_scaled"]
    assert plan.configure(block, E4, E4, "bfloat16", 4096, 4096, False, SMS, K=4096, device=DEVICE)[1] == "defaults"


def test_configure_falls_back_without_an_entry(table):
    spec = REGISTRY["fp8_block_scaled"]
    cfg, why = plan.configure(spec, E4, E4, "bfloat16", 4096, 4096, False, SMS, K=4096, device=DEVICE)
    assert why == "defaults" and cfg == spec.resolve(None)
    assert plan.configure(spec, E4, E4, "bfloat16", 128, 7168, False, SMS, K=16384, device=DEVICE)[1] == (
        "one_warpgroup_64x128"
    )


@pytest.mark.parametrize(
    "tiles",
    [
        dict(BN=256),  # 128 x 256 with two partial sets: the accumulators spill (a constraint)
        dict(STAGES=8),  # eight stages of 128 x 128: over the shared memory (a constraint)
        dict(PROMO=0, BN=256, STAGES=4),  # valid, but fast accumulation: not for use_fast_accum=False
    ],
)
def test_configure_ignores_an_entry_the_rung_should_not_run(table, tiles):
    spec = REGISTRY["fp8_wgmma"]
    _save("fp8_wgmma", (4096, 4096, 4096), tiles)
    assert plan.configure(spec, E4, E4, "bfloat16", 4096, 4096, False, SMS, K=4096, device=DEVICE)[1] == "defaults"


def test_a_one_wave_entry_serves_only_shapes_it_still_fills_once(table):
    """As for the half rungs (auto.one_wave): 64 x 128 tiles tuned at 128 x 7168 x 16384 (112 tiles, one wave)."""
    spec = REGISTRY["fp8_wgmma"]
    _save("fp8_wgmma", (128, 7168, 16384), dict(BM=64, WGS=1, NUM_THREADS=256, STAGES=8, GM=4))
    near = plan.configure(spec, E4, E4, "bfloat16", 128, 8192, False, SMS, K=16384, device=DEVICE)  # 128 tiles
    assert near[1] == "tuned at 128x7168x16384" and near[0]["GM"] == 4
    far = plan.configure(spec, E4, E4, "bfloat16", 512, 7168, False, SMS, K=16384, device=DEVICE)  # 448 tiles
    assert far[1] == "defaults"


# ---- CPU: the command line ------------------------------------------------------------------------------------


def test_cli_parses_fp8_and_plans_without_a_gpu(capsys):
    from cumm.tools.cli_args import build_parser

    args = build_parser().parse_args(["tune", "--dtype", "fp8", "--shape", "512x512x512", "--rungs", "fp8_wgmma"])
    assert args.dtype == FP8_DTYPE and args.rungs == ("fp8_wgmma",)
    assert _tune.top_rungs(90, FP8_DTYPE) == FP8_RUNGS and _tune.top_rungs(80, FP8_DTYPE) == []
    argv = ["tune", "--plan", "--no-compile", "--dtype", "fp8", "--max-configs", "2", "--shape", "512x512x512"]
    assert _cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "fp8_wgmma 512x512x512: 2 candidates" in out and "fp8_block_scaled 512x512x512: 2 candidates" in out
    assert _cli.main([*argv, "--rungs", "fp8_block_scaled"]) == 0
    assert "fp8_wgmma" not in capsys.readouterr().out
    assert _tune.tune_shapes(None, [(512, 512, 512)], False, None, dtype=FP8_DTYPE, rungs=("wgmma_ws",)) == 2
    assert "rung 'wgmma_ws' multiplies float16 and bfloat16, not fp8" in capsys.readouterr().err


def test_fp8_tune_shapes_saves_each_rung_s_best_unraced(table, monkeypatch):
    """tune_shapes without a GPU (tune faked): each FP8 rung's best is saved as its own entry, none marked "raced"
    (the rungs apply different scales: neither replaces the other)."""

    def fake_tune(kernel, M, N, K, dtype="float32", **_):
        cfg = {k: v for k, v in REGISTRY[kernel].defaults.items() if k not in plan.FORMAT_FIELDS}
        e = _store.make_entry(GPU, CC, kernel, dtype, (M, N, K), cfg, 1.0, 2 * M * N * K / 1e9)
        return _tune.TuneResult(kernel, (M, N, K), dtype, GPU, CC, cfg, 1.0, 2 * M * N * K / 1e9, 1e-3, [], {}, entry=e)

    monkeypatch.setattr(_tune, "gpu_unavailable", lambda: None)
    monkeypatch.setattr(_tune, "tune", fake_tune)
    assert _tune.tune_shapes(None, [(1024, 1024, 1024)], False, None, dtype=FP8_DTYPE, rungs=FP8_RUNGS) == 0
    entries = list(json.loads((table / "tuned.json").read_text())["entries"].values())
    assert sorted(e["kernel"] for e in entries) == sorted(FP8_RUNGS)
    assert all(e["dtype"] == FP8_DTYPE and "raced" not in e and "FA" not in e["config"] for e in entries)


# ---- GPU ------------------------------------------------------------------------------------------------------


def _hopper_torch():
    torch = pytest.importorskip("torch")
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the FP8 rungs run on sm_90a only")
    return torch


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", FP8_RUNGS)
def test_a_small_tune_saves_a_verified_entry_that_scaled_matmul_runs(table, kernel):
    torch = _hopper_torch()
    from cumm.api.decision import scaled_decision
    from cumm.plan.auto import device_key
    from cumm.tools.bench_fp8 import operands
    from cumm.tools.tune_fp8 import dequantized_product

    res = _tune.tune(kernel, 512, 512, 512, dtype=FP8_DTYPE, max_configs=3, budget_s=20, progress=False)
    assert res.rel_err < FP8_TOLERANCE and res.entry["dtype"] == FP8_DTYPE
    assert not set(plan.FORMAT_FIELDS) & set(res.config) and res.config["PROMO"] in (1, 2)
    gpu, cc = device_key(torch.cuda.current_device())
    assert _store.lookup(gpu, cc, FP8_DTYPE, 512, 512, 512, kernel=kernel)["config"] == res.config
    block = kernel == "fp8_block_scaled"
    a, b, sa, sb = operands(500, 512, 512, block)  # a nearby shape; e5m2 B, float32 out: the same tiles
    b = b.float().to(torch.float8_e5m2)
    c = cumm.scaled_matmul(a, b, sa, sb, out_dtype=torch.float32)
    ran = scaled_decision(a, b, sa, sb, out_dtype=torch.float32)
    assert ran.startswith(kernel) and ran.endswith("(tuned at 512x512x512)"), ran
    r = dequantized_product(a, b, sa, sb, block)
    assert ((c.double() - r).norm() / r.norm()).item() < FP8_TOLERANCE
