"""The shape suite (``python -m cumm bench --suite``): the shipped file, loading errors, the summary and tables,
the command line's errors and wiring (CPU, with fakes for the GPU side); a GPU smoke test of the runner on two
tiny shapes, one of them batched with a transposed B."""

from __future__ import annotations

import fnmatch
import json
import math
from pathlib import Path

import pytest

from cumm.tools import bench as _bench
from cumm.tools import cli as _cli
from cumm.tools import suite as _suite
from cumm.tools import suite_report as _report

from .test_bench import DEVICE

ROOT = Path(__file__).resolve().parents[1]


def _doc(*shapes: dict) -> dict:
    return {"name": "t", "description": "test", "shapes": list(shapes)}


def _sq(name: str = "a", **kw) -> dict:
    return {"name": name, "category": "square", "M": 64, "N": 64, "K": 64, **kw}


# ---------------------------------------------------------------------------------------------------
# The shipped suite
# ---------------------------------------------------------------------------------------------------


def test_llm_suite_parses_and_covers_every_category():
    s = _suite.load("llm")
    assert s.name == "llm" and s.description
    assert len(s.shapes) >= 30
    cats = {x.category for x in s.shapes}
    assert cats == set(_suite.CATEGORIES), cats ^ set(_suite.CATEGORIES)
    assert "llm" in _suite.available()


def test_llm_suite_has_the_issue_shapes():
    s = _suite.load("llm")
    plain = {(x.M, x.N, x.K) for x in s.shapes if x.batch == 1}
    for n in (1024, 2048, 4096, 8192):
        assert (n, n, n) in plain
    # Llama-3-8B: QKV, output, fused gate/up, down and vocabulary at 16, 128, 512, 2048 and 8192 tokens
    for t in (16, 128, 512, 2048, 8192):
        for N, K in ((6144, 4096), (4096, 4096), (28672, 4096), (4096, 14336), (128256, 4096)):
            assert (t, N, K) in plain, (t, N, K)
    for shape in ((512, 5120, 5120), (64, 64, 4096), (3000, 5000, 2000), (4095, 4095, 4095)):
        assert shape in plain
    assert any(x.M <= 64 and x.category == "decode" for x in s.shapes)
    assert any(x.category == "short_deep" and x.M <= 1024 and x.K >= 4096 for x in s.shapes)
    att = [x for x in s.shapes if x.category == "attention"]
    assert any(x.b_transposed and x.K == 128 for x in att)  # q @ k^T, k^T a view
    assert any(x.N == 128 and not x.b_transposed for x in att)  # p @ v
    assert len({x.name for x in s.shapes}) == len(s.shapes)


def test_every_shipped_suite_is_package_data():
    from .test_packaging import pyproject  # skips where tomllib is missing (Python 3.10)

    globs = pyproject()["tool"]["setuptools"]["package-data"]["cumm"]
    files = list(_suite.SUITES_DIR.glob("*.json"))
    assert files
    for f in files:
        rel = f.relative_to(ROOT / "cumm").as_posix()
        assert any(fnmatch.fnmatch(rel, g) for g in globs), rel


def test_a_suite_file_by_path(tmp_path):
    p = tmp_path / "mine.json"
    p.write_text(json.dumps(_doc(_sq(), {"name": "b", "category": "attention", "M": 8, "N": 8, "K": 4, "batch": 2})))
    s = _suite.load(str(p))
    assert [x.name for x in s.shapes] == ["a", "b"] and s.shapes[1].batch == 2 and s.source == str(p)
    assert s.shapes[1].flop == 2 * 2 * 8 * 8 * 4 and s.shapes[1].label == "2 x 8x8x4"


