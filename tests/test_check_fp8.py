"""cumm check with an FP8 C (cumm/tools/check_fp8.py): what it refuses before the GPU, the command line; on a GPU,
the wgmma and mma.sync rungs' FP8 C pass the standard cases (contiguous, views, batches, transposed operands), with
a fused activation and a saturating scale, and the guarded byte buffer's layout."""

from __future__ import annotations

import importlib.util

import pytest

import cumm
from cumm.tools import check_fp8 as F
from cumm.tools import cli as _cli

E4, E5 = "float8_e4m3fn", "float8_e5m2"


def test_fp8_c_refused_before_the_gpu():
    with pytest.raises(ValueError, match=r"out_dtype 'float16' is not an FP8 C cumm writes; choose float8_e4m3fn"):
        cumm.check("wgmma_ws", out_dtype="float16")
    with pytest.raises(ValueError, match=r"bfloat16 or float16 product's epilogue; float32 inputs write their own"):
        cumm.check("double_buffer", out_dtype=E4)
    with pytest.raises(ValueError, match=r"bfloat16 or float16 product's epilogue; float32 inputs"):
        cumm.check("wgmma_ws", dtypes=["float32"], out_dtype=E4)
    with pytest.raises(ValueError, match=r"scale_result scales an FP8 C: give out_dtype="):
        cumm.check("wgmma_ws", scale_result=2.0)
    for bad in (0.0, -1.0, float("inf"), "2"):
        with pytest.raises(ValueError, match="scale_result is a positive finite number"):
            cumm.check("wgmma_ws", out_dtype=E5, scale_result=bad)


@pytest.mark.skipif(importlib.util.find_spec("torch") is not None, reason="checks the message without torch")
def test_fp8_c_needs_torch():
    with pytest.raises(ValueError, match=r"an FP8 C is a torch tensor: cumm check --out-dtype needs torch"):
        cumm.check("wgmma_ws", out_dtype=E4)


def test_cli_check_fp8_arguments(capsys):
    args = _cli.build_parser().parse_args(["check", "--kernel", "wgmma_ws", "--out-dtype", E5, "--scale-result", "0.5"])
    assert args.out_dtype == E5 and args.scale_result == 0.5
    with pytest.raises(SystemExit):
        _cli.build_parser().parse_args(["check", "--kernel", "wgmma_ws", "--out-dtype", "fp8"])
    assert _cli.main(["check", "--kernel", "double_buffer", "--out-dtype", E4]) == 1
    assert "float32 inputs write their own dtype" in capsys.readouterr().err
    assert _cli.main(["check", "--kernel", "wgmma_ws", "--scale-result", "2"]) == 1
    assert "scale_result scales an FP8 C" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------------
# On a GPU
# ---------------------------------------------------------------------------------------------------


@pytest.mark.gpu
def test_guarded_fp8_out_layout():
    pytest.importorskip("torch")
    buf, c, tc = F.guarded_out(5, 7, E4, odd=False)
    assert c.shape == (5, 7) and c.data.ptr % 16 == 0 and c.strides[0] % 16 == 0 and tc.shape == (5, 7)
    assert tc.data_ptr() == c.data.ptr and str(tc.dtype) == "torch.float8_e4m3fn" and bool((c == F.POISON).all())
    _, c2, _ = F.guarded_out(5, 7, E5, odd=True, batch=3)
    assert c2.shape == (3, 5, 7) and c2.strides[1] % 16 != 0
    assert int((buf == F.SENTINEL).sum()) == buf.size - 35


@pytest.mark.gpu
@pytest.mark.parametrize(
    "kernel,fmt,kw",
    [
        ("wgmma_ws", E4, {}),
        ("wgmma_pingpong", E5, dict(activation="gelu_tanh")),
        ("mma_swizzled_pipeline", E4, dict(scale_result=0.05)),  # saturates: products up to ~4 sqrt(K) x 0.05 ... x 448
        ("wgmma_swap_ab", E4, dict(activation="silu")),
    ],
)
def test_fp8_c_passes_the_standard_cases(sm90, kernel, fmt, kw):
    pytest.importorskip("torch")
    report = cumm.check(kernel, out_dtype=fmt, large=False, **kw)
    assert report.ok, str(report)
    assert all(r.dtype.endswith(f" -> {fmt}") for r in report.rows) and not any(
        r.case.startswith("beta") for r in report.rows
    )


@pytest.mark.gpu
def test_fp8_c_of_a_glu_pair(sm90):
    pytest.importorskip("torch")
    report = cumm.check("wgmma_ws", glu="silu", out_dtype=E4, large=False)
    assert report.ok, str(report)
