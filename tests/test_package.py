"""The package as a whole, on the CPU: its public surface, its import graph, its formatting, the kernel tree."""

from __future__ import annotations

import ast
import pathlib
import shutil
import subprocess
import sys

import pytest

import cumm

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "cumm"


# the subpackages, bottom to top; torch (the torch.library ops over api) only with `import cumm.torch`
LAYERS = {"core", "runtime", "ladder", "plan", "api", "tools", "torch"}


def test_namespace_is_the_public_api():
    """What ``cumm`` holds is ``__all__`` and its layers (subpackages, internal), nothing else."""
    public = {n for n in dir(cumm) if not n.startswith("_")}
    assert public - LAYERS == set(cumm.__all__), f"leaked: {sorted(public - LAYERS - set(cumm.__all__))}"
    assert {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()} == LAYERS
    for name in cumm.__all__:
        assert hasattr(cumm, name), name


def _module_of(path: pathlib.Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: pathlib.Path) -> set[str]:
    """cumm modules ``path`` imports at module level or in functions (relative imports resolved)."""
    mod = _module_of(path)
    pkg = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("cumm"):
                continue
            for alias in node.names:  # "from . import _tune" names a module
                sub = f"{target}.{alias.name}"
                out.add(
                    sub
                    if (ROOT / (sub.replace(".", "/") + ".py")).exists() or (ROOT / sub.replace(".", "/")).is_dir()
                    else target
                )
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name == "cumm" or a.name.startswith("cumm."))
    out.discard(mod)
    return out


def test_no_import_cycle():
    """No module imports (directly or through others) one that imports it back; a package's __init__ may import
    its own submodules, which is not a cycle."""
    graph = {_module_of(p): _imports(p) for p in PACKAGE.rglob("*.py")}
    graph = {m: {d for d in deps if d in graph and not m.startswith(d + ".")} for m, deps in graph.items()}

    def reach(start: str) -> set[str]:
        seen, todo = set(), list(graph[start])
        while todo:
            m = todo.pop()
            if m not in seen:
                seen.add(m)
                todo.extend(graph[m])
        return seen

    cycles = sorted(m for m in graph if m in reach(m))
    assert not cycles, f"modules on an import cycle: {cycles}"


def test_no_module_imports_the_package_root():
    """The package root imports the API, which imports every layer: a module that imports the root (``import cumm``,
    ``from .. import x``, at module level or in a function) closes a circle through it."""
    for path in PACKAGE.rglob("*.py"):
        if path != PACKAGE / "__init__.py":
            assert "cumm" not in _imports(path), f"{path.relative_to(ROOT)} imports the package root cumm"


def test_spec_repr_is_short_and_readable():
    for name in [*cumm.kernels(), *cumm.kernels("chain")]:
        text = repr(cumm.kernel_spec(name))
        assert text.startswith(f"KernelSpec({name!r}") and cumm.kernel_spec(name).template in text
        assert len(text) < 600 and "<function" not in text and "0x" not in text, text


def test_kernel_tree_shows_the_ladder():
    """kernels/gemm holds the ladder's templates numbered in ladder order; every template and header is used."""
    gemm = sorted(p.parent.name for p in (PACKAGE / "kernels" / "gemm").glob("*/kernel.cu"))
    assert [n.split("_", 1)[0] for n in gemm] == [f"{i:02d}" for i in range(1, len(gemm) + 1)]
    registered = [cumm.kernel_spec(n).template for n in cumm.kernels()]
    assert registered == [f"gemm/{n}/kernel.cu" for n in gemm][: len(registered)]
    for n in cumm.kernels("chain"):
        assert cumm.kernel_spec(n).template.startswith("chain/")


def test_every_kernel_file_opens_with_what_it_changes():
    """Each template and header starts with a comment block (what it is, what it changes, why it is faster),
    and none carries a session diary."""
    for path in (PACKAGE / "kernels").rglob("*.cu*"):
        text = path.read_text()
        assert text.startswith("//"), f"{path.relative_to(ROOT)} does not open with a comment"
        assert "session" not in text.lower(), f"{path.relative_to(ROOT)} mentions a session"


@pytest.mark.skipif(
    shutil.which("ruff") is None
    and subprocess.run([sys.executable, "-m", "ruff", "--version"], capture_output=True).returncode != 0,
    reason="ruff is not installed",
)
def test_tree_is_ruff_clean():
    """``ruff check`` and ``ruff format --check`` pass on the package, the tests and the benchmarks."""
    cmd = [shutil.which("ruff")] if shutil.which("ruff") else [sys.executable, "-m", "ruff"]
    paths = [str(ROOT / d) for d in ("cumm", "tests", "bench")]
    lint = subprocess.run([*cmd, "check", *paths], capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    fmt = subprocess.run([*cmd, "format", "--check", *paths], capture_output=True, text=True)
    assert fmt.returncode == 0, fmt.stdout + fmt.stderr


@pytest.mark.skipif(
    shutil.which("ruff") is None
    and subprocess.run([sys.executable, "-m", "ruff", "--version"], capture_output=True).returncode != 0,
    reason="ruff is not installed",
)
def test_whole_tree_is_ruff_format_clean():
    """``ruff format --check .`` from the repository root passes (what a user runs), and so do the Python code
    blocks of the README and docs (ruff formats Markdown under --preview only; checked explicitly)."""
    cmd = [shutil.which("ruff")] if shutil.which("ruff") else [sys.executable, "-m", "ruff"]
    fmt = subprocess.run([*cmd, "format", "--check", "."], capture_output=True, text=True, cwd=ROOT)
    assert fmt.returncode == 0, fmt.stdout + fmt.stderr
    lint = subprocess.run([*cmd, "check", "."], capture_output=True, text=True, cwd=ROOT)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    docs = [str(p) for p in (ROOT / "README.md", ROOT / "docs") if p.exists()]
    md = subprocess.run([*cmd, "format", "--check", "--preview", *docs], capture_output=True, text=True, cwd=ROOT)
    assert md.returncode == 0, md.stdout + md.stderr
