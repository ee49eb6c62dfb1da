"""Kernel specs and the registry, on the CPU: defaults, resolve(), constraints and their messages, spaces."""

from __future__ import annotations

import functools
import itertools
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cumm
from cumm.core.spec import Constraint, KernelSpec
from cumm.ladder import REGISTRY

SPECS = list(REGISTRY.values())
WARP_SPECS = [REGISTRY[n] for n in ("warptile", "double_buffer")]


def ids(spec: KernelSpec) -> str:
    return spec.name


@functools.cache
def _space(name: str) -> tuple[tuple[tuple[str, int], ...], ...]:
    """Every configuration of the tuning space (defaults for parameters it leaves out), as item tuples."""
    spec = REGISTRY[name]
    keys = list(spec.space)
    return tuple(
        tuple({**spec.default_config(), **dict(zip(keys, values, strict=True))}.items())
        for values in itertools.product(*(spec.space[k] for k in keys))
    )


@functools.cache
def _valid(name: str) -> tuple[tuple[tuple[str, int], ...], ...]:
    spec = REGISTRY[name]
    return tuple(c for c in _space(name) if not spec.violations(dict(c)))


def _mentions(messages: list[str], c: Constraint) -> bool:
    return any(m.startswith(f"{c.message} (needs {c.expr}; got ") for m in messages)


# --------------------------------------------------------------------------------------------------
# The registry and its defaults
# --------------------------------------------------------------------------------------------------


def test_registry_is_in_ladder_order_and_public():
    gemm = [n for n, s in REGISTRY.items() if s.kind == "gemm"]
    assert cumm.kernels() == cumm.kernels("gemm") == gemm
    fp32 = [
        "naive",
        "coalesced",
        "smem",
        "blocktile_1d",
        "blocktile_2d",
        "vectorized",
        "bank_conflict_free",
        "warptile",
        "double_buffer",
        "tf32x3",
    ]
    half = ["mma", "mma_swizzled_pipeline", "wgmma", "wgmma_ws"]
    # the FP32-accurate rung on Hopper and the half branch for few tiles build on the wgmma rungs, then the FP8 rungs
    # (cumm.scaled_matmul's), then the decode rungs (stream B; raced at products of few rows), FP32 and 16-bit, then
    # ping-pong consumers (short K, fused epilogues), then FP32 from FP16 pieces
    assert gemm == fp32 + half + [
        "wgmma_tf32x3",
        "wgmma_cluster_split_k",
        "fp8_wgmma",
        "fp8_block_scaled",
        "skinny",
        "skinny16",
        "wgmma_swap_ab",
        "wgmma_pingpong",
        "wgmma_f16x3",
    ]
    assert cumm.kernels(dtype="float32") == fp32 + ["wgmma_tf32x3", "skinny", "wgmma_f16x3"]
    assert (
        cumm.kernels(dtype="float16")
        == cumm.kernels(dtype="bfloat16")
        == half
        + [
            "wgmma_cluster_split_k",
            "skinny16",
            "wgmma_swap_ab",
            "wgmma_pingpong",
        ]
    )
    assert [n for n, s in REGISTRY.items() if s.branch] == ["wgmma_cluster_split_k"]
    with pytest.raises(ValueError, match=r"dtype must be one of float32, float16, bfloat16, got 'int8'"):
        cumm.kernels(dtype="int8")
    assert sorted(n for kind in {s.kind for s in SPECS} for n in cumm.kernels(kind)) == sorted(REGISTRY)
    for name, spec in REGISTRY.items():
        assert spec.name == name
        assert cumm.kernel_spec(name) is spec
        assert spec.summary.strip(), f"{name} has no summary"
        assert spec.template.endswith(".cu")


@pytest.mark.parametrize("spec", SPECS, ids=ids)
def test_defaults_satisfy_constraints(spec):
    ccs = [None, 80, 86, 89, 90, *spec.cc_defaults]
    for cc in ccs:
        cfg = spec.default_config(cc)
        assert spec.violations(cfg) == [], (cc, cfg)
        spec.check(cfg)
        assert spec.resolve(None, cc) == cfg
        assert spec.resolve({}, cc) == cfg