# ---------------------------------------------------------------------------------------------------
# Loading errors
# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "doc, words",
    [
        ([], ["JSON object"]),
        ({"shapes": []}, ["non-empty list"]),
        (_doc(["a"]), ["shape 0", "expected an object"]),
        (_doc(_sq(extra=1)), ["unknown field", "extra"]),
        (_doc(_sq(name="")), ["'name'", "non-empty"]),
        (_doc(_sq(category="big")), ["unknown category 'big'", "square", "attention"]),
        (_doc(_sq(M=0)), ["M must be a positive integer", "0"]),
        (_doc(_sq(K=2.5)), ["K must be a positive integer"]),
        (_doc(_sq(N=True)), ["N must be a positive integer"]),
        (_doc(_sq(batch=-1)), ["batch must be a positive integer"]),
        (_doc(_sq(b_transposed="yes")), ["b_transposed must be true or false"]),
        (_doc(_sq(N=32)), ["not a 'square' shape", "M = N = K"]),
        (_doc({"name": "d", "category": "decode", "M": 65, "N": 8, "K": 8}), ["decode", "M <= 64"]),
        (_doc({"name": "s", "category": "short_deep", "M": 64, "N": 8, "K": 1024}), ["K >= 4096"]),
        (_doc({"name": "x", "category": "attention", "M": 8, "N": 8, "K": 8}), ["batch > 1"]),
        (_doc({"name": "o", "category": "odd", "M": 128, "N": 256, "K": 128}), ["multiple of 128"]),
        (_doc(_sq(), _sq()), ["unique", "a"]),
    ],
)
def test_bad_suite_documents_say_what_is_wrong(doc, words):
    with pytest.raises(_suite.SuiteError) as e:
        _suite.parse(doc, "s.json")
    for w in words:
        assert w in str(e.value), (w, str(e.value))


def test_unknown_or_unreadable_suites(tmp_path):
    with pytest.raises(_suite.SuiteError, match="unknown suite 'nope'; choose from .*llm"):
        _suite.load("nope")
    with pytest.raises(_suite.SuiteError, match="does not exist"):
        _suite.load(str(tmp_path / "missing.json"))
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(_suite.SuiteError, match="not valid JSON"):
        _suite.load(str(bad))
    with pytest.raises(_suite.SuiteError, match="a suite is a name"):
        _suite.load("")


# ---------------------------------------------------------------------------------------------------
# Summary and tables
# ---------------------------------------------------------------------------------------------------


def _row(kernel, shape, cat, ratio, *, status="ok", base=100.0):
    r = _bench.make_row(kernel, (64, 64, 64), ms=1.0, rel_err=1e-3, runs=9, tolerance=1e-2)
    r.update(shape=shape, category=cat, label="64x64x64", cublas_tflops=base, cublas_rel_err=1.1e-3, batch=1)
    if status == "ok":
        r.update(tflops=ratio * base, ratio=ratio)
    else:
        r.update(status="FAIL", tflops=None, ratio=None, ms=None, error="relative error 1 >= 1e-2")
    return r


def fake_suite_results() -> list[dict]:
    rows = []
    for shape, cat, ratio in (("s1", "square", 1.0), ("l1", "llm", 0.5), ("l2", "llm", 2.0), ("d1", "decode", 0.9)):
        rows.append(_row(_bench.CUBLAS, shape, cat, 1.0))
        rows.append(_row("auto", shape, cat, ratio))
    rows.append(_row(_bench.CUBLAS, "o1", "odd", 1.0))
    rows.append(_row("auto", "o1", "odd", 0.0, status="FAIL"))
    return rows


def test_summary_geomean_and_minimum():
    (s,) = _report.summarize(fake_suite_results())
    assert s["kernel"] == "auto" and s["shapes"] == 5 and s["failed"] == 1
    assert s["geomean"] == pytest.approx((1.0 * 0.5 * 2.0 * 0.9) ** 0.25)
    assert s["min"] == 0.5 and s["min_shape"] == "l1" and s["max"] == 2.0
    assert s["categories"]["llm"] == pytest.approx(1.0) and s["categories"]["odd"] is None
    assert _report.geomean([]) is None


