"""``decision``: what the earlier runs of a ``cumm.matmul`` call made, read from its call cache (cumm/api/matmul.py);
``scaled_decision`` the same for ``cumm.scaled_matmul`` (cumm/api/scaled.py)."""

from __future__ import annotations

from collections.abc import Mapping

from ..plan.operands import compute_capability
from . import fused as _fused
from . import scaled as _scaled
from .matmul import _calls, _key


def decision(
    a,
    b,
    out,
    *,
    kernel: str = "auto",
    config: Mapping[str, int] | None = None,
    beta: float = 0.0,
    split_k: int | None = None,
    **epilogue_args,
) -> str:
    """What the earlier runs of ``matmul(a, b, kernel=kernel, config=config, out=out, beta=beta, split_k=split_k)``
    made: "<kernel> <non-default parameters>", the split count and the operands copied on each call, e.g. "tf32x3
    BM=64 BN=64 split_k=4", "wgmma_ws (copies B)"; "" if not known. ``epilogue_args``: matmul's epilogue keywords
    (``bias``, ``activation``, ``residual``, ``epilogue``, ``operands``, ``aux``, ``glu``, ``scale_result``): what its
    fused calls with those made, for a call kept in the fused cache (one launch on the caller's arrays, or on FP16
    pieces of them: cumm/api/fused.py)."""
    epi = _fused.arguments(out, **epilogue_args)
    key = _key(a, b, out, kernel, config, split_k, float(beta), epi)
    if epi is not None:
        hit = _fused.calls.get(key) if key is not None else None
        call = hit[0] if hit is not None else None
    else:
        call = _calls.get(key) if key is not None else None
    if call is None:
        return ""
    spec, cfg = call.plan.spec, call.plan.cfg
    base = spec.default_config(compute_capability(call.dev))
    diff = " ".join(f"{k}={v}" for k, v in cfg.items() if base.get(k) != v)
    splits = call.decisions.get("splits", 1)
    copies = call.decisions.get("copies", ())  # operands laid out anew (transposed, padded rows) and staged outputs
    extra = f"(copies {' and '.join(copies)})" if copies else ""
    return " ".join(x for x in (spec.name, diff, f"split_k={splits}" if splits > 1 else "", extra) if x)


def scaled_decision(
    a,
    b,
    scale_a,
    scale_b,
    *,
    out_dtype=None,
    out=None,
    scale_result=None,
    use_fast_accum: bool = False,
    kernel: str = "auto",
    config: Mapping[str, int] | None = None,
) -> str:
    """What the earlier runs of ``scaled_matmul`` with these arguments ran: "<rung> <non-default parameters>
    (<where the configuration came from>)", e.g. "fp8_wgmma BM=64 WGS=1 NUM_THREADS=256 STAGES=8 (tuned at
    512x512x512)" or "fp8_block_scaled (defaults)"; "" if not known."""
    key = _scaled._key(a, b, scale_a, scale_b, out, out_dtype, use_fast_accum, kernel, config, scale_result)
    call = _scaled._calls.get(key) if key is not None else None
    return call.ran if call is not None else ""
