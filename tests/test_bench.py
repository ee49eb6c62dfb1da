"""The benchmark's GPU-free parts, fed with fake results: parsing, rows, tables, JSON, TF32 refusal, plot, beta;
and, at the end, a few small GPU tests (``gpu`` marker) of the beta != 0 benchmark."""

from __future__ import annotations

import json
import math
import sys

import pytest

from cumm.tools import bench as _bench
from cumm.tools.bench import BenchError, make_row

DEVICE = {"device": "NVIDIA H200", "cc": "9.0", "cupy": "14.2.0", "cuda": "13.0"}


def fake_results() -> list[dict]:
    shape = (4096, 4096, 4096)
    base_ms = 2.75
    base = make_row("cublas", shape, ms=base_ms, rel_err=2e-7, runs=20)
    base["cublas_tflops"], base["ratio"] = base["tflops"], 1.0
    cb = base["tflops"]
    return [
        base,
        make_row("naive", shape, ms=310.0, rel_err=3e-7, runs=6, cublas_tflops=cb),
        make_row("warptile", shape, ms=3.1, rel_err=2.5e-7, runs=20, cublas_tflops=cb),
        make_row("smem", shape, ms=None, rel_err=0.37, cublas_tflops=cb),  # wrong result
        make_row(
            "vectorized", shape, ms=None, rel_err=None, cublas_tflops=cb, error="SharedMemoryError: needs 70000 bytes"
        ),
        make_row("double_buffer", (1024, 512, 256), ms=0.01, rel_err=1e-7, runs=20, cublas_tflops=20.0),
    ]


# --- parsing -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, shape", [("4096x4096x4096", (4096, 4096, 4096)), ("8X16x32", (8, 16, 32)), (" 1x2x3 ", (1, 2, 3))]
)
def test_parse_shape(text, shape):
    assert _bench.parse_shape(text) == shape


@pytest.mark.parametrize(
    "text, words",
    [
        ("4096x4096", "MxNxK"),
        ("4096", "MxNxK"),
        ("ax1x1", "integers"),
        ("0x4x4", "positive"),
        ("-1x4x4", "positive"),
        ("1x2x3x4", "MxNxK"),
        ("", "MxNxK"),
    ],
)
def test_parse_shape_rejects(text, words):
    with pytest.raises(ValueError, match=words) as e:
        _bench.parse_shape(text)
    assert repr(text) in str(e.value)


def test_shape_str():
    assert _bench.shape_str((4096, 1024, 512)) == "4096x1024x512"


# --- TF32 refusal ------------------------------------------------------------------------------------


@pytest.mark.parametrize("var", _bench.TF32_VARS)
@pytest.mark.parametrize("value", ["1", "2", " 1", "yes", "true"])
def test_tf32_env_refused(monkeypatch, var, value):
    for v in _bench.TF32_VARS:
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setenv(var, value)
    with pytest.raises(BenchError, match=var) as e:
        _bench.check_tf32()
    assert "TF32" in str(e.value)


@pytest.mark.parametrize("value", [None, "", "0", "00"])
def test_tf32_env_allowed(monkeypatch, value):
    for v in _bench.TF32_VARS:
        if value is None:
            monkeypatch.delenv(v, raising=False)
        else:
            monkeypatch.setenv(v, value)
    _bench.check_tf32()


def test_tf32_check_on_a_given_mapping():
    _bench.check_tf32({})
    with pytest.raises(BenchError, match="NVIDIA_TF32_OVERRIDE"):
        _bench.check_tf32({"NVIDIA_TF32_OVERRIDE": "1"})


def test_run_refuses_tf32_before_touching_the_gpu(monkeypatch):
    monkeypatch.setenv("CUPY_TF32", "1")
    monkeypatch.setattr(_bench, "gpu_unavailable", lambda: pytest.fail("GPU touched before the TF32 check"))
    with pytest.raises(BenchError, match="CUPY_TF32"):
        _bench.run(["naive"], [(64, 64, 64)])


def test_run_without_gpu_raises_bench_error(monkeypatch):
    for v in _bench.TF32_VARS:
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setattr(_bench, "gpu_unavailable", lambda: "no CUDA GPU available (fake)")
    with pytest.raises(BenchError, match="no CUDA GPU available"):
        _bench.run(["naive"], [(64, 64, 64)])


