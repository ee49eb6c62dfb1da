"""Offline SASS summary of a kernel configuration: ptxas report plus instruction counts.

    PYTHONPATH=. python3 bench/sass.py double_buffer --arch sm_90 --config BK=8 [--dump]

Needs cuobjdump on PATH or CUOBJDUMP set (on the H200 machine it is in the CUDA toolkit; elsewhere
`pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm` provides both, with nvdisasm's folder on PATH). No GPU
needed.
"""

from __future__ import annotations

import argparse
import collections
import re

from cuobjdump import sass

import cumm


def summary(text: str) -> collections.Counter:
    ops = collections.Counter()
    for line in text.splitlines():
        m = re.search(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", line)
        if m:
            op = m.group(1)
            base = op.split(".")[0]
            ops[base] += 1
            width = re.search(r"\.(128|64)(?:\.|$)", op)  # LDG.E.128 and LDG.E.128.CONSTANT alike
            if width:
                ops[base + "." + width.group(1)] += 1
    return ops


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("kernel")
    p.add_argument("--arch", default="sm_90")
    p.add_argument("--config", default="", help="K=V,K=V overrides")
    p.add_argument("--unaligned", action="store_true")
    p.add_argument("--dump", action="store_true")
    a = p.parse_args()
    cfg = {k: int(v) for k, v in (kv.split("=") for kv in a.config.split(",") if kv)}
    r = cumm.compile(a.kernel, cfg or None, a.arch, aligned=not a.unaligned)
    print(
        f"{r.name}: {r.registers} registers, {r.spill_bytes} spill bytes, {r.stack_bytes} stack, "
        f"{r.shared_bytes} shared bytes, {r.threads} threads"
    )
    text = sass(r.cubin)
    ops = summary(text)
    print(
        "  ".join(
            f"{k}={ops[k]}"
            for k in ("FFMA", "LDS", "LDS.128", "STS", "LDG", "LDG.128", "STG", "LDL", "STL", "BAR", "BRA")
        )
    )
    total = sum(v for k, v in ops.items() if "." not in k)
    print(f"total instructions {total}, FFMA share {ops['FFMA'] / max(total, 1):.1%}")
    if a.dump:
        print(text)


if __name__ == "__main__":
    main()
