"""FP8 (cumm.scaled_matmul, rungs fp8_wgmma and fp8_block_scaled). CPU: the decisions and every error (through
cumm.plan.scaled and through the API with stand-ins for torch tensors), offline sm_90a compiles of every FP8
variant without spills. GPU (the H200): against a float64 product of the dequantized inputs, output NaN-poisoned
first, beside torch._scaled_mm's error on the same inputs."""

from __future__ import annotations

import itertools
import math

import pytest

import cumm
from cumm.ladder import REGISTRY
from cumm.plan import scaled as plan

E4, E5 = "float8_e4m3fn", "float8_e5m2"
FP8_RUNGS = [n for n, s in REGISTRY.items() if s.scales]


# ---- CPU: decisions and errors -------------------------------------------------------------------------------


def test_rungs_declare_fp8_and_scales():
    assert FP8_RUNGS == ["fp8_wgmma", "fp8_block_scaled"]
    assert REGISTRY["fp8_wgmma"].scales == "tensor" and REGISTRY["fp8_block_scaled"].scales == "block"
    for n in FP8_RUNGS:
        assert set(REGISTRY[n].dtypes) == {E4, E5}
    # matmul's rungs take no FP8 and apply no scales; FP8 rungs are not matmul's (its dtypes stay as they were)
    assert all(not s.scales for n, s in REGISTRY.items() if n not in FP8_RUNGS)
    assert "float8_e4m3fn" not in cumm.SUPPORTED_DTYPES


@pytest.mark.parametrize(("da", "db"), list(itertools.product((E4, E5), repeat=2)))
def test_every_format_pair_is_taken(da, db):
    plan.check_formats(da, db)  # e5m2 x e5m2 too: wgmma has it (the compile test below builds it)
    assert plan.choose("auto", da, db, "tensor").name == "fp8_wgmma"
    assert plan.choose("auto", da, db, "block").name == "fp8_block_scaled"


@pytest.mark.parametrize(
    ("da", "db", "match"),
    [
        (E4, "bfloat16", "FP8 mixed with bfloat16"),
        ("float16", E5, "FP8 mixed with float16"),
        ("float32", "float32", "use cumm.matmul"),
        ("uint8", "uint8", "takes FP8 inputs"),
    ],
)
def test_format_errors(da, db, match):
    with pytest.raises(TypeError, match=match):
        plan.check_formats(da, db)


@pytest.mark.parametrize(
    ("M", "N", "K", "sa", "sb", "want"),
    [
        (64, 32, 100, (), (), "tensor"),
        (64, 32, 100, (1,), (1, 1), "tensor"),
        (64, 32, 100, (64, 1), (1, 32), "tensor"),
        (64, 32, 100, (64, 1), (), "tensor"),
        (64, 300, 1000, (64, 8), (3, 8), "block"),
        (5, 129, 129, (5, 2), (2, 2), "block"),
    ],
)
def test_scale_layouts(M, N, K, sa, sb, want):
    assert plan.scale_layout(M, N, K, sa, sb) == want


@pytest.mark.parametrize(
    ("sa", "sb"),
    [((64,), (1, 32)), ((64, 1), (32, 1)), ((64, 8), (8, 3)), ((64, 7), (3, 7)), ((1, 64), (1, 32))],
)
def test_scale_shape_errors_name_the_accepted_shapes(sa, sb):
    with pytest.raises(ValueError, match=r"accepted: per-tensor.*\(64, 1\).*\(1, 300\).*\(64, 8\).*\(3, 8\)"):
        plan.scale_layout(64, 300, 1000, sa, sb)


def test_named_kernel_must_fit_the_scales():
    with pytest.raises(ValueError, match="applies block scales, and these are tensor"):
        plan.choose("fp8_block_scaled", E4, E4, "tensor")
    with pytest.raises(ValueError, match="not a scaled FP8 kernel"):
        plan.choose("wgmma_ws", E4, E4, "tensor")


