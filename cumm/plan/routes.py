"""Where a matmul call with a fused epilogue runs (cumm/plan/epilogue.py's Epilogue): the rung whose stores take it,
auto's rung for a short K, a rung running a batch in one launch, the rungs that pair a GLU's columns, and the rung
for operands the copy engine cannot read. decide asks :func:`routes` once per call key."""

from __future__ import annotations

from ..ladder import REGISTRY, gemm_kernels
from ..runtime.driver import multiprocessors
from . import auto as _auto
from .epilogue import Epilogue
from .operands import GLU_BLOCK, compute_capability


def route(kernel: str, requested: str, split_k):
    """The rung an epilogue call runs: ``kernel`` (auto's choice or the caller's) unless its stores cannot take an
    epilogue; split-K refused (an epilogue runs once, after the whole sum)."""
    if split_k not in (None, 1):
        raise ValueError(
            f"split_k={split_k} with an epilogue: slices of K write partial sums, and the epilogue must run once on "
            "the whole sum; pass split_k=None"
        )
    spec = REGISTRY[kernel]
    if spec.epilogue:
        return kernel
    # the highest rung below it that takes the same dtypes and an epilogue (a spec field, KernelSpec.epilogue)
    below = list(REGISTRY)[: list(REGISTRY).index(kernel)]
    able = [
        n for n in below if REGISTRY[n].epilogue and REGISTRY[n].kind == "gemm" and REGISTRY[n].dtypes == spec.dtypes
    ]
    if requested != "auto" or not able:
        takes = [n for n, s in REGISTRY.items() if s.epilogue and s.kind == "gemm" and set(spec.dtypes) & set(s.dtypes)]
        raise ValueError(
            f"kernel {kernel!r} does not take an epilogue (its stores do not go through include/epilogue.cuh); "
            f"the rungs that do: {takes} (or kernel='auto')"
        )
    return able[-1]


def short_k_route(kernel: str, K: int, dtype: str, cc: int, rows: int = 0, N: int = 0, sms: int = 0) -> str:
    """auto's rung for a fused epilogue K deep: in place of a top rung (``kernel``), the last rung that takes
    ``dtype``, runs on ``cc`` and takes the product: its spec's ``epilogue_max_k`` is at least K, or its
    ``epilogue_shapes`` says so for (``rows``, ``N``, K, ``sms``) (wgmma_pingpong: its epilogue runs under the other
    warpgroup's mainloop, where the top rung's runs between two mainloops); else ``kernel``."""
    if not REGISTRY[kernel].top:  # a tuned entry's own rung (few rows, deep K) keeps the call
        return kernel

    def takes(s) -> bool:
        deep = s.epilogue_shapes is not None and rows > 0 and s.epilogue_shapes(rows, N, K, sms)
        return K <= s.epilogue_max_k or deep

    able = [n for n in gemm_kernels() if dtype in REGISTRY[n].dtypes and REGISTRY[n].supports(cc)]
    able = [n for n in able if takes(REGISTRY[n])]
    return able[-1] if able else kernel


