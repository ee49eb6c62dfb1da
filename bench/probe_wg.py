"""Where fused3_wg's tile time goes: per-block time in each section of a tile, from %globaltimer stamps that
this probe inserts into the rendered source (k-loop, writing the partial tile and the first cluster barrier,
the rank's sum over distributed shared memory, the last cluster barrier), summed over the tiles of a launch;
and the same with parts of the work removed (results then wrong; only the times matter).

    PYTHONPATH=. python3 bench/probe_wg.py [--n 512] [--configs wg64x32] [--variants full,nomma,nosplit,noload]
"""

from __future__ import annotations

import argparse
import statistics

import cupy
import numpy as np
from cupy.cuda import nvrtc
from probe_chain import EXTRA, launch_setup, stamped_runs, with_maps  # bench/ is this script's directory

from cumm import _chain
from cumm._compile import NVRTC_OPTIONS, _arch_specific_kernel, _nvrtc_compile
from cumm._ladder import get_spec
from cumm._render import render

PROBE = r"""
__device__ unsigned long long cumm_probe[8192][8];
__device__ __forceinline__ unsigned long long cumm_now() {
    unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t;
}
__device__ __forceinline__ void cumm_sect(int i, unsigned long long& t0) {
    if (threadIdx.x == 0) { const unsigned long long t = cumm_now(); cumm_probe[blockIdx.x][i] += t - t0; t0 = t; }
}
"""
SECTIONS = {3: "kloop", 4: "part+bar", 5: "reduce", 6: "arrive"}
ANCHORS = [  # (text, inserted before it)
    ("    // chunks of K; this rank's group kg takes", "    unsigned long long cumm_t0 = cumm_now();\n"),
    ("    cumm_cluster_wait();  // (the previous tile's last barrier", "    cumm_sect(3, cumm_t0);\n"),
    ("    // Rank `rank` sums rows", "    cumm_sect(4, cumm_t0);\n"),
    ("#if CL > 1\n    // This rank is done reading", "    cumm_sect(5, cumm_t0);\n"),
    ("\n// Persistent:", "    cumm_sect(6, cumm_t0);\n"),
]
_YSPLIT = "        float4 v[U];\n#pragma unroll\n        for (int u = 0; u < U; ++u) {"
_YSTORE = "#pragma unroll\n        for (int u = 0; u < U; ++u) {\n            const int i = tg + u * NTG;\n"
_XLOADS = "            load_x(j, xb, xs);"
_FENCE = '            asm volatile("fence.proxy.async.shared::cta;\\n" ::: "memory");'
_NOX = "            for (int s = 0; s < BK / 8; ++s)\n" \
       "                for (int i = 0; i < 4; ++i) xb[s][i] = xs[s][i] = j;"
VARIANTS = {  # text replacements that remove one part of the work
    "full": [],
    "nomma": [("            cumm_wgmma<BN>(", "            if (0) cumm_wgmma<BN>(")],
    "nosplit": [(_YSPLIT, _YSPLIT.replace("for", "if (0) for")),  # Y's split into shared memory
                (_YSTORE, _YSTORE.replace("for", "if (0) for"))],
    "noload": [("        if (s < nc) issue(s);", "        if (0) issue(s);"),
               ("        if (j + STAGES - 1 < nc) issue(", "        if (0) issue(")],  # (cp.async only)
    # copy engine: a chunk's copies and its wait removed (stages hold stale data)
    "notma": [("            for (int s = 0; s < STAGES && s < nc; ++s) issue(s);", "            ;"),
              ("            if (tg == 0 && j >= 0 && j + STAGES < nc) issue(j + STAGES);", "            ;"),
              ("            cumm_mbar_wait(bars + (seq + j) % STAGES, (seq + j) / STAGES & 1);", "            ;")],
    # copy engine: Y's box not copied (X's only, the bytes expected cut to match): a third fewer bytes per
    # chunk from L2 at BM 64, BN 32, as TMA multicast of X over a cluster of two column tiles would read
    "noy": [("cumm_mbar_expect(bar, 4 * (BM * BK + BK * BN));", "cumm_mbar_expect(bar, 4 * BM * BK);"),
            ("            cumm_tma_load(Yr, ty, bn0, k0, bar);", "            ;")],
    # XA = 1: no proxy fence between Y's split (generic stores) and the wgmma that read it (results may be wrong)
    "nofence": [(_XLOADS + "\n" + _FENCE, _XLOADS)],
}
# XA = 1: what is left without the wgmma, the copies, Y's split and X's loads (register moves stand in for them):
# the folds, barriers and loop. (Without X's loads but with the wgmma, ptxas serializes the wgmma: C7514.)
VARIANTS["skeleton"] = VARIANTS["nomma"] + VARIANTS["nosplit"] + VARIANTS["notma"] + [(_XLOADS, _NOX)]


def build(config: str, variant: str, compile_only: bool = False):
    spec = get_spec("fused3_wg")
    cfg = spec.resolve({**_chain.WG_CONFIGS, **EXTRA}[config], 90)
    name, src = render(spec, cfg, (1, 1, 1))
    for text, before in ANCHORS:
        if text == "\n// Persistent:":  # the end of the tile function: before its closing brace
            i = src.index(text)
            j = src.rindex("}", 0, i)
            src = src[:j] + before + src[j:]
            continue
        assert src.count(text) == 1, f"template changed: update the probe's anchor {text!r}"
        src = src.replace(text, before + text)
    for old, new in VARIANTS[variant]:
        assert old in src, f"template changed: update the probe's variant {variant}"
        src = src.replace(old, new)
    k = src.index("namespace wg {")
    src = src[:k] + PROBE + src[k:]
    if compile_only:
        return _nvrtc_compile(nvrtc, spec, cfg, "sm_90a", src, [*NVRTC_OPTIONS, "-ftz=true", "-arch=sm_90a"])
    kern = _arch_specific_kernel(spec, cfg, name, src, 90)
    g = kern.module.get_global_var("cumm_probe")
    ptr = g[0] if isinstance(g, tuple) else g
    probe = cupy.ndarray((8192, 8), cupy.uint64, cupy.cuda.MemoryPointer(
        cupy.cuda.UnownedMemory(ptr, 8192 * 64, kern.module), 0))
    return kern, spec, cfg, probe


def run(n: int, config: str, variant: str, clusters: int, reps: int = 20) -> None:
    kern, spec, cfg, probe = build(config, variant)
    grid, threads, smem, args, _, _ = launch_setup(n, kern, spec, cfg, clusters)
    launch = with_maps(kern, cfg, grid, threads, smem, args)
    rows = [[event_us] + [float(np.median(s[:, i])) / 1e3 for i in SECTIONS] + [s[:, 3].max() / 1e3]
            for event_us, s in stamped_runs(launch, grid, threads, smem, args, probe, reps)]
    med = [statistics.median(col) for col in zip(*rows, strict=True)]
    names = ["event", *SECTIONS.values(), "kloop_max"]
    print(f"n={n} {config} {variant} grid={grid} (clusters of {cfg['CL']}): per block, summed over its tiles, us: "
          + "  ".join(f"{k}={v:.2f}" for k, v in zip(names, med, strict=True)), flush=True)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=512)
    p.add_argument("--configs", default="wg64x32")
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--clusters", default="0,1", help="grid caps in clusters (0: as multi_dot launches)")
    a = p.parse_args()
    for c in a.configs.split(","):
        for v in a.variants.split(","):
            for g in map(int, a.clusters.split(",")):
                run(a.n, c, v, g)


if __name__ == "__main__":
    main()
