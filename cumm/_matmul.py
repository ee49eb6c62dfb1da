"""``cumm.matmul``: argument checks, plan lookup (cached per kernel/config/alignment/device), launch.

The per-call path is kept short: a cached plan holds the compiled kernel, block, dynamic shared memory
and the spec's grid function, so a cache hit only checks the arrays and launches.
"""

from __future__ import annotations

from collections.abc import Mapping

import cupy
import numpy as np

from . import _auto, _edges, _repack, _splitk
from ._compile import device_kernel
from ._ladder import REGISTRY, get_spec
from ._operands import F32, INT32_MAX, aligned, check_operand, check_out, compute_capability, row_major


class Plan:
    __slots__ = ("spec", "cfg", "kern", "block", "smem", "tile", "_slots")

    def __init__(self, spec, cfg, kern):
        self.spec, self.cfg, self.kern = spec, cfg, kern
        self.block = spec.block(cfg)
        self.smem = spec.smem(cfg)
        self.tile = (cfg["BM"], cfg["BN"]) if "BM" in cfg and "BN" in cfg else (0, 0)  # (0, 0): no strips
        self._slots = None

    def slots(self, device_id: int) -> int:
        """Blocks of this kernel resident at once on the device (occupancy API x multiprocessors): a wave."""
        if self._slots is None:
            from cupy_backends.cuda.api import driver

            with cupy.cuda.Device(device_id):
                per_sm = driver.occupancyMaxActiveBlocksPerMultiprocessor(
                    self.kern.kernel.ptr, self.block[0] * self.block[1] * self.block[2], self.smem)
            self._slots = per_sm * _auto._sms(device_id)
        return self._slots

    def blocks(self, M: int, N: int, K: int) -> int:
        gx, gy, gz = self.spec.grid(self.cfg, M, N, K)
        return gx * gy * gz

    def launch(self, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc, splits: int = 1) -> None:
        grid = self.spec.grid(self.cfg, M, N, K)
        out, ldo = c, ldc
        if splits > 1:  # grid z = slices of K; each writes raw partials (alpha 1, beta 0) into a workspace
            grid = (grid[0], grid[1], splits)
            c, ldc = cupy.empty((splits, M, N), dtype=F32), N
        if grid[1] > 65535 or grid[2] > 65535:
            raise ValueError(
                f"kernel {self.spec.name!r} with {self.cfg} needs a grid of {grid} blocks for a {M}x{N}x{K} "
                "product; CUDA allows at most 65535 blocks in y and z: use larger tiles or another kernel"
            )
        i32 = np.int32
        self.kern(grid, self.block,
                  (i32(M), i32(N), i32(K), np.float32(alpha), a, i32(lda), b, i32(ldb), np.float32(beta), c, i32(ldc)),
                  shared_mem=self.smem)
        if splits > 1:
            _splitk.reduce(c, splits, M, N, alpha, beta, out, ldo)


_plans: dict[tuple, Plan] = {}
def get_plan(kernel: str, config: Mapping[str, int] | None, flags: tuple[int, int, int], device_id: int) -> Plan:
    key = (kernel, None if config is None else tuple(sorted(config.items())), flags, device_id)
    plan = _plans.get(key)
    if plan is None:
        spec = get_spec(kernel)
        if spec.kind != "gemm":
            raise ValueError(f"kernel {kernel!r} is not a matrix-product kernel; use one of {gemm_kernels_list()}")
        cc = compute_capability(device_id)
        spec.check_cc(cc, f"device {device_id}",
                      f"use one of {[n for n in gemm_kernels_list() if REGISTRY[n].min_cc <= cc]}")
        cfg = spec.resolve(config, cc)
        plan = _plans[key] = Plan(spec, cfg, device_kernel(spec, cfg, flags, device_id))
    return plan


def gemm_kernels_list() -> list[str]:
    return [n for n, s in REGISTRY.items() if s.kind == "gemm"]


