"""An FP8 C from cumm.matmul's bfloat16 / float16 products (include/epilogue.cuh's CUMM_EPI_FP8 byte stores, the
conversion in include/fp8_cvt.cuh), on the CPU: rendering, offline compiles of every 16-bit rung with an epilogue
(no spills), and the checks that need no GPU. The GPU half is tests/test_fp8_epilogue_gpu.py."""

from __future__ import annotations

import numpy as np
import pytest

from cumm.api import fused
from cumm.ladder import REGISTRY
from cumm.plan import epilogue as E
from cumm.plan.operands import check_fp8_out, dtype_name, new_out
from cumm.runtime import render as R
from cumm.runtime.compile import compile_offline

from .test_epilogue import _build, _Fake

SCALE = _Fake((), "float32")


def _fp8(fmt=3, **kw):
    return _build(M=5, N=kw.pop("N", 16), fp8=fmt, scale_result=SCALE, **kw)


def test_build_adds_the_scale_last():
    """The scale is the last operand (include/epilogue.cuh's cumm_epi_scale reads op[NOPS - 1]), named cumm_scale
    (no user operand can take a cumm_ name); the format is in the digest and the label."""
    epi, ops = _fp8(3, bias=_Fake((16,)), activation="relu")
    assert epi.fp8 == 3 and epi.operands == (("bias", "float32"), (E.SCALE_OPERAND, "float32"))
    assert [(ld, bs) for _, ld, bs in ops] == [(0, 0), (0, 0)]
    assert epi.label == "bias+relu+fp8_e4m3"
    e4, e5 = _fp8(3)[0], _fp8(4)[0]
    assert e4.operands == ((E.SCALE_OPERAND, "float32"),) and e4.label == "fp8_e4m3" and e5.label == "fp8_e5m2"
    assert len({e4.digest, e5.digest, _build(N=16, bias=_Fake((16,)))[0].digest}) == 3


@pytest.mark.parametrize(
    "kw,err,match",
    [
        (dict(scale_result=SCALE), TypeError, r"scale_result scales an FP8 C.*pass out= a torch.float8_e4m3fn"),
        (dict(fp8=3), TypeError, "an FP8 C needs scale_result"),
        (dict(fp8=3, scale_result=_Fake((), "float16")), TypeError, r"float32 tensor of one element.*float16"),
        (dict(fp8=4, scale_result=_Fake((2,), "float32")), TypeError, r"one element.*shape \(2,\)"),
        (dict(fp8=3, scale_result=_Fake((1,), "float32", dev=1)), ValueError, "scale_result is on device 1"),
    ],
)
def test_build_errors(kw, err, match):
    with pytest.raises(err, match=match):
        _build(N=16, **kw)


def test_fp8_out_takes_half_inputs_and_beta_zero():
    check_fp8_out("bfloat16", 0.0)
    check_fp8_out("float16", 0.0)
    with pytest.raises(TypeError, match=r"float32: cast them \(.to\(torch.bfloat16\)\), or pass a float32 out"):
        check_fp8_out("float32", 0.0)
    with pytest.raises(ValueError, match=r"beta=1.0 with an FP8 out.*pass beta=0.*residual="):
        check_fp8_out("bfloat16", 1.0)


def test_the_scale_is_part_of_the_cached_call():
    """A cached FP8 call packs the scale's pointer on every call (the last of the epilogue's arrays) and keys its
    layout."""
    args = dict(bias=None, residual=None, operands=None, aux=None, scale_result=SCALE)
    assert fused._in_order(args) == [SCALE]
    args = dict(args, bias=_Fake((16,)))
    assert fused._in_order(args)[-1] is SCALE


def test_rendering():
    """Only an FP8 C's variant defines CUMM_EPI_FP8 and renders include/fp8_cvt.cuh (before epilogue.cuh): every
    other epilogue variant's source is as it was."""
    spec = REGISTRY["wgmma_ws"]
    cfg = spec.resolve(None, 90)
    plain, _ = _build(N=16, bias=_Fake((16,)), activation="relu")
    epi, _ = _fp8(4, bias=_Fake((16,)), activation="relu")
    flags = (1, 1, 0, 0, R.dtype_flag("bfloat16", "bfloat16"))
    name, src = R.render(spec, cfg, E.with_flags(flags, epi))
    assert "#define CUMM_EPI_FP8 4" in src and f"_e{epi.digest}" in name
    assert src.index('#line 1 "include/fp8_cvt.cuh"') < src.index('#line 1 "include/epilogue.cuh"')
    _, src = R.render(spec, cfg, E.with_flags(flags, plain))
    assert "#define CUMM_EPI_FP8 " not in src and '#line 1 "include/fp8_cvt.cuh"' not in src


