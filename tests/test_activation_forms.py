"""The fused activations' fast forms (include/epilogue.cuh), checked on the CPU: their constants read from the header
and evaluated in float32 as the device does (tanh exact: tanh.approx's own error is the GPU test's,
test_epilogue.py's per-element test), against float64."""

from __future__ import annotations

import math
import re
from importlib import resources

import numpy as np

HEADER = resources.files("cumm").joinpath("kernels", "include", "epilogue.cuh").read_text()
_FLOAT = r"(-?[0-9.]+(?:e-?[0-9]+)?)f"


def _function(name: str) -> str:
    start = HEADER.index(f"float {name}(")
    return HEADER[start : HEADER.index("\n}\n", start)]


def _gelu_exact(x: np.ndarray) -> np.ndarray:
    return np.array([0.5 * t * (1.0 + math.erf(t / math.sqrt(2.0))) for t in x])


def _units(out: np.ndarray, ref: np.ndarray, mantissa_bits: int) -> float:
    """The largest error in units of C's last place of max(|ref|, 2^-14), as the GPU per-element test counts."""
    return float((np.abs(out - ref) / (2.0**-mantissa_bits * np.maximum(np.abs(ref), 2.0**-14))).max())


def test_bfloat16_exact_gelu_form_is_within_half_a_unit():
    """cumm_gelu_h: h + h tanh(h p(|h|)), p a quartic in |h| (Horner from the highest coefficient): within 0.45 of
    bfloat16's unit before C's rounding over -16..16, and p > 0 (the tails go to 0 and to v)."""
    f = _function("cumm_gelu_h")
    nums = [float(m) for m in re.findall(_FLOAT, f)]
    assert len(nums) == 5, f
    c4, c3, c2, c1, c0 = (np.float32(n) for n in nums)
    x = np.linspace(-16, 16, 320001).astype(np.float32)
    h = np.float32(0.5) * x
    a = np.abs(h)
    p = c4 * a + c3
    for c in (c2, c1, c0):
        p = p * a + c
    assert float(p.min()) > 0.5
    out = h + h * np.tanh((h * p).astype(np.float64)).astype(np.float32)
    assert _units(out.astype(np.float64), _gelu_exact(x.astype(np.float64)), 7) < 0.45


def test_two_mufu_gelu_tanh_constants_are_the_textbook_ones():
    """float16 and float C's gelu_tanh: e^(-2 u) = 2^(v (c1 + c2 v^2)), u = sqrt(2 / pi) (v + 0.044715 v^3)."""
    f = _function("cumm_gelu_tanh")
    c2, c1 = (float(m) for m in re.search(r"fmaf\(" + _FLOAT + r", v \* v, " + _FLOAT + r"\)", f).groups())
    k = -2.0 * math.sqrt(2.0 / math.pi) / math.log(2.0)
    assert math.isclose(c1, k, rel_tol=1e-7) and math.isclose(c2, k * 0.044715, rel_tol=1e-7)
