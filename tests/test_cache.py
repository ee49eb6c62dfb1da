"""Compile caches: in process (thread-safe, compile once) and across processes (CuPy's disk cache)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import cumm
from cumm.ladder import get_spec
from cumm.runtime import compile as _compile
from cumm.runtime.render import template_hash

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[1]


def test_eight_threads_compile_a_new_configuration_once():
    spec = get_spec("blocktile_1d")
    cfg = spec.resolve(dict(BM=32, BN=32, BK=4, TM=4))  # used by no other test
    key = (spec.name, template_hash(spec), tuple(cfg[k] for k in spec.params), (1, 1, 1), 0)  # device_kernel's
    _compile._kernels.pop(key, None)  # forget it if an earlier test compiled it
    before = _compile.stats["compiles"]
    start = threading.Barrier(8)
    got = []

    def ask():
        start.wait()
        got.append(_compile.device_kernel(spec, cfg, (1, 1, 1), 0))

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert _compile.stats["compiles"] - before == 1
    assert len(got) == 8 and all(k is got[0] for k in got)


_CHILD = """
import json, time, cupy, cumm
from cumm.runtime import compile as _compile
a = cupy.random.default_rng(1).standard_normal((300, 200), dtype=cupy.float32)
t0 = time.perf_counter()
cumm.matmul(a, a.T.copy(), kernel="double_buffer")
cupy.cuda.Device().synchronize()
print(json.dumps({"compile_seconds": _compile.stats["compile_seconds"], "first_call": time.perf_counter() - t0}))
"""


def test_second_process_reuses_the_disk_cache(tmp_path):
    env = dict(os.environ, CUPY_CACHE_DIR=str(tmp_path), PYTHONPATH=str(ROOT))

    def child():
        out = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True, text=True, check=True)
        return json.loads(out.stdout.strip().splitlines()[-1])

    first = child()
    second = child()
    print(f"first process {first}, second process {second}")
    assert second["compile_seconds"] < 0.050, second
    assert first["compile_seconds"] > second["compile_seconds"]


def test_plan_cache_hit_does_not_recompile(rng):
    import cupy

    a = rng.standard_normal((64, 64), dtype=cupy.float32)
    cumm.matmul(a, a, kernel="smem")
    before = dict(_compile.stats)
    for _ in range(5):
        cumm.matmul(a, a, kernel="smem")
    assert _compile.stats == before