# --- rows, ratio, budget -----------------------------------------------------------------------------


def test_tflops():
    assert _bench.tflops(1000, 1000, 1000, 1.0) == pytest.approx(2.0)  # 2e9 flop in 1 ms
    assert _bench.tflops(4096, 4096, 4096, 2.75) == pytest.approx(2 * 4096**3 / 2.75e-3 / 1e12)


def test_row_ratio_is_against_the_same_runs_cublas():
    row = make_row("warptile", (4096, 4096, 4096), ms=4.0, rel_err=1e-6, runs=20, cublas_tflops=50.0)
    assert row["status"] == "ok"
    assert row["tflops"] == pytest.approx(2 * 4096**3 / 4e-3 / 1e12)
    assert row["ratio"] == pytest.approx(row["tflops"] / 50.0)
    assert row["runs"] == 20
    assert set(row) >= {"kernel", "M", "N", "K", "ms", "tflops", "cublas_tflops", "ratio", "rel_err", "status", "runs"}


@pytest.mark.parametrize("rel_err", [1e-4, 0.5, math.nan, math.inf])
def test_row_fails_without_timing(rel_err):
    row = make_row("smem", (64, 64, 64), ms=1.0, rel_err=rel_err, runs=20, cublas_tflops=10.0)
    assert row["status"] == "FAIL"
    assert row["ms"] is None and row["tflops"] is None and row["ratio"] is None and row["runs"] == 0
    assert row["error"]
    if not math.isfinite(rel_err):
        assert row["rel_err"] is None  # strict JSON has no NaN


def test_row_with_error_fails():
    row = make_row("vectorized", (64, 64, 64), ms=None, rel_err=None, error="ConfigError: too many threads")
    assert row["status"] == "FAIL" and row["error"].startswith("ConfigError")


def test_row_without_baseline_has_no_ratio():
    row = make_row("naive", (64, 64, 64), ms=1.0, rel_err=1e-7, runs=3)
    assert row["status"] == "ok" and row["ratio"] is None


@pytest.mark.parametrize(
    "est_ms, repeat, expect",
    [
        (0.05, 20, 20),  # fast: all requested runs
        (500.0, 20, 4),  # 2 s budget / 0.5 s
        (5000.0, 20, 3),  # naive at 8192: never below 3
        (5000.0, 2, 2),  # an explicit smaller repeat wins
        (0.0, 20, 20),
    ],
)
def test_planned_runs(est_ms, repeat, expect):
    assert _bench.planned_runs(est_ms, repeat, budget_s=2.0) == expect


