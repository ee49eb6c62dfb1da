"""The compiled kernel of a matrix product: a :class:`Plan` (one rung's kernel for one configuration and compile
variant on one device, its geometry and its launch), kept once per key by :func:`plan_for`. The decisions that
ask for one are cumm/plan/decide.py's.
"""

from __future__ import annotations

from collections.abc import Mapping

import cupy
import numpy as np

from ..core.dtypes import F32
from ..core.spec import KernelSpec
from ..ladder import REGISTRY, get_spec
from ..runtime.compile import device_kernel
from ..runtime.driver import cluster_width, max_active_clusters, multiprocessors
from ..runtime.render import Variant, variant
from . import splitk as _splitk
from .operands import compute_capability


class Plan:
    """One compiled kernel configuration (for one set of alignment flags, on one device) and its geometry."""

    __slots__ = ("spec", "cfg", "kern", "flags", "block", "smem", "tile", "_slots")

    def __init__(self, spec: KernelSpec, config: Mapping[str, int] | None, flags: Variant, device_id: int):
        """``spec``'s kernel for ``config`` (checked against the device, resolved over the defaults) and compile
        variant ``flags`` on ``device_id``, compiled (:func:`plan_for` keeps one per key)."""
        _gemm_only(spec)
        cc = compute_capability(device_id)
        spec.check_cc(
            cc, f"device {device_id}", f"use one of {[n for n in gemm_kernels_list() if REGISTRY[n].min_cc <= cc]}"
        )
        cfg = spec.resolve(config, cc)
        self.spec, self.cfg, self.kern, self.flags = spec, cfg, device_kernel(spec, cfg, flags, device_id), flags
        self.block = spec.block(cfg)
        self.smem = spec.smem(cfg)
        self.tile = (cfg["BM"], cfg["BN"]) if "BM" in cfg and "BN" in cfg else (0, 0)  # (0, 0): no strips
        self._slots = None

    def slots(self, device_id: int) -> int:
        """Blocks of this kernel resident at once on the device (occupancy API x multiprocessors): a wave. For a
        kernel compiled with clusters of w > 1 blocks, w x the clusters resident at once (a cluster's blocks share
        a GPC, and a GPC with an odd number of free multiprocessors leaves one idle)."""
        if self._slots is None:
            from cupy_backends.cuda.api import driver

            threads = self.block[0] * self.block[1] * self.block[2]
            with cupy.cuda.Device(device_id):
                func = self.kern.kernel.ptr
                width = cluster_width(func)
                if width > 1:
                    self._slots = width * max_active_clusters(func, width, threads, self.smem)
                else:
                    per_sm = driver.occupancyMaxActiveBlocksPerMultiprocessor(func, threads, self.smem)
                    self._slots = per_sm * multiprocessors(device_id)
        return self._slots

    def blocks(self, M: int, N: int, K: int) -> int:
        gx, gy, gz = self.spec.grid(self.cfg, M, N, K)
        return gx * gy * gz

    def launch(
        self,
        M,
        N,
        K,
        alpha,
        a,
        lda,
        b,
        ldb,
        beta,
        c,
        ldc,
        splits: int = 1,
        batch: tuple[int, int, int, int] | None = None,
    ) -> None:
        """One launch (two with split-K). ``batch``: (count, A's, B's and C's batch strides in elements) for a
        batched variant: grid z is the batch."""
        grid = self.spec.grid(self.cfg, M, N, K)
        out, ldo = c, ldc
        if batch is not None:  # grid z over the batch, or the kernel walks the batch's tiles itself
            grid = (grid[0] * batch[0], grid[1], 1) if self.spec.schedules_batch else (grid[0], grid[1], batch[0])
        if splits > 1:  # grid z = slices of K; each writes raw partials (alpha 1, beta 0) into a workspace
            grid = (grid[0], grid[1], splits)
            c, ldc = cupy.empty((splits, M, N), dtype=F32), N
        if grid[1] > 65535 or grid[2] > 65535:
            raise ValueError(
                f"kernel {self.spec.name!r} with {self.cfg} needs a grid of {grid} blocks for a {M}x{N}x{K} "
                "product" + (f" batch of {batch[0]}" if batch else "") + "; CUDA allows at most 65535 blocks in y "
                "and z: use larger tiles or another kernel" + (", or split the batch" if batch else "")
            )
        i32 = np.int32
        args = (i32(M), i32(N), i32(K), np.float32(alpha), a, i32(lda), b, i32(ldb), np.float32(beta), c, i32(ldc))
        if batch is not None:
            args += tuple(np.int64(s) for s in batch[1:])
            if self.spec.schedules_batch:
                args += (i32(batch[0]),)
        self.kern(grid, self.block, args, shared_mem=self.smem)
        if splits > 1:
            _splitk.reduce(c, splits, M, N, alpha, beta, out, ldo)


_plans: dict[tuple, Plan] = {}


def get_plan(kernel: str, config: Mapping[str, int] | None, flags: tuple[int, ...], device_id: int) -> Plan:
    """The compiled ``kernel`` (a name) for ``config`` and compile variant ``flags`` (a Variant) on ``device_id``."""
    return plan_for(get_spec(kernel), config, flags, device_id)


def plan_for(spec: KernelSpec, config: Mapping[str, int] | None, flags: tuple[int, ...], device_id: int) -> Plan:
    """The compiled kernel of ``spec`` for ``config`` and compile variant ``flags`` on ``device_id`` (cached)."""
    flags = variant(flags)
    key = (spec.name, None if config is None else tuple(sorted(config.items())), flags, device_id)
    plan = _plans.get(key)
    if plan is None:
        plan = _plans[key] = Plan(spec, config, flags, device_id)
    return plan


def gemm_kernels_list() -> list[str]:
    return [n for n, s in REGISTRY.items() if s.kind == "gemm"]


NOT_GEMM = "kernel {!r} is not a matrix-product kernel; use one of {}"


def _gemm_only(spec: KernelSpec) -> None:
    """ValueError unless ``spec`` is a matrix-product kernel (a chain kernel named to matmul)."""
    if spec.kind != "gemm":
        raise ValueError(NOT_GEMM.format(spec.name, gemm_kernels_list()))
