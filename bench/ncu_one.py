"""Launch one kernel configuration a few times at one size, for ncu to profile the last launch.

    ncu --clock-control none -k regex:cumm_ --launch-skip 2 --launch-count 1 \
        --metrics l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum python3 bench/ncu_one.py vectorized BK=16
"""

from __future__ import annotations

import sys

import cupy

import cumm

kernel = sys.argv[1]
cfg = {k: int(v) for k, v in (kv.split("=") for kv in sys.argv[2:] if "=" in kv)} or None
n = int(__import__("os").environ.get("NCU_N", "4096"))
rng = cupy.random.default_rng(0)
a = rng.standard_normal((n, n), dtype=cupy.float32)
b = rng.standard_normal((n, n), dtype=cupy.float32)
for _ in range(3):
    cumm.matmul(a, b, kernel=kernel, config=cfg)
cupy.cuda.Device().synchronize()
