"""The tuner's last step over rungs: each rung's best at a shape raced again side by side (:func:`race`).

Each rung's best comes from its own search, seconds to minutes apart from the others', and on the H200 the clock
follows the power: a rung timed while the card ran cool wins by what it borrowed. The re-race gives every
configuration the same conditions: ``RACE_ROUNDS`` rounds in which they take turns (round r starts at the r-th, so
none always follows the same one), each burst after ``SETTLE_S`` of back-to-back launches of itself, operands
rotated as in the search; the median of the rounds' medians decides and is what the entries store. Measured on the
H200 (bf16, the re-tune with the warpgroup index in uniform registers): the searches' picks at 128 x 8192 x 8192
(wgmma_cluster_split_k, 0.7 % ahead of wgmma_ws) and 3000 x 5000 x 2000 (wgmma_pingpong, 0.9 % ahead) ran 1.7-3.4 %
and 5-14 % behind them in interleaved rounds beside torch.matmul (docs/results.md).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from ..ladder import get_spec
from ..runtime.timing import SETTLE_S, back_to_back_ms, hold
from .space import MAX_REPS, MIN_REPS, SAMPLE_MS, DeviceInfo
from .tune_operands import operands_for, run_as
from .tune_search import TuneResult

RACE_ROUNDS = 5


def race(results: Sequence[TuneResult], rounds: int = RACE_ROUNDS, seed: int = 0) -> list[float]:
    """Milliseconds of each result's configuration (one shape and dtype, on the current device) raced side by side:
    the median over ``rounds`` rounds of each burst's median. Results are not changed."""
    import cupy

    dev = DeviceInfo.from_device(cupy.cuda.runtime.getDevice())
    launches, sets, reps = [], [], []
    for r in results:
        Operands = operands_for(r.dtype)
        spec = get_spec(r.kernel)
        flags = run_as(spec, r.dtype, Operands.flags(r.dtype, *r.shape), *r.shape[1:], r.b_transposed)[0]
        tb = {"b_transposed": True} if r.b_transposed else {}  # (MatmulOperands' only)
        ops = Operands(r.kernel, spec, *r.shape, r.dtype, flags, dev, seed, **tb)
        launches.append(ops.launcher({**r.config}, r.split_k))
        sets.append(ops.nsets)
        reps.append(int(min(MAX_REPS, max(MIN_REPS, math.ceil(SAMPLE_MS / max(r.ms, 1e-3))))))
    for launch in launches:  # (a split's variant and its sum compile outside the timing)
        launch(0)
    cupy.cuda.Device().synchronize()
    per: list[list[float]] = [[] for _ in results]
    n = len(results)
    for rnd in range(rounds):
        for j in range(n):
            i = (rnd + j) % n
            launch, nsets = launches[i], sets[i]
            hold(lambda k, f=launch, s=nsets: f(k % s), SETTLE_S)
            per[i].append(statistics.median(back_to_back_ms(lambda k, f=launch, s=nsets: f(k % s), reps[i])))
    return [statistics.median(p) for p in per]