def test_configure():
    spec = REGISTRY["fp8_wgmma"]
    cfg, why = plan.configure(spec, E5, E4, "float32", 4096, 4096, False, 132)
    assert (cfg["FA"], cfg["FB"], cfg["OUT"], cfg["PROMO"], why) == (1, 0, 2, 2, "defaults")  # two partial sets
    assert plan.configure(spec, E4, E4, "bfloat16", 4096, 4096, True, 132)[0]["PROMO"] == 0
    cfg, why = plan.configure(spec, E4, E4, "bfloat16", 128, 4096, False, 132)
    assert cfg["WGS"] == 1 and why == "one_warpgroup_64x128"  # few tiles
    with pytest.raises(cumm.ConfigError, match="spill"):
        plan.configure(spec, E4, E4, "bfloat16", 4096, 4096, False, 132, {"BN": 256})  # promotion at 128 x 256
    # many rounds of tiles (8192 x 8192: 43 x 64 of 192 x 128, about 21 rounds on 132 SMs): three warpgroups, one
    # partial set; 4096^3's 5.3 rounds keep the defaults; use_fast_accum keeps its 128 x 256 tiles
    for rung in ("fp8_wgmma", "fp8_block_scaled"):
        cfg, why = plan.configure(REGISTRY[rung], E4, E4, "bfloat16", 8192, 8192, False, 132)
        assert (cfg["BM"], cfg["WGS"], cfg["PROMO"], why) == (192, 3, 1, "three_warpgroups_192x128")
    assert 43 * 64 >= plan.MANY_ROUNDS * 132 > 22 * 32
    assert plan.configure(spec, E4, E4, "bfloat16", 8192, 8192, True, 132)[1] == "fast_accum"
    with pytest.raises(cumm.ConfigError, match="accumulators"):  # three warpgroups cannot hold two partial sets
        plan.configure(
            spec, E4, E4, "bfloat16", 4096, 4096, False, 132, {**spec.configs["three_warpgroups_192x128"], "PROMO": 2}
        )
    with pytest.raises(TypeError, match="out_dtype must be one of"):
        plan.out_name("int8")


def test_readable():
    assert plan.readable(0x1000, 4096, 1, 4096)
    assert not plan.readable(0x1000, 4100, 1, 4100)  # K % 16: padded copy
    assert not plan.readable(0x1008, 4096, 1, 4096)  # base off 16 bytes
    assert not plan.readable(0x1000, 1, 4096, 4096)  # column-major: transposed copy


class FakeTensor:
    """What scaled_matmul reads of a torch tensor before it touches the GPU."""

    __module__ = "torch"

    def __init__(self, shape, dtype, device=0, cuda=True):
        self.shape, self.dtype, self.is_cuda, self._dev = tuple(shape), f"torch.{dtype}", cuda, device
        self.device = f"cuda:{device}" if cuda else "cpu"

    def dim(self):
        return len(self.shape)

    def get_device(self):
        return self._dev

    def numel(self):
        return math.prod(self.shape)

    def data_ptr(self):
        return 0

    def stride(self, dim=None):
        st = tuple(math.prod(self.shape[i + 1 :]) for i in range(len(self.shape)))
        return st if dim is None else st[dim]


def _call(a, b, sa=(), sb=(), **kw):
    mk = lambda s: s if s is None or isinstance(s, FakeTensor) else FakeTensor(s, "float32")  # noqa: E731
    return cumm.scaled_matmul(a, b, mk(sa), mk(sb), **kw)


A, B = FakeTensor((64, 128), E4), FakeTensor((128, 32), E4)


@pytest.mark.parametrize(
    ("args", "kw", "err", "match"),
    [
        ((A, B, None, ()), {}, TypeError, "scale_a is missing"),
        ((A, B, (), None), {}, TypeError, "scale_b is missing"),
        ((A, B, FakeTensor((), "bfloat16"), ()), {}, TypeError, "scale_a must be float32"),
        ((A, B, (), FakeTensor((), "float32", device=1)), {}, ValueError, "scale_b is on cuda:1"),
        ((A, FakeTensor((128, 32), "bfloat16")), {}, TypeError, "FP8 mixed with bfloat16"),
        ((FakeTensor((64, 128), "float16"), FakeTensor((128, 32), "float16")), {}, TypeError, "cumm.matmul"),
        ((A, FakeTensor((100, 32), E4)), {}, ValueError, "a's columns must equal b's rows"),
        ((A, FakeTensor((128,), E4)), {}, ValueError, "must be 2-D"),
        ((A, FakeTensor((128, 0), E4)), {}, ValueError, "at least 1"),
        ((A, FakeTensor((128, 32), E4, cuda=False)), {}, TypeError, "b must be on a CUDA device"),
        ((A, FakeTensor((128, 32), E4, device=1)), {}, ValueError, "put both on one device"),
        ((A, B, (64, 2), (1, 32)), {}, ValueError, "accepted: per-tensor"),
        ((A, B, (64, 1), (1, 1)), {"use_fast_accum": True, "out_dtype": "int8"}, TypeError, "out_dtype"),
        ((A, B, (64, 1), (1, 1)), {"kernel": "fp8_block_scaled"}, ValueError, "applies block scales"),
        ((A, B, (64, 1), (1, 32)), {"out": FakeTensor((64, 32), "float16")}, ValueError, "out must be"),
    ],
)
def test_api_errors(args, kw, err, match):
    with pytest.raises(err, match=match):
        _call(*args, **kw)