def test_table_ends_with_geomean_and_minimum():
    text = _report.format_table(fake_suite_results(), "bfloat16")
    lines = text.splitlines()
    assert lines[0].startswith("shape") and "x cuBLAS" in lines[0] and "cuBLAS error" in lines[0]
    assert "cublas" not in [line.split()[3] for line in lines[2:7]]  # cuBLAS is folded into each row
    assert "FAIL auto o1" in text
    assert lines[-2].startswith("auto bfloat16 vs cuBLAS over 4 shapes, 1 FAIL: geomean 0.974x, minimum 0.500x (l1)")
    assert lines[-1].startswith("  geomean per category: square 1.000x, llm 1.000x, decode 0.900x")
    md = _report.format_table(fake_suite_results(), "bfloat16", markdown=True)
    assert md.startswith("| shape") and "**auto bfloat16 vs cuBLAS" in md


def test_report_and_markdown():
    suite = _suite.parse(_doc(_sq()), "t.json")
    doc = _report.build_report(
        fake_suite_results(), suite, device=DEVICE, dtype="float16", settle_s=0.1, repeat=20, seconds=95.0, command="c"
    )
    assert doc["summary"][0]["min_shape"] == "l1" and doc["suite"]["shapes"] == 1 and doc["dtype"] == "float16"
    json.dumps(doc, allow_nan=False)
    md = _report.format_markdown(doc)
    assert md.startswith("# cumm float16 shape suite `t`: NVIDIA H200") and "took 95 s" in md
    assert "torch.matmul" in md and "Command: `c`" in md and "geomean" in md


def _with_ratios(rows, scale):
    """fake_suite_results with every ok cumm row's ratio (and TFLOP/s) scaled: another run of the same suite."""
    out = []
    for r in rows:
        r = dict(r)
        if r["kernel"] != _bench.CUBLAS and r["status"] == "ok":
            r.update(ratio=r["ratio"] * scale, tflops=r["tflops"] * scale)
        out.append(r)
    return out


def test_runs_combine_to_the_median_ratio():
    base = fake_suite_results()
    runs = [_with_ratios(base, 1.0), _with_ratios(base, 0.9), _with_ratios(base, 1.2)]
    runs[1][1]["rel_err"] = 5e-3  # the worst error of the runs is kept
    runs[2][3]["ran"] = "wgmma_ws BN=64"  # a shape whose pick differed between runs says so
    rows = _report.combine(runs)
    assert [(r["shape"], r["kernel"]) for r in rows] == [(r["shape"], r["kernel"]) for r in base]
    s1 = rows[1]
    assert s1["ratio"] == pytest.approx(1.0) and s1["ratios"] == pytest.approx([1.0, 0.9, 1.2])
    assert s1["tflops"] == pytest.approx(100.0) and s1["rel_err"] == 5e-3
    assert rows[3]["ratio"] == pytest.approx(0.5) and rows[3]["ran"].endswith(" / wgmma_ws BN=64")
    assert rows[-1]["status"] == "FAIL" and rows[-1]["ratio"] is None  # FAILed in every run
    (s,) = _report.summarize(rows)
    assert s["min"] == pytest.approx(0.5) and s["failed"] == 1
    one_fail = [_with_ratios(base, 1.0), _with_ratios(base, 1.0)]
    one_fail[1][1] = dict(one_fail[1][1], status="FAIL", ratio=None, tflops=None, error="relative error 1")
    assert _report.combine(one_fail)[1]["status"] == "FAIL"  # a FAIL in any run FAILs the shape
    assert _report.combine([base])[1] == base[1]
    with pytest.raises(ValueError, match="at least one run"):
        _report.combine([])
    text = _report.format_table(rows, "bfloat16", runs=3)
    assert "per run" in text.splitlines()[0] and "1.000 / 0.900 / 1.200" in text
    suite = _suite.parse(_doc(_sq()), "t.json")
    doc = _report.build_report(rows, suite, device=DEVICE, dtype="bfloat16", settle_s=0.1, repeat=20, runs=3)
    json.dumps(doc, allow_nan=False)
    md = _report.format_markdown(doc)
    assert doc["runs"] == 3 and "ran 3 times" in md and "median of the 3 runs' ratios" in md