def matmul(a, b, *, kernel: str = "auto", config: Mapping[str, int] | None = None, out=None,
           alpha: float = 1.0, beta: float = 0.0, split_k: int | None = None):
    """C = alpha * a @ b + beta * out (see README.md). ``split_k``: slices of K run in parallel and summed
    (kernels with ``split_k`` in their spec); None: 1, or the heuristic's choice for kernel="auto"."""
    if split_k is not None:
        split_k = _splitk.check_arg(split_k, kernel)
    check_operand(a, "a")
    check_operand(b, "b")
    M, K = a.shape
    K2, N = b.shape
    if K != K2:
        raise ValueError(f"shapes {a.shape} and {b.shape} do not align: a has {K} columns, b has {K2} rows")
    dev = a.data.device_id  # (x.device builds a Device object per call)
    if b.data.device_id != dev:
        raise ValueError(f"a is on device {dev} and b on device {b.data.device_id}; put both on one device")
    if max(M, N, K) > INT32_MAX:
        raise ValueError(f"dimensions must be below 2**31, got M={M}, N={N}, K={K}")
    alpha, beta = float(alpha), float(beta)
    if out is None:
        if beta != 0.0:
            raise ValueError(f"beta={beta} needs out= (C = alpha * a @ b + beta * out)")
        out = cupy.empty((M, N), dtype=F32)
    else:
        check_out(out, (a, b), M, N, dev, ("a", "b"))

    if M == 0 or N == 0:
        return out
    if K == 0:  # the empty sum: alpha * 0 + beta * out
        if beta == 0.0:
            out.fill(0)
        else:
            out *= np.float32(beta)
        return out

    a, lda = row_major(a, "a", copy_ok=True)
    b, ldb = row_major(b, "b", copy_ok=True)
    c, ldc = row_major(out, "out", copy_ok=False)
    if max(lda, ldb, ldc) > INT32_MAX:
        raise ValueError(f"leading dimensions must be below 2**31, got {lda}, {ldb}, {ldc}")

    if kernel == "auto":
        kernel, config, split_k = _auto.select(M, N, K, dev, config, split_k)
    flags = (aligned(a, lda), aligned(b, ldb), aligned(c, ldc))
    if _repack.ENABLED and not (flags[0] and flags[1]):  # scalar loads of A or B: a padded copy may pay
        a, lda, b, ldb = _repack.prepare(get_spec(kernel), M, N, K, a, lda, b, ldb, flags)
        flags = (aligned(a, lda), aligned(b, ldb), flags[2])
    splits = 1
    if split_k is not None and split_k > 1:  # only the slices that get at least one slab of K
        splits = _splitk.effective_splits(K, split_k, _splitk.slab(kernel, config, compute_capability(dev)))
        if splits > 1:  # the kernel writes to a fresh contiguous workspace (ldc = N), not to out
            flags = (flags[0], flags[1], int(N % 4 == 0))
    staged = None  # an unaligned C (scalar stores): the kernel may write a padded buffer, copied back after
    if (_repack.ENABLED and not flags[2] and splits == 1 and get_spec(kernel).stage_out
            and _repack.should_stage_out(M, N, K, beta)):
        staged = _repack.stage_out(c, beta)
        if staged is not None:
            flags = (flags[0], flags[1], 1)
    plan = get_plan(kernel, config, flags, dev)
    mm, nn = M, N
    bm, bn = plan.tile
    if bm and splits == 1 and _edges.ENABLED and (0 < M % bm <= _edges.EDGE_ROWS or 0 < N % bn <= _edges.EDGE_ROWS):
        mm, nn = _edges.split(M, N, bm, bn, lambda m, n: plan.blocks(m, n, K), plan.slots(dev))
    tgt, ldt = staged if staged is not None else (c, ldc)
    if dev != cupy.cuda.runtime.getDevice():
        with cupy.cuda.Device(dev):
            _run(plan, M, N, K, mm, nn, alpha, a, lda, b, ldb, beta, tgt, ldt, splits, dev)
    else:
        _run(plan, M, N, K, mm, nn, alpha, a, lda, b, ldb, beta, tgt, ldt, splits, dev)
    if staged is not None:
        _repack.unstage_out(tgt, ldt, c, ldc)
    return out


def _run(plan: Plan, M, N, K, mm, nn, alpha, a, lda, b, ldb, beta, c, ldc, splits, dev) -> None:
    """The plan's kernel on the first mm x nn of C; the thin remainders, if any, as edge strips (_edges.py)."""
    plan.launch(mm, nn, K, alpha, a, lda, b, ldb, beta, c, ldc, splits)
    if mm != M or nn != N:
        _edges.run(M, N, K, mm, nn, alpha, a, lda, b, ldb, beta, c, ldc, _auto._sms(dev), dev)


