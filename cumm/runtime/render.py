"""Template rendering: a configuration becomes CUDA source with a unique ``extern "C"`` name.

The rendered source is ``#define``s for every parameter and alignment flag, then ``common.cuh``, then the
spec's shared ``headers`` (device code two kernels use), then the kernel's template. The function name
spells out the configuration, so each configuration is its own entry in CuPy's on-disk cache on every
CuPy version, and profiles name the exact variant.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
from importlib import resources
from typing import NamedTuple

from ..core.errors import ConfigError
from ..core.spec import Config, KernelSpec

COMMON_HEADER = "include/common.cuh"
# The #defines of a variant's alignment and batch fields, in Variant's order.
FLAG_NAMES = ("VEC_A", "VEC_B", "VEC_C", "CUMM_BATCHED")
BATCHED = 3  # Variant's index of ``batched``
DTYPE = 4  # ... of ``dtype``
LAYOUT = 5  # ... of ``layout``
# Variant.dtype indexes this: (inputs' dtype, C's dtype). Half-precision kernels read CUMM_BF16 (0: float16 inputs,
# 1: bfloat16) and OUT_F32 (1: C is float32, 0: C has the inputs' type); accumulation is FP32 in every variant.
DTYPE_VARIANTS = (
    ("float32", "float32"),
    ("float16", "float16"),
    ("bfloat16", "bfloat16"),
    ("float16", "float32"),
    ("bfloat16", "float32"),
)
# Variant.layout's bits: operands given transposed and read in place (A column-major: CUMM_TA, B: CUMM_TB), for
# kernels that declare ``reads_transposed``.
TRANSPOSED_A, TRANSPOSED_B = 1, 2


class Variant(NamedTuple):
    """A configuration's compile variant: what its rendered source and its kernel's name depend on beside the tile
    parameters. Each field's default renders as before the field existed (no #define, nothing added to the name),
    so the code and cubins of older variants never change. A plain tuple of the first fields is one too."""

    vec_a: int = 1  # 16-byte accesses on A are legal (VEC_A; see common.cuh)
    vec_b: int = 1  # ... on B (VEC_B)
    vec_c: int = 1  # ... on C (VEC_C)
    batched: int = 0  # the batched variant (CUMM_BATCHED: grid z, or the kernel's own walk, is the batch)
    dtype: int = 0  # an index into DTYPE_VARIANTS (0: float32 in and out)
    layout: int = 0  # TRANSPOSED_A | TRANSPOSED_B
    epilogue: object = None  # a fused epilogue (cumm.plan.epilogue.Epilogue, hashable); None: none


ALIGNED = Variant()
# An epilogue variant renders include/epilogue.cuh after the headers and the epilogue's function before the template.
EPILOGUE_HEADER = "include/epilogue.cuh"
# An FP8 rung's variant with FP8 output (OUT = 3: e4m3, 4: e5m2; include/fp8.cuh) renders include/fp8_out.cuh just
# before the template: its stores and its scale_result parameter, the rung's own template and headers unchanged.
FP8_HEADER, FP8_OUT_HEADER, FP8_OUT_FIRST = "include/fp8.cuh", "include/fp8_out.cuh", 3
# The FP32-to-FP8 conversion and pair store, rendered before the FP8 stores that use it (fp8_out.cuh, and
# epilogue.cuh in an epilogue variant with an FP8 C: Epilogue.fp8, CUMM_EPI_FP8).
FP8_CVT_HEADER = "include/fp8_cvt.cuh"


def variant(flags: tuple[int, ...]) -> Variant:
    """``flags`` (a Variant, or a tuple of its first fields) as a Variant."""
    return flags if type(flags) is Variant else Variant(*flags)


def layout_of(flags: tuple[int, ...]) -> int:
    """The transposed-operand bits of ``flags`` (0: both row-major)."""
    return variant(flags).layout


def dtype_flag(inputs: str, output: str) -> int:
    """Variant.dtype of inputs of dtype ``inputs`` (a name) writing C of dtype ``output``."""
    return DTYPE_VARIANTS.index((inputs, output))


def dtypes_of(flags: tuple[int, ...]) -> tuple[str, str]:
    """(inputs' dtype, C's dtype) of ``flags``."""
    return DTYPE_VARIANTS[variant(flags).dtype]


def template_text(filename: str) -> str:
    """The text of a template or header: a file under cumm/kernels (read once), or a user's file given by its
    absolute path (read each time: the renderer runs once per configuration, and edits are seen)."""
    if os.path.isabs(filename):
        with open(filename, encoding="utf-8") as f:
            return f.read()
    return _package_text(filename)


@functools.cache
def _package_text(filename: str) -> str:
    return resources.files("cumm").joinpath("kernels", filename).read_text()


template_text.cache_clear = _package_text.cache_clear  # type: ignore[attr-defined]  # (tests forget the cache)


def spec_parts(spec: KernelSpec) -> list[tuple[str, str]]:
    """(name, text) of each part of a kernel's source after the #defines: common.cuh, the spec's headers, its
    template (``spec.source`` when given). The name is what ``#line`` gives NVRTC's messages."""
    parts = [(f, template_text(f)) for f in (COMMON_HEADER, *spec.headers)]
    parts.append((spec.template, spec.source if spec.source is not None else template_text(spec.template)))
    return parts


