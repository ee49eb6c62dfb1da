"""Gatekeeping for the pytest-benchmark suite in bench/ (self-contained: tests/conftest.py is not loaded here).

The benchmarks run only with ``--benchmark-only`` (so a plain ``pytest`` never spends minutes timing) and
only on a CUDA GPU; otherwise each is skipped with the reason. Sizes: ``--cumm-sizes 512,1024``, else the
environment variable CUMM_BENCH_SIZES, else 1024,2048,4096.

``--benchmark-only`` where no benchmark can run (no GPU, no driver) ends with one line that says so and why; the
exit code stays 0, as for any run whose tests all skip (nothing failed).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
NOTHING_RAN = pytest.StashKey[tuple[str, int]]()  # (why, how many benchmarks) when --benchmark-only cannot run
DEFAULT_SIZES = "1024,2048,4096"


def pytest_addoption(parser):
    parser.addoption(
        "--cumm-sizes",
        default=None,
        metavar="S1,S2",
        help=f"square sizes for the bench/ suite (else env CUMM_BENCH_SIZES, else {DEFAULT_SIZES})",
    )


def bench_sizes(config) -> list[int]:
    text = config.getoption("cumm_sizes") or os.environ.get("CUMM_BENCH_SIZES") or DEFAULT_SIZES
    try:
        sizes = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        sizes = []
    if not sizes or min(sizes) <= 0:
        raise pytest.UsageError(f"benchmark sizes must be positive integers like 512,1024; got {text!r}")
    return sizes


def pytest_generate_tests(metafunc):
    if "size" in metafunc.fixturenames:
        metafunc.parametrize("size", bench_sizes(metafunc.config), ids=lambda s: f"{s}^3")


def _skip_reason(config) -> str | None:
    if not config.pluginmanager.hasplugin("benchmark"):
        return "pytest-benchmark is not installed: pip install 'cumm[test]'"
    if not config.getoption("benchmark_only", default=False):
        return "benchmarks run only with --benchmark-only"
    from cumm.runtime.timing import gpu_unavailable

    return gpu_unavailable()


def pytest_collection_modifyitems(config, items):
    # This hook sees every collected item, also those of tests/: touch only the ones under bench/.
    mine = [item for item in items if HERE in Path(str(item.path)).resolve().parents]
    reason = _skip_reason(config) if mine else None
    if reason:
        for item in mine:
            item.add_marker(pytest.mark.skip(reason=reason))
        if config.getoption("benchmark_only", default=False):
            config.stash[NOTHING_RAN] = (reason, len(mine))


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if NOTHING_RAN in config.stash:
        reason, n = config.stash[NOTHING_RAN]
        terminalreporter.write_line(
            f"cumm: no benchmark could run: {reason}. The {n} benchmarks of bench/ need an NVIDIA GPU and its "
            "driver; all were skipped (exit code 0: nothing failed).",
            yellow=True,
            bold=True,
        )
