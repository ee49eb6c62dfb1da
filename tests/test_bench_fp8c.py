"""cumm bench with an FP8 C (``out_dtype=``, ``--out-dtype``): what it refuses before the GPU, the command line and
the report; on a GPU, the cumm kernels' FP8 C verified (the format's own rounding as the bar) and timed beside
cuBLAS's plain product."""

from __future__ import annotations

import pytest

import cumm
from cumm.core.dtypes import TOLERANCE
from cumm.tools import bench as _bench
from cumm.tools import cli as _cli
from cumm.tools.bench_rows import make_row

E4, E5 = "float8_e4m3fn", "float8_e5m2"


def test_fp8_c_race_refused_before_the_gpu():
    with pytest.raises(ValueError, match=r"beta=1 with an FP8 C: cumm writes fp8\(scale_result \* v\)"):
        cumm.bench(["auto"], shapes=[(64, 64, 64)], dtype="bfloat16", beta=1.0, out_dtype=E4)
    with pytest.raises(ValueError, match=r"an FP8 C with glu=: .* race glu= with a 16-bit C"):
        cumm.bench(["auto"], shapes=[(64, 64, 64)], dtype="bfloat16", glu="silu", out_dtype=E5)
    with pytest.raises(ValueError, match=r"scale_result scales an FP8 C: give out_dtype="):
        cumm.bench(["auto"], shapes=[(64, 64, 64)], dtype="bfloat16", scale_result=2.0)
    with pytest.raises(ValueError, match=r"bfloat16 or float16 product's epilogue; float32 inputs write their own"):
        cumm.bench(["auto"], shapes=[(64, 64, 64)], out_dtype=E4)
    with pytest.raises(ValueError, match=r"out_dtype 'float16' is not an FP8 C cumm writes"):
        cumm.bench(["auto"], shapes=[(64, 64, 64)], dtype="float16", out_dtype="float16")
    with pytest.raises(ValueError, match="scale_result is a positive finite number"):
        cumm.bench(["auto"], shapes=[(64, 64, 64)], dtype="float16", out_dtype=E4, scale_result=-1.0)


def test_cli_bench_fp8_arguments(capsys):
    args = _cli.build_parser().parse_args(["bench", "--dtype", "bf16", "--out-dtype", E5, "--scale-result", "0.5"])
    assert args.out_dtype == E5 and args.scale_result == 0.5
    with pytest.raises(SystemExit):
        _cli.build_parser().parse_args(["bench", "--out-dtype", "fp8"])
    assert _cli.main(["bench", "--dtype", "bf16", "--out-dtype", E4, "--beta", "1"]) == 1
    assert "never reads C; race it with beta 0" in capsys.readouterr().err
    assert _cli.main(["bench", "--out-dtype", E4]) == 1  # float32 inputs (the default dtype)
    assert "float32 inputs write their own dtype" in capsys.readouterr().err
    assert _cli.main(["bench", "--grouped", "--out-dtype", E4]) == 1
    assert "--grouped times grouped products: drop one" in capsys.readouterr().err
    assert _cli.main(["bench", "--dtype", "fp8", "--out-dtype", E4]) == 1
    assert "--dtype fp8 races FP8 inputs: drop one" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        _cli.main(["bench", "--suite", "llm", "--dtype", "bf16", "--out-dtype", E4])
    assert e.value.code == 2 and "--out-dtype" in capsys.readouterr().err


def test_report_says_the_c_is_fp8():
    shape = (256, 256, 256)
    base = make_row("cublas", shape, ms=0.01, rel_err=2e-3, runs=20)
    rows = [base, make_row("auto", shape, ms=0.011, rel_err=2e-2, runs=20, cublas_tflops=base["tflops"])]
    device = {"device": "NVIDIA H200", "cc": "9.0", "cupy": "14.2.0", "cuda": "13.0"}
    doc = _bench.build_report(rows, device=device, dtype="bfloat16", out_dtype=E5, scale_result=None)
    assert doc["out_dtype"] == E5 and doc["scale_result"] == 1.0
    assert f"the cumm kernels write an FP8 C, `{E5}` of 1 v" in _bench.format_markdown(doc)
    assert "out_dtype" not in _bench.build_report(rows, device=device, dtype="bfloat16")


# ---------------------------------------------------------------------------------------------------
# On a GPU
# ---------------------------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize(
    "dtype,fmt,kw",
    [
        ("bfloat16", E4, dict(activation="gelu_tanh")),
        ("float16", E5, dict(scale_result=1000.0)),  # saturates: |v| up to ~4 sqrt(K) = 90, x 1000 past 57344
    ],
)
def test_fp8_c_race(sm90, dtype, fmt, kw):
    pytest.importorskip("torch")
    shapes = [(257, 384, 520), (1, 136, 1), (129, 200, 64)]
    rows = cumm.bench(
        ["auto", "wgmma_pingpong", "mma_swizzled_pipeline"],
        shapes=shapes,
        dtype=dtype,
        out_dtype=fmt,
        repeat=3,
        settle_s=0.0,
        progress=False,
        **kw,
    )
    assert len(rows) == 4 * len(shapes)
    for i in range(0, len(rows), 4):
        base, ours = rows[i], rows[i + 1 : i + 4]
        assert base["kernel"] == "cublas" and base["status"] == "ok"
        for r in ours:
            # verified within the format's rounding, which is coarser than the inputs' dtype's bar: an FP8 C
            assert r["status"] == "ok" and r["rel_err"] > TOLERANCE[dtype], r
            assert r["ms"] > 0 and r["ratio"] > 0