# every 16-bit rung with an epilogue: the wgmma tile stores (13, 14, 22, GLU's pairs too), the mma pair stores (11,
# 12, 16, 20) and swap_ab's single elements (21)
FP8_RUNGS = [
    ("wgmma_ws", None, "bfloat16", 3, {}),
    ("wgmma_ws", None, "float16", 4, dict(glu="silu")),
    ("wgmma_pingpong", dict(BM=128, BN=192, STAGES=4), "bfloat16", 3, dict(activation="gelu_tanh")),
    ("wgmma_pingpong", None, "float16", 4, dict(glu="gelu_tanh")),
    ("wgmma", None, "float16", 3, {}),
    ("mma", None, "bfloat16", 4, {}),
    ("mma_swizzled_pipeline", None, "float16", 3, {}),
    ("wgmma_cluster_split_k", None, "bfloat16", 3, {}),
    ("skinny16", None, "bfloat16", 4, {}),
    ("wgmma_swap_ab", None, "float16", 3, {}),
]


@pytest.mark.parametrize(
    ("kernel", "config", "dt", "fmt", "kw"), FP8_RUNGS, ids=[f"{r[0]}-{r[2]}-{r[3]}" for r in FP8_RUNGS]
)
@pytest.mark.parametrize("batched", [0, 1])
@pytest.mark.parametrize("vec_c", [0, 1])
def test_fp8_c_compiles_offline_without_spills(kernel, config, dt, fmt, kw, batched, vec_c):
    """Each store path takes the FP8 C (bias, and a named activation or GLU beside it), the copy engine's (VEC_C:
    wgmma_ws's and wgmma_pingpong's TMA store of bytes) and the direct ones, sm_90a, spilling nothing
    the same epilogue with a 16-bit C does not (wgmma_pingpong's 128 x 192 tiles with bias + gelu_tanh spill 16
    bytes in their batched variants with either C)."""
    spec = REGISTRY[kernel]
    if batched and not R.supports_batch(spec):
        pytest.skip(f"{kernel} runs no batches")
    bias = _Fake((16 if kw.get("glu") else 32,))
    epi, _ = _fp8(fmt, N=32, bias=bias, **kw)
    half, _ = _build(M=5, N=32, bias=bias, **kw)
    flags = (1, 1, vec_c, batched, R.dtype_flag(dt, dt))
    cfg = spec.resolve(config, 90)
    k = compile_offline(spec, cfg, "sm_90a", E.with_flags(flags, epi))
    assert k.registers > 0
    if k.spill_bytes:
        assert k.spill_bytes <= compile_offline(spec, cfg, "sm_90a", E.with_flags(flags, half)).spill_bytes


class _Other:
    """An array of another library (its kind "other": no GPU needed for these checks)."""

    def __init__(self, shape, dtype="float32"):
        self.shape, self.ndim, self.dtype = tuple(shape), len(shape), np.dtype(dtype)


def test_out_dtype_names_and_checks():
    """matmul's out_dtype= (plan.operands.new_out): the dtypes it writes, and the errors before anything is made."""
    assert dtype_name("float8_e4m3fn") == "float8_e4m3fn" and dtype_name(np.float32) == "float32"
    assert dtype_name(np.dtype("float16")) == "float16"
    a, b = _Other((4, 8)), _Other((8, 3))
    with pytest.raises(TypeError, match="pass out= or out_dtype=, not both"):
        new_out(a, b, a, "float32")
    with pytest.raises(ValueError, match="beta=2.0 adds beta . out, and out_dtype= makes a new C"):
        new_out(a, b, None, "float32", beta=2.0)
    with pytest.raises(TypeError, match="out_dtype=int8: matmul writes float32 for float32 other inputs"):
        new_out(a, b, None, np.int8)
    with pytest.raises(TypeError, match="out_dtype=float8_e5m2.*FP8 C: torch tensors; CuPy has no FP8 dtype"):
        new_out(_Other((4, 8), "float16"), _Other((8, 3), "float16"), None, "float8_e5m2")


def test_fp8_code_of_torch_like_tensors():
    """An FP8 C is recognized by its torch dtype (found once a dtype), a Parameter-like subclass included;
    CuPy arrays and other dtypes are not FP8."""
    from cumm.runtime.arrays import fp8_code

    class _Dtype:
        def __init__(self, name):
            self.name = name

        def __str__(self):
            return f"torch.{self.name}"

    def tensor(module, dtype):
        cls = type("Tensor", (), {"__module__": module})
        t = cls()
        t.dtype = dtype
        return t

    e4, e5, bf = _Dtype("float8_e4m3fn"), _Dtype("float8_e5m2"), _Dtype("bfloat16")
    assert fp8_code(tensor("torch", e4)) == 3
    assert fp8_code(tensor("torch", e4)) == 3  # the cached answer
    assert fp8_code(tensor("torch.nn.parameter", e5)) == 4
    assert fp8_code(tensor("torch", bf)) == 0
    assert fp8_code(tensor("numpy", e4)) == 0
    assert fp8_code(None) == 0
    assert fp8_code(np.zeros(2)) == 0
