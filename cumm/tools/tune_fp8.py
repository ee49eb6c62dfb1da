"""The FP8 rungs' products for the tuner (``cumm tune --dtype fp8``; :func:`.tune_search.tune` with dtype
``FP8_DTYPE``): e4m3 x e4m3 with bfloat16 out through cumm.scaled_matmul, each candidate timed as the other rungs'
are and checked against the float64 product of the dequantized inputs before it may become the best. The entry is
stored without the formats and C's type (``plan.scaled.FORMAT_FIELDS``): the tiling serves every format pair and
output. PROMO is searched among the promoted forms (the specs' spaces: 1 and 2, the same sums in the same order):
use_fast_accum=False."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping

from ..core.dtypes import FP8_TOLERANCE
from ..core.spec import KernelSpec
from ..ladder.common import FP8_SLAB
from ..plan.scaled import FORMAT_FIELDS, TMA_ALIGN
from ..runtime.timing import rotation_sets
from .bench_fp8 import operands
from .space import ASSUMED_FP8_TFLOPS


def dequantized_product(a, b, sa, sb, block: bool):
    """float64 (a * scales) @ (b * scales) of torch FP8 ``a`` (M x K) and ``b`` (K x N): scalar scales, or block
    scales (``sa`` (M, ceil(K/128)) per 1 x 128 block of a, ``sb`` (ceil(N/128), ceil(K/128)) per 128 x 128 block
    of b)."""
    K, N = b.shape
    A, B = a.double(), b.double()
    if block:
        A = A * sa.double().repeat_interleave(FP8_SLAB, 1)[:, :K]
        B = B * sb.double().repeat_interleave(FP8_SLAB, 0).repeat_interleave(FP8_SLAB, 1)[:N, :K].t()
    else:
        A, B = A * sa.double(), B * sb.double()
    return A @ B


class Fp8Operands:
    """An FP8 rung's input sets and launches for the tuner (:class:`.tune_operands.MatmulOperands`' fields):
    bench_fp8's operands (e4m3, per-tensor scales, or for the block-scaled rung per-K-block scales with scale_a
    K-block-major, read in place), rotated when L2 would hold one set, bfloat16 out."""

    fixed = FORMAT_FIELDS  # not stored: a tuned entry serves every format pair and output
    tflops = ASSUMED_FP8_TFLOPS
    tolerance = FP8_TOLERANCE

    @staticmethod
    def flags(dtype: str, M: int, N: int, K: int) -> tuple[int, ...]:
        """The variant scaled_matmul compiles for these operands: A and B through the copy engine, bfloat16 C's rows
        on 16 bytes or not."""
        return 1, 1, int(2 * N % TMA_ALIGN == 0)

    def __init__(self, kernel: str, spec: KernelSpec, M: int, N: int, K: int, dtype: str, flags, dev, seed: int):
        import cupy
        import torch

        self.kernel, block = kernel, spec.scales == "block"
        self.nsets = rotation_sets(M * K + K * N + 2 * M * N, dev.l2_bytes)
        dev_id = cupy.cuda.runtime.getDevice()
        with torch.cuda.device(dev_id), torch.random.fork_rng(devices=[dev_id]):
            torch.manual_seed(seed)
            self.sets = [operands(M, N, K, block, k_block_major=True) for _ in range(self.nsets)]
            self.outs = [torch.empty((M, N), dtype=torch.bfloat16, device="cuda") for _ in range(self.nsets)]
        self.dev_id, self.block = dev_id, block

    def launcher(self, cfg: Mapping[str, int], split_k: int = 1) -> Callable:
        """run(s, out=None): ``cfg``'s product of input set s into out (set s's C). (``split_k``: always 1, the FP8
        rungs do not split K.)"""
        from ..api.scaled import scaled_matmul

        def run(s: int, out=None) -> None:
            scaled_matmul(*self.sets[s], kernel=self.kernel, config=cfg, out=self.outs[s] if out is None else out)

        return run

    def rel_err(self, run: Callable) -> float:
        """The relative Frobenius error of run(0, out) into a NaN-filled out against the float64 reference."""
        import torch

        out = torch.full_like(self.outs[0], float("nan"))
        run(0, out)
        ref, norm = self._reference
        return float((out.double() - ref).norm()) / norm

    @functools.cached_property
    def _reference(self):
        """(float64 product of set 0's dequantized operands, its norm): made at the first check."""
        import torch

        with torch.cuda.device(self.dev_id):
            ref = dequantized_product(*self.sets[0], self.block)
        return ref, float(ref.norm())
