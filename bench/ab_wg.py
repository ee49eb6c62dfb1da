"""A/B of fused3_wg kernels in one run, launched as multi_dot launches them (tensor maps included): batches of
back-to-back launches between an event pair, A and B batches interleaved; median us per call and each one's
error against float64. A case is CONFIG:n (the working tree's template against another copy of it, --old) or
CONFIG/CONFIG:n (two configurations of the working tree's template).

    PYTHONPATH=. python3 bench/ab_wg.py --old path/to/fused3_wg.cu [--cases wg128x32:512,wg128x32/k64:512]
        [--rotate] [--per-call]

--rotate --per-call times what bench/chain.py's loop and device columns time (inputs from memory, an event pair
around each call); the default, back-to-back batches on L2-resident inputs, is the kernel alone.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import cupy
from probe_chain import EXTRA, launch_setup, with_maps  # bench/ is this script's directory

from cumm import _chain, _render
from cumm._compile import _arch_specific_kernel
from cumm._ladder import get_spec

# candidates beside the named configurations and probe_chain's EXTRA
CANDIDATES = {
    "k64": dict(BM=128, BN=32, BK=64, CL=2, STAGES=3, MINB=1, XA=1, TMA=1),
    "k64xa0": dict(BM=128, BN=32, BK=64, CL=2, STAGES=3, MINB=1, XA=0, TMA=1),
    "k64xa0s2": dict(BM=128, BN=32, BK=64, CL=2, STAGES=2, MINB=1, XA=0, TMA=1),
    "k64b64": dict(BM=64, BN=32, BK=64, CL=2, STAGES=2, MINB=1, XA=0, TMA=1),
    "k64b64s3": dict(BM=64, BN=32, BK=64, CL=2, STAGES=3, MINB=1, XA=0, TMA=1),
    # session 11: K split over two K groups of one block (KW = 2)
    # (kw64x32 itself: the named configuration, _chain.WG_CONFIGS; as it was before session 15: kw64x32pc0)
    "kw64x32k32": dict(BM=64, BN=32, BK=32, CL=1, STAGES=4, MINB=1, XA=0, TMA=1, KW=2),
    "kw64x64": dict(BM=64, BN=64, BK=32, CL=1, STAGES=2, MINB=1, XA=0, TMA=1, KW=2),
    # session 14: wg64x32 waiting for the last chunk's wgmma after the barrier (RF = 0), as before
    "wg64x32rf0": dict(BM=64, BN=32, BK=64, CL=2, STAGES=2, MINB=1, XA=0, TMA=1, RF=0),
    "kw64x32rf1": dict(BM=64, BN=32, BK=64, CL=1, STAGES=2, MINB=1, XA=0, TMA=1, KW=2, RF=1),
    # session 15: the first phase-2 tile's C split in the grid barrier's wait (PC = 1), and without
    "kw64x32pc": dict(BM=64, BN=32, BK=64, CL=1, STAGES=2, MINB=1, XA=0, TMA=1, KW=2, PC=1),
    "kw64x32pc0": dict(BM=64, BN=32, BK=64, CL=1, STAGES=2, MINB=1, XA=0, TMA=1, KW=2, PC=0),
    # session 16: x_big's two products as one wgmma of N = 2 BN (MN = 1, wg128x64's now), and without
    "wg128x64mn0": dict(BM=128, BN=64, BK=32, CL=2, STAGES=4, MINB=1, XA=0, TMA=1, MN=0),
    "kw64x32mn": dict(BM=64, BN=32, BK=64, CL=1, STAGES=2, MINB=1, XA=0, TMA=1, KW=2, PC=1, MN=1),
}


def build(config: str, template: str | None):
    """The kernel of ``config`` rendered from ``template`` (a path; None: the package's own). A directory stands
    for the template and its headers: each file there replaces the package's of that name."""
    spec = get_spec("fused3_wg")
    cfg = spec.resolve({**_chain.WG_CONFIGS, **EXTRA, **CANDIDATES}[config], 90)
    own = _render.template_text
    if template is not None and Path(template).is_dir():
        _render.template_text = lambda f: (Path(template) / f).read_text() if (Path(template) / f).exists() else own(f)
    elif template is not None:
        text = Path(template).read_text()
        _render.template_text = lambda f: text if f == spec.template else own(f)
    try:
        name, src = _render.render(spec, cfg, (1, 1, 1))
    finally:
        _render.template_text = own
    return _arch_specific_kernel(spec, cfg, name, src, 90), spec, cfg


def input_sets(args: tuple, n: int, count: int) -> list[tuple]:
    """``args`` and count - 1 copies of it with fresh A, B, C and E (the same T and barrier word)."""
    sets = [args]
    for _ in range(count - 1):
        x = [cupy.random.standard_normal((n, n), dtype=cupy.float32) for _ in range(4)]
        sets.append((*args[:4], x[0], args[5], x[1], args[7], x[2], args[9], x[3], *args[11:]))
    return sets


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--old", help="another copy of fused3_wg.cu, or a directory of it and its headers (CONFIG:n)")
    p.add_argument("--cases", default="wg128x32:384,wg128x32:512,wg128x64:768,wg128x64:1024,wg128x64:2048")
    p.add_argument("--batches", type=int, default=15)
    p.add_argument("--calls", type=int, default=40)
    p.add_argument("--rotate", action="store_true",
                   help="cycle through input sets of over 120 MB together (inputs come from memory, not L2)")
    p.add_argument("--per-call", action="store_true",
                   help="an event pair around every call (as bench/chain.py's loop and device columns), not a batch")
    a = p.parse_args()
    for case in a.cases.split(","):
        config, n = case.split(":")
        n = int(n)
        runs = {}
        pairs = [(c, None) for c in config.split("/")] if "/" in config else [("old", a.old), ("new", None)]
        for label, tpl in pairs:
            kern, spec, cfg = build(label if "/" in config else config, tpl)
            grid, threads, smem, args, x, e = launch_setup(n, kern, spec, cfg)
            sets = input_sets(args, n, -(-120 << 20) // (16 * n * n) if a.rotate else 1)
            runs[label] = ([with_maps(kern, cfg, grid, threads, smem, s) for s in sets], grid, threads, smem, sets,
                           x, e)
        times = {k: [] for k in runs}
        ev = [cupy.cuda.Event(), cupy.cuda.Event()]
        pairs = [(cupy.cuda.Event(), cupy.cuda.Event()) for _ in range(a.calls)] if a.per_call else []
        for b in range(a.batches + 2):
            for label, (launches, grid, threads, smem, sets, _, _) in runs.items():
                ev[0].record()
                for i in range(a.calls):
                    if pairs:
                        pairs[i][0].record()
                    launches[i % len(sets)]((grid,), (threads,), sets[i % len(sets)], shared_mem=smem)
                    if pairs:
                        pairs[i][1].record()
                ev[1].record()
                ev[1].synchronize()
                if b >= 2:
                    if pairs:
                        times[label].append(statistics.median(cupy.cuda.get_elapsed_time(*q) * 1e3 for q in pairs))
                    else:
                        times[label].append(cupy.cuda.get_elapsed_time(*ev) * 1e3 / a.calls)
        out = []
        for label, (*_, x, e) in runs.items():
            r = (x[0].astype(cupy.float64) @ x[1].astype(cupy.float64)) @ x[2].astype(cupy.float64)
            err = float(cupy.linalg.norm(e - r) / cupy.linalg.norm(r))
            out.append(f"{label} {statistics.median(times[label]):7.2f} us (err {err:.1e})")
        print(f"n={n:5d} {config:10s} grid={grid}: " + "  ".join(out), flush=True)


if __name__ == "__main__":
    main()