def line_directive(name: str) -> str:
    """``#line 1 "name"``, the name escaped as a C string (a Windows path's backslashes)."""
    return '#line 1 "' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


# A string literal (kept), a line comment or a block comment (dropped).
_COMMENT_OR_STRING = re.compile(r'"(?:\\.|[^"\\\n])*"|//[^\n]*|/\*.*?\*/', re.S)


def code_text(text: str) -> str:
    """``text`` without comments, trailing blanks or blank lines: what the compiler sees, for hashing."""
    code = _COMMENT_OR_STRING.sub(lambda m: m.group(0) if m.group(0).startswith('"') else " ", text)
    return "\n".join(" ".join(line.split()) for line in code.splitlines() if line.strip())


@functools.cache
def template_hash(spec: KernelSpec) -> str:
    """Changes whenever the kernel's code (template, common header or shared headers) changes; edits of
    comments and blank space leave it (and the tuned entries made with it) as it is."""
    text = "\n".join(code_text(t) for _, t in spec_parts(spec))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@functools.cache
def supports_batch(spec: KernelSpec) -> bool:
    """Whether the kernel runs batched products: it walks the batch's tiles itself (``schedules_batch``), or its
    template moves its pointers to its product of a batch (CUMM_BATCH(), or CUMM_SPLIT_K, which does so in a
    batched variant; see common.cuh)."""
    if spec.schedules_batch:
        return True
    code = code_text(spec_parts(spec)[-1][1])  # the template (or spec.source)
    return "CUMM_BATCH()" in code or "CUMM_SPLIT_K(" in code


def batched(flags: tuple[int, ...]) -> bool:
    """Whether ``flags`` select the batched variant."""
    return bool(variant(flags).batched)


def kernel_name(spec: KernelSpec, cfg: Config, flags: tuple[int, ...] = ALIGNED) -> str:
    v = variant(flags)
    params = "_".join(f"{k}{cfg[k]}" for k in spec.params)
    vec = "v" + "".join(str(int(f)) for f in v[:BATCHED]) + ("_batched" if v.batched else "")
    inputs, output = DTYPE_VARIANTS[v.dtype]
    if inputs != "float32":
        vec += f"_{inputs}" + ("_out_float32" if output == "float32" else "")
    lay = v.layout
    if lay:
        vec += "_t" + ("a" if lay & TRANSPOSED_A else "") + ("b" if lay & TRANSPOSED_B else "")
    if v.epilogue is not None:
        vec += f"_e{v.epilogue.digest}"
    return f"cumm_{spec.name}_{params}_{vec}"