@pytest.mark.parametrize("spec", SPECS, ids=ids)
def test_launch_geometry_of_defaults(spec):
    cfg = spec.default_config()
    block = spec.block(cfg)
    assert len(block) == 3 and all(isinstance(x, int) and x >= 1 for x in block)
    assert 1 <= spec.threads(cfg) <= 1024
    grid = spec.grid(cfg, 4096, 4096, 4096)
    assert len(grid) == 3 and all(x >= 1 for x in grid)
    # one tile: one block, or one cluster (CL blocks sharing operands, or KS blocks sharing the tile's K)
    assert spec.grid(cfg, 1, 1, 1) == (cfg.get("CL", cfg.get("KS", 1)), 1, 1)
    assert spec.smem(cfg) >= 0


@pytest.mark.parametrize("spec", SPECS, ids=ids)
def test_cc_defaults_and_space_name_known_parameters(spec):
    params = set(spec.params)
    for cc, over in spec.cc_defaults.items():
        assert isinstance(cc, int)
        assert set(over) <= params, (cc, over)
    assert set(spec.space) <= params
    for k, values in spec.space.items():
        assert len(values) >= 1 and all(isinstance(v, int) and v >= 0 for v in values), (k, values)


def test_spec_rejects_unknown_parameters_in_cc_defaults_and_space():
    base = REGISTRY["naive"]
    common = dict(
        name="x",
        template="gemm/01_naive/kernel.cu",
        summary="s",
        defaults=dict(BS=32),
        block=base.block,
        grid=base.grid,
    )
    with pytest.raises(ValueError, match=r"cc_defaults\[90\].*\['BX'\]"):
        KernelSpec(**common, cc_defaults={90: {"BX": 16}})
    with pytest.raises(ValueError, match=r"space names unknown parameters \['BX'\]"):
        KernelSpec(**common, space={"BX": (8, 16)})
    with pytest.raises(ValueError, match=r"x: reads_transposed needs tensor_maps"):
        KernelSpec(**common, reads_transposed=True)  # the layout reaches the kernel only through its maps


@pytest.mark.parametrize("spec", SPECS, ids=ids)
def test_space_yields_valid_configs(spec):
    valid = [dict(c) for c in _valid(spec.name)]
    assert valid, f"no configuration of {spec.name}'s tuning space satisfies its constraints"
    non_default = [c for c in valid if c != spec.default_config()]
    assert non_default or all(len(v) == 1 for v in spec.space.values())


# --------------------------------------------------------------------------------------------------
# resolve(): overrides, unknown keys, bad values
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("spec", SPECS, ids=ids)
def test_resolve_unknown_key_lists_parameters(spec):
    with pytest.raises(cumm.ConfigError) as e:
        spec.resolve({"NOPE": 4})
    msg = str(e.value)
    assert "NOPE" in msg and spec.name in msg
    for p in spec.params:
        assert repr(p) in msg, (p, msg)


@pytest.mark.parametrize("spec", SPECS, ids=ids)
@pytest.mark.parametrize("bad", [-1, -32, 1.0, 32.0, "32", None, True, False, [32]], ids=repr)
def test_resolve_rejects_non_integer_negative_and_bool(spec, bad):
    p = spec.params[0]
    with pytest.raises(cumm.ConfigError, match=re.escape(f"parameter {p} must be a non-negative integer, got {bad!r}")):
        spec.resolve({p: bad})


def test_config_error_is_a_value_error():
    assert issubclass(cumm.ConfigError, ValueError)
    with pytest.raises(ValueError):
        REGISTRY["smem"].resolve({"BS": -4})


def test_resolve_accepts_integer_like_values():
    np = pytest.importorskip("numpy")
    spec = REGISTRY["smem"]
    cfg = spec.resolve({"BS": np.int64(16)})
    assert cfg == {"BS": 16} and type(cfg["BS"]) is int
    assert spec.resolve({"BS": 8}) == {"BS": 8}
    assert spec.default_config() == {"BS": 32}, "resolve() must not modify the defaults"


