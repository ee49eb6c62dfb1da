"""The smem rung: parameters, defaults, constraints and launch geometry."""

from __future__ import annotations

from pathlib import Path

from cumm.core.spec import KernelSpec, at_most_1024_threads, positive
from cumm.ladder.common import grid_nm, static_smem

SPEC = KernelSpec(
    name="smem",
    template=Path(__file__).with_name("kernel.cu"),
    summary="shared-memory cache blocking with BS x BS tiles",
    defaults=dict(BS=32),
    block=lambda c: (c["BS"] * c["BS"], 1, 1),
    grid=grid_nm("BS", "BS"),
    constraints=[*positive("BS"), at_most_1024_threads("BS * BS"), static_smem("2 * BS * BS")],
    space=dict(BS=(8, 16, 32)),
)