SR = FakeTensor((), "float32")  # a scale_result


@pytest.mark.parametrize(
    ("kw", "err", "match"),
    [
        ({"scale_result": SR}, TypeError, r"scale_result scales an FP8 output.*writes bfloat16: drop scale_result"),
        ({"scale_result": SR, "out_dtype": "float32"}, TypeError, r"writes float32.*or pass an FP8 out_dtype"),
        ({"scale_result": 2.0, "out_dtype": E4}, TypeError, r"one-element torch CUDA tensor, got float: pass torch"),
        ({"scale_result": FakeTensor((), "bfloat16"), "out_dtype": E5}, TypeError, "scale_result must be float32"),
        ({"scale_result": FakeTensor((2,), "float32"), "out_dtype": E4}, ValueError, r"one element.*shape \(2,\)"),
        ({"scale_result": FakeTensor((), "float32", cuda=False), "out_dtype": E4}, TypeError, "on a CUDA device"),
        ({"scale_result": FakeTensor((1,), "float32", device=1), "out_dtype": E4}, ValueError, "on cuda:1"),
        ({"out_dtype": E4, "out": FakeTensor((64, 32), "bfloat16")}, ValueError, "pass an out of float8_e4m3fn"),
        ({"out_dtype": E4, "out": FakeTensor((64, 32), E5)}, ValueError, "or out_dtype=torch.float8_e5m2"),
        ({"out": FakeTensor((64, 32), E4)}, ValueError, r"out_dtype is bfloat16 \(the default\).*float8_e4m3fn"),
        ({"out_dtype": E4, "out": FakeTensor((64, 33), E4)}, ValueError, r"\(64, 32\) float8_e4m3fn tensor"),
    ],
)
def test_fp8_out_errors(kw, err, match):
    """FP8 output: scale_result only with an FP8 out_dtype, as torch takes it (a float32 one-element CUDA tensor on
    the operands' device); an out of another dtype names the fix. Each before anything touches the GPU."""
    with pytest.raises(err, match=match):
        _call(A, B, **kw)


def test_fp8_out_decisions():
    """An FP8 out_dtype without scale_result is scaled by 1 (torch's default); FP8 C is stored directly (EPI = 0,
    over a configuration or tuned entry that says 1), OUT 3 (e4m3) or 4 (e5m2)."""
    for out, code in ((E4, 3), (E5, 4)):
        assert plan.out_name(out) == out
        plan.check_scale_result(out, False)
        plan.check_scale_result(out, True)
        for rung in FP8_RUNGS:
            cfg, _ = plan.configure(REGISTRY[rung], E4, E5, out, 4096, 4096, False, 132)
            assert (cfg["OUT"], cfg["EPI"], cfg["FB"]) == (code, 0, 1)
            cfg, why = plan.configure(REGISTRY[rung], E4, E4, out, 4096, 4096, False, 132, {"EPI": 1})
            assert cfg["EPI"] == 0 and why == "config"
    with pytest.raises(cumm.ConfigError, match="FP8 outputs .* are stored directly: EPI = 0"):
        REGISTRY["fp8_wgmma"].resolve({"OUT": 3, "EPI": 1})