@pytest.mark.parametrize("spec", SPECS, ids=ids)
def test_resolve_override_subset(spec):
    valid = [dict(c) for c in _valid(spec.name) if dict(c) != spec.default_config()]
    if not valid:
        pytest.skip("space has no non-default configuration")
    cfg = valid[len(valid) // 2]
    changed = {k: v for k, v in cfg.items() if v != spec.defaults[k]}
    assert spec.resolve(changed) == cfg


# --------------------------------------------------------------------------------------------------
# Constraint messages
# --------------------------------------------------------------------------------------------------


def test_small_kernel_violation_message():
    with pytest.raises(cumm.ConfigError) as e:
        REGISTRY["smem"].resolve({"BS": 128})
    msg = str(e.value)
    assert "invalid configuration for kernel 'smem'" in msg
    assert "a CUDA block has at most 1024 threads (needs BS * BS <= 1024; got BS=128)" in msg
    assert "static shared memory is limited to 48 KB per block" in msg


def test_zero_parameter_reports_positive_constraint():
    spec = REGISTRY["warptile"]
    v = spec.violations({**spec.default_config(), "TM": 0})
    assert v and v[0] == "TM must be at least 1 (needs TM >= 1; got TM=0)"


# Configurations that break the constraints of the warp-tiled rungs which single-parameter changes of the
# defaults cannot reach on their own (they couple WM, WN, WNITER, TM and TN).
_WARP_CASES = [
    # WMITER = 32*256 / (32*8*4*1) = 8, WSUBM = 32/8 = 4: the warp sub-tile is 4 rows, the thread tile 8.
    dict(BM=32, BN=256, BK=16, WM=32, WN=256, WNITER=1, TM=8, TN=4, NUM_THREADS=32, MINB=1),
    # WNITER = 3 does not split WN = 64 (and WSUBN = 21 is not a multiple of TN).
    dict(BM=96, BN=64, BK=8, WM=48, WN=64, WNITER=3, TM=4, TN=4, NUM_THREADS=64, MINB=1),
    # WSUBN = 64 is not a multiple of TN = 12.
    dict(BM=96, BN=64, BK=8, WM=48, WN=64, WNITER=1, TM=4, TN=12, NUM_THREADS=64, MINB=1),
    # WM * WN = 128 < 32 * TM * TN: WMITER would be 0.
    dict(BM=32, BN=64, BK=8, WM=8, WN=16, WNITER=1, TM=4, TN=4, NUM_THREADS=512, MINB=1),
    # TM = 6 fits the warp arithmetic but not float4 reads.
    dict(BM=96, BN=128, BK=16, WM=48, WN=64, WNITER=1, TM=6, TN=4, NUM_THREADS=128, MINB=1),
]
_PROBE_VALUES = (0, 1, 2, 3, 5, 6, 12, 24, 40, 48, 96, 192, 2048)


def _violating_configs(spec: KernelSpec):
    """Single-parameter changes of the defaults, then the hand-made cases above."""
    d = spec.default_config()
    for k in spec.params:
        for v in _PROBE_VALUES:
            if v != d[k]:
                yield {**d, k: v}
    yield from _WARP_CASES


@pytest.mark.parametrize("spec", WARP_SPECS, ids=ids)
def test_each_warp_constraint_can_be_violated_and_is_named(spec):
    configs = list(_violating_configs(spec))
    for c in spec.constraints:
        hits = [(cfg, v) for cfg in configs if _mentions(v := spec.violations(cfg), c)]
        assert hits, f"no probe configuration violates {c.expr!r}"
        cfg, messages = hits[0]
        msg = next(m for m in messages if m.startswith(c.message))
        for p in spec.params:  # every parameter the expression names is shown with its value
            if re.search(rf"\b{p}\b", c.expr):
                assert f"{p}={cfg[p]}" in msg, (p, msg)
        with pytest.raises(cumm.ConfigError) as e:
            spec.check(cfg)
        assert msg in str(e.value)


@pytest.mark.parametrize("spec", WARP_SPECS, ids=ids)
def test_warp_subtile_must_divide_by_thread_tile(spec):
    cfg = _WARP_CASES[0]
    d = spec.derived(cfg)
    assert (d["WMITER"], d["WSUBM"], d["WSUBN"]) == (8, 4, 256)
    v = spec.violations(cfg)
    want = (
        "the warp sub-tile (WSUBM x WSUBN) must divide by the thread tile TM x TN "
        "(needs WSUBM % TM == 0 and WSUBN % TN == 0; got "
    )
    msg = next((m for m in v if m.startswith(want)), None)
    assert msg is not None, v
    for part in ("TM=8", "TN=4", "WSUBM=4", "WSUBN=256"):
        assert part in msg, msg
    # and nothing before it in the chain fails: this case isolates the sub-tile constraints
    assert all("sub-tile" in m or "32 lanes" in m for m in v), v
    with pytest.raises(cumm.ConfigError, match=r"WSUBM % TM == 0"):
        spec.resolve({k: cfg[k] for k in spec.params})


@pytest.mark.parametrize("spec", WARP_SPECS, ids=ids)
def test_derived_values_of_defaults(spec):
    cfg = spec.default_config()
    d = spec.derived(cfg)
    assert d["WMITER"] >= 1
    assert d["WSUBM"] * d["WMITER"] == cfg["WM"] and d["WSUBN"] * cfg["WNITER"] == cfg["WN"]
    assert (d["WSUBM"] // cfg["TM"]) * (d["WSUBN"] // cfg["TN"]) == 32
    assert spec.threads(cfg) == cfg["NUM_THREADS"] == 32 * (cfg["BM"] // cfg["WM"]) * (cfg["BN"] // cfg["WN"])


def test_double_buffer_uses_twice_the_shared_memory_of_warptile():
    wt, db = REGISTRY["warptile"], REGISTRY["double_buffer"]
    assert wt.params == db.params
    for cfg in (wt.default_config(), db.default_config()):
        assert db.smem(cfg) == 2 * wt.smem(cfg) == 2 * 4 * cfg["BK"] * (cfg["BM"] + cfg["BN"])


# --------------------------------------------------------------------------------------------------
# Properties: any configuration either passes check() or says why not
# --------------------------------------------------------------------------------------------------


def _space_strategy(spec: KernelSpec):
    return st.fixed_dictionaries({k: st.sampled_from(list(v)) for k, v in spec.space.items()}).map(
        lambda over: {**spec.default_config(), **over}
    )


def _assert_consistent(spec: KernelSpec, cfg: dict[str, int]) -> None:
    v = spec.violations(cfg)
    if not v:
        spec.check(cfg)
        assert spec.resolve(cfg) == cfg
        return
    assert all("(needs " in m and "; got " in m for m in v), v
    with pytest.raises(cumm.ConfigError) as e:
        spec.check(cfg)
    assert all(m in str(e.value) for m in v)


_PROPERTY = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("spec", SPECS, ids=ids)
@_PROPERTY
@given(data=st.data())
def test_space_configs_pass_or_explain(spec, data):
    _assert_consistent(spec, data.draw(_space_strategy(spec)))


@pytest.mark.parametrize("spec", SPECS, ids=ids)
@_PROPERTY
@given(data=st.data())
def test_arbitrary_configs_pass_or_explain(spec, data):
    """Off the tuning space too (zeros, odd numbers): violations() never raises, check() agrees with it."""
    values = st.one_of(st.sampled_from([0, 1, 2, 3, 4, 8, 16, 32, 64, 128, 256]), st.integers(0, 4096))
    cfg = data.draw(st.fixed_dictionaries({k: values for k in spec.params}))
    _assert_consistent(spec, cfg)


@pytest.mark.parametrize(
    "cfg, words",
    [
        (dict(BM=16, U=4), "registers"),  # 2 x 4 x (16 + 64) + 64 + 16 > 255
        (dict(BM=1, U=1, NUM_THREADS=1024, BN=6), "a multiple of 4"),
        (dict(BN=64, NUM_THREADS=40), "whole warps"),
        (dict(BN=96, NUM_THREADS=128), "k-groups"),  # 24 column threads do not divide 128
    ],
)
def test_skinny_rejects_configurations_with_the_rule_named(cfg, words):
    """skinny's constraints (registers, four columns a thread, whole warps) fail with their messages, before any
    compile or GPU."""
    with pytest.raises(cumm.ConfigError, match=words):
        REGISTRY["skinny"].resolve(cfg, 90)
