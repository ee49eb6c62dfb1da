"""``cumm check`` / ``cumm bench`` with ``glu=`` (issue 52: verify and race a gated MLP's fused product): on the CPU
the arguments, the errors before any GPU is touched (matmul's own messages), the float64 GLU reference against numpy,
the glu= standard cases, the table's baseline; on the GPU cumm.check(glu=) on a few shapes and the standard set, a
wrong reference caught, and a tiny cumm.bench(glu=) beside torch's unfused gated MLP."""

from __future__ import annotations

import math

import numpy as np
import pytest

import cumm
from cumm.plan import routes as RT
from cumm.tools import bench as _bench
from cumm.tools import check as _check
from cumm.tools import cli as _cli
from cumm.tools import epiref
from cumm.tools.cli_args import build_parser

ACTS = ["silu", "gelu", "gelu_tanh", "relu"]


def _no_gpu(*_a, **_k):
    pytest.fail("the GPU was asked for before the arguments were refused")


@pytest.fixture
def cpu_only(monkeypatch):
    """Anything that asks whether a GPU is there fails the test: errors must come first."""
    from cumm.runtime import timing

    for mod in (timing, _bench):
        monkeypatch.setattr(mod, "gpu_unavailable", _no_gpu)
    for v in _bench.TF32_VARS:
        monkeypatch.delenv(v, raising=False)


# ---- CPU: the float64 reference ---------------------------------------------------------------------------------


def _numpy_act(name, x):
    """Each activation element by element with math's functions, apart from epiref's vectorised ones."""
    f = {
        "silu": lambda t: t / (1.0 + math.exp(-t)),
        "gelu": lambda t: 0.5 * t * (1.0 + math.erf(t / math.sqrt(2.0))),
        "gelu_tanh": lambda t: 0.5 * t * (1.0 + math.tanh(math.sqrt(2.0 / math.pi) * (t + 0.044715 * t**3))),
        "relu": lambda t: max(t, 0.0),
    }[name]
    return np.array([[f(float(t)) for t in r] for r in x])


@pytest.mark.parametrize("act", ACTS)
def test_glu_reference_against_numpy(act):
    rng = np.random.default_rng(7)
    x, w1, w3 = rng.standard_normal((13, 11)), rng.standard_normal((11, 24)), rng.standard_normal((11, 24))
    alpha = -0.5
    got = epiref.glu_pair(act, alpha * (x @ w1), alpha * (x @ w3))
    want = _numpy_act(act, alpha * (x @ w1)) * (alpha * (x @ w3))
    assert got.dtype == np.float64 and got.shape == (13, 24)
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13)