def routes(
    kernel: str,
    auto: bool,
    split_k,
    batch: tuple[int, ...],
    dtype: str,
    dev: int,
    shape: tuple[int, int, int],
    epi: Epilogue,
):
    """(the rung an epilogue call runs: :func:`route` of ``kernel``, auto's choice or the caller's, for auto at
    ``shape`` (rows, N, K; a batch's rows nb M) :func:`short_k_route` of it, or deeper the rung the tuned table ties
    with it (cumm.plan.auto.epilogue_tie, for one product); for a batch under auto, a rung that runs the batch in one
    launch; :func:`fallback_route` of that rung; and the configuration the tie gives, else None): every question
    decide asks of this module, asked at once. Neither for an epilogue that reads an M x N operand
    (``epi.reads_matrix``): there wgmma_pingpong ran slower than the top rung (H200, bf16 8192 x 14336 x 1024, the
    snippet v * sigmoid(v) * aux[row, col]: 0.616 against 0.557 ms; the gated MLP's second product, reading h: 1.028
    against 0.907 ms for both products)."""
    routed = route(kernel, "auto" if auto else kernel, split_k)
    if epi.fp8 and compute_capability(dev) < 89:
        raise ValueError(
            f"an FP8 C needs compute capability 8.9 or newer (cvt.rn.satfinite.e4m3x2 / e5m2x2); device {dev} is "
            f"{compute_capability(dev)}: pass a bfloat16 or float16 out"
        )
    config = None
    if auto and not epi.reads_matrix:
        rows, N, K = shape
        short = short_k_route(routed, K, dtype, compute_capability(dev), rows, N, multiprocessors(dev))
        deep = short == routed and REGISTRY[routed].top and not batch  # (the table's shapes are single products)
        tie = _auto.epilogue_tie(routed, rows, N, K, dev, dtype) if deep else None
        routed, config = tie or (short, None)
    if epi.glu and not REGISTRY[routed].glu:
        routed = glu_route(routed, auto, dtype, compute_capability(dev), bool(batch))
    if batch and auto and not REGISTRY[routed].batches:
        # one launch a product would give every product z = 0: a rung that runs the batch in one launch
        cc = compute_capability(dev)
        able = [n for n in gemm_kernels() if REGISTRY[n].batches and dtype in REGISTRY[n].dtypes]
        able = [n for n in able if REGISTRY[n].min_cc <= cc and REGISTRY[n].epilogue]
        able = [n for n in able if REGISTRY[n].glu or not epi.glu]
        routed = able[-1] if able else routed
    return routed, fallback_route(routed), config


def glu_rungs() -> list[str]:
    """The rungs that run glu= (KernelSpec.glu, with an epilogue), in ladder order."""
    return [n for n in gemm_kernels() if REGISTRY[n].glu and REGISTRY[n].epilogue]


def glu_unsupported(dtype: str, cc: int | None = None, batched: bool = False) -> str:
    """What glu= runs on, against this ``dtype`` product (a batch, on compute capability ``cc`` when known)."""
    glu = glu_rungs()
    takes = sorted({d for n in glu for d in REGISTRY[n].dtypes})
    ccs = sorted({REGISTRY[n].min_cc for n in glu})
    on = "" if cc is None else f" on {cc}"
    return (
        f"glu= runs on the rungs {glu}: {' and '.join(takes)} products on compute capability {ccs}; this is a "
        f"{dtype} product{' batch' if batched else ''}{on}"
    )


def glu_route(kernel: str, auto: bool, dtype: str, cc: int, batched: bool) -> str:
    """For a glu= call that ``kernel`` cannot run (its stores see one pair of columns at a time): under auto the
    top rung of those that can (KernelSpec.glu) for ``dtype`` on ``cc`` (running batches for a batch); else the
    ValueError naming them."""
    glu = glu_rungs()
    able = [n for n in glu if dtype in REGISTRY[n].dtypes and REGISTRY[n].supports(cc)]
    able = [n for n in able if REGISTRY[n].batches or not batched]
    if auto and able:
        top = [n for n in able if REGISTRY[n].top]
        return (top or able)[-1]
    if not auto:
        raise ValueError(
            f"kernel {kernel!r} cannot run glu= (its stores see one column pair at a time, and glu= pairs column "
            f"blocks {GLU_BLOCK} apart); the rungs that do: {glu} (or kernel='auto')"
        )
    raise ValueError(glu_unsupported(dtype, cc, batched))


def fallback_route(kernel: str) -> str | ValueError | None:
    """For an epilogue call on ``kernel``: the rung it runs if the copy engine cannot read its operands and its
    fallback rung's stores (``KernelSpec.fallback``) do not take an epilogue (:func:`route` as auto asks it, or the
    ValueError for the caller to raise then); None when there is no such fallback rung. Asked with the first route."""
    fallback = REGISTRY[kernel].fallback
    if fallback not in REGISTRY or REGISTRY[fallback].epilogue:
        return None
    try:
        return route(fallback, "auto", None)
    except ValueError as e:
        return e