def test_fp8_out_rendering():
    """Only FP8-out variants render include/fp8_out.cuh (scale_result their kernel's first parameter, their stores
    cvt.rn.satfinite); every other variant's source is what it was (the rungs' templates and headers are untouched:
    tests/test_tune.py's shipped tables keep their hashes). A template that does not store through cumm_fp8_store
    cannot take FP8 out: a ConfigError on the host, never a kernel that writes something else."""
    import dataclasses

    from cumm.runtime.render import render

    for rung in FP8_RUNGS:
        spec = REGISTRY[rung]
        for out in range(5):
            name, src = render(spec, spec.resolve({"OUT": out, "EPI": int(out < 3)}))
            fp8 = out >= 3
            assert ('#line 1 "include/fp8_out.cuh"' in src) == fp8 and f"OUT{out}" in name
            assert ("cumm_scale_result" in src) == fp8 and (f"#define CUMM_FP8_OUT_KERNEL {name}" in src) == fp8
            if fp8:
                assert src.index("include/fp8_out.cuh") < src.index(spec.template)
    other = dataclasses.replace(REGISTRY["fp8_wgmma"], source='extern "C" __global__ void CUMM_KERNEL() {}')
    with pytest.raises(cumm.ConfigError, match="cannot store FP8 output"):
        render(other, other.resolve({"OUT": 4, "EPI": 0}))


def test_block_scales_refuse_fast_accum():
    with pytest.raises(ValueError, match="block scales always promote"):
        _call(FakeTensor((64, 300), E4), FakeTensor((300, 200), E4), (64, 3), (2, 3), use_fast_accum=True)


def test_cupy_arrays_are_refused_with_the_reason():
    import cupy

    x = cupy.ndarray(
        (4, 4), dtype=cupy.uint8, memptr=cupy.cuda.MemoryPointer(cupy.cuda.UnownedMemory(0, 16, None, 0), 0)
    )
    with pytest.raises(TypeError, match="CuPy has no FP8 dtype"):
        cumm.scaled_matmul(x, x, None, None)


# ---- CPU: every FP8 variant compiles for sm_90a, without spills --------------------------------------------------

VARIANTS = [
    (k, cfg)
    for k in FP8_RUNGS
    for cfg in [
        *(dict(FA=fa, FB=fb, OUT=o) for fa, fb, o in itertools.product((0, 1), (0, 1), (0, 1, 2))),
        *(dict(REGISTRY[k].configs[n]) for n in REGISTRY[k].configs),
        dict(EPI=0, BN=64),
    ]
]
# FP8 output (OUT 3: e4m3, 4: e5m2; EPI = 0): every format pair, and both outputs in every named configuration
FP8_OUT_VARIANTS = [
    (k, cfg)
    for k in FP8_RUNGS
    for cfg in [
        *(dict(FA=fa, FB=fb, OUT=o, EPI=0) for fa, fb, o in itertools.product((0, 1), (0, 1), (3, 4))),
        *(dict(REGISTRY[k].configs[n], OUT=o, EPI=0) for n in REGISTRY[k].configs for o in (3, 4)),
        dict(EPI=0, BN=64, OUT=3),
    ]
]


@pytest.mark.parametrize(("kernel", "config"), VARIANTS, ids=[f"{k}-{c}" for k, c in VARIANTS])
def test_fp8_variants_compile_without_spills(kernel, config):
    k = cumm.compile(kernel, config, "sm_90")
    assert k.arch == "sm_90a" and k.spill_bytes == 0, (k.registers, k.spill_bytes, k.log)
    assert b"\x7fELF" == k.cubin[:4]


@pytest.mark.parametrize("aligned", [True, False])
@pytest.mark.parametrize(("kernel", "config"), FP8_OUT_VARIANTS, ids=[f"{k}-{c}" for k, c in FP8_OUT_VARIANTS])
def test_fp8_out_variants_compile_without_spills(kernel, config, aligned):
    """C aligned (2-byte pair stores) or not (bytes), for sm_90a, no spills."""
    k = cumm.compile(kernel, config, "sm_90", aligned=aligned)
    assert k.arch == "sm_90a" and k.spill_bytes == 0, (k.registers, k.spill_bytes, k.log)
    assert b"\x7fELF" == k.cubin[:4]


# ---- CPU: the FP8 bench's command line and table ------------------------------------------------------------


def test_bench_dtype_fp8_parses_and_formats():
    from cumm.tools import bench_fp8
    from cumm.tools.cli import build_parser

    assert build_parser().parse_args(["bench", "--dtype", "fp8"]).dtype == "fp8"
    row = {"shape": [128, 256, 512], "tflops": dict.fromkeys(bench_fp8.COLUMNS, 100.0), "rel_vs_torch": 0.0}
    row["tflops"]["fp8_wgmma"] = 110.0
    text, md = bench_fp8.format_rows([row]), bench_fp8.format_rows([row], markdown=True)
    assert "128x256x512" in text and "1.10" in text and md.startswith("| M x N x K |")
