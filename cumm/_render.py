"""Template rendering: a configuration becomes CUDA source with a unique ``extern "C"`` name.

The rendered source is ``#define``s for every parameter and alignment flag, then ``common.cuh``, then the
spec's shared ``headers`` (device code two kernels use), then the kernel's template. The function name
spells out the configuration, so each configuration is its own entry in CuPy's on-disk cache on every
CuPy version, and profiles name the exact variant.
"""

from __future__ import annotations

import functools
import hashlib
import re
from importlib import resources

from ._spec import Config, KernelSpec

COMMON_HEADER = "include/common.cuh"
# Alignment flags, in order: 16-byte accesses on A, B, C are legal (see common.cuh); an optional fourth flag
# selects the batched variant (CUMM_BATCHED: gridDim.z is the batch). Unbatched variants render exactly as
# before the flag existed (no CUMM_BATCHED define, the same name), so their code and cubins are unchanged.
FLAG_NAMES = ("VEC_A", "VEC_B", "VEC_C", "CUMM_BATCHED")
ALIGNED = (1, 1, 1)
BATCHED = 3  # index of the batched flag


@functools.cache
def template_text(filename: str) -> str:
    return resources.files("cumm").joinpath("kernels", filename).read_text()


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
    text = "\n".join(code_text(template_text(f)) for f in (COMMON_HEADER, *spec.headers, spec.template))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def batched(flags: tuple[int, ...]) -> bool:
    """Whether ``flags`` select the batched variant."""
    return len(flags) > BATCHED and bool(flags[BATCHED])


def kernel_name(spec: KernelSpec, cfg: Config, flags: tuple[int, ...] = ALIGNED) -> str:
    params = "_".join(f"{k}{cfg[k]}" for k in spec.params)
    vec = "v" + "".join(str(int(f)) for f in flags[:BATCHED]) + ("_batched" if batched(flags) else "")
    return f"cumm_{spec.name}_{params}_{vec}"


def render(spec: KernelSpec, cfg: Config, flags: tuple[int, ...] = ALIGNED) -> tuple[str, str]:
    """Return (function name, CUDA source) for ``cfg`` (already resolved and checked)."""
    name = kernel_name(spec, cfg, flags)
    lines = [f"// cumm: {spec.name} rendered for {dict(cfg)}", f"#define CUMM_KERNEL {name}"]
    lines += [f"#define {k} {int(cfg[k])}" for k in spec.params]
    lines += [f"#define {f} {int(v)}" for f, v in zip(FLAG_NAMES[:BATCHED], flags[:BATCHED], strict=True)]
    if batched(flags):
        lines.append(f"#define {FLAG_NAMES[BATCHED]} 1")
    for f in (COMMON_HEADER, *spec.headers, spec.template):
        lines.append(f'#line 1 "{f}"')
        lines.append(template_text(f))
    return name, "\n".join(lines)