@pytest.mark.parametrize(
    "dtype, err, base, fails",
    [
        ("bfloat16", 2.5e-3, 1.2e-3, True),  # twice as wrong as cuBLAS and above the floor
        ("bfloat16", 2.0e-3, 1.2e-3, False),
        ("bfloat16", 1.0e-3, 1.0e-4, False),  # under the floor: both noise
        ("float32", 3e-6, 1e-6, True),
        ("float32", 3e-7, 1e-7, False),
    ],
)
def test_error_against_cublas(dtype, err, base, fails):
    row = _bench.make_row("auto", (8, 8, 8), ms=1.0, rel_err=err, runs=3, tolerance=_suite.TOLERANCE[dtype])
    got = _suite.check_error(row, base, dtype)
    assert (got["status"] == "FAIL") == fails
    if fails:
        assert got["tflops"] is None and "cuBLAS's" in got["error"]


# ---------------------------------------------------------------------------------------------------
# The runner with the GPU faked (wiring: batch counted, cuBLAS's error carried, error check applied)
# ---------------------------------------------------------------------------------------------------


def test_run_wiring_without_a_gpu(monkeypatch):
    import cupy

    suite = _suite.parse(
        _doc(
            _sq("sq"),
            {"name": "att", "category": "attention", "M": 8, "N": 8, "K": 4, "batch": 3, "b_transposed": True},
        )
    )
    seen = []

    def measure(names, sets, ref, ref_norm, shape, timing, dtype, warm_s=0.0, beta=0.0, fused=None):
        seen.append((list(names), shape, timing, dtype, warm_s))
        err = 1e-3 if shape[0] == 64 else 9e-3  # the batched auto result is far worse than cuBLAS's
        return [
            _bench.make_row(_bench.CUBLAS, shape, ms=2.0, rel_err=1e-3, runs=9, tolerance=1.5e-2),
            _bench.make_row("auto", shape, ms=1.0, rel_err=err, runs=9, tolerance=1.5e-2),
        ]

    class Pool:
        def free_all_blocks(self):
            pass

    monkeypatch.setattr(_bench, "gpu_unavailable", lambda: None)
    monkeypatch.setattr(_bench, "check_cupy_compute_type", lambda: None)
    monkeypatch.setattr(_bench, "_measure_shape", measure)
    monkeypatch.setattr(_bench, "product_reference", lambda a, b: (None, 1.0))
    monkeypatch.setattr(_suite, "input_sets", lambda rng, s, dtype: [(None, None, None)])
    monkeypatch.setattr(cupy.random, "default_rng", lambda: None)
    monkeypatch.setattr(cupy, "get_default_memory_pool", lambda: Pool())
    for v in _bench.TF32_VARS:
        monkeypatch.delenv(v, raising=False)
    rows = _suite.run(suite, dtype="bfloat16", repeat=7, settle_s=0.0, progress=False)
    assert [n for n, *_ in seen] == [["cublas", "auto"]] * 2
    assert seen[0][1] == (64, 64, 64) and seen[1][1] == (8, 8, 4) and seen[0][3] == "bfloat16"
    assert seen[0][2] == dict(warmup=_bench.DEFAULT_WARMUP, repeat=7, budget_s=_suite.BUDGET_S, settle_s=0.0)
    assert seen[0][4] == 0.5 and seen[1][4] == 0.0  # only the first shape warms the card
    sq_auto, att_base, att_auto = rows[1], rows[2], rows[3]
    assert sq_auto["ratio"] == pytest.approx(2.0) and sq_auto["cublas_rel_err"] == 1e-3 and sq_auto["shape"] == "sq"
    assert att_base["tflops"] == pytest.approx(3 * _bench.tflops(8, 8, 4, 2.0))  # the batch is counted
    assert att_base["label"] == "3 x 8x8x4 (B^T)" and att_base["category"] == "attention"
    assert att_auto["status"] == "FAIL" and "cuBLAS's" in att_auto["error"]
    with pytest.raises(ValueError, match="unknown kernel 'bogus' for float32"):
        _suite.run(suite, ["bogus"])
    with pytest.raises(ValueError, match="dtype must be one of"):
        _suite.run(suite, dtype="float64")


