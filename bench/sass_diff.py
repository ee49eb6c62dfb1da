"""Before / after SASS of every shipped variant of the Hopper rungs: offline (no GPU), from a git revision's tree
and from the working tree.

    PYTHONPATH=. python3 bench/sass_diff.py --base REV [--kernels wgmma,wgmma_ws] [--drop PP]

Variants: each kernel's defaults, named configurations, the configurations of its entries in cumm/tuned/*.json
and the three the offline-compile test samples, each x C aligned or not x (half kernels) bf16 -> bf16 and
fp16 -> float32 x batched or not (where the kernel runs batches) x (reads_transposed) A, B or both column-major;
FP8 kernels x C bfloat16, float16 or float32 (OUT) x C aligned or not, and A e4m3 / B e5m2 and the reverse;
grouped kernels x contiguous or masked A (MASKED) x C aligned or not x bf16 or fp16 x B N- or K-major.
The kernel's name (it spells the configuration) is masked, so a parameter dropped from a spec (``--drop``)
compares its variants with those of the configuration without it. Per kernel: how many variants are identical,
and for each that is not, registers, spill bytes and the counts of the instructions that matter (wgmma, TMA,
barriers, shared and global loads and stores). Needs cuobjdump (CUOBJDUMP or PATH; see bench/cuobjdump.py).
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import itertools
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from cuobjdump import sass

ROOT = Path(__file__).resolve().parent.parent
KERNELS = (
    "mma_swizzled_pipeline",
    "wgmma",
    "wgmma_ws",
    "wgmma_tf32x3",
    "wgmma_cluster_split_k",
    "fp8_wgmma",
    "fp8_block_scaled",
    "wgmma_grouped",
    "fused3_wg",
)
# SASS opcodes reported per variant: wgmma, TMA loads and stores, mbarrier / barrier traffic, memory
OPS = ("HGMMA", "UTMALDG", "UTMASTG", "SYNCS", "BAR", "LDS", "STS", "LDG", "STG", "LDL", "STL", "LDGSTS")


def _configs(name: str) -> list[dict]:
    from cumm.ladder import REGISTRY

    spec = REGISTRY[name]
    out = [spec.resolve({}, 90), *(spec.resolve(c, 90) for c in spec.configs.values())]
    for table in sorted((ROOT / "cumm/tuned").glob("*.json")):
        for e in json.loads(table.read_text())["entries"].values():
            if e["kernel"] == name and e["cc"] == 90:
                out.append(spec.resolve({k: v for k, v in e["config"].items() if k in spec.defaults}, 90))
    sys.path.insert(0, str(ROOT))
    from tests.test_compile import sample_configs

    out += sample_configs(spec)
    seen, uniq = set(), []
    for c in out:
        key = tuple(sorted(c.items()))
        if key not in seen:
            seen.add(key)
            uniq.append(c)
    return uniq


def fp8_variants(cfg: dict) -> list[tuple[dict, tuple]]:
    """(configuration, flags) of each variant cumm/api/scaled.py renders for an FP8 rung's configuration: flags
    (1, 1, VEC_C); C's type OUT (bfloat16, float16, float32) with C aligned or not, and A e4m3 / B e5m2 and the
    reverse (bench/restamp.py compares the same set)."""
    outs = [({**cfg, "OUT": out}, (1, 1, vc)) for out in (0, 1, 2) for vc in (1, 0)]
    return outs + [({**cfg, "FA": fa, "FB": 1 - fa}, (1, 1, 1)) for fa in (0, 1)]


def variants(names) -> list[tuple]:
    from cumm.ladder import REGISTRY
    from cumm.runtime.render import dtype_flag, supports_batch

    jobs = []
    for name in names:
        spec = REGISTRY[name]
        half = "float32" not in spec.dtypes
        for cfg in _configs(name):
            if spec.scales:  # FP8: C's type OUT and the formats FA, FB
                jobs += [(name, c, flags) for c, flags in fp8_variants(cfg)]
                continue
            if spec.kind == "grouped":  # (cumm/plan/grouped.py) inputs' dtype out, B N- or K-major, both layouts
                for masked, vc, dt, lay in itertools.product((0, 1), (1, 0), ("bfloat16", "float16"), (0, 2)):
                    jobs.append((name, {**cfg, "MASKED": masked}, (1, 1, vc, 0, dtype_flag(dt, dt), lay)))
                continue
            for vc in (1, 0):
                if spec.kind != "gemm":  # (a chain kernel's copy-engine form takes aligned operands only)
                    if vc or not cfg.get("TMA"):
                        jobs.append((name, cfg, (1, 1, 1) if vc else (0, 0, 0)))
                    continue
                for bt in (0, 1) if supports_batch(spec) else (0,):
                    if not half:
                        jobs.append((name, cfg, (1, 1, vc, bt)))
                        continue
                    for dt in (("bfloat16", "bfloat16"), ("float16", "float32")):
                        jobs.append((name, cfg, (1, 1, vc, bt, dtype_flag(*dt))))
                        if spec.reads_transposed and vc and not bt and dt[0] == "bfloat16":
                            jobs += [(name, cfg, (1, 1, 1, 0, dtype_flag(*dt), lay)) for lay in (1, 2, 3)]
    return jobs


def _counts(text: str) -> dict[str, int]:
    ops = collections.Counter()
    for line in text.splitlines():
        m = re.search(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)", line)
        if m:
            ops[m.group(1)] += 1
            ops["total"] += 1
    return {k: ops[k] for k in (*OPS, "total")}


def dump(names: list[str], drop: list[str], out: str) -> None:
    """Under the tree on PYTHONPATH: per variant (its key without the dropped parameters) the masked SASS's sha256,
    the ptxas report and the instruction counts."""
    from cumm.ladder import REGISTRY
    from cumm.runtime.compile import compile_offline

    def one(job):
        name, cfg, flags = job
        k = compile_offline(REGISTRY[name], cfg, "sm_90", flags)
        text = sass(k.cubin, k.name)
        key = json.dumps([name, {a: v for a, v in sorted(cfg.items()) if a not in drop}, flags])
        info = dict(sha=hashlib.sha256(text.encode()).hexdigest(), regs=k.registers, spill=k.spill_bytes)
        return key, {**info, **_counts(text)}

    with ThreadPoolExecutor(os.cpu_count() or 4) as ex:
        res = dict(ex.map(one, variants(names)))
    Path(out).write_text(json.dumps(res))


def _run_dump(root: Path, names, drop, out: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(root)}
    cmd = [sys.executable, str(ROOT / "bench/sass_diff.py"), "--dump", str(out), "--kernels", ",".join(names)]
    subprocess.run([*cmd, "--drop", ",".join(drop)], env=env, check=True, cwd=root)
    return json.loads(out.read_text())


def _side_by_side(base: str, names, drop, tmp: Path) -> tuple[dict, dict]:
    archive = subprocess.run(["git", "archive", base, "cumm"], cwd=ROOT, check=True, capture_output=True).stdout
    (tmp / "base.tar").write_bytes(archive)
    with tarfile.open(tmp / "base.tar") as t:
        t.extractall(tmp / "base", filter="data")
    (tmp / "base/tests").symlink_to(ROOT / "tests")  # the sampled configurations: today's test's
    return _run_dump(tmp / "base", names, drop, tmp / "old.json"), _run_dump(ROOT, names, drop, tmp / "new.json")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--base", help="the git revision to compare with (its cumm/ tree)")
    p.add_argument("--kernels", default=",".join(KERNELS))
    p.add_argument("--drop", default="", help="parameters a spec no longer has (left out of the variants' keys)")
    p.add_argument("--save", help="also write both sides' results here (json)")
    p.add_argument("--old", help="the base side from an earlier --save (instead of compiling --base again)")
    p.add_argument("--dump", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    names, drop = a.kernels.split(","), [d for d in a.drop.split(",") if d]
    if a.dump:
        dump(names, drop, a.dump)
        return 0
    if not (a.base or a.old):
        p.error("--base REV (or --old FILE) is required")
    with tempfile.TemporaryDirectory() as tmp:
        if a.old:
            saved = json.loads(Path(a.old).read_text())
            old = saved.get("old", saved)  # a --save file, or a --dump of the base tree
            new = _run_dump(ROOT, names, drop, Path(tmp) / "new.json")
        else:
            old, new = _side_by_side(a.base, names, drop, Path(tmp))
    if a.save:
        Path(a.save).write_text(json.dumps({"old": old, "new": new}, indent=1))
    for name in names:
        keys = sorted(k for k in set(old) | set(new) if json.loads(k)[0] == name)
        same = [k for k in keys if k in old and k in new and old[k]["sha"] == new[k]["sha"]]
        only = [k for k in keys if (k in old) != (k in new)]
        print(f"{name}: {len(same)} of {len(keys)} variants identical, {len(only)} on one side only")
        for k in keys:
            if k in same:
                continue
            _, cfg, flags = json.loads(k)
            if k not in old or k not in new:
                side = "new only" if k in new else "base only"
                print(f"  {side}: {cfg} {flags}")
                continue
            diff = {f: (old[k][f], new[k][f]) for f in ("regs", "spill", *OPS, "total") if old[k][f] != new[k][f]}
            print(
                f"  differs: {cfg} {flags}: "
                + (
                    ", ".join(f"{f} {o}->{n}" for f, (o, n) in diff.items())
                    or "same registers, spills and counts (order / addressing)"
                )
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
