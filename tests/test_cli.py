"""The command line without a GPU: help, argument errors, the no-GPU message, wiring with fake results."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

import cumm
from cumm.tools import bench as _bench
from cumm.tools import cli as _cli

from .test_bench import DEVICE, fake_results

ROOT = Path(__file__).resolve().parents[1]


def run_module(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "cumm", *args], capture_output=True, text=True, env=full_env, cwd=ROOT, timeout=120
    )


@pytest.mark.parametrize("args", [["--help"], ["bench", "--help"], ["tune", "--help"]])
def test_help(capsys, args):
    with pytest.raises(SystemExit) as e:
        _cli.main(args)
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "usage:" in out
    if args == ["bench", "--help"]:
        opts = ("--kernels", "--sizes", "--shapes", "--repeat", "--settle", "--json", "--plot", "--markdown")
        for opt in (*opts, "--overhead"):
            assert opt in out


def test_python_m_cumm_help():
    for args in (["--help"], ["bench", "--help"]):
        p = run_module(*args)
        assert p.returncode == 0, p.stderr
        assert "bench" in p.stdout and "Traceback" not in p.stderr


@pytest.mark.parametrize(
    "args, words",
    [
        (["bench", "--kernels", "fastest"], ["--kernels", "'fastest'", "naive", "double_buffer", "auto"]),
        (["bench", "--kernels", "naive,bogus"], ["'bogus'", "warptile"]),
        (["bench", "--shapes", "4096x4096"], ["--shapes", "'4096x4096'", "MxNxK"]),
        (["bench", "--shapes", "1024x1024x1024,axbxc"], ["'axbxc'", "integers"]),
        (["bench", "--sizes", "1024,big"], ["--sizes", "'1024,big'"]),
        (["bench", "--sizes", "0"], ["--sizes", "positive"]),
        (["bench", "--repeat", "0"], ["--repeat", "positive"]),
        (["bench", "--settle", "-1"], ["--settle", "seconds from 0 to 60"]),
        (["bench", "--settle", "soon"], ["--settle", "seconds from 0 to 60"]),
        (["tune", "--kernel", "bogus", "--shape", "64x64x64"], ["--kernel", "'bogus'", "warptile"]),
        (["tune", "--kernel", "warptile", "--shape", "64x64"], ["--shape", "MxNxK"]),
        (["tune"], ["--kernel", "--shape", "--standard"]),
        (["tune", "--kernel", "warptile"], ["--shape"]),
        (["frobnicate"], ["bench", "tune"]),
        ([], ["bench", "tune"]),
    ],
)
def test_bad_arguments_exit_2(capsys, args, words):
    with pytest.raises(SystemExit) as e:
        _cli.main(args)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "error:" in err
    for w in words:
        assert w in err


def test_bench_without_gpu_is_a_clear_message(monkeypatch, capsys):
    for v in _bench.TF32_VARS:
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setattr(_bench, "gpu_unavailable", lambda: "no CUDA GPU available (fake: no driver)")
    assert _cli.main(["bench", "--sizes", "64"]) == 1
    cap = capsys.readouterr()
    assert "no CUDA GPU available" in cap.err and "NVIDIA GPU" in cap.err
    assert cap.out == ""


def test_python_m_cumm_bench_without_gpu():
    if _bench.gpu_unavailable() is None:
        pytest.skip("a GPU is present; this checks the message on a machine without one")
    p = run_module("bench", "--sizes", "64", env={"CUPY_TF32": "0"})
    assert p.returncode == 1
    assert "no CUDA GPU available" in p.stderr and "Traceback" not in p.stderr


def test_bench_refuses_tf32(monkeypatch, capsys):
    monkeypatch.setenv("NVIDIA_TF32_OVERRIDE", "1")
    assert _cli.main(["bench"]) == 1
    err = capsys.readouterr().err
    assert "NVIDIA_TF32_OVERRIDE" in err and "TF32" in err


def test_bench_plot_without_matplotlib_fails_early(monkeypatch, capsys, tmp_path):
    for v in _bench.TF32_VARS:
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setattr(_bench, "gpu_unavailable", lambda: pytest.fail("should stop before the GPU"))
    assert _cli.main(["bench", "--plot", str(tmp_path / "p.png")]) == 1
    assert "cumm[plot]" in capsys.readouterr().err


@pytest.fixture
def fake_gpu(monkeypatch):
    """Stand-ins for the GPU side of the benchmark; records what run() was asked for."""
    for v in _bench.TF32_VARS:
        monkeypatch.delenv(v, raising=False)
    calls = {}

    def run(kernels, shapes, *, repeat, dtype="float32", settle_s=_bench.SETTLE_S, beta=0.0):
        calls.update(kernels=kernels, shapes=shapes, repeat=repeat, dtype=dtype, settle_s=settle_s, beta=beta)
        return [r for r in fake_results() if r["status"] == "ok"]

    monkeypatch.setattr(_bench, "gpu_unavailable", lambda: None)
    monkeypatch.setattr(_bench, "run", run)
    monkeypatch.setattr(_bench, "device_info", lambda: dict(DEVICE))
    monkeypatch.setattr(
        _bench,
        "host_overhead",
        lambda: {"shape": [64, 64, 64], "calls": 2000, "cumm_us": 9.0, "cupy_us": 8.0, "ratio": 1.125},
    )
    return calls


def test_bench_wiring(fake_gpu, capsys, tmp_path):
    js, md = tmp_path / "r.json", tmp_path / "r.md"
    rc = _cli.main(
        [
            "bench",
            "--kernels",
            "naive,warptile,auto",
            "--sizes",
            "4096",
            "--shapes",
            "1024x512x256",
            "--repeat",
            "30",
            "--settle",
            "0.5",
            "--json",
            str(js),
            "--markdown",
            str(md),
            "--overhead",
        ]
    )
    assert rc == 0
    assert fake_gpu == {
        "kernels": ["naive", "warptile", "auto"],
        "shapes": [(4096, 4096, 4096), (1024, 512, 256)],
        "repeat": 30,
        "dtype": "float32",
        "settle_s": 0.5,
        "beta": 0.0,
    }
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("kernel") and "warptile" in out and "host overhead" in out
    doc = json.loads(js.read_text())
    assert doc["device"] == "NVIDIA H200" and doc["host_overhead"]["ratio"] == 1.125
    assert doc["command"].startswith("cumm bench --kernels naive,warptile,auto")
    assert "| warptile" in md.read_text() and "run alone for 0.5 s" in md.read_text() and doc["settle_s"] == 0.5


def test_bench_default_sizes(fake_gpu):
    assert _cli.main(["bench"]) == 0
    assert fake_gpu["kernels"] is None  # all of the ladder
    assert fake_gpu["shapes"] == [(s, s, s) for s in (1024, 2048, 4096)]
    assert fake_gpu["settle_s"] == _bench.SETTLE_S
    assert fake_gpu["beta"] == 0.0 and type(fake_gpu["beta"]) is float


def test_bench_beta_wiring(fake_gpu, tmp_path):
    """--beta reaches run() and the report; the command line in the JSON and the markdown regenerates the table."""
    js, md = tmp_path / "r.json", tmp_path / "r.md"
    args = ["bench", "--dtype", "bf16", "--beta", "0.5", "--kernels", "wgmma_ws,auto", "--sizes", "2048"]
    assert _cli.main([*args, "--json", str(js), "--markdown", str(md)]) == 0
    assert fake_gpu["beta"] == 0.5 and fake_gpu["dtype"] == "bfloat16"
    doc = json.loads(js.read_text())
    assert doc["beta"] == 0.5
    assert doc["command"] == f"cumm {' '.join(args)} --json {js} --markdown {md}"
    text = md.read_text()
    assert f"Command: `{doc['command']}`" in text
    assert "`C = A @ B + beta C` in place with beta = 0.5" in text
    assert "`torch.Tensor.addmm_` with the same beta" in text


def test_bench_beta_plot_names_the_product(fake_gpu, monkeypatch, tmp_path):
    drawn = {}
    monkeypatch.setattr(_bench, "require_matplotlib", lambda: None)
    monkeypatch.setattr(_bench, "plot", lambda results, path, **kw: drawn.update(kw))
    assert _cli.main(["bench", "--beta", "-1", "--plot", str(tmp_path / "p.png")]) == 0
    assert drawn == {
        "title": "cumm vs cuBLAS (float32, C = A @ B - 1 C), NVIDIA H200",
        "baseline": "cuBLAS (FP32, beta -1)",
    }


@pytest.mark.parametrize("value, want", [("1", 1.0), ("-0.5", -0.5), ("2e-3", 0.002), ("0", 0.0)])
def test_bench_beta_values(fake_gpu, value, want):
    assert _cli.main(["bench", f"--beta={value}"]) == 0
    assert fake_gpu["beta"] == want


@pytest.mark.parametrize(
    "value, words",
    [
        ("nan", ["finite", "got nan", "'nan'"]),
        ("inf", ["finite", "got inf"]),
        ("-inf", ["finite", "got -inf"]),
        ("1e39", ["float32's range"]),
        ("abc", ["expected a finite number such as 0.5 or 1", "'abc'"]),
        ("", ["expected a finite number"]),
    ],
)
def test_bench_rejects_a_bad_beta(capsys, monkeypatch, value, words):
    monkeypatch.setattr(_bench, "run", lambda *a, **k: pytest.fail("ran with a bad --beta"))
    with pytest.raises(SystemExit) as e:
        _cli.main(["bench", f"--beta={value}"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "error: argument --beta:" in err
    for w in words:
        assert w in err


def test_bench_help_names_beta(capsys):
    with pytest.raises(SystemExit):
        _cli.main(["bench", "--help"])
    out = capsys.readouterr().out
    assert "--beta BETA" in out and "addmm_" in out and "cupy.cublas.gemm" in out


def test_bench_exit_1_when_a_kernel_fails(fake_gpu, monkeypatch, capsys):
    monkeypatch.setattr(_bench, "run", lambda kernels, shapes, **kw: fake_results())
    assert _cli.main(["bench"]) == 1
    cap = capsys.readouterr()
    assert "FAIL" in cap.out and "FAIL" in cap.err


@pytest.fixture
def fake_tune(monkeypatch):
    calls = []
    mod = types.ModuleType("cumm.tools.tune")

    def tune_shapes(kernel, shapes, standard, max_configs, dtype="float32", rungs=None, transposed_b=()):
        calls.append(
            (kernel, shapes, standard, max_configs)
            + ((dtype,) if dtype != "float32" else ())
            + ((tuple(rungs),) if rungs else ())
            + ((sorted(transposed_b),) if transposed_b else ())
        )
        return 0

    mod.tune_shapes = tune_shapes
    monkeypatch.setitem(sys.modules, "cumm.tools.tune", mod)
    monkeypatch.setattr(cumm.tools, "tune", mod)
    return calls


def test_tune_kernel_and_shape(fake_tune):
    rc = _cli.main(
        ["tune", "--kernel", "warptile", "--shape", "4096x4096x4096", "--shape", "1024x512x256", "--max-configs", "7"]
    )
    assert rc == 0
    assert fake_tune == [("warptile", [(4096, 4096, 4096), (1024, 512, 256)], False, 7)]


def test_tune_chosen_rungs(fake_tune):
    assert _cli.main(["tune", "--shape", "64x4096x14336", "--rungs", "tf32x3, wgmma_tf32x3"]) == 0
    assert fake_tune == [(None, [(64, 4096, 14336)], False, None, ("tf32x3", "wgmma_tf32x3"))]


def test_tune_standard(fake_tune):
    assert _cli.main(["tune", "--standard"]) == 0
    assert fake_tune == [(None, [], True, None)]


def test_tune_a_half_dtype(fake_tune):
    assert _cli.main(["tune", "--standard", "--dtype", "bf16"]) == 0
    assert _cli.main(["tune", "--kernel", "wgmma_ws", "--shape", "512x512x512", "--dtype", "fp16"]) == 0
    assert fake_tune == [(None, [], True, None, "bfloat16"), ("wgmma_ws", [(512, 512, 512)], False, None, "float16")]


def test_tune_shapes_without_a_kernel_race_the_top_rungs(fake_tune):
    assert _cli.main(["tune", "--shape", "512x4096x4096", "--dtype", "bf16"]) == 0
    assert fake_tune == [(None, [(512, 4096, 4096)], False, None, "bfloat16")]


def test_tune_a_suite_times_its_transposed_b_so(fake_tune):
    """`tune --suite llm`: the suite's shapes as the table looks them up, and its q @ k^T keys to time with B^T."""
    assert _cli.main(["tune", "--suite", "llm", "--dtype", "bf16"]) == 0
    ((kernel, shapes, standard, n, dtype, transposed),) = fake_tune
    assert (kernel, standard, n, dtype) == (None, False, None, "bfloat16") and len(shapes) == 50
    assert transposed == [(65536, 2048, 128), (131072, 512, 128), (131072, 4096, 128)]


def test_tune_exit_code_passes_through(fake_tune, monkeypatch):
    monkeypatch.setattr(sys.modules["cumm.tools.tune"], "tune_shapes", lambda **kw: 3)
    assert _cli.main(["tune", "--standard"]) == 3
