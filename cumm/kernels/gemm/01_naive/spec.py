"""The naive rung: parameters, defaults, constraints and launch geometry."""

from __future__ import annotations

from pathlib import Path

from cumm.core.spec import KernelSpec, at_most_1024_threads, cdiv, positive

SPEC = KernelSpec(
    name="naive",
    template=Path(__file__).with_name("kernel.cu"),
    summary="one thread per element of C; threads run down columns (uncoalesced)",
    defaults=dict(BS=32),
    block=lambda c: (c["BS"], c["BS"], 1),
    grid=lambda c, M, N, K: (cdiv(M, c["BS"]), cdiv(N, c["BS"]), 1),
    constraints=[*positive("BS"), at_most_1024_threads("BS * BS")],
    space=dict(BS=(8, 16, 32)),
)