def test_input_sets_exceed_twice_l2():
    l2 = 60 * 2**20
    op = 4 * 2 * 1024 * 1024  # A and B at 1024^3
    n = _bench.n_input_sets(op, op * 3 // 2, l2, free_bytes=100 * 2**30)
    assert n * op > 2 * l2 and (n - 1) * op <= 2 * l2
    big = 4 * 2 * 8192 * 8192
    assert _bench.n_input_sets(big, big * 3 // 2, l2, free_bytes=100 * 2**30) == 2
    assert _bench.n_input_sets(op, op * 3 // 2, l2, free_bytes=op * 4) == 2  # capped by memory, but >= 2


# --- table -------------------------------------------------------------------------------------------


def test_table_plain():
    text = _bench.format_table(fake_results())
    lines = text.splitlines()
    header = lines[0]
    for col in ("kernel", "shape", "ms", "TFLOP/s", "% of cuBLAS", "rel. error"):
        assert col in header
    body = lines[2:8]
    assert len({len(line) for line in lines[:2]}) == 1  # header and rule align
    warp = next(line for line in body if line.startswith("warptile"))
    assert "3.100" in warp and "4096x4096x4096" in warp and "%" in warp
    pct = 100 * 2.75 / 3.1
    assert f"{pct:.1f}%" in warp
    smem = next(line for line in body if line.startswith("smem"))
    assert "FAIL" in smem and "3.7e-01" in smem and "%" not in smem
    vec = next(line for line in body if line.startswith("vectorized"))
    assert "FAIL" in vec
    assert any(line.startswith("FAIL vectorized 4096x4096x4096: SharedMemoryError") for line in lines)
    assert any(line.startswith("FAIL smem") and "relative error" in line for line in lines)
    assert "1024x512x256" in text


def test_table_columns_align():
    lines = _bench.format_table(fake_results()).splitlines()[:8]
    # right-aligned numbers: the ms column ends at the same place on every line
    end = lines[0].index("ms") + 2
    for line in lines[2:]:
        assert line[end - 1] != " ", line


def test_table_markdown():
    lines = _bench.format_table(fake_results(), markdown=True).splitlines()
    assert lines[0].startswith("| kernel") and lines[0].endswith("|")
    assert set(lines[1]) <= set("|-:") and lines[1].count("|") == len(_bench.COLUMNS) + 1
    assert all(line.count("|") == len(_bench.COLUMNS) + 1 for line in lines[:8])
    assert len({len(line) for line in lines[:8]}) == 1


def test_table_says_what_ran():
    rows = fake_results()
    rows[2]["ran"] = "warptile BM=64 BN=64"
    text = _bench.format_table(rows)
    assert text.splitlines()[0].split()[-1] == "ran" and "warptile BM=64 BN=64" in text


def test_markdown_report_and_overhead():
    overhead = {"shape": [64, 64, 64], "calls": 2000, "cumm_us": 9.5, "cupy_us": 8.0, "ratio": 9.5 / 8.0}
    doc = _bench.build_report(fake_results(), device=DEVICE, overhead=overhead, command="cumm bench --sizes 4096")
    md = _bench.format_markdown(doc)
    assert "NVIDIA H200" in md and "`cumm bench --sizes 4096`" in md and "| warptile" in md
    line = _bench.format_overhead(overhead)
    assert "9.5 us" in line and "8.0 us" in line and "1.19x" in line and "64x64x64" in line


def test_markdown_names_the_settle_time():
    """A report of a run that settled each call says how long; one without (older JSON) does not claim it."""
    doc = _bench.build_report(fake_results(), device=DEVICE, command="cumm bench", settle_s=0.25)
    assert doc["settle_s"] == 0.25
    assert "each call run alone for 0.25 s before its samples" in _bench.format_markdown(doc)
    old = _bench.build_report(fake_results(), device=DEVICE, command="cumm bench")
    assert "settle_s" not in old and "run alone" not in _bench.format_markdown(old)


@pytest.mark.parametrize("bad", [-0.1, 61, float("nan"), "1"])
def test_run_refuses_a_bad_settle_time(bad):
    with pytest.raises(ValueError, match="settle_s must be a number of seconds from 0 to 60"):
        _bench.run(["naive"], [(8, 8, 8)], settle_s=bad)


# --- JSON --------------------------------------------------------------------------------------------


def test_json_schema(tmp_path):
    overhead = {"shape": [64, 64, 64], "calls": 2000, "cumm_us": 9.5, "cupy_us": 8.0, "ratio": 1.19}
    doc = _bench.build_report(fake_results(), device=DEVICE, overhead=overhead, command="cumm bench")
    path = tmp_path / "r.json"
    _bench.write_json(str(path), doc)
    got = json.loads(path.read_text())
    assert {k: got[k] for k in ("device", "cc", "cupy", "cuda", "command")} == {**DEVICE, "command": "cumm bench"}
    assert got["host_overhead"]["cumm_us"] == 9.5
    assert len(got["results"]) == 6
    keys = {"kernel", "M", "N", "K", "ms", "tflops", "cublas_tflops", "ratio", "rel_err", "status", "runs"}
    for r in got["results"]:
        assert keys <= set(r)
        assert r["status"] in ("ok", "FAIL")
        if r["status"] == "FAIL":
            assert r["ms"] is None and r["tflops"] is None
    assert got["results"][0]["kernel"] == "cublas" and got["results"][0]["ratio"] == 1.0


def test_json_without_overhead_and_nan(tmp_path):
    rows = [make_row("naive", (8, 8, 8), ms=1.0, rel_err=math.nan)]
    doc = _bench.build_report(rows, device=DEVICE)
    assert "host_overhead" not in doc and doc["command"] is None
    path = tmp_path / "r.json"
    _bench.write_json(str(path), doc)  # strict JSON: would raise on NaN
    assert json.loads(path.read_text())["results"][0]["rel_err"] is None


# --- plot, progress ----------------------------------------------------------------------------------


def test_plot_writes_png(tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "p.png"
    _bench.plot(fake_results(), str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_names_the_baseline_of_the_dtype(tmp_path):
    assert _bench.baseline_label("float32") == "cuBLAS (FP32)"
    assert _bench.baseline_label("bfloat16") == "cuBLAS (bfloat16, torch.matmul)"
    pytest.importorskip("matplotlib")
    path = tmp_path / "p.png"
    _bench.plot(fake_results(), str(path), baseline=_bench.baseline_label("float16"))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_without_matplotlib_names_the_extra(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # makes `import matplotlib` fail
    with pytest.raises(ImportError, match=r"cumm\[plot\]"):
        _bench.plot(fake_results(), str(tmp_path / "p.png"))


def test_progress_without_tqdm(monkeypatch):
    monkeypatch.setitem(sys.modules, "tqdm", None)
    bar = _bench._progress(10, True)
    bar.update()
    bar.set_postfix_str("x")
    bar.close()


def test_torch_rounds_time_bursts_in_turn(monkeypatch):
    """The FP8 and epilogue benchmarks' timing: per round each name's burst of reps calls fn(0..reps-1) between two
    torch events, names in turn, milliseconds per call (torch faked: none here)."""
    import types

    from cumm.runtime import timing as _timing

    log, clock = [], [0.0]

    class Event:
        def __init__(self, enable_timing=False):
            assert enable_timing
            self.t = None

        def record(self):
            self.t = clock[0]
            log.append("record")

        def synchronize(self):
            log.append("sync")

        def elapsed_time(self, end):
            return end.t - self.t

    fake = types.ModuleType("torch")
    fake.cuda = types.SimpleNamespace(Event=Event)
    monkeypatch.setitem(sys.modules, "torch", fake)

    def call(name, ms):
        def fn(i):
            log.append((name, i))
            clock[0] += ms

        return fn

    times = _timing.torch_rounds_ms({"a": call("a", 2.0), "b": call("b", 5.0)}, rounds=2, reps=3)
    assert times == {"a": [2.0, 2.0], "b": [5.0, 5.0]}
    burst = lambda n: ["record", (n, 0), (n, 1), (n, 2), "record", "sync"]  # noqa: E731
    assert log == burst("a") + burst("b") + burst("a") + burst("b")


def test_hold_runs_the_call_back_to_back_for_the_time_given(monkeypatch):
    """The settle (bench and tuner): calls 0, 1, 2, ... in order, synchronized every few, for about the time given."""
    import time

    import cupy

    from cumm.runtime import timing as _timing

    syncs = []

    class FakeDevice:
        def synchronize(self):
            syncs.append(len(calls))

    monkeypatch.setattr(cupy.cuda, "Device", FakeDevice)
    calls: list[int] = []
    t0 = time.perf_counter()
    _timing.hold(calls.append, 0.05)
    took = time.perf_counter() - t0
    assert 0.05 <= took < 1.0
    assert calls == list(range(len(calls))) and len(calls) >= 4
    assert syncs and syncs[-1] == len(calls) and all(b - a == 4 for a, b in zip([0, *syncs[:-1]], syncs, strict=True))


# --- beta != 0: C = A @ B + beta C (no GPU) -----------------------------------------------------------


@pytest.mark.parametrize("value, want", [(0, 0.0), (0.5, 0.5), (-1, -1.0), (2.5e38, 2.5e38)])
def test_check_beta_accepts_finite_numbers(value, want):
    got = _bench.check_beta(value)
    assert got == want and type(got) is float


@pytest.mark.parametrize(
    "bad, words",
    [
        (math.nan, "finite"),
        (math.inf, "finite"),
        (-math.inf, "finite"),
        (1e39, "float32's range"),
        ("0.5", "real number"),
        (True, "real number"),
        (None, "real number"),
    ],
)
def test_check_beta_rejects(bad, words):
    with pytest.raises(ValueError, match=words) as e:
        _bench.check_beta(bad)
    assert str(e.value).startswith("beta must be")


@pytest.mark.parametrize("bad", [math.inf, math.nan, "1"])
def test_run_and_bench_refuse_a_bad_beta_before_touching_the_gpu(monkeypatch, bad):
    import cumm

    monkeypatch.setattr(_bench, "gpu_unavailable", lambda: pytest.fail("GPU touched before beta was checked"))
    with pytest.raises(ValueError, match="beta must be"):
        _bench.run(["naive"], [(8, 8, 8)], beta=bad)
    with pytest.raises(ValueError, match="beta must be"):
        cumm.bench(kernels=["naive"], sizes=[8], beta=bad)


def test_c0_scale_makes_beta_c0_as_large_as_the_product():
    assert 0.5 * _bench.c0_scale(4096, 0.5) == pytest.approx(64.0)  # A @ B's elements: std sqrt(K)
    assert -2.0 * _bench.c0_scale(33, -2.0, "bfloat16") == pytest.approx(-math.sqrt(33))
    assert _bench.c0_scale(4096, 1e-6, "float16") == 2.0**12  # float16 holds C0 (its largest value is 65504)
    assert _bench.c0_scale(4096, 1e-6, "bfloat16") == pytest.approx(64e6)


@pytest.mark.parametrize("dtype", list(_bench.TOLERANCES))
@pytest.mark.parametrize("K", [33, 8192])
@pytest.mark.parametrize("beta", [1e-3, 0.5, 1.0, -3.0])
def test_a_call_ignoring_beta_is_off_by_more_than_the_tolerance(dtype, K, beta):
    """verify's arithmetic on the host: with C0 from c0_scale, a result of A @ B alone (beta ignored) is off by
    about 1/sqrt(2) of the reference A @ B + beta C0 at any K and beta; a C0 of unit deviation would let it
    pass at deep K (about 1/90 at K = 8192 with beta = 1, under bfloat16's 1.5e-2)."""
    import numpy as np

    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((16, K)), rng.standard_normal((K, 16))
    ab = a @ b
    c0 = rng.standard_normal((16, 16)) * _bench.c0_scale(K, beta, dtype)
    want = ab + beta * c0
    assert np.linalg.norm(ab - want) / np.linalg.norm(want) > 10 * _bench.TOLERANCES[dtype]


def test_report_records_beta():
    doc = _bench.build_report(fake_results(), device=DEVICE, command="cumm bench")
    assert doc["beta"] == 0.0  # always recorded; 0: the plain product
    md = _bench.format_markdown(doc)
    assert "`cupy.matmul`" in md and "beta" not in md and "addmm_" not in md
    doc = _bench.build_report(fake_results(), device=DEVICE, command="cumm bench --beta 0.5", beta=0.5)
    assert doc["beta"] == 0.5
    md = _bench.format_markdown(doc)
    title, _, sentence = md.splitlines()[:3]
    assert title == "# cumm float32 GEMM benchmark, C = A @ B + 0.5 C: NVIDIA H200"
    assert "the product timed is `C = A @ B + beta C` in place with beta = 0.5" in sentence
    assert "`cupy.cublas.gemm` with the same beta, FP32 (no TF32)" in sentence and "`cupy.matmul`" not in sentence
    assert "Command: `cumm bench --beta 0.5`" in md


def test_half_report_with_beta_names_addmm():
    doc = _bench.build_report(fake_results(), device=DEVICE, dtype="bfloat16", beta=-1, command="cumm bench")
    assert doc["beta"] == -1.0 and type(doc["beta"]) is float
    md = _bench.format_markdown(doc)
    assert md.startswith("# cumm bfloat16 GEMM benchmark, C = A @ B - 1 C: NVIDIA H200\n")
    assert "beta = -1 " in md and "`torch.Tensor.addmm_` with the same beta on the same bfloat16 arrays" in md
    assert "torch.matmul" not in md


def test_report_of_older_json_without_beta_is_the_plain_product():
    doc = _bench.build_report(fake_results(), device=DEVICE, command="cumm bench")
    del doc["beta"]
    assert _bench.format_markdown(doc) == _bench.format_markdown({**doc, "beta": 0.0})


def test_report_refuses_a_bad_beta():
    with pytest.raises(ValueError, match="finite"):
        _bench.build_report(fake_results(), device=DEVICE, beta=math.nan)


def test_json_keeps_beta(tmp_path):
    path = tmp_path / "r.json"
    _bench.write_json(str(path), _bench.build_report(fake_results(), device=DEVICE, beta=0.5))
    assert json.loads(path.read_text())["beta"] == 0.5


def test_product_label():
    assert _bench.product_label(0.0) == "C = A @ B"
    assert _bench.product_label(0.5) == "C = A @ B + 0.5 C"
    assert _bench.product_label(-2.0) == "C = A @ B - 2 C"


def test_baseline_label_with_beta():
    assert _bench.baseline_label("float32", 0.0) == "cuBLAS (FP32)"
    assert _bench.baseline_label("float32", 1.0) == "cuBLAS (FP32, beta 1)"
    assert _bench.baseline_label("float16", 0.5) == "cuBLAS (float16, addmm_, beta 0.5)"


# --- beta != 0 on a GPU: small shapes, few runs --------------------------------------------------------

QUICK = dict(repeat=3, settle_s=0.0, progress=False)


@pytest.mark.gpu
def test_bench_with_beta_float32():
    import cumm

    rows = cumm.bench(kernels=["double_buffer"], shapes=[(129, 70, 33)], beta=0.5, **QUICK)
    assert [r["kernel"] for r in rows] == ["cublas", "double_buffer"]
    assert all(r["status"] == "ok" and r["tflops"] > 0 for r in rows), rows
    assert rows[1]["ran"].startswith("double_buffer")


@pytest.mark.gpu
def test_bench_with_beta_bfloat16(sm90):
    pytest.importorskip("torch")  # the half baseline is torch.Tensor.addmm_
    import cumm

    shapes = [(129, 70, 33), (256, 256, 128)]  # unaligned rows (wgmma_ws hands them to its fallback), aligned
    rows = cumm.bench(kernels=["wgmma_ws"], shapes=shapes, dtype="bfloat16", beta=0.5, **QUICK)
    assert [(r["kernel"], r["M"]) for r in rows] == [(k, s[0]) for s in shapes for k in ("cublas", "wgmma_ws")]
    assert all(r["status"] == "ok" and r["tflops"] > 0 for r in rows), rows
    assert rows[3]["ran"].startswith("wgmma_ws")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_verify_fails_a_call_that_ignores_beta(dtype):
    """At deep K (where a C0 of unit size would hide it under bfloat16's tolerance) a call writing A @ B only
    fails; the call with beta passes; with beta = 0 the NaN fill still catches a call that writes nothing."""
    import cupy

    import cumm

    rng = cupy.random.default_rng()
    sets = _bench.input_sets(rng, 128, 128, 8192, n_sets=1, dtype=dtype, beta=1.0)
    ref, ref_norm = _bench.reference(*sets[0][:2])
    tol = _bench.TOLERANCES[dtype]
    right = _bench.kernel_call("auto", dtype, beta=1.0)
    assert _bench.verify(right, sets[0], ref, ref_norm, beta=1.0) < tol
    ignores_beta = _bench.kernel_call("auto", dtype)  # C = A @ B
    assert _bench.verify(ignores_beta, sets[0], ref, ref_norm, beta=1.0) > 10 * tol
    reads_c = _bench.verify(lambda a, b, c: cumm.matmul(a, b, out=c, beta=1.0), sets[0], ref, ref_norm)
    assert not reads_c < tol  # beta = 0's check: a call that reads C reads NaN
    assert not _bench.verify(lambda a, b, c: None, sets[0], ref, ref_norm) < tol  # nothing written: NaN


@pytest.mark.gpu
def test_bench_fails_a_kernel_that_ignores_beta(monkeypatch):
    import cumm

    real = _bench.kernel_call

    def ignoring_beta(kernel, dtype="float32", beta=0.0):
        return real(kernel, dtype, beta) if kernel == _bench.CUBLAS else real(kernel, dtype)

    monkeypatch.setattr(_bench, "kernel_call", ignoring_beta)
    rows = cumm.bench(kernels=["double_buffer"], shapes=[(129, 70, 33)], beta=0.5, **QUICK)
    assert rows[0]["status"] == "ok"
    assert rows[1]["status"] == "FAIL" and rows[1]["ms"] is None and "relative error" in rows[1]["error"]
