"""The package explains itself: --version, --help and the install hint without CuPy, the metadata in
pyproject.toml, and an sdist whose tests run. All on the CPU."""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

import cumm
from cumm.core import install as _install
from cumm.tools import cli as _cli

ROOT = Path(__file__).resolve().parents[1]

try:
    import tomllib
except ImportError:  # Python 3.10
    tomllib = None


def pyproject() -> dict:
    if tomllib is None:
        pytest.skip("reading pyproject.toml needs tomllib (Python 3.11 or newer)")
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


# --------------------------------------------------------------------------------------------------
# --version and --help
# --------------------------------------------------------------------------------------------------


def test_version_flag(capsys):
    with pytest.raises(SystemExit) as e:
        _cli.main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out.strip() == f"cumm {cumm.__version__}"


def test_python_m_cumm_version():
    p = subprocess.run(
        [sys.executable, "-m", "cumm", "--version"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
        timeout=120,
    )
    assert p.returncode == 0 and p.stdout.strip() == f"cumm {cumm.__version__}", p.stdout + p.stderr


def test_help_says_what_cumm_is(capsys):
    with pytest.raises(SystemExit):
        _cli.main(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    for words in ("GEMM kernels", "NVRTC", "FP32", "3xTF32", "float16", "bfloat16", "naive", "Hopper wgmma"):
        assert words in out, words
    assert "SGEMM" not in out


def test_the_console_script_is_the_cli():
    scripts = pyproject()["project"]["scripts"]
    module, _, func = scripts["cumm"].partition(":")
    assert getattr(importlib.import_module(module), func) is _cli.main


# --------------------------------------------------------------------------------------------------
# Without CuPy (pip install . without an extra)
# --------------------------------------------------------------------------------------------------


@pytest.fixture
def no_cupy(tmp_path):
    """Environment for a child process in which ``import cupy`` fails as it does where CuPy is not installed."""
    hidden = tmp_path / "hide-cupy"
    for name in ("cupy", "cupy_backends"):
        (hidden / name).mkdir(parents=True)
        (hidden / name / "__init__.py").write_text(f"raise ModuleNotFoundError(\"No module named '{name}'\")\n")
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(hidden), str(ROOT)])}


def run_cumm(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "cumm", *args], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120
    )


def test_cupy_is_really_hidden(no_cupy):
    p = subprocess.run([sys.executable, "-c", "import cupy"], capture_output=True, text=True, env=no_cupy)
    assert p.returncode != 0 and "No module named 'cupy'" in p.stderr


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["bench", "--help"], ["new", "--help"]])
def test_help_and_version_work_without_cupy(no_cupy, args):
    p = run_cumm(no_cupy, *args)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stdout + p.stderr
    assert ("usage:" in p.stdout) if "--help" in args else (p.stdout.strip() == f"cumm {cumm.__version__}")


@pytest.mark.parametrize(
    "args",
    [
        ["bench", "--sizes", "64"],
        ["bench", "--shapes", "64x64x64", "--beta", "1"],
        ["tune", "--kernel", "naive", "--shape", "64x64x64"],
        ["tune", "--plan", "--kernel", "naive", "--shape", "64x64x64"],
        ["check", "--kernel", "naive"],
    ],
)
def test_gpu_commands_without_cupy_say_what_to_install(no_cupy, args):
    p = run_cumm(no_cupy, *args)
    assert p.returncode == 1 and "Traceback" not in p.stderr, p.stdout + p.stderr
    assert p.stderr.startswith(f"python -m cumm {args[0]}: cumm needs CuPy"), p.stderr
    assert 'pip install ".[cuda12]"' in p.stderr and 'pip install ".[cuda13]"' in p.stderr


def test_new_works_without_cupy(no_cupy, tmp_path):
    p = run_cumm(no_cupy, "new", "mine", "--dir", str(tmp_path))
    assert p.returncode == 0, p.stdout + p.stderr
    assert (tmp_path / "mine" / "kernel.cu").is_file() and (tmp_path / "mine" / "spec.py").is_file()


def test_the_api_without_cupy_raises_the_hint(no_cupy):
    code = """
import cumm
assert cumm.__version__
for name in cumm.__all__:
    try:
        getattr(cumm, name)
    except ImportError as e:
        assert 'pip install ".[cuda12]"' in str(e), e
    else:
        raise SystemExit(f"cumm.{name} without CuPy")
try:
    cumm.no_such_thing
except AttributeError:
    pass
try:
    from cumm import matmul
except ImportError as e:
    print("OK", e)
"""
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=no_cupy, timeout=120)
    assert p.returncode == 0 and p.stdout.startswith("OK cumm.matmul: cumm needs CuPy"), p.stdout + p.stderr


