"""``pytest --benchmark-only`` where no benchmark can run ends with one line saying so and why; exit code 0.

The child pytest runs with CUDA_VISIBLE_DEVICES="" so that no GPU is visible, also on a machine that has one."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINE = re.compile(
    r"^cumm: no benchmark could run: no CUDA GPU available \(.+\)\. The (\d+) benchmarks of bench/ need an NVIDIA "
    r"GPU and its driver; all were skipped \(exit code 0: nothing failed\)\.$",
    re.M,
)


def run_bench_suite(*args: str) -> subprocess.CompletedProcess:
    pytest.importorskip("pytest_benchmark", reason="pytest-benchmark is not installed")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CUDA_VISIBLE_DEVICES": ""}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "bench/test_benchmarks.py", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=300,
    )


def test_benchmark_only_without_a_gpu_says_why_in_one_line():
    p = run_bench_suite("--benchmark-only")
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    found = LINE.findall(p.stdout)
    assert len(found) == 1, p.stdout[-3000:]
    skipped = re.fullmatch(r"(\d+) skipped in [\d.]+s", p.stdout.strip().splitlines()[-1])  # nothing else
    assert skipped and int(found[0]) == int(skipped.group(1)) > 0, p.stdout[-3000:]


def test_a_plain_run_does_not_claim_a_missing_gpu():
    """Without --benchmark-only the benchmarks skip by design: no such line."""
    p = run_bench_suite()
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "cumm: no benchmark could run" not in p.stdout
