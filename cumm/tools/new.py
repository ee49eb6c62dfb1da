"""``python -m cumm new NAME --from RUNG``: a rung's template and spec as two files of your own, ready to edit.

``NAME.cu`` is the rung's template with a first line saying where it came from; ``NAME.py`` defines the
kernel's spec (the rung's values: defaults, constraints as ``Constraint(...)`` lines, launch geometry as the
functions the ladder uses, copied from ``cumm/_ladder.py``) and registers it. Importing the file (or
``--kernel-file NAME.py`` on the command line) makes ``NAME`` a kernel like any rung.
"""

from __future__ import annotations

import ast
import inspect
import json
import os
import re
from pathlib import Path

from ..core.spec import KernelSpec
from ..ladder.ladder import get_spec
from ..ladder.registry import REGISTRY, RESERVED
from ..runtime.render import template_text

_GEOMETRY = ("block", "grid", "smem", "derived", "tensor_maps", "workspace")
_SPEC_HELPERS = {"cdiv": "def cdiv(a, b):\n    return -(-a // b)"}  # names _ladder imports from _spec


def kernel_source(name: str) -> str:
    """The template text of kernel ``name`` (a rung, or a registered kernel): what ``#define``s and
    ``common.cuh`` are put before when it is compiled."""
    spec = get_spec(name)
    return spec.source if spec.source is not None else template_text(spec.template)


def _ladder_call(rung: str) -> tuple[str, ast.Call, dict[str, ast.AST]] | None:
    """(source of cumm/_ladder.py, the KernelSpec(...) call of ``rung``, its module-level definitions)."""
    from ..ladder import ladder as _ladder

    try:
        src = inspect.getsource(_ladder)
    except (OSError, TypeError):
        return None
    tree = ast.parse(src)
    defs: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            defs[node.name] = node
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            defs[node.targets[0].id] = node
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "KernelSpec":
            for kw in node.keywords:
                if kw.arg == "name" and isinstance(kw.value, ast.Constant) and kw.value.value == rung:
                    return src, node, defs
    return None


def _geometry(rung: str) -> tuple[list[str], dict[str, str]] | None:
    """(helper definitions, {field: expression}) of the rung's block, grid, smem and derived, as written in
    cumm/_ladder.py; None when the rung is not written there."""
    found = _ladder_call(rung)
    if found is None:
        return None
    src, call, defs = found
    exprs: dict[str, str] = {}
    needed: set[str] = set()
    extra: set[str] = set()

    def collect(node: ast.AST) -> None:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load):
                if sub.id in defs and sub.id not in needed:
                    needed.add(sub.id)
                    collect(defs[sub.id])
                elif sub.id in _SPEC_HELPERS:
                    extra.add(sub.id)

    for kw in call.keywords:
        if kw.arg in _GEOMETRY:
            exprs[kw.arg] = ast.get_source_segment(src, kw.value) or ""
            collect(kw.value)
    if any(not e for e in exprs.values()):
        return None
    helpers = [_SPEC_HELPERS[n] for n in sorted(extra)]
    order = sorted(needed, key=lambda n: defs[n].lineno)
    # cumm's modules by absolute name: the file is not inside the package
    helpers += [
        re.sub(
            r"\bfrom \.(\w)",
            r"from cumm.\1",
            re.sub(r"\bfrom \. import\b", "from cumm import", ast.get_source_segment(src, defs[n]) or ""),
        )
        for n in order
    ]
    return helpers, exprs


