"""Racecheck experiment for fused3_wg's K groups (KW): run one configuration (a dict literal) on unaligned chains,
optionally from a variant of the template, so that compute-sanitizer --tool racecheck reports on it alone.

    compute-sanitizer --tool racecheck python3 bench/race_kw.py "dict(BM=64, BN=32, ...)" [--variant NAME]
"""

from __future__ import annotations

import argparse

import cupy

from cumm import _chain, _render
from cumm._ladder import get_spec

# template variants: (text, replacement)
VARIANTS = {
    "plain": [],
    # named barriers with immediate ids (one per K group) instead of an id in a register
    "immid": [('asm volatile("bar.sync %0, %1;\\n" ::"r"(1 + kg), "n"(NTG) : "memory");',
               'if (kg == 0) asm volatile("bar.sync 1, %0;\\n" ::"n"(NTG) : "memory");\n'
               '            else asm volatile("bar.sync 2, %0;\\n" ::"n"(NTG) : "memory");')],
}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("config")
    p.add_argument("--variant", default="plain")
    a = p.parse_args()
    cfg = eval(a.config, {"dict": dict})  # noqa: S307 (a bench script's own argument)
    spec = get_spec("fused3_wg")
    own = _render.template_text
    text = own(spec.template)
    for old, new in VARIANTS[a.variant]:
        assert text.count(old) == 1, f"template changed: update the variant {a.variant}"
        text = text.replace(old, new)
    _render.template_text = lambda f: text if f == spec.template else own(f)
    rng = cupy.random.default_rng(0)
    dev = cupy.cuda.runtime.getDevice()
    for dims in [(37, 45, 777, 600), (130, 3, 257, 5), (513, 129, 300, 70)]:
        mats = []
        for i in range(3):
            x = rng.standard_normal((dims[i], dims[i + 1] + 1), dtype=cupy.float32)
            mats.append(x[:, 1:])  # unaligned: cp.async
        out = cupy.full((dims[0], dims[3]), cupy.nan, dtype=cupy.float32)
        _chain._fused3_wg(*mats, out, cfg, dev)
        ref = mats[0].astype(cupy.float64) @ mats[1].astype(cupy.float64) @ mats[2].astype(cupy.float64)
        err = float(cupy.linalg.norm(out - ref) / cupy.linalg.norm(ref))
        print(f"{dims} err {err:.2e}", flush=True)


if __name__ == "__main__":
    main()