def test_install_hint_names_only_what_exists():
    """The extras it names are pyproject's; it names no distribution that no index has."""
    extras = pyproject()["project"]["optional-dependencies"]
    named = re.findall(r'pip install "\.\[(\w+)\]"', _install.HINT)
    assert named == ["cuda12", "cuda13"] and all(e in extras for e in named)
    assert "cumm-ladder[" not in _install.HINT
    assert "cupy-cuda12x" in " ".join(extras["cuda12"]) and "cupy-cuda13x" in " ".join(extras["cuda13"])


# --------------------------------------------------------------------------------------------------
# Metadata
# --------------------------------------------------------------------------------------------------


def test_pyproject_metadata():
    project = pyproject()["project"]
    assert project["license"] == "MIT" and project["license-files"] == ["LICENSE"]
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")
    classifiers = project["classifiers"]
    assert not [c for c in classifiers if c.startswith("License ::")], "the SPDX license replaces License classifiers"
    for v in ("3.10", "3.11", "3.12", "3.13"):
        assert f"Programming Language :: Python :: {v}" in classifiers
    assert project["requires-python"] == ">=3.10"
    for c in ("Environment :: GPU :: NVIDIA CUDA", "Operating System :: POSIX :: Linux"):
        assert c in classifiers
    assert any(c.startswith("Topic :: ") for c in classifiers)
    assert "urls" not in project, "project URLs must point at something public; there is none yet"
    # the version is cumm.__version__, read by setuptools without importing cumm
    assert project["dynamic"] == ["version"]
    assert pyproject()["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "cumm.__version__"}
    assert re.search(r'^__version__ = "[0-9][^"]*"$', (ROOT / "cumm" / "__init__.py").read_text(), re.M)


def test_classifiers_are_valid():
    trove = pytest.importorskip("trove_classifiers", reason="pip install trove-classifiers to check the classifiers")
    bad = [c for c in pyproject()["project"]["classifiers"] if c not in trove.classifiers]
    assert not bad, bad


# --------------------------------------------------------------------------------------------------
# The sdist
# --------------------------------------------------------------------------------------------------

IN_SDIST = ["tests", "bench", "docs", ".ci"]


def test_manifest_grafts_what_the_tests_need():
    lines = (ROOT / "MANIFEST.in").read_text().splitlines()
    for d in IN_SDIST:
        assert f"graft {d}" in lines, d
    assert set(pyproject()["tool"]["pytest"]["ini_options"]["testpaths"]) <= set(IN_SDIST)


def _has_build() -> bool:
    spec = importlib.util.find_spec("build")
    return spec is not None and spec.origin is not None  # not a namespace package made of a build/ directory


@pytest.mark.skipif(not _has_build(), reason="the 'build' package is not installed (pip install build)")
def test_sdist_carries_its_tests_and_they_collect(tmp_path):
    tree, out = tmp_path / "tree", tmp_path / "dist"  # a copy: building writes an .egg-info into the tree
    junk = shutil.ignore_patterns(".git", "__pycache__", "*.egg-info", ".benchmarks", ".*_cache", "build", "dist")
    shutil.copytree(ROOT, tree, ignore=junk)
    # build with this environment's setuptools when it is new enough (no index needed), else in an isolated one
    own = re.match(r"\d+", importlib.metadata.version("setuptools")) if importlib.util.find_spec("setuptools") else None
    isolation = ["--no-isolation"] if own and int(own.group()) >= 77 else []
    p = subprocess.run(
        [sys.executable, "-m", "build", "--sdist", *isolation, "--outdir", str(out), str(tree)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    (sdist,) = out.glob("*.tar.gz")
    assert sdist.name == f"cumm_ladder-{cumm.__version__}.tar.gz"
    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
        tar.extractall(tmp_path / "src", **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
    for f in (
        "LICENSE",
        "README.md",
        "MANIFEST.in",
        "tests/conftest.py",
        "tests/test_packaging.py",
        "bench/conftest.py",
        "bench/test_benchmarks.py",
        "docs/kernels.md",
        ".ci/run",
        "cumm/tuned/h200.json",
        "cumm/kernels/gemm/13_wgmma/kernel.cu",
    ):
        assert f in names, f"{f} is not in the sdist"
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    (src,) = (tmp_path / "src").iterdir()
    pkg_info = (src / "PKG-INFO").read_text()
    assert f"Version: {cumm.__version__}" in pkg_info and "License-Expression: MIT" in pkg_info
    p = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
        capture_output=True,
        text=True,
        cwd=src,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
        timeout=600,
    )
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    summary = p.stdout.strip().splitlines()[-1]
    assert re.fullmatch(r"\d+ tests collected in [\d.]+s", summary), p.stdout[-3000:]
