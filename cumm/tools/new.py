"""``python -m cumm new NAME --from RUNG``: a rung's folder copied as a folder of your own, ready to edit.

``NAME/kernel.cu`` is the rung's template with a first line saying where it came from; ``NAME/spec.py`` is the
rung's own ``spec.py`` (its parameters, constraints, launch geometry and policy hooks, exactly as the ladder
declares them) under the new name, and it registers the kernel when imported (``--kernel-file NAME/spec.py`` on
the command line). A user's kernel thus has the same shape as the package's rungs. A kernel that is not one of
the ladder's rungs (registered by a user) gives a spec file that reuses that kernel's geometry.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from ..core.spec import KernelSpec
from ..ladder import get_spec, rung_module
from ..ladder.registry import REGISTRY, RESERVED
from ..runtime.render import template_text


def kernel_source(name: str) -> str:
    """The template text of kernel ``name`` (a rung, or a registered kernel): what ``#define``s and
    ``common.cuh`` are put before when it is compiled."""
    spec = get_spec(name)
    return spec.source if spec.source is not None else template_text(spec.template)


def _literal(value) -> str:
    """A mapping of parameters as ``dict(A=1, B=2)``, a string in double quotes, the rest as repr."""
    if isinstance(value, dict) or hasattr(value, "items"):
        return "dict(" + ", ".join(f"{k}={_literal(v)}" for k, v in value.items()) + ")"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # a valid Python literal too
    if isinstance(value, tuple):
        return "(" + ", ".join(_literal(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    return repr(value)


def _docstring(name: str, spec: KernelSpec) -> str:
    return (
        f'"""{name}: a kernel of your own, started from cumm\'s {spec.name!r} rung ({spec.template}).\n\n'
        "Edit kernel.cu (the CUDA template) and the spec below, then:\n\n"
        f"    python -m cumm check --kernel-file {name}/spec.py\n"
        f"    python -m cumm bench --kernel-file {name}/spec.py --kernels {spec.name},{name}\n\n"
        f'Importing this file registers the kernel: cumm.matmul(a, b, kernel="{name}"). See docs/kernels.md.\n"""'
    )


def rung_spec_file(name: str, rung: str) -> str:
    """The ladder rung ``rung``'s spec.py, as kernel ``name`` that registers itself when imported."""
    text = Path(rung_module(rung).__file__).read_text()
    spec = get_spec(rung)
    body = re.sub(r'\A""".*?"""', lambda _: _docstring(name, spec), text, count=1, flags=re.S)
    body, n = re.subn(rf'(SPEC = KernelSpec\(\n\s+name=)"{re.escape(rung)}"', rf'\1"{name}"', body, count=1)
    if n != 1:
        raise ValueError(f"the spec file of {rung!r} does not start its KernelSpec with name={rung!r}")
    body = body.replace("from pathlib import Path\n", "from pathlib import Path\n\nimport cumm\n", 1)
    return body + "cumm.register(SPEC, replace=True)  # replace=True: running this file again registers your edits\n"


def spec_file(name: str, spec: KernelSpec) -> str:
    """A spec.py for kernel ``name`` from a registered kernel that is not a ladder rung: its values, and its
    launch geometry taken from that kernel's spec."""
    lines = [
        _docstring(name, spec),
        "",
        "from pathlib import Path",
        "",
        "import cumm",
        "from cumm import Constraint, KernelSpec",
        "",
        f"_RUNG = cumm.kernel_spec({_literal(spec.name)})  # geometry reused from that kernel",
        "",
        "SPEC = KernelSpec(",
    ]
    out = lines.append
    out(f"    name={_literal(name)},")
    out('    template=Path(__file__).with_name("kernel.cu"),')
    out(f"    summary={_literal(spec.summary + f' (from {spec.name})')},")
    out(f"    defaults={_literal(spec.defaults)},")
    for f in ("block", "grid", "smem", "derived"):
        out(f"    {f}=_RUNG.{f},")
    for f in ("tensor_maps", "workspace", "shape_config", "pitch_config"):
        if getattr(spec, f) is not None:
            out(f"    {f}=_RUNG.{f},")
    out("    constraints=[")
    for c in spec.constraints:
        out(f"        Constraint({_literal(c.expr)}, {_literal(c.message)}),")
    out("    ],")
    for f in ("space", "configs", "cc_defaults"):
        value = getattr(spec, f)
        if value:
            out(f"    {f}={{" + ", ".join(f"{_literal(k)}: {_literal(v)}" for k, v in value.items()) + "},")
    for f in ("split_k", "stage_out", "arch_specific", "persistent", "schedules_batch", "reads_transposed"):
        if getattr(spec, f):
            out(f"    {f}=True,")
    for f in ("vector_loads", "min_cc", "headers", "fallback"):
        if getattr(spec, f):
            out(f"    {f}={_literal(getattr(spec, f))},")
    out(f"    dtypes={_literal(spec.dtypes)},")
    out(")")
    out("cumm.register(SPEC, replace=True)  # replace=True: running this file again registers your edits")
    return "\n".join(lines) + "\n"


def new(
    name: str, rung: str = "double_buffer", directory: str | os.PathLike = ".", *, force: bool = False
) -> tuple[Path, Path]:
    """Write ``NAME/kernel.cu`` and ``NAME/spec.py`` into ``directory`` from ``rung``; returns their paths.

    Refuses (FileExistsError) to overwrite either file unless ``force``."""
    if not name.isidentifier() or name in RESERVED:
        raise ValueError(
            f"kernel name {name!r} must be an identifier (it names the CUDA function and the kernel's folder) "
            f"and not one of {', '.join(RESERVED)}, e.g. my_double_buffer"
        )
    spec = get_spec(rung)
    if spec.kind != "gemm":
        raise ValueError(
            f"kernel {rung!r} is a {spec.kind} kernel; start from a GEMM rung: "
            f"{', '.join(n for n, s in REGISTRY.items() if s.kind == 'gemm')}"
        )
    d = Path(directory) / name
    cu, py = d / "kernel.cu", d / "spec.py"
    existing = [str(p) for p in (cu, py) if p.exists()]
    if existing and not force:
        raise FileExistsError(
            f"{' and '.join(existing)} already exist{'s' if len(existing) == 1 else ''}; "
            "pass --force (force=True) to overwrite"
        )
    where = spec.template if spec.source is None else "source"
    header = f"// {name}: copied from cumm's {rung} rung ({where}); edit freely.\n"
    try:
        ladder = rung_module(rung).SPEC is spec  # a ladder rung, not replaced by a user's spec
    except ValueError:
        ladder = False
    code = rung_spec_file(name, rung) if ladder else spec_file(name, spec)
    d.mkdir(parents=True, exist_ok=True)
    cu.write_text(header + kernel_source(rung))
    py.write_text(code)
    return cu, py