def test_glu_reference_is_the_interleaved_products_pairing():
    """act(x @ w1) * (x @ w3) is what glu= makes of the 2N-column product over glu_weight's layout (blocks of 8)."""
    rng = np.random.default_rng(3)
    K, N = 9, 32
    x, w1, w3 = rng.standard_normal((5, K)), rng.standard_normal((K, N)), rng.standard_normal((K, N))
    w13 = np.stack([w1.reshape(K, N // 8, 8), w3.reshape(K, N // 8, 8)], axis=2).reshape(K, 2 * N)
    p = (x @ w13).reshape(5, N // 8, 2, 8)
    paired = epiref.glu_pair("silu", p[:, :, 0].reshape(5, N), p[:, :, 1].reshape(5, N))
    np.testing.assert_allclose(paired, epiref.glu_pair("silu", x @ w1, x @ w3), rtol=1e-12)


# ---- CPU: errors before any GPU ---------------------------------------------------------------------------------


def test_check_glu_messages_are_matmuls():
    with pytest.raises(ValueError, match=r"glu='swish'; it must be one of \['gelu', 'gelu_tanh', 'relu', 'silu'\]"):
        epiref.check_glu("swish", ["bfloat16"])
    with pytest.raises(ValueError, match=r"glu= runs on the rungs .* this is a float32 product: pass dtype 'bfloat16'"):
        epiref.check_glu("silu", ["float32"])
    with pytest.raises(ValueError, match=r"kernel 'mma' cannot run glu= .*the rungs that do: \['wgmma', 'wgmma_ws'"):
        epiref.check_glu("silu", ["bfloat16"], ["auto", "mma"])
    with pytest.raises(ValueError, match=r"shape 37x20x13 with glu= \(N = 20 is C's width, B has 2N = 40 columns\): "):
        epiref.check_glu("silu", ["float16"], ["wgmma_ws"], [(37, 24, 13), (37, 20, 13)])
    with pytest.raises(ValueError, match="b has 40 columns, not a multiple of 16; make b with cumm.glu_weight"):
        epiref.check_glu("silu", ["float16"], None, [(37, 20, 13)])
    epiref.check_glu("gelu_tanh", ["bfloat16", "float16"], ["auto", *RT.glu_rungs()], [(1, 8, 1), (4097, 264, 72)])
    epiref.check_glu(None, ["float32"], ["mma"], [(1, 1, 1)])  # no glu: nothing to refuse
    # the same rules as matmul's own (one definition each)
    assert RT.glu_rungs() == ["wgmma", "wgmma_ws", "wgmma_pingpong"]
    with pytest.raises(ValueError, match="this is a float32 product on 90"):
        RT.glu_route("double_buffer", True, "float32", 90, False)


def test_cumm_check_refuses_before_the_gpu(cpu_only):
    with pytest.raises(ValueError, match="kernel 'warptile' cannot run glu="):
        cumm.check("warptile", glu="silu")
    with pytest.raises(ValueError, match="kernel 'mma' cannot run glu="):
        cumm.check("mma", glu="silu", shapes=[(64, 64, 64)])
    with pytest.raises(ValueError, match="this is a float32 product"):
        cumm.check("wgmma_ws", glu="silu", dtypes=["float32"])
    with pytest.raises(ValueError, match="not a multiple of 16"):
        cumm.check("wgmma_pingpong", glu="silu", shapes=[(64, 12, 64)])
    with pytest.raises(ValueError, match="glu='tanh'"):
        cumm.check("wgmma_ws", glu="tanh")


def test_cumm_bench_refuses_before_the_gpu(cpu_only):
    with pytest.raises(ValueError, match="this is a float32 product"):
        cumm.bench(glu="silu")  # (the default dtype is float32)
    with pytest.raises(ValueError, match="kernel 'mma' cannot run glu="):
        cumm.bench(["mma"], dtype="bfloat16", glu="silu")
    with pytest.raises(ValueError, match=r"shape 256x100x64 with glu= .*not a multiple of 16"):
        cumm.bench(shapes=[(256, 100, 64)], dtype="float16", glu="relu")
    with pytest.raises(ValueError, match="the unfused baseline has no beta"):
        cumm.bench(dtype="bfloat16", glu="silu", beta=1.0)
    with pytest.raises(ValueError, match="glu='swish'"):
        cumm.bench(dtype="bfloat16", glu="swish")


def test_glu_standard_cases():
    cases = _check.standard_cases(glu=True, transposed=True)
    plain = _check.standard_cases(transposed=True)
    assert [c.name for c in cases] == [c.name for c in plain]
    for c, p in zip(cases, plain, strict=True):
        assert c.N % 8 == 0 and p.N <= c.N < p.N + 8 and (c.M, c.K, c.layout, c.batch) == (p.M, p.K, p.layout, p.batch)
    assert cases[0].shape == (1, 8, 1)
    assert _check.standard_cases([(5, 12, 3)], glu=True)[0].shape == (5, 12, 3)  # given shapes are kept (and refused)


# ---- CPU: the command line --------------------------------------------------------------------------------------


def test_cli_parses_glu():
    a = build_parser().parse_args(["bench", "--dtype", "bf16", "--glu", "silu", "--shapes", "4096x1024x512"])
    assert (a.glu, a.dtype, a.shapes) == ("silu", "bfloat16", [(4096, 1024, 512)])
    a = build_parser().parse_args(["check", "--kernel", "wgmma_ws", "--glu", "gelu_tanh", "--activation", "relu"])
    assert (a.glu, a.activation) == ("gelu_tanh", "relu")
    assert _cli._epilogue_args(a) == {"glu": "gelu_tanh", "activation": "relu"}
    for cmd in (["bench"], ["check", "--kernel", "wgmma_ws"]):
        with pytest.raises(SystemExit):
            build_parser().parse_args([*cmd, "--glu", "swish"])


def test_cli_activation_names_are_the_epilogues():
    """cli_args keeps its own copy (no CuPy at argument parsing): the same names, in ACTIVATIONS' order."""
    from cumm.plan.epilogue import ACTIVATIONS
    from cumm.tools.cli_args import ACTIVATION_NAMES

    assert ACTIVATION_NAMES == tuple(ACTIVATIONS)


@pytest.mark.parametrize("command", ["bench", "check"])
def test_cli_help_says_n_is_the_outputs_width(command, capsys):
    with pytest.raises(SystemExit):
        _cli.main([command, "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "--glu {relu,gelu,gelu_tanh,silu}" in out
    assert ("OUTPUT's columns, so B has 2N" if command == "bench" else "--shapes' N is C's width") in out


@pytest.mark.parametrize(
    "args,words",
    [
        (["check", "--kernel", "mma", "--glu", "silu"], "kernel 'mma' cannot run glu="),
        (["check", "--kernel", "wgmma_ws", "--glu", "silu", "--shapes", "37x20x13"], "not a multiple of 16"),
        (["check", "--kernel", "double_buffer", "--glu", "relu"], "kernel 'double_buffer' cannot run glu="),
        (["bench", "--glu", "silu"], "this is a float32 product: pass dtype 'bfloat16' or 'float16'"),
        (["bench", "--glu", "silu", "--dtype", "bf16", "--kernels", "mma,auto"], "kernel 'mma' cannot run glu="),
        (["bench", "--glu", "silu", "--dtype", "fp16", "--sizes", "100"], "N = 100 is C's width"),
        (["bench", "--glu", "silu", "--dtype", "fp8"], "this is a fp8 product"),
        (["bench", "--glu", "silu", "--dtype", "bf16", "--beta", "0.5"], "the unfused baseline has no beta"),
        (["bench", "--glu", "silu", "--dtype", "bf16", "--grouped"], "--grouped times grouped products"),
    ],
)
def test_cli_glu_errors_before_the_gpu(cpu_only, capsys, args, words):
    assert _cli.main(args) == 1
    err = capsys.readouterr().err
    assert words in err and err.startswith(f"cumm {args[0]}: ")


def test_cli_suite_refuses_glu(capsys):
    with pytest.raises(SystemExit) as e:
        _cli.main(["bench", "--suite", "llm", "--glu", "silu"])
    assert e.value.code == 2 and "drop --glu" in capsys.readouterr().err


def test_cli_bench_glu_wiring(monkeypatch, capsys, tmp_path):
    """--glu reaches cumm.bench's run, the JSON and the markdown; the ratio column names its baseline."""
    for v in _bench.TF32_VARS:
        monkeypatch.delenv(v, raising=False)
    asked = {}

    def run(kernels, shapes, **kw):
        asked.update(kw, kernels=kernels, shapes=shapes)
        base = _bench.make_row(_bench.UNFUSED, shapes[0], ms=2.0, rel_err=3e-3, runs=9, tolerance=1e-2, columns=2048)
        row = _bench.make_row("auto", shapes[0], ms=1.0, rel_err=2e-3, runs=9, tolerance=1e-2, columns=2048)
        for r in (base, row):
            r["cublas_tflops"], r["ratio"] = base["tflops"], r["tflops"] / base["tflops"]
        return [base, row]

    monkeypatch.setattr(_bench, "gpu_unavailable", lambda: None)
    monkeypatch.setattr(_bench, "run", run)
    monkeypatch.setattr(_bench, "device_info", lambda: {"device": "H", "cc": "9.0", "cupy": "x", "cuda": "13.0"})
    js, md = tmp_path / "r.json", tmp_path / "r.md"
    args = ["bench", "--dtype", "bf16", "--glu", "gelu", "--shapes", "512x1024x256", "--json", str(js)]
    assert _cli.main([*args, "--markdown", str(md)]) == 0
    assert asked["glu"] == "gelu" and asked["kernels"] is None and asked["shapes"] == [(512, 1024, 256)]
    out = capsys.readouterr().out
    head = out.splitlines()[0]
    assert "% of unfused" in head and "% of cuBLAS" not in head and "200.0%" in out
    import json

    doc = json.loads(js.read_text())
    assert doc["glu"] == "gelu" and doc["results"][0]["kernel"] == "unfused"
    # TFLOP/s of the 2N-column product: 2 * 512 * 2048 * 256 in 1 ms
    assert doc["results"][1]["tflops"] == pytest.approx(2 * 512 * 2048 * 256 / 1e-3 / 1e12)
    text = md.read_text()
    assert "gated-MLP (glu=gelu)" in text and "baseline `unfused`" in text and "% of unfused" in text


# ---- GPU --------------------------------------------------------------------------------------------------------

GLU_SHAPES = [(1, 8, 1), (37, 24, 13), (129, 136, 64), (301, 264, 259)]


@pytest.mark.gpu
@pytest.mark.parametrize(
    "kernel,act", [("wgmma", "relu"), ("wgmma_ws", "silu"), ("wgmma_ws", "gelu"), ("wgmma_pingpong", "gelu_tanh")]
)
def test_check_glu_on_a_few_shapes(sm90, kernel, act):
    report = cumm.check(kernel, glu=act, shapes=GLU_SHAPES)
    assert report.ok, str(report)
    assert {r.dtype for r in report.rows} == {"bfloat16", "float16"} and len(report.rows) == 2 * len(GLU_SHAPES)


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", ["wgmma_ws", "wgmma_pingpong"])
def test_check_glu_standard_set(sm90, kernel):
    """The standard odd shapes (N rounded up to a multiple of 8): views, alpha and beta, batches, transposed."""
    report = cumm.check(kernel, glu="silu")
    assert report.ok, str(report)
    names = {r.case for r in report.rows}
    assert {"unaligned views", "alpha, beta", "batch of 3", "batch, a broadcast"} <= names


@pytest.mark.gpu
def test_check_glu_with_the_rest_of_the_epilogue(sm90):
    """--activation and an epilogue snippet with its reference after the pair, at C's (row, col); a wrong
    reference is caught."""
    shapes = [(37, 24, 13), (129, 136, 64)]
    assert cumm.check("wgmma_ws", glu="silu", activation="relu", shapes=shapes).ok
    snip = "v = v * 0.5f + 0.01f * (float)col;"
    report = cumm.check("wgmma_pingpong", glu="gelu", epilogue=snip, reference="v * 0.5 + 0.01 * col", shapes=shapes)
    assert report.ok, str(report)
    bad = cumm.check("wgmma_pingpong", glu="gelu", epilogue=snip, reference="v * 0.6 + 0.01 * col", shapes=shapes)
    assert not bad.ok and all(r.verdict == "FAIL" for r in bad.rows)


@pytest.mark.gpu
def test_cli_check_glu(sm90, capsys):
    assert (
        _cli.main(["check", "--kernel", "wgmma_ws,wgmma_pingpong", "--glu", "gelu_tanh", "--shapes", "65x72x40"]) == 0
    )
    out = capsys.readouterr().out
    assert out.count(": ok") == 2


@pytest.mark.gpu
def test_bench_glu_tiny(sm90):
    pytest.importorskip("torch")
    rows = cumm.bench(
        ["wgmma_pingpong", "auto"],
        shapes=[(256, 256, 128), (520, 136, 72)],
        dtype="bfloat16",
        glu="silu",
        repeat=3,
        progress=False,
        settle_s=0.0,
    )
    assert [r["kernel"] for r in rows] == ["unfused", "wgmma_pingpong", "auto"] * 2
    assert all(r["status"] == "ok" for r in rows), rows
    for r in rows:
        assert r["ratio"] > 0 and r["rel_err"] < 1.5e-2
    assert rows[0]["ratio"] == 1.0
    M, N, K = rows[0]["M"], rows[0]["N"], rows[0]["K"]
    assert rows[0]["tflops"] == pytest.approx(2 * M * 2 * N * K / (rows[0]["ms"] * 1e-3) / 1e12)
    text = _bench.format_table(rows)
    assert "% of unfused" in text.splitlines()[0]


@pytest.mark.gpu
def test_bench_glu_default_kernels_and_epilogue(sm90):
    pytest.importorskip("torch")
    rows = cumm.bench(
        shapes=[(128, 64, 64)], dtype="float16", glu="gelu", activation="relu", repeat=2, progress=False, settle_s=0
    )
    assert [r["kernel"] for r in rows] == ["unfused", *RT.glu_rungs(), "auto"]
    assert all(r["status"] == "ok" for r in rows), rows


def test_reference_expression_survives_an_import_from_c():
    """An extension module that imports lazily from C (PyImport_Import, as CuPy did compiling an elementwise kernel
    inside a reference expression on the GPU: KeyError '__import__') looks __import__ up in the eval frame's
    builtins: the reference's scope keeps it."""
    import ctypes

    from cumm.tools import epiref

    imp = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.py_object)(("PyImport_Import", ctypes.pythonapi))
    f = epiref.transform(None, "v(row)")  # the expression calls the C function from its own frame
    assert f(imp, "json", None).__name__ == "json"
