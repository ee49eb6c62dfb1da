"""``decision``: what the earlier runs of a ``cumm.matmul`` call made, read from its call cache (cumm/api/matmul.py)."""

from __future__ import annotations

from collections.abc import Mapping

from ..plan.operands import compute_capability
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
) -> str:
    """What the earlier runs of ``matmul(a, b, kernel=kernel, config=config, out=out, beta=beta, split_k=split_k)``
    made: "<kernel> <non-default parameters>", the split count and the operands copied on each call, e.g. "tf32x3
    BM=64 BN=64 split_k=4", "wgmma_ws (copies B)"; "" if not known."""
    key = _key(a, b, out, kernel, config, split_k, float(beta))
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
