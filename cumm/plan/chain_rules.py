"""Which fused kernel, in which named configuration, multiplies a chain of three: the size rules, as data.

A chain A @ B @ C of shapes m x k, k x p, p x n is measured by the multiply-adds of the fused kernels'
order (A @ B) @ C, ``m * p * (k + n)`` (a square chain of size n counts 2 n^3), or, for ``fused3``'s panel
size, by its rows m. A rule is a list of steps ``(limit, configuration)``: the first step whose limit the
measure does not exceed names the configuration, ``None`` where the rule's kernel is not the one to use.
The configuration names are those of each kernel's spec (``KernelSpec.configs`` in ``the rung folders' spec.py``).

Every figure below is device time on the H200 (``bench/chain.py``; history and the configurations that lost:
docs/chain.md).
"""

from __future__ import annotations

from typing import NamedTuple


class Rule(NamedTuple):
    kernel: str
    min_cc: int  # oldest compute capability the rule applies to (kernel="auto")
    measure: str  # "fma": m * p * (k + n); "rows": m
    steps: tuple[tuple[int, str | None], ...]
    last: str  # kernel=<this kernel> past the last step (auto: past the last step the rule gives nothing)


def _n3(n: int) -> int:
    return 2 * n**3  # the measure of a square chain of size n


FUSED3 = Rule("fused3", 90, "rows", ((383, "bm16"),), "bm32")  # bm16 wins at m = 256, bm32 at 512
# fused3's bm16 (clusters) wins up to n = 160 (at 128; tc32x32 at 192)
FUSED3_SMALL = Rule("fused3", 90, "fma", ((_n3(160), "bm16"),), "bm16")
# fused3_tc: up to n = 3072 for square chains, past which two tf32x3 GEMMs are as fast. KS > 1 (k-sliced
# warps) measured within 3 % of KS = 1 at n = 384 and 512 and slower elsewhere: not used.
FUSED3_TC = Rule(
    "fused3_tc", 80, "fma", ((_n3(768), "tc32x32"), (_n3(1536), "tc64x64"), (_n3(3072), "tc128x128")), "tc128x128"
)
# fused3_wg (compute capability 9.0 only), the fastest measured configuration at each size, from batches of
# back-to-back launches (us per call): kw64x32 to n = 512 (512: 14.7 against wg64x32's 15.4; 384: 12.2
# against 13.3), wg128x64 to 704 (every tile in one round; 704: 26.2 against wg64x32's 33.6), wg64x32 to 896
# (768: 43.2 against 49.4), wg128x64 to 4096 (3351 us against cupy's 5347); fused3_tc is as fast up to 320.
FUSED3_WG = Rule(
    "fused3_wg",
    90,
    "fma",
    ((_n3(320), None), (_n3(512), "kw64x32"), (_n3(704), "wg128x64"), (_n3(896), "wg64x32"), (_n3(4096), "wg128x64")),
    "wg128x64",
)

# kernel="auto": the first rule (in this order) that applies to the device and names a configuration wins;
# none: two cumm.matmul calls.
AUTO = (FUSED3_SMALL, FUSED3_WG, FUSED3_TC)
# kernel=<a fused kernel>: that kernel's rule, forced (every chain kernel of the registry has one).
FORCED = {r.kernel: r for r in (FUSED3, FUSED3_TC, FUSED3_WG)}


def _measure(rule: Rule, m: int, fused: int) -> int:
    return m if rule.measure == "rows" else fused


def step(rule: Rule, m: int, fused: int) -> str | None:
    """The configuration ``rule`` gives a chain of ``m`` rows and ``fused`` multiply-adds, None if none."""
    x = _measure(rule, m, fused)
    return next((name for limit, name in rule.steps if x <= limit), None)


def forced(kernel: str, m: int, fused: int) -> str:
    """kernel=<kernel>: its rule's configuration; below a step that names none, the smallest named one;
    past the last step, the rule's ``last``."""
    rule = FORCED[kernel]
    x = _measure(rule, m, fused)
    return next((name for limit, name in rule.steps if x <= limit and name), rule.last)


def select(m: int, k: int, p: int, n: int, cc: int, supports) -> tuple[str, str] | None:
    """kernel="auto" for three arrays: (kernel, configuration name), or None for two matmuls.

    ``cc``: the compute capability as an int (90 for 9.0); ``supports(kernel, cc)``: whether the kernel runs
    there (its spec's ``supports``)."""
    if cc < 80 or min(m, k, p, n) < 1:
        return None
    fused = m * p * (k + n)  # (A @ B) @ C, the order the fused kernels compute
    if fused > k * n * (m + p):  # A @ (B @ C) is cheaper: two matmuls in that order
        return None
    for rule in AUTO:
        if cc >= rule.min_cc and supports(rule.kernel, cc):
            name = step(rule, m, fused)
            if name is not None:
                return rule.kernel, name
    return None