# ---------------------------------------------------------------------------------------------------
# The command line
# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, words",
    [
        (["--suite", "nosuch"], ["--suite", "unknown suite 'nosuch'", "llm"]),
        (["--suite", "missing/x.json"], ["--suite", "does not exist"]),
        (["--suite", "llm", "--sizes", "64"], ["--suite times its own shapes", "--sizes"]),
        (["--suite", "llm", "--shapes", "8x8x8"], ["--shapes"]),
        (["--suite", "llm", "--grouped"], ["--grouped"]),
        (["--suite", "llm", "--beta", "1"], ["--beta"]),
        (["--suite", "llm", "--activation", "relu"], ["--activation"]),
        (["--suite", "llm", "--plot", "x.png"], ["--plot"]),
        (["--suite", "llm", "--overhead", "--sizes", "8"], ["--overhead", "--sizes"]),
        (["--suite", "llm", "--dtype", "fp64"], ["unknown dtype 'fp64'"]),
        (["--suite", "llm", "--kernels", "bogus"], ["unknown kernel 'bogus'"]),
        (["--suite", "llm", "--runs", "0"], ["--runs"]),
        (["--sizes", "64", "--runs", "3"], ["--runs 3 repeats a shape suite", "--suite"]),
    ],
)
def test_suite_flag_errors_exit_2(capsys, args, words):
    with pytest.raises(SystemExit) as e:
        _cli.main(["bench", *args])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "error:" in err
    for w in words:
        assert w in err, (w, err)


def test_suite_flag_without_gpu_is_a_clear_message(monkeypatch, capsys):
    for v in _bench.TF32_VARS:
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setattr(_bench, "gpu_unavailable", lambda: "no CUDA GPU available (test)")
    assert _cli.main(["bench", "--suite", "llm", "--dtype", "bf16"]) == 1
    assert "no CUDA GPU available (test); the benchmark needs an NVIDIA GPU" in capsys.readouterr().err


def test_suite_flag_bad_file_by_path(tmp_path, capsys):
    p = tmp_path / "s.json"
    p.write_text(json.dumps(_doc(_sq(category="huge"))))
    with pytest.raises(SystemExit) as e:
        _cli.main(["bench", "--suite", str(p)])
    assert e.value.code == 2 and "unknown category 'huge'" in capsys.readouterr().err


def test_suite_flag_wiring(monkeypatch, capsys, tmp_path):
    for v in _bench.TF32_VARS:
        monkeypatch.delenv(v, raising=False)
    calls = {}

    def run(suite, kernels, *, dtype, repeat, settle_s):
        calls.update(
            suite=suite.name, n=len(suite.shapes), kernels=kernels, dtype=dtype, repeat=repeat, settle=settle_s
        )
        return fake_suite_results()

    monkeypatch.setattr(_bench, "gpu_unavailable", lambda: None)
    monkeypatch.setattr(_bench, "device_info", lambda: dict(DEVICE))
    monkeypatch.setattr(_suite, "run", run)
    js, md = tmp_path / "r.json", tmp_path / "r.md"
    rc = _cli.main(["bench", "--suite", "llm", "--dtype", "bf16", "--json", str(js), "--markdown", str(md)])
    assert rc == 1  # the fake results hold a FAIL
    assert calls == dict(
        suite="llm", n=len(_suite.load("llm").shapes), kernels=None, dtype="bfloat16", repeat=20, settle=0.1
    )
    cap = capsys.readouterr()
    assert "geomean 0.974x, minimum 0.500x (l1)" in cap.out and "1 run(s) FAILed" in cap.err
    doc = json.loads(js.read_text())
    assert doc["dtype"] == "bfloat16" and doc["summary"][0]["geomean"] == pytest.approx(0.9**0.25)
    assert doc["command"].startswith("cumm bench --suite llm") and doc["seconds"] >= 0
    calls.clear()
    count = []
    monkeypatch.setattr(_suite, "run", lambda *a, **k: count.append(1) or fake_suite_results())
    assert _cli.main(["bench", "--suite", "llm", "--dtype", "bf16", "--runs", "3", "--json", str(js)]) == 1
    doc = json.loads(js.read_text())
    assert len(count) == 3 and doc["runs"] == 3 and doc["results"][1]["ratios"] == [1.0, 1.0, 1.0]
    assert "per run" in capsys.readouterr().out
    assert "| l1" in md.read_text() and "**auto bfloat16 vs cuBLAS" in md.read_text()
    calls.clear()
    monkeypatch.setattr(_suite, "run", lambda suite, kernels, **kw: calls.update(kernels=kernels) or [])
    assert _cli.main(["bench", "--suite", "llm", "--kernels", "auto,wgmma_tf32x3", "--repeat", "5"]) == 0
    assert calls["kernels"] == ["auto", "wgmma_tf32x3"]


