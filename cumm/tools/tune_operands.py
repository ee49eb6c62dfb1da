"""The tuner's operands (:func:`operands_for`): a product's input sets, a float64 reference and one launch of a
configuration, for :func:`.tune_search.tune` and :func:`.tune_race.race`; float32 and the half dtypes here
(:class:`MatmulOperands`), the FP8 rungs' in :mod:`.tune_fp8`."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping

from ..core.dtypes import FP8_DTYPE
from ..core.dtypes import TOLERANCE as TOLERANCES
from ..core.spec import KernelSpec
from ..runtime.render import TRANSPOSED_B, Variant, dtype_flag
from ..runtime.timing import rotation_sets
from .bench_calls import np_dtype
from .space import ASSUMED_TFLOPS
from .tune_fp8 import Fp8Operands


class MatmulOperands:
    """A float32 or half product's input sets and launches for :func:`.tune_search.tune`: random normal inputs
    (rounded to the dtype), rotated when L2 would hold one set, and a float64 reference of set 0 (made when first
    needed: the race of rungs checks nothing). With ``b_transposed`` B is the transposed view of an N x K array, as
    attention's q @ k^T gives it (the rungs that read it in place then run their transposed variant, the others
    matmul's copy of it: what the user's call costs). (The FP8 rungs': :class:`.tune_fp8.Fp8Operands`, with the same
    fields.)"""

    fixed: tuple[str, ...] = ()  # parameters a tuned entry does not store
    tflops = ASSUMED_TFLOPS  # the rate that sizes the default count (space.default_count)

    @staticmethod
    def flags(dtype: str, M: int, N: int, K: int) -> tuple[int, ...]:
        # Operands are fresh C-contiguous allocations (256-byte aligned): 16-byte accesses are legal
        # exactly when the rows are multiples of 16 bytes (4 floats, 8 halves), as matmul decides for such arrays.
        v = 4 if dtype == "float32" else 8
        flags = (int(K % v == 0), int(N % v == 0), int(N % v == 0))
        return flags if dtype == "float32" else (*flags, 0, dtype_flag(dtype, dtype))

    def __init__(
        self,
        kernel: str,
        spec: KernelSpec,
        M: int,
        N: int,
        K: int,
        dtype: str,
        flags,
        dev,
        seed: int,
        *,
        b_transposed: bool = False,
    ):
        import cupy

        self.kernel, self.spec, self.shape, self.flags = kernel, spec, (M, N, K), flags
        self.b_transposed = b_transposed
        self.dev_id, self.half, self.tolerance = cupy.cuda.runtime.getDevice(), dtype != "float32", TOLERANCES[dtype]
        rng = cupy.random.default_rng(seed)
        item = 2 if self.half else 4
        self.nsets = rotation_sets(item * (M * K + K * N + M * N), dev.l2_bytes)
        f32, self.dt = cupy.float32, np_dtype(dtype)
        self.As = [rng.standard_normal((M, K), dtype=f32).astype(self.dt) for _ in range(self.nsets)]
        if b_transposed:
            self.Bs = [rng.standard_normal((N, K), dtype=f32).astype(self.dt).T for _ in range(self.nsets)]
        else:
            self.Bs = [rng.standard_normal((K, N), dtype=f32).astype(self.dt) for _ in range(self.nsets)]
        self.Cs = [cupy.empty((M, N), dtype=self.dt) for _ in range(self.nsets)]

    def launcher(self, cfg: Mapping[str, int], split_k: int = 1) -> Callable:
        """run(s, out=None): ``cfg``'s product of input set s (in ``split_k`` slices of K) into out (set s's C);
        raises what the rung cannot run. A rung that reads through the copy engine needs its tensor maps, and the
        half rungs run as one driver launch: those run (and are timed) through matmul's cached call, as does a
        split; other rungs through their Plan."""
        from ..api.matmul import matmul
        from ..plan.plan import get_plan

        (M, N, K), spec, flags = self.shape, self.spec, self.flags
        if spec.tensor_maps is not None and not (flags[0] and flags[1]):
            v = 8 if self.half else 4
            raise ValueError(
                f"{self.kernel} reads A and B through the copy engine, which needs K % {v} == 0 and N % {v} == 0 "
                f"(got {M}x{N}x{K}); matmul runs {spec.fallback} for such operands"
            )
        As, Bs, Cs = self.As, self.Bs, self.Cs
        if split_k > 1 or spec.tensor_maps is not None or self.half or self.b_transposed:
            split = {"split_k": split_k} if split_k > 1 else {}

            def run(s: int, out=None) -> None:
                matmul(As[s], Bs[s], kernel=self.kernel, config=cfg, out=Cs[s] if out is None else out, **split)

            return run
        plan = get_plan(self.kernel, cfg, flags, self.dev_id)

        def launch(s: int, out=None) -> None:
            plan.launch(M, N, K, 1.0, As[s], K, Bs[s], N, 0.0, Cs[s] if out is None else out, N)

        return launch

    def rel_err(self, run: Callable) -> float:
        """The relative Frobenius error of run(0, out) into a NaN-filled out against the float64 reference."""
        import cupy

        out = cupy.empty(self.shape[:2], dtype=self.dt)
        out.fill(math.nan)
        run(0, out)
        ref, norm = self._reference
        err = float(cupy.linalg.norm(out.astype(cupy.float32).astype(cupy.float64) - ref))
        return err / norm if norm else err

    @functools.cached_property
    def _reference(self):
        """(float64 product of set 0, its norm): made at the first check (the race of rungs checks nothing)."""
        import cupy

        ref = self.As[0].astype(cupy.float64) @ self.Bs[0].astype(cupy.float64)
        return ref, float(cupy.linalg.norm(ref))


def contiguous_pitches(dtype: str, N: int, K: int) -> tuple[int, int]:
    """The row pitches in bytes of the tuner's C-contiguous A (M x K) and B (K x N) of ``dtype``."""
    item = 1 if dtype == FP8_DTYPE else np_dtype(dtype).itemsize
    return K * item, N * item


def run_as(spec: KernelSpec, dtype: str, flags: tuple[int, ...], N: int, K: int, b_transposed: bool):
    """(compile flags, row pitches for the pitch rule or None) of the tuner's operands as matmul runs ``spec`` on
    them: a transposed B that the rung reads in place is its transposed variant, and matmul's pitch rule is for
    row-major operands only (plan/decide.py); one it does not read is copied row-major first."""
    if b_transposed and spec.reads_transposed:
        return (*Variant(*flags)._replace(layout=TRANSPOSED_B),), None
    return flags, contiguous_pitches(dtype, N, K)


def operands_for(dtype: str) -> type:
    """The tuner's operands for ``dtype``: :class:`.tune_fp8.Fp8Operands` for FP8_DTYPE, else MatmulOperands."""
    return Fp8Operands if dtype == FP8_DTYPE else MatmulOperands
