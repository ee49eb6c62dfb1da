"""Where PS = 1's phase-1 cost comes from: bench/probe_chain.py's phase stamps for variants of kw64x32ps1 whose
rendered source drops parts of C's advance split (the results of the variants without it are wrong; only
their times are read). PS = 1 was not kept: run this with bench/results/session14/presplit.patch applied
(`git apply`), which adds it (and kw64x32ps1 to probe_chain's EXTRA). Variant nofence also runs on kw64x32.

    PYTHONPATH=.:bench python3 bench/probe_ps.py [--n 512] [--variants full,noload,nostore,none,late,nofence]
        [--config kw64x32ps1]
"""

from __future__ import annotations

import argparse

import probe_chain  # bench/ is this script's directory

LOAD = "if (!loaded) split.load();"
PART = "split.part(parts++);"
FENCE = 'asm volatile("fence.proxy.async.shared::cta;\\n" ::: "memory");  // generic-proxy stores -> wgmma'
VARIANTS = {
    "full": {},
    "noload": {LOAD: ""},  # C's values not loaded (stores whatever the registers hold)
    "nostore": {PART: "parts++;"},  # loaded, the first round never split or stored
    "none": {LOAD: "", PART: "parts++;"},
    "late": {"after(j);  // (while chunk j's wgmma run)": ""},  # stored after the tile's k-loop
    # phase 1's k-loop without its proxy fence (wrong: for what the fence costs behind the stores)
    "nofence": {FENCE: ""},
}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=512)
    p.add_argument("--variants", default="full,nostore,late,nofence")
    p.add_argument("--config", default="kw64x32ps1", help="a configuration of probe_chain (kw64x32: PS = 0)")
    a = p.parse_args()
    own = probe_chain.render
    for v in a.variants.split(","):
        def render(spec, cfg, flags, _v=v):
            name, src = own(spec, cfg, flags)
            for old, new in VARIANTS[_v].items():
                assert src.count(old) == 1, f"template changed: update {old!r}"
                src = src.replace(old, new)
            return name, src
        probe_chain.render = render
        print(f"-- {v}")
        probe_chain.phases(a.n, a.config)
    probe_chain.render = own


if __name__ == "__main__":
    main()
