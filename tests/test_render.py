"""Template rendering on the CPU: #defines, the common header, unique valid names, the template hash."""

from __future__ import annotations

import itertools
import re

import pytest

from cumm.core.spec import KernelSpec
from cumm.ladder import REGISTRY
from cumm.runtime import render as _render

SPECS = list(REGISTRY.values())
ALL_FLAGS = list(itertools.product((0, 1), repeat=len(_render.FLAG_NAMES)))
C_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def ids(spec: KernelSpec) -> str:
    return spec.name


def _valid_configs(spec: KernelSpec, limit: int = 64) -> list[dict[str, int]]:
    """Up to ``limit`` valid configurations of the tuning space, spread over it, defaults first."""
    keys = list(spec.space)
    every = (
        {**spec.default_config(), **dict(zip(keys, v, strict=True))}
        for v in itertools.product(*(spec.space[k] for k in keys))
    )
    valid = [c for c in every if not spec.violations(c)]
    step = max(1, len(valid) // limit)
    out = [spec.default_config()] + [c for c in valid[::step] if c != spec.default_config()]
    return out[:limit]


@pytest.fixture
def fresh_caches():
    """Clear the renderer's caches before and after a test that swaps template text (the originals:
    monkeypatch may still hold a replacement when this tears down)."""
    text, digest = _render.template_text, _render.template_hash
    text.cache_clear()
    digest.cache_clear()
    yield
    text.cache_clear()
    digest.cache_clear()


@pytest.mark.parametrize("spec", SPECS, ids=ids)
@pytest.mark.parametrize(
    "flags", [(1, 1, 1), (0, 0, 0), (1, 0, 1), (1, 1, 1, 1), (0, 1, 0, 1)], ids=lambda f: "v" + "".join(map(str, f))
)
def test_source_defines_every_parameter_and_flag(spec, flags):
    cfg = spec.default_config()
    name, src = _render.render(spec, cfg, flags)
    lines = src.splitlines()
    for k in spec.params:
        assert f"#define {k} {cfg[k]}" in lines, k
    vec = _render.FLAG_NAMES[:3]
    assert vec == ("VEC_A", "VEC_B", "VEC_C") and _render.FLAG_NAMES[3] == "CUMM_BATCHED"
    for f, v in zip(vec, flags[:3], strict=True):
        assert f"#define {f} {v}" in lines, f
    batched = len(flags) == 4
    # an unbatched variant renders as before the batched flag existed: no define, the same name
    assert ("#define CUMM_BATCHED 1" in lines) == batched and name.endswith("_batched") == batched
    assert f"#define CUMM_KERNEL {name}" in lines
    # each macro is defined exactly once
    expect = {*spec.params, *vec, "CUMM_KERNEL", *(["CUMM_BATCHED"] if batched else [])}
    defined = [ln.split()[1] for ln in lines if ln.startswith("#define ")]
    header = [d for d in defined if d in (*spec.params, *vec, "CUMM_KERNEL")] + (["CUMM_BATCHED"] if batched else [])
    assert sorted(header) == sorted(expect)


@pytest.mark.parametrize("spec", SPECS, ids=ids)
def test_source_includes_common_header_then_template(spec):
    _, src = _render.render(spec, spec.default_config())
    common = _render.template_text(_render.COMMON_HEADER)
    body = _render.template_text(spec.template)
    assert "CUMM_GEMM_ARGS" in common  # it is the real header
    i_defs = src.index("#define CUMM_KERNEL")
    i_common = src.index(common)
    i_body = src.index(body)
    assert i_defs < i_common < i_body
    assert f'#line 1 "{_render.COMMON_HEADER}"' in src
    assert f'#line 1 "{spec.template}"' in src
    assert "CUMM_KERNEL" in body, "the template must name its entry point CUMM_KERNEL"


@pytest.mark.parametrize("spec", SPECS, ids=ids)
def test_names_are_c_identifiers_unique_per_config_and_flags(spec):
    configs = _valid_configs(spec)
    names = {}
    for cfg in configs:
        for flags in ALL_FLAGS:
            name, src = _render.render(spec, cfg, flags)
            assert C_IDENTIFIER.fullmatch(name), name
            assert name.startswith(f"cumm_{spec.name}_")
            assert name == _render.kernel_name(spec, cfg, flags)
            key = (tuple(cfg[k] for k in spec.params), flags)
            assert name not in names or names[name] == key, f"{name} names both {names[name]} and {key}"
            names[name] = key
    assert len(names) == len(configs) * len(ALL_FLAGS)


def test_names_differ_across_kernels_with_the_same_parameters():
    a, b = REGISTRY["warptile"], REGISTRY["double_buffer"]
    cfg = a.default_config()
    assert _render.kernel_name(a, cfg) != _render.kernel_name(b, cfg)


def test_render_is_deterministic():
    spec = REGISTRY["double_buffer"]
    cfg = spec.default_config()
    assert _render.render(spec, cfg) == _render.render(spec, dict(cfg))
    assert _render.render(spec, cfg, (1, 1, 1)) == _render.render(spec, cfg)  # ALIGNED is the default


def test_templates_exist_for_every_spec():
    for spec in SPECS:
        assert _render.template_text(spec.template).strip(), spec.template


def _hash(spec: KernelSpec) -> str:
    """template_hash after clearing its cache, so that it sees the current template text."""
    _render.template_hash.cache_clear()
    return _render.template_hash(spec)


def test_specs_are_hashable_registry_entries():
    """template_hash is cached per spec, so a spec must hash (by identity: one registry entry)."""
    assert len({hash(s) for s in SPECS}) == len(SPECS)
    assert REGISTRY["naive"] == REGISTRY["naive"] and REGISTRY["naive"] != REGISTRY["coalesced"]


@pytest.mark.parametrize("spec", SPECS, ids=ids)
def test_template_hash_tracks_template_text(spec, monkeypatch, fresh_caches):
    h0 = _hash(spec)
    assert re.fullmatch(r"[0-9a-f]{16}", h0)
    assert _hash(spec) == h0  # stable

    original = _render.template_text
    monkeypatch.setattr(
        _render, "template_text", lambda f: original(f) + ("\n#define CUMM_EDITED 1\n" if f == spec.template else "")
    )
    h1 = _hash(spec)
    assert h1 != h0, "editing the kernel's template must change its hash"
    assert "CUMM_EDITED" in _render.render(spec, spec.default_config())[1]

    monkeypatch.setattr(
        _render,
        "template_text",
        lambda f: original(f) + ("\n#define CUMM_EDITED 1\n" if f == _render.COMMON_HEADER else ""),
    )
    h2 = _hash(spec)
    assert h2 not in (h0, h1), "editing common.cuh must change every kernel's hash"

    monkeypatch.setattr(_render, "template_text", original)
    assert _hash(spec) == h0


@pytest.mark.parametrize("spec", SPECS[:3] + SPECS[-3:], ids=ids)
def test_template_hash_ignores_comments_and_blank_space(spec, monkeypatch, fresh_caches):
    """Documentation edits keep the hash (and the tuned entries made with it); a string literal is code."""
    h0 = _hash(spec)
    original = _render.template_text
    edited = "// a new header line\n/* and a block\n   comment */\n\n{}   \n// the end\n"
    monkeypatch.setattr(
        _render, "template_text", lambda f: edited.format(original(f)) if f == spec.template else original(f)
    )
    assert _hash(spec) == h0
    monkeypatch.setattr(
        _render,
        "template_text",
        lambda f: original(f) + ('\nconst char* cumm_s = "// x";\n' if f == spec.template else ""),
    )
    assert _hash(spec) != h0


def test_code_text_keeps_strings_and_drops_comments():
    src = 'a = "// not a comment"; // a comment\n\n  b /* x\n y */ = 2;   \n'
    assert _render.code_text(src) == 'a = "// not a comment";\nb = 2;'


def test_template_hash_differs_between_templates():
    by_template = {s.template: _hash(s) for s in SPECS}
    assert len(set(by_template.values())) == len(by_template)


def test_template_hash_cached_per_spec_and_cleared_on_edit(monkeypatch, fresh_caches):
    spec = REGISTRY["smem"]
    h0 = _render.template_hash(spec)
    assert _render.template_hash(spec) == h0
    original = _render.template_text
    monkeypatch.setattr(
        _render, "template_text", lambda f: original(f) + ("\nint cumm_edited;\n" if f == spec.template else "")
    )
    assert _render.template_hash(spec) == h0, "cached until the cache is cleared"
    _render.template_hash.cache_clear()
    assert _render.template_hash(spec) != h0


def test_transposed_layouts_render_their_defines_and_names():
    """The sixth flag (operands read in place, transposed): CUMM_TA / CUMM_TB defined and the name marked only when
    set, so the row-major variants render as before it existed."""
    spec = REGISTRY["wgmma_ws"]
    cfg = spec.resolve({}, 90)
    base = (1, 1, 1, 0, _render.dtype_flag("bfloat16", "bfloat16"))
    names = {}
    for lay in (0, 1, 2, 3):
        flags = base + ((lay,) if lay else ())
        name, src = _render.render(spec, cfg, flags)
        names[lay] = name
        assert ("#define CUMM_TA 1" in src) == bool(lay & _render.TRANSPOSED_A)
        assert ("#define CUMM_TB 1" in src) == bool(lay & _render.TRANSPOSED_B)
        assert _render.layout_of(flags) == lay
    assert names[0] == _render.kernel_name(spec, cfg, base) and not names[0].endswith(("_ta", "_tb", "_tab"))
    assert [names[k][-4:] for k in (1, 2, 3)] == ["6_ta", "6_tb", "_tab"]
    assert _render.render(spec, cfg, base + (0,))[1] == _render.render(spec, cfg, base)[1]