def render(spec: KernelSpec, cfg: Config, flags: tuple[int, ...] = ALIGNED) -> tuple[str, str]:
    """Return (function name, CUDA source) for ``cfg`` (already resolved and checked)."""
    v = variant(flags)
    name = kernel_name(spec, cfg, v)
    lines = [f"// cumm: {spec.name} rendered for {dict(cfg)}", f"#define CUMM_KERNEL {name}"]
    lines += [f"#define {k} {int(cfg[k])}" for k in spec.params]
    lines += [f"#define {f} {int(x)}" for f, x in zip(FLAG_NAMES[:BATCHED], v[:BATCHED], strict=True)]
    if v.batched:
        lines.append(f"#define {FLAG_NAMES[BATCHED]} 1")
    inputs, output = DTYPE_VARIANTS[v.dtype]
    if inputs != "float32":
        lines += [f"#define CUMM_BF16 {int(inputs == 'bfloat16')}", f"#define OUT_F32 {int(output == 'float32')}"]
    lay = v.layout
    lines += [f"#define CUMM_T{x} 1" for x, bit in (("A", TRANSPOSED_A), ("B", TRANSPOSED_B)) if lay & bit]
    epi = v.epilogue
    parts = spec_parts(spec)
    if epi is not None:
        lines += ["#define CUMM_EPI 1", f"#define CUMM_EPI_NOPS {epi.nops}"]
        if epi.glu:  # the activation of the gate columns (include/epilogue.cuh's pairing)
            lines.append(f"#define CUMM_EPI_GLU {epi.glu}")
        if "include/sm90.cuh" in spec.headers:
            lines.append("#define CUMM_EPI_SM90 1")
        fp8 = []
        if epi.fp8:  # an FP8 C, stored directly as bytes (VEC_C = 0), times the scale (the last operand)
            lines.append(f"#define CUMM_EPI_FP8 {epi.fp8}")
            fp8 = [(FP8_CVT_HEADER, template_text(FP8_CVT_HEADER))]
        parts = [*parts[:-1], *fp8, (EPILOGUE_HEADER, template_text(EPILOGUE_HEADER))]
        parts += [(f"cumm epilogue function ({epi.label})", epi.definition()), spec_parts(spec)[-1]]
    if fp8_out(spec, cfg):
        if "cumm_fp8_store<" not in code_text(parts[-1][1]):
            raise ConfigError(
                f"kernel {spec.name!r} cannot store FP8 output (OUT = {cfg['OUT']}): its template does not store C "
                "through cumm_fp8_store (include/sm90_fp8.cuh), which include/fp8_out.cuh replaces; use OUT 0-2"
            )
        lines.append(f"#define CUMM_FP8_OUT_KERNEL {name}")
        parts = [*parts[:-1], *((h, template_text(h)) for h in (FP8_CVT_HEADER, FP8_OUT_HEADER)), parts[-1]]
    for f, text in parts:
        lines.append(line_directive(f))
        lines.append(text)
    return name, "\n".join(lines)


def fp8_out(spec: KernelSpec, cfg: Config) -> bool:
    """Whether ``cfg`` is an FP8 rung's variant that writes FP8 (OUT >= 3): its kernel takes scale_result first."""
    return FP8_HEADER in spec.headers and cfg.get("OUT", 0) >= FP8_OUT_FIRST


SNIPPET_FILE = "cumm epilogue snippet"  # the #line name of a user's snippet (cumm.plan.epilogue.Epilogue)


def snippet_errors(log: str, source: str) -> str:
    """NVRTC's messages about a user's epilogue snippet, each with the snippet's line it names, for a CompileError;
    "" when the log names no line of a snippet."""
    m = re.search(r'#line 1 "' + SNIPPET_FILE + r'"\n(.*?)\n;\n    }\n}', source, re.S)
    if m is None:
        return ""
    snippet = m.group(1).splitlines()
    notes = []
    for line, msg in re.findall(r'"?' + SNIPPET_FILE + r'"?\((\d+)\): (.*)', log):
        i = int(line)
        text = snippet[i - 1].strip() if 0 < i <= len(snippet) else ""
        notes.append(f"epilogue snippet line {i}: {msg.strip()}\n    {text}")
    if not notes:
        return ""
    return "in your epilogue snippet:\n" + "\n".join(notes) + "\n"
