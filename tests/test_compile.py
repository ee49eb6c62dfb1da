"""Offline compilation (NVRTC, no GPU): every kernel's defaults and a sample of other configurations
for sm_80 and sm_90, what ptxas reports about them, the cubin itself, and compile errors."""

from __future__ import annotations

import functools
import itertools
import math
import struct
import uuid

import pytest

import cumm
from cumm.core.spec import KernelSpec
from cumm.ladder import REGISTRY
from cumm.runtime import render as _render

ARCHS = ("sm_80", "sm_90")
KERNELS = list(REGISTRY)
VARIANTS = {"aligned": True, "unaligned": False}
EM_CUDA = 190  # ELF e_machine of NVIDIA CUDA cubins


@functools.cache
def compiled(kernel: str, arch: str, aligned: bool = True, config: tuple[tuple[str, int], ...] = ()):
    """Compile once per module run; several tests read the same result."""
    return cumm.compile(kernel, dict(config) or None, arch, aligned=aligned)


def _cc(arch: str) -> int:
    return int(arch[3:].rstrip("a"))


def _distance(spec: KernelSpec, cfg: dict[str, int]) -> float:
    """How far a configuration is from the defaults (log2 steps); near ones compile in about a second."""
    d = spec.default_config()
    return sum(abs(math.log2(cfg[k] / d[k])) if cfg[k] > 0 and d[k] > 0 else float(cfg[k] != d[k]) for k in spec.params)


def _outputs_per_thread(spec: KernelSpec, cfg: dict[str, int]) -> float:
    """Elements of a 4096 x 4096 result per thread: register tiles (and compile time) grow with it."""
    return 4096 * 4096 / math.prod(spec.grid(cfg, 4096, 4096, 4096)) / spec.threads(cfg)


