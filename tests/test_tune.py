"""The tuner: enumeration and filtering, buckets, the tuned tables, kernel="auto" (CPU); a real tune (GPU)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import threading
import warnings
from pathlib import Path

import pytest

import cumm
from cumm.ladder import REGISTRY, get_spec
from cumm.plan import auto as _auto
from cumm.plan import store as _store
from cumm.runtime.render import template_hash
from cumm.tools import bench as _bench
from cumm.tools import candidates as _cand
from cumm.tools import cli as _cli
from cumm.tools import space as _space
from cumm.tools import tune as _tune
from cumm.tools import tune_operands as _operands
from cumm.tools import tune_search as _search
from cumm.tools.bench import np_dtype

from .conftest import GPU_SKIP_REASON

ROOT = Path(__file__).resolve().parents[1]
TOP_RUNGS = ["warptile", "double_buffer"]
GPU, CC = "NVIDIA H200", 90


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A private CUMM_CACHE_DIR, no shipped tables, fresh caches and warn-once state."""
    monkeypatch.setenv("CUMM_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(_store, "shipped_tables", lambda: [])
    monkeypatch.setattr(_store, "_warned", set())
    _store.clear_caches()
    yield tmp_path
    _store.clear_caches()


@pytest.fixture
def fake_device(monkeypatch):
    """Device 0 looks like an H200 without touching a GPU."""
    monkeypatch.setattr(_auto, "device_key", lambda device_id: (GPU, CC))
    monkeypatch.setattr(_auto, "multiprocessors", lambda device_id: 132)
    _auto.clear_cache()
    yield
    _auto.clear_cache()


def _entry(k="warptile", shape=(4096, 4096, 4096), tile=None, tflops=40.0, gpu=GPU, cc=CC, **over):
    """A table entry for kernel ``k`` with ``tile`` overriding its defaults; ``over`` replaces fields."""
    cfg = get_spec(k).resolve(tile, cc)
    ms = 2 * math.prod(shape) / (tflops * 1e9)
    e = _store.make_entry(gpu, cc, k, "float32", shape, cfg, ms, tflops)
    e.update(over)
    return e


# ----------------------------------------------------------------------------------------------------------
# Enumeration, filters, ranking
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kernel", TOP_RUNGS)
def test_enumeration_is_deterministic_and_valid(kernel):
    spec = get_spec(kernel)
    a, total = _space.enumerate_configs(spec, CC)
    b, _ = _space.enumerate_configs(spec, CC)
    assert a == b and a, "enumeration is empty or not deterministic"
    assert total == math.prod(len(v) for v in spec.space.values())
    assert len(a) < total, "the constraints should remove something from the raw product"
    for cfg in a[:: max(1, len(a) // 50)]:
        assert spec.violations(cfg) == []


@pytest.mark.parametrize("kernel", TOP_RUNGS)
@pytest.mark.parametrize("shape", [(4096, 4096, 4096), (512, 512, 512), (128, 4096, 4096), (8192, 8192, 64)])
def test_candidates_plan_is_deterministic_nonempty_and_filtered(kernel, shape):
    spec = get_spec(kernel)
    p1 = _cand.candidates(kernel, *shape, device=_space.H200, compile=False)
    p2 = _cand.candidates(kernel, *shape, device=_space.H200, compile=False)
    assert p1.configs == p2.configs and p1.configs
    assert len(p1.configs) <= _space.DEFAULT_MAX_CONFIGS
    keys = [_space.config_key(spec, c) for c in p1.configs]
    assert len(set(keys)) == len(keys), "duplicates in the plan"
    for cfg in p1.configs:
        assert spec.violations(cfg) == []
        assert _space.static_reject(spec, cfg, *shape, _space.H200) is None
    c = p1.counts
    assert c["space"] > c["constraint_ok"] >= c["ranked"] >= len(p1.configs)
    # The plan is diverse: several tile shapes (grids) among the first configurations.
    grids = {spec.grid(cfg, *shape) for cfg in p1.configs[:10]}
    assert len(grids) >= 3


def test_static_filter_rules():
    spec = get_spec("double_buffer")
    base = spec.resolve(None, CC)
    h = _space.H200
    # 128 accumulators per thread under a 128-register cap (256 threads, 2 blocks/SM): certain spill.
    cfg = dict(base, BM=128, BN=256, WM=64, WN=64, WNITER=4, TM=4, TN=4, NUM_THREADS=256, MINB=2)
    assert spec.violations(cfg) == []
    assert "spill" in _space.static_reject(spec, cfg, 4096, 4096, 4096, h)
    # MINB=2 at 128 threads leaves the same 255-register cap as MINB=1: a duplicate.
    cfg = dict(base, BM=64, BN=64, BK=16, WM=32, WN=32, WNITER=2, TM=4, TN=4, NUM_THREADS=128, MINB=2)
    assert spec.violations(cfg) == []
    assert "duplicate" in _space.static_reject(spec, cfg, 4096, 4096, 4096, h)
    assert _space.static_reject(spec, dict(cfg, MINB=1), 4096, 4096, 4096, h) is None
    # A 128-row tile for a 64-row problem: the 64-row tile covers it.
    assert "larger than needed" in _space.static_reject(spec, dict(base, MINB=1), 64, 4096, 4096, h)
    # More shared memory than the device allows.
    small = _space.DeviceInfo("tiny", 90, 132, smem_optin=16 * 1024, smem_per_sm=16 * 1024, l2_bytes=1 << 20)
    assert "shared memory" in _space.static_reject(spec, base, 4096, 4096, 4096, small)


def test_register_cap():
    h = _space.H200
    assert _space.register_cap(256, 1, h) == 255
    assert _space.register_cap(256, 2, h) == 128
    assert _space.register_cap(128, 2, h) == 255
    assert _space.register_cap(384, 1, h) == 168


@pytest.mark.parametrize("n", [1, 3, 7])
def test_max_configs_is_honored_in_the_plan(n):
    p = _cand.candidates("warptile", 2048, 2048, 2048, device=_space.H200, max_configs=n, compile=False)
    assert len(p.configs) == n
    assert p.configs == _cand.candidates("warptile", 2048, 2048, 2048, max_configs=10, compile=False).configs[:n]


def test_max_configs_must_be_positive():
    with pytest.raises(ValueError, match="max_configs"):
        _cand.candidates("warptile", 64, 64, 64, max_configs=0, compile=False)


def test_default_count_fits_the_budget():
    assert _space.default_count(8192, 8192, 8192, _space.DEFAULT_BUDGET_S) == _space.DEFAULT_MAX_CONFIGS
    assert _space.default_count(8192, 8192, 8192, 10) < _space.DEFAULT_MAX_CONFIGS
    assert _space.default_count(1 << 16, 1 << 16, 1 << 16, 1) == 1


def test_the_first_seed_is_what_matmul_runs_at_the_shape():
    """The tuner times first what auto would run with no entry: the defaults through the spec's shape rule (128 x
    192 at 512 x 5120 x 5120, where the defaults' 128 x 256 tiles are fewer than the multiprocessors) and, with the
    operands' pitches, its pitch rule (clusters of two where B's rows start off 32 bytes: N = 5000 in bf16). The
    unadjusted defaults stay among the seeds, and are what an entry of an adjusted seed keeps."""
    spec = get_spec("wgmma_ws")
    first = _cand.candidates("wgmma_ws", 512, 5120, 5120, max_configs=8, compile=False).configs
    assert (first[0]["BM"], first[0]["BN"], first[0]["SK"]) == (128, 192, spec.defaults["SK"])
    assert spec.default_config(90) in first
    pitches = _operands.contiguous_pitches("bfloat16", 5000, 2000)
    assert pitches == (4000, 10000)
    odd = _cand.candidates("wgmma_ws", 3000, 5000, 2000, max_configs=8, compile=False, pitches=pitches)
    assert odd.configs[0] == {**spec.default_config(90), "CL": 2}
    # what an entry keeps: the seed as written (matmul's rules give it CL = 2 at this pitch, and not to a batch)
    assert odd.given[_space.config_key(spec, odd.configs[0])] == spec.default_config(90)
    even = _cand.candidates("wgmma_ws", 3000, 5120, 2000, max_configs=8, compile=False, pitches=(4000, 10240))
    assert even.configs[0] == spec.default_config(90)


def test_offline_compile_filter_with_max_configs():
    """NVRTC only (no GPU): survivors compile without spills, within the register file; order kept."""
    try:
        from cupy.cuda import nvrtc

        nvrtc.getVersion()
    except Exception as e:  # pragma: no cover - no NVRTC library
        pytest.skip(f"NVRTC unavailable: {type(e).__name__}: {e}")
    p = _cand.candidates("warptile", 512, 512, 512, device=_space.H200, max_configs=2)
    assert 1 <= len(p.configs) <= 2
    by = {_space.config_key(get_spec("warptile"), r["config"]): r for r in p.rows}
    for cfg in p.configs:
        r = by[_space.config_key(get_spec("warptile"), cfg)]
        assert r["status"] == "candidate" and r["spill_bytes"] == 0
        assert r["registers"] * r["threads"] <= 65536
    for r in p.rows:
        assert r["status"] in ("candidate", "rejected", "skipped")
        if r["status"] == "rejected":
            assert r["reason"]
    plan = _cand.candidates("warptile", 512, 512, 512, device=_space.H200, max_configs=50, compile=False).configs
    order = [_space.config_key(get_spec("warptile"), c) for c in plan]
    got = [order.index(_space.config_key(get_spec("warptile"), c)) for c in p.configs]
    assert got == sorted(got), "survivors keep the plan's order"


# ----------------------------------------------------------------------------------------------------------
# Buckets and lookup
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("x", [*range(1, 300), 1000, 1447, 1448, 1449, 4095, 4097, 5792, 5793, 8192, 10**6])
def test_bucket_is_nearest_power_of_two_in_log_space(x):
    b = _store.bucket_dim(x)
    assert b & (b - 1) == 0
    assert b == 2 ** round(math.log2(x))


def test_bucket_of_nonpositive_is_one():
    assert _store.bucket(0, 1, 3) == (1, 1, 4)


def test_nearest_bucket_lookup(cache):
    _store.save_entries(
        [
            _entry(shape=(4096, 4096, 4096), tile=dict(BK=8), tflops=40.0),
            _entry(shape=(8192, 8192, 256), tile=dict(BK=32), tflops=30.0),
            _entry(shape=(512, 512, 512), tile=dict(BM=64, BN=64, WM=32, WN=32, NUM_THREADS=128, MINB=1), tflops=10.0),
        ]
    )
    assert _store.lookup(GPU, CC, "float32", 4000, 4000, 4000)["config"]["BK"] == 8
    assert _store.lookup(GPU, CC, "float32", 6000, 6000, 6000)["config"]["BK"] == 8  # (13,13,13) nearest 4096^3
    assert _store.lookup(GPU, CC, "float32", 8192, 8192, 300)["config"]["BK"] == 32
    assert _store.lookup(GPU, CC, "float32", 400, 600, 512)["shape"] == [512, 512, 512]
    assert _store.lookup(GPU, CC, "float32", 16, 16, 16) is None  # farther than MAX_DISTANCE
    assert _store.lookup(GPU, CC, "float32", 16, 16, 16, max_distance=100)["shape"] == [512, 512, 512]
    assert _store.lookup("NVIDIA A100", CC, "float32", 4096, 4096, 4096) is None
    assert _store.lookup(GPU, 80, "float32", 4096, 4096, 4096) is None
    assert _store.lookup(GPU, CC, "float64", 4096, 4096, 4096) is None


def test_entries_are_kept_per_shape_not_per_bucket(cache):
    """Two shapes of one bucket (512 x 4096 x 4096 and 512 x 5120 x 5120) keep an entry each, and each is served
    its own: a race at one does not replace the other's."""
    _store.save_entries([_entry("warptile", shape=(512, 4096, 4096), tile=dict(BK=8), tflops=40.0)])
    _store.save_entries([_entry("warptile", shape=(512, 5120, 5120), tile=dict(BK=32), tflops=41.0)])
    assert _store.bucket(512, 5120, 5120) == _store.bucket(512, 4096, 4096)
    assert len(_store.tuned_entries(GPU, CC)) == 2
    assert _store.lookup(GPU, CC, "float32", 512, 4096, 4096)["config"]["BK"] == 8
    assert _store.lookup(GPU, CC, "float32", 512, 5120, 5120)["config"]["BK"] == 32
    assert _store.lookup(GPU, CC, "float32", 512, 4500, 4500)["config"]["BK"] == 8  # nearer 4096 in log2


def test_a_table_keyed_by_bucket_is_read_under_shape_keys(cache):
    """A table written when entries were keyed by bucket: its entries count under their shapes' keys, and a save
    replaces the entry of the same shape rather than adding a second one."""
    e = _entry("warptile", shape=(512, 5120, 5120), tile=dict(BK=8), tflops=40.0)
    old_key = "NVIDIA H200|sm_90|warptile|float32|512x4096x4096"
    (cache / "tuned.json").write_text(json.dumps({"schema": _store.SCHEMA, "entries": {old_key: e}}))
    _store.clear_caches()
    assert _store.lookup(GPU, CC, "float32", 512, 5120, 5120)["config"]["BK"] == 8
    _store.save_entries([_entry("warptile", shape=(512, 5120, 5120), tile=dict(BK=32), tflops=41.0)])
    entries = json.loads((cache / "tuned.json").read_text())["entries"]
    assert list(entries) == ["NVIDIA H200|sm_90|warptile|float32|512x5120x5120"]
    assert entries["NVIDIA H200|sm_90|warptile|float32|512x5120x5120"]["config"]["BK"] == 32


def test_same_bucket_prefers_the_faster_kernel(cache):
    _store.save_entries([_entry("warptile", tflops=40.0), _entry("double_buffer", tflops=42.0)])
    assert _store.lookup(GPU, CC, "float32", 4096, 4096, 4096)["kernel"] == "double_buffer"
    _store.save_entries([_entry("warptile", tflops=45.0)])  # same key: replaced
    assert _store.lookup(GPU, CC, "float32", 4096, 4096, 4096)["kernel"] == "warptile"
    assert len(_store.tuned_entries(GPU, CC)) == 2


def test_retuning_the_race_winner_alone_keeps_its_race(cache):
    """`tune --kernel K` at a shape K won a race at: a faster configuration of K keeps the race (auto still trusts
    K over the top rung); a slower one, another template, or a new race replace it as they are."""
    key = "NVIDIA H200|sm_90|warptile|float32|4096x4096x4096"
    race = {"warptile": "h1", "wgmma_tf32x3": "h2", "double_buffer": "h3"}

    def saved(**over):
        _store.save_entries([_entry("warptile", **over)])
        return json.loads((cache / "tuned.json").read_text())["entries"][key]

    assert saved(tflops=40.0, template_hash="h1", raced=race)["raced"] == race
    got = saved(tflops=41.0, template_hash="h1", raced={"warptile": "h1"})
    assert got["raced"] == race and got["tflops"] == 41.0  # faster, same template: the race kept
    assert saved(tflops=42.0, template_hash="h1")["raced"] == race  # (an entry without a race record: the same)
    assert saved(tflops=30.0, template_hash="h1", raced={"warptile": "h1"})["raced"] == {"warptile": "h1"}
    saved(tflops=40.0, template_hash="h1", raced=race)
    assert saved(tflops=45.0, template_hash="h9", raced={"warptile": "h9"})["raced"] == {"warptile": "h9"}
    saved(tflops=40.0, template_hash="h1", raced=race)
    new_race = {"warptile": "h1", "tf32x3": "h4"}
    assert saved(tflops=45.0, template_hash="h1", raced=new_race)["raced"] == new_race


# ----------------------------------------------------------------------------------------------------------
# Persistence
# ----------------------------------------------------------------------------------------------------------


def test_a_new_race_takes_the_winner_mark_from_an_older_one(cache):
    """One winner a shape: a race's winner takes the mark from an older race's winner there, and from a loser of the
    new race that kept the old mark (a faster configuration of the old winner: _with_kept_race); a rung tuned alone
    takes no one's mark."""
    old = {"warptile": "h1", "double_buffer": "h3"}
    new = {"warptile": "h1", "double_buffer": "h3", "wgmma_tf32x3": "h2"}
    _store.save_entries([_entry("warptile", tflops=40.0, template_hash="h1", raced=old)])
    _store.save_entries(
        [_entry("warptile", tflops=41.0, template_hash="h1"), _entry("double_buffer", tflops=50.0, raced=new)]
    )
    marks = {e["kernel"]: e.get("raced") for e in json.loads((cache / "tuned.json").read_text())["entries"].values()}
    assert marks == {"warptile": None, "double_buffer": new}
    _store.save_entries([_entry("warptile", tflops=42.0, template_hash="h1", raced={"warptile": "h1"})])
    marks = {e["kernel"]: e.get("raced") for e in json.loads((cache / "tuned.json").read_text())["entries"].values()}
    assert marks == {"warptile": {"warptile": "h1"}, "double_buffer": new}


def test_cache_dir_resolution(monkeypatch, tmp_path):
    monkeypatch.setenv("CUMM_CACHE_DIR", str(tmp_path / "a"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert _store.user_table_path() == tmp_path / "a" / "tuned.json"
    monkeypatch.delenv("CUMM_CACHE_DIR")
    assert _store.user_table_path() == tmp_path / "x" / "cumm" / "tuned.json"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "h"))
    assert _store.user_table_path() == tmp_path / "h" / ".cache" / "cumm" / "tuned.json"


def test_round_trip(cache):
    e = _entry(tile=dict(BK=32, MINB=1), timed=12)
    path = _store.save_entries([e])
    assert path == cache / "tuned.json"
    doc = json.loads(path.read_text())
    assert doc["schema"] == _store.SCHEMA
    ((key, stored),) = doc["entries"].items()
    assert key == "NVIDIA H200|sm_90|warptile|float32|4096x4096x4096"
    for field in ("config", "ms", "tflops", "template_hash", "schema", "bucket", "shape", "gpu", "cc", "kernel"):
        assert stored[field] == e[field]
    assert stored["template_hash"] == _store.template_hash(get_spec("warptile"))
    got = _store.lookup(GPU, CC, "float32", 4096, 4096, 4096)
    assert got["config"] == e["config"] and got["timed"] == 12
    assert not list(cache.glob("*.tmp")), "temporary files left behind"


def test_changed_template_invalidates(cache, monkeypatch):
    _store.save_entries([_entry(), _entry("double_buffer", shape=(2048, 2048, 2048))])
    assert len(_store.tuned_entries(GPU, CC)) == 2
    real = _store.template_hash
    monkeypatch.setattr(_store, "template_hash", lambda spec: "0" * 16 if spec.name == "warptile" else real(spec))
    _store.clear_caches()
    assert [e["kernel"] for e in _store.tuned_entries(GPU, CC)] == ["double_buffer"]
    assert _store.lookup(GPU, CC, "float32", 4096, 4096, 4096)["kernel"] == "double_buffer"  # next nearest


def test_unusable_entries_are_ignored(cache):
    _store.save_entries(
        [
            _entry(shape=(1024, 1024, 1024), schema=_store.SCHEMA + 1),  # a future schema
            _entry(shape=(2048, 2048, 2048), kernel="no_such_kernel"),
            _entry(shape=(4096, 4096, 4096), config={"BM": 96}),  # violates the constraints
            _entry(shape=(8192, 8192, 8192), config={"NOT_A_PARAM": 1}),
            _entry(shape=(512, 512, 512), ms="fast"),
        ]
    )
    assert _store.tuned_entries(GPU, CC) == []
    doc = json.loads((cache / "tuned.json").read_text())
    assert len(doc["entries"]) == 5, "entries another version may use must survive a merge"


def test_corrupt_table_is_tolerated(cache):
    path = cache / "tuned.json"
    path.write_text('{"schema": 1, "entries": {"x": ')  # truncated
    with pytest.warns(RuntimeWarning, match="unreadable"):
        assert _store.tuned_entries(GPU, CC) == []
    _store.clear_caches()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _store.tuned_entries(GPU, CC) == []  # warned once only
        assert _store.lookup(GPU, CC, "float32", 64, 64, 64) is None
    _store.save_entries([_entry()])  # a writer replaces it and keeps the bad file aside
    assert (cache / "tuned.json.corrupt").read_text().startswith('{"schema": 1')
    assert len(_store.tuned_entries(GPU, CC)) == 1


@pytest.mark.parametrize("text", ["[1, 2]", '{"entries": [1]}', "\x00\x01", ""])
def test_wrong_structure_is_tolerated(cache, text):
    (cache / "tuned.json").write_text(text)
    with pytest.warns(RuntimeWarning):
        assert _store.tuned_entries(GPU, CC) == []


def test_concurrent_writers_threads_and_processes(cache):
    n_threads, n_procs, per = 6, 3, 8

    def shape(i, j):
        return (2 ** (i + 1), 2 ** (j + 1), 64)

    def thread_writer(i):
        for j in range(per):
            _store.save_entries([_entry(shape=shape(i, j))])

    code = (
        "import math, sys\n"
        "from cumm.plan import store as _store\n"
        "from cumm.ladder import get_spec\n"
        "i = int(sys.argv[1])\n"
        f"for j in range({per}):\n"
        "    s = (2 ** (i + 1), 2 ** (j + 1), 64)\n"
        "    cfg = get_spec('warptile').resolve(None, 90)\n"
        "    _store.save_entries([_store.make_entry('NVIDIA H200', 90, 'warptile', 'float32', s, cfg, 1.0, 1.0)])\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CUMM_CACHE_DIR": str(cache)}
    procs = [subprocess.Popen([sys.executable, "-c", code, str(n_threads + i)], env=env) for i in range(n_procs)]
    threads = [threading.Thread(target=thread_writer, args=(i,)) for i in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for p in procs:
        assert p.wait(timeout=120) == 0
    doc = json.loads((cache / "tuned.json").read_text())
    want = {
        f"NVIDIA H200|sm_90|warptile|float32|{'x'.join(map(str, shape(i, j)))}"
        for i in range(n_threads + n_procs)
        for j in range(per)
    }
    assert set(doc["entries"]) == want
    assert not list(cache.glob("*.tmp"))


def test_shipped_tables_are_well_formed():
    for t in _store.shipped_tables():
        doc = json.loads(t.read_text())
        assert doc["schema"] == _store.SCHEMA
        for key, e in doc["entries"].items():
            assert _store._well_formed(e), key
            assert key == _store.entry_key(e)
            # every parameter a spec has no more (a removed one: bench/restamp.py --drop) gone from the entries
            assert not set(e["config"]) - set(REGISTRY[e["kernel"]].params), key


def test_shipped_entries_run_batches_and_transposed_operands():
    """No shipped wgmma_ws entry holds clusters of two: the pitch rule adds them at run time where they apply, and a
    batch or a transposed B looked up at the entry's shape must compile (CL = 2 refuses both)."""
    for t in _store.shipped_tables():
        for key, e in json.loads(t.read_text())["entries"].items():
            if e["kernel"] == "wgmma_ws":
                assert e["config"].get("CL", 1) == 1, key


def test_shipped_tables_have_one_winner_a_shape():
    """A race saves one winner (with "raced") per GPU, dtype and shape; a second one left by merging tables by hand
    would make auto's choice depend on which entry it met first."""
    for t in _store.shipped_tables():
        winners: dict[tuple, str] = {}
        for key, e in json.loads(t.read_text())["entries"].items():
            if e.get("raced"):
                at = (e["gpu"], e["dtype"], tuple(e["shape"]))
                assert at not in winners, f"{t.name}: {key} and {winners[at]} both won at {at}"
                winners[at] = key


def test_shipped_tables_match_the_current_templates():
    """An edited template (or common.cuh, or a shared header) voids its tuned entries: re-tune, then ship."""
    for t in _store.shipped_tables():
        for key, e in json.loads(t.read_text())["entries"].items():
            assert e["template_hash"] == _store.template_hash(get_spec(e["kernel"])), (
                f"{t.name}: {key} was tuned for another version of {e['kernel']}'s source"
            )


def test_shipped_and_user_tables_merge_user_wins(cache, monkeypatch, tmp_path):
    shipped = tmp_path / "shipped"
    shipped.mkdir()
    _store.save_entries(
        [_entry(tile=dict(BK=8)), _entry(shape=(512, 512, 512), tile=dict(BK=8))], shipped / "h200.json"
    )
    monkeypatch.setattr(_store, "shipped_tables", lambda: [shipped / "h200.json"])
    _store.clear_caches()
    assert _store.lookup(GPU, CC, "float32", 4096, 4096, 4096)["config"]["BK"] == 8
    _store.save_entries([_entry(tile=dict(BK=32))])  # the user's table
    assert _store.lookup(GPU, CC, "float32", 4096, 4096, 4096)["config"]["BK"] == 32
    assert _store.lookup(GPU, CC, "float32", 512, 512, 512)["config"]["BK"] == 8


# ----------------------------------------------------------------------------------------------------------
# kernel="auto"
# ----------------------------------------------------------------------------------------------------------


def _top(M, N, K):
    """auto's top rung for an M x N x K float32 product on the fake H200 (wgmma_f16x3 takes the large ones)."""
    return _auto.top(CC, shape=(M, N, K, 132))


def test_auto_public_names():
    assert _auto.top(CC) in REGISTRY
    get_spec(_auto.top(CC)).check(get_spec(_auto.top(CC)).resolve(_auto.SMALL_TILES[_auto.top(CC)], CC))


def test_select_keeps_an_explicit_config(cache, fake_device):
    cfg = {"BK": 8}
    assert _auto.select(4096, 4096, 4096, 0, cfg) == (_auto.top(CC), cfg, 1)


def test_select_falls_back_to_the_heuristic(cache, fake_device):
    assert _auto.select(8192, 8192, 8192, 0) == (_top(8192, 8192, 8192), None, 1) == ("wgmma_f16x3", None, 1)
    assert _auto.select(512, 512, 512, 0) == (_auto.top(CC), _auto.SMALL_TILES[_auto.top(CC)], 1)


def test_select_uses_a_tuned_entry(cache, fake_device, monkeypatch):
    cfg = get_spec("warptile").resolve(dict(BK=32, MINB=1), CC)
    _store.save_entries([_entry(_top(4096, 4096, 4096), tflops=30.0)])  # the bucket raced the top rung: its winner
    _store.save_entries([_entry("warptile", shape=(4096, 4096, 4096), tile=cfg)])
    assert _auto.select(4000, 4100, 3000, 0) == ("warptile", cfg, 1)
    assert _auto.select(3500, 5000, 4096, 0) == ("warptile", cfg, 1)  # the nearest shape's entry
    assert _auto.select(4096, 4096, 4096, 0) == ("warptile", cfg, 1)
    assert _auto.select(64, 64, 64, 0) == (_auto.top(CC), _auto.SMALL_TILES[_auto.top(CC)], 1)  # too far: heuristic
    # Memoized per (device, shape): no table is read again for a shape seen before.
    monkeypatch.setattr(_store, "tuned_entries", lambda *a, **k: pytest.fail("table scanned again"))
    monkeypatch.setattr(_store, "read_table", lambda *a, **k: pytest.fail("file read again"))
    for _ in range(3):
        assert _auto.select(4096, 4096, 4096, 0) == ("warptile", cfg, 1)
        assert _auto.select(3500, 5000, 4096, 0) == ("warptile", cfg, 1)


def test_select_other_gpu_uses_the_heuristic(cache, monkeypatch):
    _store.save_entries([_entry("warptile")])
    monkeypatch.setattr(_auto, "device_key", lambda device_id: ("NVIDIA A100-SXM4-80GB", 80))
    monkeypatch.setattr(_auto, "multiprocessors", lambda device_id: 108)
    _auto.clear_cache()
    assert _auto.select(4096, 4096, 4096, 0) == (_auto.top(80), None, 1)
    assert _auto.top(80) == "tf32x3" and _auto.top(CC) == "wgmma_tf32x3"  # wgmma: sm_90 only


def test_saving_refreshes_select(cache, fake_device):
    assert _auto.select(4096, 4096, 4096, 0) == (_top(4096, 4096, 4096), None, 1)
    _store.save_entries([_entry("warptile"), _entry(_top(4096, 4096, 4096), tflops=30.0)])
    assert _auto.select(4096, 4096, 4096, 0)[0] == "warptile"


def test_select_survives_a_broken_lookup(cache, fake_device, monkeypatch):
    def boom(*a, **k):
        raise OSError("disk on fire")

    monkeypatch.setattr(_store, "lookup", boom)
    with pytest.warns(RuntimeWarning, match="heuristic"):
        assert _auto.select(8192, 8192, 8192, 0) == (_top(8192, 8192, 8192), None, 1)


# ----------------------------------------------------------------------------------------------------------
# CLI (no GPU: argument errors only)
# ----------------------------------------------------------------------------------------------------------


def test_cli_argument_errors(capsys):
    assert _tune.tune_shapes(None, [], False, None) == 2
    assert _tune.tune_shapes("no_such_kernel", [(64, 64, 64)], False, None) == 2
    assert _tune.tune_shapes("warptile", [(64, 64)], False, None) == 2
    err = capsys.readouterr().err
    assert "--standard" in err and "no_such_kernel" in err
    assert _tune.tune_shapes("tf32x3", [(64, 64, 64)], False, None, dtype="bfloat16") == 2
    assert _tune.tune_shapes(None, [(64, 64, 64)], False, None, dtype="int8") == 2
    err = capsys.readouterr().err
    assert "'tf32x3' multiplies float32, not bfloat16" in err and "'int8' is not supported" in err
    assert _tune.tune_shapes(None, [(64, 64, 64)], False, None, dtype="bfloat16", rungs=("tf32x3",)) == 2
    assert "rung 'tf32x3' multiplies float32, not bfloat16" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        _cli.main(["tune", "--shape", "64x64x64", "--rungs", "tf32x3,no_such_rung"])
    assert "unknown rungs ['no_such_rung']" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        _cli.main(["tune", "--shape", "64x64x64", "--rungs", " , "])
    assert "give rungs as A,B,..." in capsys.readouterr().err


def test_top_rungs_per_dtype():
    assert _tune.top_rungs(90) == ["warptile", "double_buffer", "tf32x3", "wgmma_tf32x3", "skinny", "wgmma_f16x3"]
    assert _tune.top_rungs(80) == ["warptile", "double_buffer", "tf32x3", "skinny"]
    half = ["mma_swizzled_pipeline", "wgmma", "wgmma_ws"]
    raced = ["wgmma_cluster_split_k", "skinny16", "wgmma_swap_ab", "wgmma_pingpong"]
    assert _tune.top_rungs(90, "bfloat16") == [*half, *raced]
    assert _tune.top_rungs(80, "float16") == ["mma_swizzled_pipeline", "skinny16"]


def test_a_branch_rung_races_only_where_tiles_are_few():
    """wgmma_cluster_split_k (a branch for few tiles) races where wgmma_ws's default 128 x 256 tiles are fewer
    than the multiprocessors; elsewhere the ladder's rungs share the budget."""
    # (the decode rungs race at products of few rows only: skinny16 at M = 1, wgmma_swap_ab at M <= 256)
    rungs = [k for k in _tune.top_rungs(90, "bfloat16") if k not in ("skinny16", "wgmma_swap_ab")]
    half = [k for k in rungs if k != "wgmma_cluster_split_k"]  # (few tiles: wgmma_ws's defaults, the top rung's)
    assert _tune.raced_at(rungs, (4096, 4096, 4096), 132) == half  # 512 tiles
    assert _tune.raced_at(rungs, (2048, 2304, 2048), 132) == half  # 144 tiles
    for shape in [(1024, 1024, 8192), (2048, 2048, 2048), (128, 4096, 4096), (8192, 256, 8192)]:
        assert _tune.raced_at(rungs, shape, 132) == rungs, shape
    assert _tune.raced_at(rungs, (2048, 2048, 2048), 100) == half  # 128 tiles on 100 multiprocessors
    assert _tune.raced_at(["wgmma_cluster_split_k"], (4096, 4096, 4096), 132) == ["wgmma_cluster_split_k"]


def test_a_rung_with_race_max_m_races_only_at_few_rows():
    """skinny (race_max_m = 64) races at decode products only, and is not the ladder's last rung for the few-tiles
    rule of a branch rung."""
    rungs = _tune.top_rungs(90)
    no_skinny = [k for k in rungs if k != "skinny"]
    assert _tune.raced_at(rungs, (64, 4096, 4096), 132) == rungs
    assert _tune.raced_at(rungs, (65, 4096, 4096), 132) == no_skinny
    assert _tune.raced_at(rungs, (8192, 8192, 8192), 132) == no_skinny
    assert _tune.raced_at(["skinny"], (4096, 4096, 4096), 132) == []
    half = _tune.top_rungs(90, "bfloat16")
    no16 = [k for k in half if k != "skinny16"]
    # the branch races, wgmma_swap_ab (race_max_m = 256) too; skinny16 not
    assert _tune.raced_at([*half, "skinny"], (128, 4096, 4096), 132) == no16
    assert _tune.raced_at(half, (1, 4096, 4096), 132) == half  # skinny16 (race_max_m = 1) too
    assert _tune.raced_at(half, (2, 4096, 4096), 132) == no16
    assert _tune.raced_at(half, (257, 4096, 4096), 132) == [k for k in no16 if k != "wgmma_swap_ab"]


def test_half_auto_uses_its_dtype_s_entries(cache, fake_device):
    top = _auto.top(CC, dtype="bfloat16")
    assert _auto.select(4096, 4096, 4096, 0, dtype="bfloat16") == (top, None, None)  # no entry: the top rung
    cfg = get_spec(top).resolve(dict(BN=128, STAGES=5), CC)
    e = _store.make_entry(GPU, CC, top, "bfloat16", (4096,) * 3, cfg, 0.2, 700.0)
    _store.save_entries([e])
    assert _auto.select(4000, 4000, 4000, 0, dtype="bfloat16") == (top, cfg, None)
    assert _auto.select(4096, 4096, 4096, 0, dtype="float16") == (_auto.top(CC, dtype="float16"), None, None)
    assert _auto.select(4096, 4096, 4096, 0)[0] == _top(4096, 4096, 4096)  # float32: not a bf16 entry
    assert _auto.named(top, 4096, 4096, 4096, 0, dtype="bfloat16") == cfg
    assert _auto.named(top, 4096, 4096, 4096, 0, dtype="float16") is None
    # an entry of a lower rung alone never raced the top one: not used
    low = _store.make_entry(GPU, CC, "wgmma", "float16", (2048,) * 3, get_spec("wgmma").resolve(None, CC), 0.03, 600.0)
    _store.save_entries([low])
    assert _auto.select(2048, 2048, 2048, 0, dtype="float16")[0] == _auto.top(CC, dtype="float16")
    # ... unless it won a race against the top rung as the top rung's template is now (the tuner's "raced")
    from cumm.runtime.render import template_hash

    raced = {top: template_hash(get_spec(top)), "wgmma": template_hash(get_spec("wgmma"))}
    _store.save_entries([dict(low, raced=raced)])
    _auto.clear_cache()
    assert _auto.select(2048, 2048, 2048, 0, dtype="float16")[:2] == ("wgmma", low["config"])
    _store.save_entries([dict(low, raced={**raced, top: "0" * 16})])  # raced an older template of the top rung
    _auto.clear_cache()
    assert _auto.select(2048, 2048, 2048, 0, dtype="float16")[0] == top
    # ... then the top rung runs as it does when named: with its own nearest entry (here the bf16 one at 4096^3)
    low = _store.make_entry(GPU, CC, "wgmma", "bfloat16", (2048,) * 3, get_spec("wgmma").resolve(None, CC), 0.03, 600.0)
    _store.save_entries([low])
    assert _auto.named(top, 2048, 2048, 2048, 0, dtype="bfloat16") == cfg
    assert _auto.select(2048, 2048, 2048, 0, dtype="bfloat16") == (top, cfg, None)
    assert _auto.select(2048, 2048, 2048, 0, {"STAGES": 3}, dtype="bfloat16") == (top, {"STAGES": 3}, None)


def test_half_auto_without_entries_fills_the_gpu_with_named_tiles(cache, fake_device):
    """No tuned entry (e.g. an H100): wgmma_ws keeps its 128 x 256 tiles when they give at least half of the 132
    multiprocessors a block, else the named configuration with the largest tiles that does (the H200 tuner's
    winners: 64 x 64 at 128 x 4096 x 4096, 128 x 128 at 512 x 4096 x 4096 and 8192 x 256 x 8192)."""
    top = _auto.top(CC, dtype="bfloat16")
    spec = get_spec(top)
    one64, one128 = dict(spec.configs["one_warpgroup_64x64"]), dict(spec.configs["one_warpgroup_128x128"])

    def ran(M, N, count=1):
        cfg = _auto.named(top, M, N, 4096, 0, count, dtype="bfloat16")
        return spec.resolve(cfg, CC)

    assert _auto.named(top, 4096, 4096, 4096, 0, dtype="bfloat16") is None  # 512 tiles
    assert _auto.named(top, 1024, 3000, 4096, 0, dtype="bfloat16") is None  # 96 tiles: stream-K shares the wave
    assert ran(512, 4096) == spec.resolve(one128, CC)  # 64 default tiles -> 128
    assert ran(8192, 256) == spec.resolve(one128, CC)
    assert ran(128, 4096) == spec.resolve(one64, CC)  # 16 -> 32 (still under 66) -> 128
    assert ran(4096, 128) == spec.resolve(one64, CC)
    assert ran(64, 64) == spec.resolve(one64, CC)  # nothing fills: the most tiles
    # rounds x area: 128 tiles of 192 x 64 in one round against 96 of 128 x 128 (24 of 32 rows, 3/4 the area)
    tall = spec.resolve(dict(spec.configs["one_warpgroup_192x64"]), CC)
    assert ran(3072, 512) == tall and ran(768, 1536) == tall and ran(384, 3072) == tall
    assert ran(2048, 1024) == spec.resolve(one128, CC)  # 128 tiles either way: the larger
    assert ran(256, 6144) == spec.resolve(one128, CC)  # 64 x 64 in three rounds is not weighed against it
    assert ran(128, 4096, count=8) is not None and _auto.named(top, 1024, 4096, 4096, 0, dtype="bfloat16") is None
    assert _auto.select(512, 4096, 4096, 0, dtype="bfloat16")[:2] == (
        top,
        _auto.named(top, 512, 4096, 4096, 0, dtype="bfloat16"),
    )


def test_half_auto_without_entries_shares_deep_slabs_out(cache, fake_device):
    """A deep product that is not thin keeps the default tiles, their k-slabs shared out over every block by
    stream-K, rather than small tiles: 64 x 64 from K = 8192, 128 x 64 and 192 x 64 (under half the defaults'
    area) from K = 16384, 128 x 128 from 32768; small tiles still win for a thin product."""
    top = _auto.top(CC, dtype="bfloat16")
    spec = get_spec(top)
    one64, one128 = dict(spec.configs["one_warpgroup_64x64"]), dict(spec.configs["one_warpgroup_128x128"])
    quarter = dict(spec.configs["one_warpgroup_128x64"])

    def ran(M, N, K):
        return _auto.named(top, M, N, K, 0, dtype="bfloat16")

    for M, N, K in ((1024, 1024, 16384), (256, 4096, 16384), (512, 2048, 16384), (512, 1024, 8192)):
        assert ran(M, N, K) is None, (M, N, K)
    assert ran(512, 1024, 4096) == one64  # 64 x 64 fills, not yet deep enough to share out
    for M, N, K in ((1024, 1024, 8192), (2048, 512, 8192), (256, 4096, 8192), (1024, 1024, 4096), (768, 1024, 4096)):
        assert ran(M, N, K) == quarter, (M, N, K)
    assert ran(512, 4096, 8192) == one128 and ran(256, 5000, 8192) == one128
    assert ran(8192, 256, 16384) == one128  # half the defaults' area: shared out only from K = 32768
    assert ran(8192, 256, 32768) is None
    assert ran(128, 8192, 16384) == quarter  # thin: bound by B's traffic
    assert _auto.select(1024, 1024, 16384, 0, dtype="bfloat16")[:2] == (top, None)
    assert _auto.select(1024, 1024, 8192, 0, dtype="bfloat16")[:2] == (top, quarter)


def test_a_half_batch_takes_the_entry_of_one_product_as_tall_as_the_batch(cache, fake_device):
    """A batch of 32 products of 2048 x 128 x 2048 looks up 65536 x 128 x 2048 (wgmma_ws walks the batch's tiles as
    one run); an entry of a rung without batches (the cluster split-K branch) is passed over for the top rung."""
    from cumm.runtime.render import supports_batch, template_hash

    top = _auto.top(CC, dtype="bfloat16")
    assert supports_batch(get_spec(top)) and get_spec(top).schedules_batch
    tall = get_spec(top).resolve(dict(BM=256, BN=128, STAGES=3, GM=4, SK=0), CC)
    _store.save_entries([_store.make_entry(GPU, CC, top, "bfloat16", (65536, 128, 2048), tall, 0.08, 425.0)])
    assert _auto.select(2048, 128, 2048, 0, batched=32, dtype="bfloat16") == (top, tall, 1)
    assert _auto.named(top, 2048, 128, 2048, 0, 32, dtype="bfloat16") == tall
    # a caller's configuration runs as given
    assert _auto.select(2048, 128, 2048, 0, batched=32, config={"BN": 64}, dtype="bfloat16") == (top, {"BN": 64}, 1)
    br = "wgmma_cluster_split_k"
    bcfg = get_spec(br).resolve(dict(WGS=1, NUM_THREADS=256, STAGES=4), CC)
    raced = {br: template_hash(get_spec(br)), top: template_hash(get_spec(top))}
    win = _store.make_entry(GPU, CC, br, "bfloat16", (8192, 1024, 8192), bcfg, 0.2, 700.0)
    _store.save_entries([dict(win, raced=raced)])
    _auto.clear_cache()
    kernel, cfg, splits = _auto.select(1024, 1024, 8192, 0, batched=8, dtype="bfloat16")
    assert (kernel, splits) == (top, 1) and supports_batch(get_spec(kernel))


def test_a_branch_win_serves_nearby_shapes_while_its_grid_fits_one_wave(cache, fake_device):
    """The cluster split-K branch's entry at 1024 x 1024 x 8192 (128 x 128 tiles, KS = 2: 128 blocks) serves
    1000 x 1000 x 8000; at 2048 x 2048 x 8192, the nearest bucket too, it would launch 512 blocks: the top rung's
    own entry runs there."""
    from cumm.runtime.render import template_hash

    br, top = "wgmma_cluster_split_k", _auto.top(CC, dtype="bfloat16")
    bcfg = get_spec(br).resolve(dict(WGS=1, NUM_THREADS=256, STAGES=4), CC)
    tcfg = get_spec(top).resolve(None, CC)
    shape = (1024, 1024, 8192)
    raced = {br: template_hash(get_spec(br)), top: template_hash(get_spec(top))}
    win = _store.make_entry(GPU, CC, br, "bfloat16", shape, bcfg, 0.034, 507.0)
    lose = _store.make_entry(GPU, CC, top, "bfloat16", shape, tcfg, 0.037, 467.0)
    _store.save_entries([dict(win, raced=raced), lose])
    assert _auto.select(1024, 1024, 8192, 0, dtype="bfloat16")[:2] == (br, bcfg)
    assert _auto.select(1000, 1000, 8000, 0, dtype="bfloat16")[:2] == (br, bcfg)
    assert _auto.select(2048, 2048, 8192, 0, dtype="bfloat16")[:2] == (top, tcfg)
    assert _auto.select(2048, 1024, 8192, 0, dtype="bfloat16")[:2] == (top, tcfg)  # 256 blocks of the branch


def test_a_few_tile_entry_serves_nearby_shapes_while_its_grid_fits_one_wave(cache, fake_device):
    """The H200's entry at 512 x 4096 x 4096 (one warpgroup's 128 x 128 tiles: 128 of them, one wave) serves
    500 x 4000 x 4000 (128 tiles); at 600 x 4000 x 4000 (160) and 1024 x 4096 x 4096 (256 tiles, the nearest entry
    still) the heuristic runs instead: the default tiles. An entry tuned for many waves serves nearby shapes as
    before."""
    top = _auto.top(CC, dtype="bfloat16")
    spec = get_spec(top)
    one128 = spec.resolve(dict(spec.configs["one_warpgroup_128x128"]), CC)
    _store.save_entries([_store.make_entry(GPU, CC, top, "bfloat16", (512, 4096, 4096), one128, 0.03, 570.0)])
    assert _auto.select(512, 4096, 4096, 0, dtype="bfloat16")[:2] == (top, one128)
    assert _auto.select(500, 4000, 4000, 0, dtype="bfloat16")[:2] == (top, one128)
    assert _auto.select(600, 4000, 4000, 0, dtype="bfloat16")[:2] == (top, None)
    assert _auto.named(top, 512, 4096, 4096, 0, dtype="bfloat16") == one128
    assert _auto.select(1024, 4096, 4096, 0, dtype="bfloat16")[:2] == (top, None)
    assert _auto.named(top, 1024, 4096, 4096, 0, dtype="bfloat16") is None
    many = spec.resolve(dict(GM=4), CC)  # 4096^3: 512 tiles, four waves
    _store.save_entries([_store.make_entry(GPU, CC, top, "bfloat16", (4096, 4096, 4096), many, 0.2, 690.0)])
    _auto.clear_cache()
    assert _auto.select(2048, 4096, 4096, 0, dtype="bfloat16")[:2] == (top, many)


@pytest.mark.parametrize("winner", ["wgmma_ws", "wgmma"])
def test_a_race_saves_every_rung_s_best_and_marks_the_winner(winner, cache, fake_device, monkeypatch, capsys):
    """tune_shapes without a GPU (tune faked): each raced rung's best is saved, only the winner carries "raced";
    auto runs the winner (a lower rung too: it raced the top rung as it is now), a named rung its own entry."""
    rungs = ["mma_swizzled_pipeline", "wgmma", "wgmma_ws"]
    speeds = {"mma_swizzled_pipeline": 300.0, "wgmma": 600.0, "wgmma_ws": 650.0}
    speeds[winner] = 700.0
    cfgs = {k: get_spec(k).resolve(None, CC) for k in rungs}
    cfgs["wgmma"] = get_spec("wgmma").resolve(dict(BM=256, BN=128), CC)

    def fake_tune(kernel, M, N, K, dtype="float32", **_):
        ms = 2 * M * N * K / (speeds[kernel] * 1e9)
        e = _store.make_entry(GPU, CC, kernel, dtype, (M, N, K), cfgs[kernel], ms, speeds[kernel])
        return _tune.TuneResult(
            kernel, (M, N, K), dtype, GPU, CC, dict(cfgs[kernel]), ms, speeds[kernel], 1e-3, [], {}, entry=e
        )

    monkeypatch.setattr(_tune, "gpu_unavailable", lambda: None)
    monkeypatch.setattr(_tune, "top_rungs", lambda cc=None, dtype="float32": rungs)
    monkeypatch.setattr(_tune, "tune", fake_tune)
    assert _tune.tune_shapes(None, [(4096, 4096, 4096)], False, None, dtype="bfloat16") == 0
    entries = list(json.loads((cache / "tuned.json").read_text())["entries"].values())
    assert sorted(e["kernel"] for e in entries) == sorted(rungs)
    (win,) = [e for e in entries if "raced" in e]
    assert win["kernel"] == winner and set(win["raced"]) == set(rungs)
    assert _auto.select(4096, 4096, 4096, 0, dtype="bfloat16")[:2] == (winner, cfgs[winner])
    for k in rungs:
        assert _auto.named(k, 4096, 4096, 4096, 0, dtype="bfloat16") == cfgs[k]
        assert _auto.named(k, 4000, 4000, 4000, 0, dtype="bfloat16") == cfgs[k]  # the same bucket
    assert f"4096x4096x4096  {winner}" in capsys.readouterr().out


def test_standard_shapes():
    assert len(set(_tune.STANDARD_SHAPES)) == len(_tune.STANDARD_SHAPES) >= 8
    for s in [(1024,) * 3, (2048,) * 3, (4096,) * 3, (8192,) * 3, (512,) * 3, (8192, 8192, 256)]:
        assert s in _tune.STANDARD_SHAPES


def test_plan_command_runs_without_a_gpu(capsys):
    argv = ["tune", "--plan", "--no-compile", "--kernel", "warptile", "--max-configs", "3", "--shape", "1024x1024x1024"]
    assert _cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "warptile 1024x1024x1024: 3 candidates" in out


def test_plan_races_the_branch_only_where_tiles_are_few(capsys):
    argv = ["tune", "--plan", "--no-compile", "--dtype", "bf16", "--max-configs", "1"]
    assert _cli.main([*argv, "--shape", "1024x1024x8192", "--shape", "4096x4096x4096"]) == 0
    out = capsys.readouterr().out
    assert "wgmma_cluster_split_k 1024x1024x8192: 1 candidates" in out
    assert "wgmma_ws 4096x4096x4096: 1 candidates" in out and "wgmma_cluster_split_k 4096x4096x4096" not in out


def test_tune_takes_a_suites_shapes_as_the_table_looks_them_up(capsys, tmp_path):
    """`cumm tune --suite`: each shape a suite times, once, a batch as one product that many times as tall (the key
    half batches are looked up by; q @ k^T's transposed B under the same key); an unknown suite is the parser's
    error naming it."""
    from cumm.tools.suite import load

    llm = load("llm").tuned_shapes()
    assert len(llm) == len(set(llm)) and (131072, 128, 4096) in llm and (131072, 4096, 128) in llm
    doc = {
        "name": "two",
        "description": "two shapes",
        "shapes": [
            {"name": "a", "category": "odd", "M": 1000, "N": 3000, "K": 500},
            {"name": "pv", "category": "attention", "M": 256, "N": 128, "K": 256, "batch": 8},
        ],
    }
    f = tmp_path / "two.json"
    f.write_text(json.dumps(doc))
    argv = ["tune", "--plan", "--no-compile", "--dtype", "bf16", "--rungs", "wgmma_ws", "--max-configs", "1"]
    assert _cli.main([*argv, "--suite", str(f)]) == 0
    out = capsys.readouterr().out
    assert "wgmma_ws 1000x3000x500: 1 candidates" in out and "wgmma_ws 2048x128x256: 1 candidates" in out
    with pytest.raises(SystemExit) as e:
        _cli.main([*argv, "--suite", "no_such_suite"])
    assert e.value.code == 2 and "unknown suite 'no_such_suite'" in capsys.readouterr().err


# ----------------------------------------------------------------------------------------------------------
# GPU
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.gpu
def test_tune_returns_a_verified_config_and_persists_it(cache):
    import cupy

    res = _tune.tune("warptile", 512, 512, 512, max_configs=4, progress=False)
    assert res.rel_err < _tune.TOLERANCES["float32"]
    get_spec("warptile").check(res.config)
    assert res.ms > 0 and res.tflops > 0
    statuses = [r["status"] for r in res.table]
    assert statuses.count("best") == 1
    assert sum(1 for r in res.table if r.get("ms") is not None and "split_k" not in r) <= 4
    # 16 tiles of 128 x 128 on a GPU of more multiprocessors: the split race ran, and its winner (or none) is kept
    splits = [r for r in res.table if "split_k" in r]
    assert splits and res.split_k == (res.table[[r["status"] for r in res.table].index("best")].get("split_k", 1))
    assert res.entry.get("split_k", 1) == res.split_k
    assert res.elapsed_s < 180
    assert Path(res.saved_to) == cache / "tuned.json"
    gpu, cc = _auto.device_key(0)
    got = _store.lookup(gpu, cc, "float32", 512, 512, 512)
    assert got["config"] == res.config and got["kernel"] == "warptile"
    assert _auto.named("warptile", 512, 512, 512, cupy.cuda.runtime.getDevice()) == res.config
    # kernel="auto" uses a bucket once it raced the top rung: here an entry of it, slower.
    top = _auto.top(cc)
    if top != "warptile":
        cfg = get_spec(top).resolve(None, cc)
        _store.save_entries([_store.make_entry(gpu, cc, top, "float32", (512,) * 3, cfg, 2 * res.ms, res.tflops / 2)])
    # kernel="auto" now runs the tuned configuration, correctly.
    _auto.clear_cache()
    assert _auto.select(512, 512, 512, cupy.cuda.runtime.getDevice()) == ("warptile", res.config, res.split_k)
    import cumm

    a = cupy.random.standard_normal((512, 512), dtype=cupy.float32)
    b = cupy.random.standard_normal((512, 512), dtype=cupy.float32)
    ref = a.astype(cupy.float64) @ b.astype(cupy.float64)
    c = cumm.matmul(a, b)
    assert float(cupy.linalg.norm(c - ref) / cupy.linalg.norm(ref)) < 1e-5


def test_split_candidates():
    """The split race's candidates: a rung that splits K, tiles that leave multiprocessors idle, slices that keep the
    blocks under four per multiprocessor and every slice two K steps deep."""
    spec = get_spec("tf32x3")
    small = spec.resolve(dict(spec.configs["small"]), CC)  # 64 x 64 tiles, BK = 32
    wide = spec.resolve(dict(small, BN=128, WN=64), CC)
    rows = [
        dict(config=small, ms=2.0, status="timed"),
        dict(config=wide, ms=1.0, status="timed"),
        dict(config=small, ms=0.5, split_k=4, status="timed"),  # (a split row: not raced again)
        dict(config=dict(wide, STAGES=2), ms=0.2, status="failed"),  # (timed, then found wrong)
    ]
    got = _search.split_candidates(spec, rows, 64, 4096, 14336, 132)
    # 32 tiles of 64 x 128: up to 16 slices (528 blocks); 64 of 64 x 64: up to 8
    assert got[:6] == [(wide, s) for s in (2, 3, 4, 6, 8, 16)] and got[6:] == [(small, s) for s in (2, 3, 4, 6, 8)]
    # one tile (64 x 64 x 4096): every slice count of SPLITS, the deepest 64 slices of two BK = 32 steps
    assert [s for _, s in _search.split_candidates(spec, rows[:1], 64, 64, 4096, 132)] == list(_search.SPLITS)
    # 64 tiles of 64 x 64 at 512 x 512: up to 8 slices on 132 multiprocessors (512 blocks), 6 on 100 (384)
    assert {s for c, s in _search.split_candidates(spec, rows[:1], 512, 512, 4096, 132)} == {2, 3, 4, 6, 8}
    assert {s for c, s in _search.split_candidates(spec, rows[:1], 512, 512, 4096, 100)} == {2, 3, 4, 6}
    assert {s for c, s in _search.split_candidates(spec, rows[:1], 512, 512, 256, 132)} == {2, 3, 4}  # K / 64 slices
    assert _search.split_candidates(spec, rows[:1], 4096, 4096, 4096, 132) == []  # 4096 tiles fill the GPU
    assert _search.split_candidates(get_spec("wgmma_tf32x3"), rows, 64, 4096, 14336, 132) == []  # no split-K


@pytest.mark.gpu
def test_tune_races_split_k_and_auto_runs_it(cache):
    """A few-row, deep FP32 product: the split race times tf32x3's tiles with K in slices; auto then runs the
    tuned entry's split, correctly."""
    import cupy

    res = _tune.tune("tf32x3", 64, 2048, 8192, max_configs=2, progress=False)
    assert any("split_k" in r for r in res.table)
    assert res.entry.get("split_k", 1) == res.split_k and res.rel_err < _tune.TOLERANCES["float32"]
    dev = cupy.cuda.runtime.getDevice()
    # the entry as the winner of a race against the top rung (auto trusts a lower rung's win only then)
    top = _auto.top(_auto.device_key(dev)[1])
    raced = {"tf32x3": res.entry["template_hash"], top: template_hash(get_spec(top))}
    _store.save_entries([{**res.entry, "raced": raced}])
    _auto.clear_cache()
    assert _auto.select(64, 2048, 8192, dev) == ("tf32x3", res.config, res.split_k)
    rng = cupy.random.default_rng(1)
    a = rng.standard_normal((64, 8192), dtype=cupy.float32)
    b = rng.standard_normal((8192, 2048), dtype=cupy.float32)
    ref = a.astype(cupy.float64) @ b.astype(cupy.float64)
    c = cumm.matmul(a, b, kernel="tf32x3", config=res.config, split_k=res.split_k)
    assert float(cupy.linalg.norm(c - ref) / cupy.linalg.norm(ref)) < 1e-5


@pytest.mark.gpu
def test_tune_a_half_rung_and_auto_runs_it(cache):
    import cupy

    if int(cupy.cuda.Device().compute_capability) < 90:
        pytest.skip("wgmma_ws runs on compute capability 9.0")
    res = _tune.tune("wgmma_ws", 512, 512, 512, dtype="bfloat16", max_configs=2, progress=False)
    assert res.rel_err < _bench.TOLERANCES["bfloat16"] and res.entry["dtype"] == "bfloat16"
    dev = cupy.cuda.runtime.getDevice()
    _auto.clear_cache()
    assert _auto.select(512, 512, 512, dev, dtype="bfloat16") == ("wgmma_ws", res.config, None)
    a = cupy.random.standard_normal((512, 512), dtype=cupy.float32).astype(np_dtype("bfloat16"))
    ref = a.astype(cupy.float64) @ a.astype(cupy.float64)
    got = cumm.matmul(a, a)
    assert float(cupy.linalg.norm(got.astype(cupy.float32).astype(cupy.float64) - ref) / cupy.linalg.norm(ref)) < 1e-2


@pytest.mark.gpu
def test_the_rungs_race_side_by_side_and_the_entries_keep_the_race(cache, capsys):
    """cumm tune over two rungs: each rung's best is raced again (tune_race), the saved entries hold the race's
    times, and the winner, marked with what it raced, is the faster of them there."""
    import cupy

    from cumm.tools.tune_race import race

    if int(cupy.cuda.Device().compute_capability) < 90:
        pytest.skip("wgmma_ws and wgmma_pingpong run on compute capability 9.0")
    got = [
        _tune.tune(k, 512, 1024, 512, dtype="bfloat16", max_configs=1, save=False, progress=False)
        for k in ("wgmma_ws", "wgmma_pingpong")
    ]
    ms = race(got, rounds=2)
    assert len(ms) == 2 and all(math.isfinite(t) and t > 0 for t in ms)
    assert _tune.tune_shapes(None, [(512, 1024, 512)], False, 1, "bfloat16", ["wgmma_ws", "wgmma_pingpong"]) == 0
    _store.clear_caches()
    entries = [
        e
        for e in _store.tuned_entries(*_auto.device_key(cupy.cuda.runtime.getDevice()), "bfloat16")
        if e["shape"] == [512, 1024, 512]
    ]
    assert {e["kernel"] for e in entries} == {"wgmma_ws", "wgmma_pingpong"}
    win = [e for e in entries if e.get("raced")]
    assert len(win) == 1 and win[0]["tflops"] == max(e["tflops"] for e in entries)
    for e in entries:
        assert e["tflops"] == pytest.approx(2.0 * 512 * 1024 * 512 / (e["ms"] * 1e9))


@pytest.mark.gpu
def test_an_entry_keeps_the_seed_as_written_and_matmul_runs_what_was_timed(cache, rng):
    """At 3000 x 5000 x 2000 (bf16: B's rows start off 32 bytes) the first seed timed is the defaults with clusters
    of two (the pitch rule); the entry keeps the defaults, auto runs them with CL = 2 there as timed, and a batch
    looked up at the same shape runs CL = 1 (clusters of two do not run batches)."""
    import cupy

    from cumm.api.decision import decision

    if int(cupy.cuda.Device().compute_capability) < 90:
        pytest.skip("wgmma_ws runs on compute capability 9.0")
    res = _tune.tune("wgmma_ws", 3000, 5000, 2000, dtype="bfloat16", max_configs=1, progress=False)
    assert res.config["CL"] == 2 and res.entry["config"]["CL"] == 1
    _auto.clear_cache()
    bf16 = np_dtype("bfloat16")
    a = rng.standard_normal((3000, 2000), dtype="float32").astype(bf16)
    b = rng.standard_normal((2000, 5000), dtype="float32").astype(bf16)
    for x, y in ((a, b), (a.reshape(2, 1500, 2000), cupy.stack([b, b]))):
        out = cupy.full((*x.shape[:-1], 5000), math.nan, dtype=bf16)
        cumm.matmul(x, y, out=out)
        ran = decision(x, y, out)
        assert ran.startswith("wgmma_ws") and ("CL=2" in ran) == (x.ndim == 2), ran
        f64 = [v.astype(cupy.float32).astype(cupy.float64) for v in (x, y, out)]
        ref = f64[0] @ f64[1]
        assert float(cupy.linalg.norm(f64[2] - ref) / cupy.linalg.norm(ref)) < 1e-2


@pytest.mark.gpu
def test_tune_unaligned_shape_without_saving(cache):
    res = _tune.tune("double_buffer", 130, 66, 70, max_configs=2, save=False, progress=False)
    assert res.rel_err < _tune.TOLERANCES["float32"] and res.saved_to is None
    assert not (cache / "tuned.json").exists()


@pytest.mark.gpu
def test_cli_writes_both_tables(cache, tmp_path, monkeypatch, capsys):
    out = tmp_path / "out" / "h200.json"
    monkeypatch.setenv("CUMM_TUNE_OUT", str(out))
    assert _tune.tune_shapes(None, [(256, 256, 256)], False, 2) == 0
    doc = json.loads(out.read_text())
    entries = list(doc["entries"].values())
    rungs = _tune.raced_at(_tune.top_rungs(), (256, 256, 256), 132)  # (skinny races at M <= 64 only)
    assert sorted(e["kernel"] for e in entries) == sorted(rungs)  # each raced rung's best
    win = max(entries, key=lambda e: e["tflops"])
    assert set(win["raced"]) == set(rungs)  # what it beat; the others carry no "raced"
    assert all("raced" not in e for e in entries if e is not win)
    assert json.loads((cache / "tuned.json").read_text())["entries"] == doc["entries"]
    assert "256x256x256" in capsys.readouterr().out
    import cupy

    dev = cupy.cuda.runtime.getDevice()
    _auto.clear_cache()
    assert _auto.select(256, 256, 256, dev)[:2] == (win["kernel"], win["config"])  # auto: the winner
    for e in entries:  # a named rung: its own entry for this shape
        assert _auto.named(e["kernel"], 256, 256, 256, dev) == e["config"]


@pytest.mark.skipif(GPU_SKIP_REASON is None, reason="a GPU is present: this checks the messages without one")
def test_tune_without_a_gpu_says_so_and_saves_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CUMM_CACHE_DIR", str(tmp_path))
    with pytest.raises(_tune.TuneError, match=r"no CUDA GPU available.*nothing was saved"):
        cumm.tune("warptile", 64, 64, 64)
    assert _cli.main(["tune", "--kernel", "warptile", "--shape", "64x64x64"]) == 1
    err = capsys.readouterr().err
    assert "cumm tune: no CUDA GPU available" in err and "nothing was saved" in err and "saved to" not in err
    assert not list(tmp_path.iterdir()), "nothing may be written without a GPU"


def test_named_rungs_fit_the_gpu(fake_device, monkeypatch):
    """A named rung without a config: its tuned entry, else its small tiles when the default grid would leave more
    than half the multiprocessors idle (H200 measurements in cumm/plan/auto.py), else its defaults. (fake_device
    forgets the memoized answers afterwards: a later test on a real GPU must not meet the fake entry below.)"""
    monkeypatch.setattr(_auto, "_lookup", lambda device_id, b, kernel=None, dtype="float32": None)
    _auto.clear_cache()
    small = _auto.SMALL_TILES
    assert _auto.named("double_buffer", 1024, 1024, 1024, 0) == small["double_buffer"]  # 32 blocks
    assert _auto.named("double_buffer", 2048, 2048, 2048, 0) is None  # 128 blocks
    assert _auto.named("warptile", 1024, 1024, 1024, 0) == small["warptile"]  # 64 blocks
    assert _auto.named("warptile", 2048, 2048, 2048, 0) is None
    assert _auto.named("naive", 64, 64, 64, 0) is None  # no small configuration
    assert _auto.named("warptile", 1024, 1024, 1024, 0, count=4) is None  # a batch of 4: 256 blocks
    # a persistent rung: auto's rule (small tiles while its default tiles are fewer than the multiprocessors)
    assert _auto.named("wgmma_tf32x3", 1280, 1280, 1280, 0) == small["wgmma_tf32x3"]  # 100 tiles
    assert _auto.named("wgmma_tf32x3", 1280, 1280, 1280, 0, count=2) is None  # 200 tiles
    assert _auto.named("wgmma_tf32x3", 1280, 1280, 1280, 0) == _auto.select(1280, 1280, 1280, 0)[1]
    tuned = {"BM": 64, "BN": 128}
    monkeypatch.setattr(_auto, "_lookup", lambda device_id, b, kernel=None, dtype="float32": (kernel, tuned, 1))
    _auto.clear_cache()
    assert _auto.named("warptile", 1024, 1024, 1024, 0) == tuned