def test_help_names_the_suite(capsys):
    with pytest.raises(SystemExit):
        _cli.main(["bench", "--help"])
    out = capsys.readouterr().out
    assert "--suite" in out and "geomean" in out


# ---------------------------------------------------------------------------------------------------
# GPU: the runner on two tiny shapes, one batched with B a transposed view
# ---------------------------------------------------------------------------------------------------

TINY = _doc(
    {"name": "tiny odd", "category": "odd", "M": 67, "N": 96, "K": 131},
    {"name": "tiny qk", "category": "attention", "M": 64, "N": 80, "K": 128, "batch": 3, "b_transposed": True},
)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_suite_runner_on_the_gpu(dtype):
    if dtype != "float32":
        pytest.importorskip("torch", reason="the half cuBLAS baseline is torch.matmul")
    suite = _suite.parse(TINY, "tiny.json")
    rows = _suite.run(suite, dtype=dtype, repeat=6, settle_s=0.0, progress=False)
    assert [(r["kernel"], r["shape"]) for r in rows] == [
        ("cublas", "tiny odd"),
        ("auto", "tiny odd"),
        ("cublas", "tiny qk"),
        ("auto", "tiny qk"),
    ]
    for r in rows:
        assert r["status"] == "ok", r
        assert r["rel_err"] < _suite.TOLERANCE[dtype] and r["cublas_rel_err"] < _suite.TOLERANCE[dtype]
        assert r["tflops"] > 0 and math.isfinite(r["ratio"]) and r["runs"] >= 3
    assert rows[3]["tflops"] == pytest.approx(3 * _bench.tflops(64, 80, 128, rows[3]["ms"]))
    # auto's decision was recorded (a batched call that copies an operand, B a transposed view here for float32, is
    # not kept in matmul's call cache, so there is no decision to report: "")
    assert rows[1]["ran"] and isinstance(rows[3]["ran"], str)
    (s,) = _report.summarize(rows)
    assert s["failed"] == 0 and math.isfinite(s["geomean"]) and s["min"] <= s["geomean"] <= s["max"]


@pytest.mark.gpu
def test_suite_command_on_the_gpu(tmp_path, capsys):
    p, js, md = tmp_path / "tiny.json", tmp_path / "r.json", tmp_path / "r.md"
    p.write_text(json.dumps(TINY))
    rc = _cli.main(
        ["bench", "--suite", str(p), "--repeat", "6", "--settle", "0", "--json", str(js), "--markdown", str(md)]
    )
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "auto float32 vs cuBLAS over 2 shapes: geomean" in out
    doc = json.loads(js.read_text())
    assert len(doc["results"]) == 4 and doc["summary"][0]["failed"] == 0
    assert "shape suite `t`" in md.read_text()