def _literal(value) -> str:
    """A mapping of parameters as ``dict(A=1, B=2)``, a string in double quotes, the rest as repr."""
    if isinstance(value, dict) or hasattr(value, "items"):
        return "dict(" + ", ".join(f"{k}={_literal(v)}" for k, v in value.items()) + ")"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # a valid Python literal too
    if isinstance(value, tuple):
        return "(" + ", ".join(_literal(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    return repr(value)


def spec_file(name: str, spec: KernelSpec, template_file: str) -> str:
    """The Python file defining kernel ``name`` from ``spec``'s values, its template ``template_file`` (a name
    next to the file)."""
    geo = _geometry(spec.name)
    helpers, exprs = geo if geo is not None else ([], {})
    base = f"_RUNG = cumm.kernel_spec({_literal(spec.name)})  # geometry reused from the rung\n" if geo is None else ""
    lines = [
        f'"""{name}: a kernel of your own, started from cumm\'s {spec.name!r} rung ({spec.template}).',
        "",
        f"Edit {template_file} (the CUDA template) and the spec below, then:",
        "",
        f"    python -m cumm check --kernel-file {name}.py",
        f"    python -m cumm bench --kernel-file {name}.py --kernels {spec.name},{name}",
        "",
        f'Importing this file registers the kernel: cumm.matmul(a, b, kernel="{name}"). See docs/kernels.md.',
        '"""',
        "",
        "from pathlib import Path",
        "",
        "import cumm",
        "from cumm import Constraint, KernelSpec",
        "",
    ]
    if base:
        lines += [base]
    for h in helpers:
        lines += ["", h, ""]
    lines += ["", "SPEC = KernelSpec("]
    out = lines.append
    out(f"    name={_literal(name)},")
    out(f"    template=str(Path(__file__).with_name({_literal(template_file)})),")
    out(f"    summary={_literal(spec.summary + f' (from {spec.name})')},")
    out(f"    defaults={_literal(spec.defaults)},")
    for f in ("block", "grid", "smem"):
        if f in exprs:
            out(f"    {f}={exprs[f]},")
        elif f != "smem" or base:
            out(f"    {f}=_RUNG.{f},")
    if "tensor_maps" in exprs:
        out(f"    tensor_maps={exprs['tensor_maps']},  # copy-engine (TMA) descriptors passed after the arguments")
    elif spec.tensor_maps is not None:
        out(
            "    tensor_maps=_RUNG.tensor_maps,"
            if base
            else f"    tensor_maps=cumm.kernel_spec({_literal(spec.name)}).tensor_maps,"
        )
    if "workspace" in exprs:
        out(f"    workspace={exprs['workspace']},  # a per-stream scratch buffer, the kernel's last argument")
    elif spec.workspace is not None:
        out(
            "    workspace=_RUNG.workspace,"
            if base
            else f"    workspace=cumm.kernel_spec({_literal(spec.name)}).workspace,"
        )
    if spec.fallback:
        out(f"    fallback={_literal(spec.fallback)},  # the kernel run on operands the copy engine cannot read")
    if "derived" in exprs:
        out(f"    derived={exprs['derived']},  # named values the constraints use")
    elif base:
        out("    derived=_RUNG.derived,")
    out("    constraints=[")
    for c in spec.constraints:
        out(f"        Constraint({_literal(c.expr)}, {_literal(c.message)}),")
    out("    ],")
    if spec.space:
        out(f"    space={_literal(spec.space)},  # what cumm.tune searches")
    if spec.configs:
        out("    configs={" + ", ".join(f"{_literal(k)}: {_literal(v)}" for k, v in spec.configs.items()) + "},")
    if spec.cc_defaults:
        out(
            "    cc_defaults={"
            + ", ".join(f"{k}: {_literal(v)}" for k, v in spec.cc_defaults.items())
            + "},  # per compute capability: these win over defaults there"
        )
    for flag in ("split_k", "stage_out", "arch_specific", "persistent", "schedules_batch"):
        if getattr(spec, flag):
            out(f"    {flag}=True,")
    if spec.vector_loads:
        out(f"    vector_loads={_literal(spec.vector_loads)},")
    if spec.min_cc:
        out(f"    min_cc={spec.min_cc},")
    if spec.headers:
        out(f"    headers={_literal(spec.headers)},")
    out(f"    dtypes={_literal(spec.dtypes)},")
    out(")")
    out("cumm.register(SPEC, replace=True)  # replace=True: running this file again registers your edits")
    return "\n".join(lines) + "\n"


def new(
    name: str, rung: str = "double_buffer", directory: str | os.PathLike = ".", *, force: bool = False
) -> tuple[Path, Path]:
    """Write ``NAME.cu`` and ``NAME.py`` into ``directory`` from ``rung``; returns their paths.

    Refuses (FileExistsError) to overwrite either file unless ``force``."""
    if not name.isidentifier() or name in RESERVED:
        raise ValueError(
            f"kernel name {name!r} must be an identifier (it names the CUDA function and the Python "
            f"file) and not one of {', '.join(RESERVED)}, e.g. my_double_buffer"
        )
    spec = get_spec(rung)
    if spec.kind != "gemm":
        raise ValueError(
            f"kernel {rung!r} is a {spec.kind} kernel; start from a GEMM rung: "
            f"{', '.join(n for n, s in REGISTRY.items() if s.kind == 'gemm')}"
        )
    d = Path(directory)
    cu, py = d / f"{name}.cu", d / f"{name}.py"
    existing = [str(p) for p in (cu, py) if p.exists()]
    if existing and not force:
        raise FileExistsError(
            f"{' and '.join(existing)} already exist{'s' if len(existing) == 1 else ''}; "
            "pass --force (force=True) to overwrite"
        )
    where = spec.template if spec.source is None else "source"
    text = kernel_source(rung)
    header = f"// {name}: copied from cumm's {rung} rung ({where}); edit freely.\n"
    d.mkdir(parents=True, exist_ok=True)
    code = spec_file(name, spec, cu.name)
    cu.write_text(header + text)
    py.write_text(code)
    return cu, py