def sample_configs(spec: KernelSpec, n: int = 3) -> list[dict[str, int]]:
    """Up to ``n`` valid non-default configurations of the spec's tuning space, picked deterministically:
    no more work per thread than the defaults, and from the nearer third by distance from the defaults,
    so that compile times stay moderate."""
    keys = list(spec.space)
    d = spec.default_config()
    every = ({**d, **dict(zip(keys, v, strict=True))} for v in itertools.product(*(spec.space[k] for k in keys)))
    valid = [
        c
        for c in every
        if c != d and not spec.violations(c) and _outputs_per_thread(spec, c) <= _outputs_per_thread(spec, d)
    ]
    valid.sort(key=lambda c: (_distance(spec, c), [c[k] for k in spec.params]))
    picks = sorted({0, len(valid) // 6, len(valid) // 3})
    picks += [i for i in range(len(valid)) if i not in picks][: max(0, n - len(picks))]
    return [valid[i] for i in sorted(picks) if i < len(valid)][:n]


def check_elf(cubin: bytes) -> None:
    assert cubin[:4] == b"\x7fELF", cubin[:16]
    assert cubin[4] == 2 and cubin[5] == 1, "a 64-bit little-endian ELF"
    (e_machine,) = struct.unpack_from("<H", cubin, 18)
    assert e_machine == EM_CUDA, e_machine
    e_phoff, e_shoff = struct.unpack_from("<QQ", cubin, 32)
    e_phentsize, e_phnum, e_shentsize, e_shnum = struct.unpack_from("<HHHH", cubin, 54)
    assert e_phoff + e_phnum * e_phentsize <= len(cubin), (
        f"program headers end at {e_phoff + e_phnum * e_phentsize} but the cubin has {len(cubin)} bytes (truncated?)"
    )
    assert e_shoff + e_shnum * e_shentsize <= len(cubin), (
        f"section headers end at {e_shoff + e_shnum * e_shentsize} but the cubin has {len(cubin)} bytes (truncated?)"
    )


def check_report(k: cumm.CompiledKernel, spec: KernelSpec, cfg: dict[str, int], arch: str, flags) -> None:
    check_elf(k.cubin)
    assert k.kernel == spec.name and k.arch == (spec.target(_cc(arch)) if spec.arch_specific else arch)
    assert k.config == cfg
    assert k.name == _render.kernel_name(spec, cfg, flags)
    assert f"Compiling entry function '{k.name}'" in k.log, k.log
    assert k.registers > 0, k.log
    assert k.registers <= 255
    assert k.spill_bytes == k.spill_stores + k.spill_loads >= 0
    assert k.shared_bytes == k.static_shared_bytes + k.dynamic_shared_bytes
    assert k.dynamic_shared_bytes == spec.smem(cfg)
    assert 0 <= k.static_shared_bytes <= 48 * 1024
    assert k.threads == spec.threads(cfg)


# --------------------------------------------------------------------------------------------------
# Defaults: every kernel, both architectures, aligned and unaligned
# --------------------------------------------------------------------------------------------------


# (kernel, arch) pairs where the kernel runs: fused3_wg (wgmma) only on sm_90, compiled for sm_90a
RUNS_ON = [(k, a) for k in KERNELS for a in ARCHS if REGISTRY[k].supports(_cc(a))]


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize(("kernel", "arch"), RUNS_ON)
def test_defaults_compile(kernel, arch, variant):
    spec = REGISTRY[kernel]
    aligned = VARIANTS[variant]
    k = compiled(kernel, arch, aligned)
    cfg = spec.default_config(_cc(arch))
    check_report(k, spec, cfg, arch, (1, 1, 1) if aligned else (0, 0, 0))


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("kernel", KERNELS)
def test_defaults_do_not_spill_on_sm_90(kernel, variant):
    k = compiled(kernel, "sm_90", VARIANTS[variant])
    assert k.spill_bytes == 0, (
        f"{kernel} ({variant}) defaults {k.config} spill on sm_90: {k.registers} registers, "
        f"{k.spill_stores} bytes spill stores, {k.spill_loads} bytes spill loads, {k.stack_bytes} bytes stack"
    )


NAMED = [(k, n) for k in KERNELS for n in REGISTRY[k].configs if REGISTRY[k].supports(90)]
# Known: fused3_tc's 128 x 128 tiles spill (32 bytes on sm_90, where chains run fused3_wg; 64 on sm_80, whose rule
# runs them at n 1537-3072: docs/chain.md)
KNOWN_SPILLS = {("fused3_tc", "tc128x128"): 32}


@pytest.mark.parametrize(("kernel", "name"), NAMED, ids=[f"{k}-{n}" for k, n in NAMED])
def test_named_configurations_compile_without_spills_on_sm_90(kernel, name):
    """The named configurations (the ones auto and the tuner reach for first) keep to the defaults' standard: no
    spills, but for the one known above, which must not grow."""
    spec = REGISTRY[kernel]
    cfg = spec.resolve(dict(spec.configs[name]), 90)
    k = compiled(kernel, "sm_90", True, tuple(cfg.items()))
    check_report(k, spec, cfg, "sm_90", (1, 1, 1))
    known = KNOWN_SPILLS.get((kernel, name), 0)
    assert k.spill_bytes <= known, f"{kernel} {name} {cfg}: {k.registers} registers, {k.spill_bytes} bytes of spills"


def test_aligned_and_unaligned_are_distinct_programs():
    a = compiled("vectorized", "sm_90", True)
    u = compiled("vectorized", "sm_90", False)
    assert a.name != u.name and a.name.endswith("_v111") and u.name.endswith("_v000")
    assert a.cubin != u.cubin


def test_arch_specific_kernel():
    """fused3_wg uses wgmma: compiled for sm_90a, refused for any other compute capability with a reason."""
    spec = REGISTRY["fused3_wg"]
    assert spec.arch_specific and spec.target(90) == "sm_90a" and spec.supports(90)
    assert not spec.supports(80) and not spec.supports(100)
    assert compiled("fused3_wg", "sm_90").arch == compiled("fused3_wg", "sm_90a").arch == "sm_90a"
    with pytest.raises(cumm.ConfigError, match=r"'fused3_wg' needs compute capability 9\.0 or newer; sm_80 has 8\.0"):
        cumm.compile("fused3_wg", arch="sm_80")
    with pytest.raises(cumm.ConfigError, match=r"capability 9\.0 only \(sm_90a\); sm_100 has 10"):
        cumm.compile("fused3_wg", arch="sm_100")
    assert REGISTRY["tf32x3"].target(90) == "sm_90" and not REGISTRY["tf32x3"].arch_specific


def test_architectures_give_distinct_cubins():
    assert compiled("smem", "sm_80").cubin != compiled("smem", "sm_90").cubin


# --------------------------------------------------------------------------------------------------
# A sample of valid non-default configurations per kernel
# --------------------------------------------------------------------------------------------------


SAMPLES = [(name, cfg) for name, spec in REGISTRY.items() for cfg in sample_configs(spec)]


def _sample_id(param) -> str:
    if isinstance(param, dict):
        return "-".join(f"{k}{v}" for k, v in param.items())
    return str(param)


def test_every_kernel_has_samples():
    per_kernel = {name: sum(1 for n, _ in SAMPLES if n == name) for name in REGISTRY}
    for name, count in per_kernel.items():
        space_size = math.prod(len(v) for v in REGISTRY[name].space.values())
        assert count >= min(2, space_size - 1), (name, count)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize(("kernel", "config"), SAMPLES, ids=[f"{n}-{_sample_id(c)}" for n, c in SAMPLES])
def test_sample_configs_compile(kernel, config, arch):
    spec = REGISTRY[kernel]
    if not spec.supports(_cc(arch)):
        pytest.skip(f"{kernel} does not run on {arch}")
    assert config != spec.default_config()
    try:
        k = compiled(kernel, arch, True, tuple(config.items()))
    except cumm.CompileError as e:
        if "#error directive" not in e.log:
            raise
        # the template itself refuses this configuration on this architecture, with a reason
        pytest.skip(f"{kernel} refuses {config} on {arch}: {e.log.strip().splitlines()[0]}")
    check_report(k, spec, config, arch, (1, 1, 1))


def test_config_overrides_merge_with_defaults():
    k = compiled("blocktile_1d", "sm_90", True, (("BK", 16),))
    assert k.config == {**REGISTRY["blocktile_1d"].default_config(), "BK": 16}
    assert k.static_shared_bytes > compiled("blocktile_1d", "sm_90").static_shared_bytes


# --------------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("arch", ["sm90", "compute_90", 90, "sm_", "sm_9", "SM_90", "sm_90x", "", None])
def test_bad_arch(arch):
    with pytest.raises(ValueError, match="arch must look like 'sm_80' or 'sm_90'"):
        cumm.compile("naive", arch=arch)


def test_config_errors_come_before_compiling():
    with pytest.raises(cumm.ConfigError, match="no parameter"):
        cumm.compile("naive", {"BM": 8})
    with pytest.raises(cumm.ConfigError, match=r"needs BS \* BS <= 1024; got BS=64"):
        cumm.compile("naive", {"BS": 64})


@pytest.fixture
def broken_template(monkeypatch):
    """Make naive.cu fail to compile, for this test only."""
    original = _render.template_text
    original.cache_clear()
    _render.template_hash.cache_clear()
    broken = 'extern "C" __global__ void CUMM_KERNEL(CUMM_GEMM_ARGS) { this_is_not_cuda(; }\n'
    monkeypatch.setattr(_render, "template_text", lambda f: broken if f == "gemm/01_naive/kernel.cu" else original(f))
    yield broken
    monkeypatch.undo()
    original.cache_clear()
    _render.template_hash.cache_clear()


def test_broken_template_raises_compile_error_with_nvrtc_log(broken_template):
    with pytest.raises(cumm.CompileError) as e:
        cumm.compile("naive", arch="sm_90")
    err = e.value
    assert isinstance(err, RuntimeError)
    assert err.log.strip(), "CompileError.log must carry NVRTC's log"
    assert "error" in err.log.lower() and "01_naive/kernel.cu" in err.log, err.log
    assert err.log.strip() in str(err), "the message must contain NVRTC's log"
    assert "'naive'" in str(err) and "sm_90" in str(err)
    assert broken_template in err.source and "#define BS 32" in err.source
    # other kernels still compile while naive.cu is broken
    assert cumm.compile("coalesced", arch="sm_90").registers > 0


def test_template_restored_after_broken_template_test():
    assert cumm.compile("naive", arch="sm_90").registers > 0


def test_missing_ptxas_report_recompiles_a_fresh_source(monkeypatch):
    """NVRTC 13 on the H200 machine returns no ptxas report for PTX the driver's compute cache holds; the
    offline compile must still report registers and spills (it recompiles with a unique unused global)."""
    from cumm.runtime import compile as _compile

    real = _compile._nvrtc_compile
    seen = []

    def first_empty(nvrtc, spec, cfg, arch, source, options):
        seen.append(source)
        log, cubin = real(nvrtc, spec, cfg, arch, source, options)
        return ("" if len(seen) == 1 else log), cubin

    monkeypatch.setattr(_compile, "_nvrtc_compile", first_empty)
    r = cumm.compile("naive", arch="sm_90")
    assert len(seen) == 2 and seen[0] != seen[1]
    assert r.registers > 0 and f"Compiling entry function '{r.name}'" in r.log
    monkeypatch.setattr(_compile, "_nvrtc_compile", lambda *a: ("", real(*a)[1]))
    with pytest.raises(cumm.CompileError, match="no ptxas report"):
        cumm.compile("naive", arch="sm_90")


# ----------------------------------------------------------------------------------------------------------
# Auxiliary kernels (split-K reduction, edge strips, repacking, transposing copies): compile offline, no spills
# ----------------------------------------------------------------------------------------------------------


def test_aux_kernel_table_matches_the_modules():
    from cumm.plan import edges as _edges
    from cumm.plan import repack as _repack
    from cumm.plan import splitk as _splitk
    from cumm.runtime import compile as _compile

    assert _compile.AUX_KERNELS[_splitk.REDUCE_TEMPLATE] == (_splitk.REDUCE_NAME,)
    assert _compile.AUX_KERNELS[_edges.TEMPLATE] == _edges.NAMES
    assert _compile.AUX_KERNELS[_repack.COPY_TEMPLATE] == (_repack.COPY_NAME, _repack.UNPACK_NAME)
    assert _compile.AUX_KERNELS[_repack.TRANSPOSE_TEMPLATE] == tuple(_repack.TRANSPOSE_NAMES.values())


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize(
    "template",
    [
        "auxiliary/splitk_reduce.cu",
        "auxiliary/edge_strip.cu",
        "auxiliary/repack.cu",
        "auxiliary/transpose.cu",
        "auxiliary/pieces.cu",
    ],
)
def test_aux_kernels_compile_offline_without_spills(template, arch):
    import re

    from cupy.cuda import nvrtc

    from cumm.runtime.compile import AUX_KERNELS, NVRTC_OPTIONS, aux_source

    # A unique unused global makes the PTX new, so the driver's compute cache cannot serve it without running
    # ptxas (and its report): the same measure as compile_offline's retry.
    source = f"{aux_source(template)}\n__device__ int cumm_fresh_{uuid.uuid4().hex};\n"
    prog = nvrtc.createProgram(source, template, [], [])
    try:
        try:
            nvrtc.compileProgram(prog, [*NVRTC_OPTIONS, "-ftz=true", f"-arch={arch}", "--ptxas-options=-v"])
        except nvrtc.NVRTCError as e:
            pytest.fail(f"{template} does not compile for {arch}: {e}\n{nvrtc.getProgramLog(prog)}")
        log = nvrtc.getProgramLog(prog)
        assert nvrtc.getCUBIN(prog)[:4] == b"\x7fELF"
    finally:
        nvrtc.destroyProgram(prog)
    for name in AUX_KERNELS[template]:
        start = log.find(f"Compiling entry function '{name}'")
        assert start >= 0, f"no ptxas report for {name}: {log}"
        section = log[start:].split("Compiling entry function")[1]
        spills = [int(x) for x in re.findall(r"(\d+) bytes spill (?:stores|loads)", section)]
        assert spills and not any(spills), (name, section)


# --------------------------------------------------------------------------------------------------
# Batched variants: every rung that runs batches, compiled offline
# --------------------------------------------------------------------------------------------------

BATCHABLE = [(k, a) for k, a in RUNS_ON if REGISTRY[k].kind == "gemm" and _render.supports_batch(REGISTRY[k])]


@pytest.mark.parametrize(("kernel", "arch"), BATCHABLE)
def test_batched_variants_compile_without_spills(kernel, arch):
    from cumm.runtime.compile import compile_offline

    spec = REGISTRY[kernel]
    cfg = spec.default_config(_cc(arch))
    k = compile_offline(spec, cfg, spec.target(_cc(arch)) if spec.arch_specific else arch, flags=(1, 1, 1, 1))
    assert k.name.endswith("_batched")
    assert k.spill_bytes == 0, f"{kernel} batched: {k.registers} registers, {k.spill_bytes} bytes of spills"


@pytest.mark.parametrize("layout", [1, 2, 3])
@pytest.mark.parametrize(
    "config",
    [
        {},
        {"BM": 64, "BN": 64, "STAGES": 8, "WGS": 1, "GM": 4, "EPI": 0, "SK": 0, "NUM_THREADS": 256},
        {"BM": 128, "BN": 64, "STAGES": 8, "WGS": 1, "GM": 4, "EPI": 1, "SK": 0, "NUM_THREADS": 256},
    ],
    ids=["default", "64x64", "128x64"],
)
def test_wgmma_ws_reads_transposed_operands_without_spills(layout, config):
    """The variants that read a column-major A (layout 1), B (2) or both (3) in place compile offline for sm_90a with
    the registers of the row-major variant and no spills."""
    from cumm.runtime.compile import compile_offline
    from cumm.runtime.render import dtype_flag

    spec = REGISTRY["wgmma_ws"]
    cfg = spec.resolve(config, 90)
    base = (1, 1, 1, 0, dtype_flag("bfloat16", "bfloat16"))
    row = compile_offline(spec, cfg, "sm_90a", base)
    k = compile_offline(spec, cfg, "sm_90a", base + (layout,))
    assert k.spill_bytes == 0 and k.registers == row.registers, (k.registers, row.registers)


def test_no_inline_ptx_outside_include():
    """Rungs and chain kernels reach PTX only through the wrappers in kernels/include/ (tc16.cuh's cp.async groups,
    sm90.cuh's mbarriers, TMA, wgmma): no asm statement in any kernel.cu."""
    import re
    from pathlib import Path

    root = Path(cumm.__file__).parent / "kernels"
    files = sorted(p for p in root.rglob("*.cu") if "include" not in p.parts)
    assert any(p.parent.name == "12_mma_swizzled_pipeline" for p in files)
    for p in files:
        code = re.sub(r"//[^\n]*", "", p.read_text())
        assert not re.search(r"\basm\b", code), f"{p.relative_to(root)} has inline asm: a wrapper in include/ instead"


@pytest.mark.parametrize("dt", [("bfloat16", "bfloat16"), ("float16", "float32")], ids=lambda d: "->".join(d))
def test_wgmma_batched_variant_is_the_2d_one_with_3d_maps(dt):
    """13_wgmma runs batches (grid z, 3-D maps): its batched variant compiles with the registers of the 2-D one and no
    spills, and its spec says it runs batches."""
    from cumm.runtime.compile import compile_offline
    from cumm.runtime.render import dtype_flag

    spec = REGISTRY["wgmma"]
    assert _render.supports_batch(spec) and not spec.schedules_batch
    cfg = spec.default_config(90)
    two = compile_offline(spec, cfg, "sm_90a", (1, 1, 1, 0, dtype_flag(*dt)))
    k = compile_offline(spec, cfg, "sm_90a", (1, 1, 1, 1, dtype_flag(*dt)))
    assert "_batched" in k.name and k.spill_bytes == 0 and k.registers == two.registers, (k.registers, two.registers)
