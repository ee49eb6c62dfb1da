"""Keep the tuned tables' entries through a template edit that leaves their kernels' machine code as it was.

    PYTHONPATH=. python3 bench/restamp.py --base REV [--table cumm/tuned/h200.json] [--dry-run] [--sass]

A tuned entry carries the template hash of its kernel (and of the rungs it raced, ``raced``); any code edit of a
template or of a header it includes changes the hash and retires the entry, since new code needs new timings. An
edit that only adds a variant (a flag whose code the old variants do not render) leaves the old variants' machine
code as it was. This compiles offline (no GPU), from REV's tree and from the working tree, every variant a table's
entries can run: each entry's configuration x C aligned or not x an output of the inputs' dtype or float32 x
batched or not. For each kernel whose hash changed and whose variants' cubins are all byte-identical, it rewrites
that hash in the entries (their own and in ``raced``) to the current one; any other entry stays as it is (retired:
tune it again). It prints what it compared and what it kept.

``--drop PARAM`` (a parameter removed from a spec): the entries' configurations lose it, and since a kernel's name
spells its configuration (so the cubins differ in their symbol names), variants are compared by their SASS with
the kernel's name masked (cuobjdump: CUOBJDUMP or PATH, see bench/cuobjdump.py) instead of byte for byte. The same
checks a parameter added to a spec, run while its default is the value that renders the old code (the entries
then say that value before the default changes: UWG = 0 in wgmma_ws and wgmma_cluster_split_k, until they were
tuned again and the parameter went, --drop UWG once more).

``--sass`` compares by SASS without dropping anything: an edit can change a cubin's other sections and not its
instructions (the TMA epilogue's walk made one for both formats of C: every cubin 128 bytes larger, its SASS the same).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from cuobjdump import sass
from sass_diff import fp8_variants

ROOT = Path(__file__).resolve().parent.parent


def variants(entries: dict, drop: tuple[str, ...] = ()) -> set[tuple]:
    """(kernel, config items, flags) of every variant the sm_90 entries can run (without the ``drop`` parameters: a
    tree whose spec still has one resolves it to its default)."""
    from cumm.ladder import REGISTRY
    from cumm.runtime.render import dtype_flag, supports_batch

    jobs = set()
    for e in entries.values():
        spec = REGISTRY.get(e["kernel"])
        if spec is None or spec.kind != "gemm":
            continue
        given = {k: v for k, v in e["config"].items() if k not in drop}
        if spec.scales:  # FP8: the variants sass_diff compares (the formats and C's type are configuration)
            for over, flags in fp8_variants(given):
                full = spec.resolve(over, e["cc"])
                jobs.add((e["kernel"], tuple(sorted((k, v) for k, v in full.items() if k not in drop)), e["cc"], flags))
            continue
        cfg = tuple(sorted((k, v) for k, v in spec.resolve(given, e["cc"]).items() if k not in drop))
        for vc in (0, 1):
            for bt in (0, 1) if supports_batch(spec) else (0,):
                if e["dtype"] == "float32":
                    jobs.add((e["kernel"], cfg, e["cc"], (1, 1, vc, bt) if bt else (1, 1, vc)))
                else:
                    for out in (e["dtype"], "float32"):
                        jobs.add((e["kernel"], cfg, e["cc"], (1, 1, vc, bt, dtype_flag(e["dtype"], out))))
    return jobs


def dump(table: str, out: str, drop: tuple[str, ...] = (), by_sass: bool = False) -> None:
    """Run under the tree on PYTHONPATH: the sha256 of each variant's cubin (with ``drop`` or ``by_sass``: of its
    SASS, the kernel's name masked), and the kernels' template hashes."""
    from cupy.cuda import nvrtc

    from cumm.core.errors import CompileError
    from cumm.ladder import REGISTRY
    from cumm.runtime.compile import NVRTC_OPTIONS, _nvrtc_compile
    from cumm.runtime.render import render, template_hash

    def one(job):
        kernel, cfg, cc, flags = job
        spec = REGISTRY[kernel]
        arch = spec.target(cc)
        full = spec.resolve(dict(cfg), cc)  # (a dropped parameter the spec still has: its default)
        name, source = render(spec, full, flags)
        try:
            _, cubin = _nvrtc_compile(nvrtc, spec, full, arch, source, [*NVRTC_OPTIONS, "-ftz=true", f"-arch={arch}"])
        except CompileError as e:  # a variant the kernel refuses (a cluster's batch): the same if both trees do
            return json.dumps(job), "refused: " + str(e).splitlines()[-1][:200]
        return json.dumps(job), hashlib.sha256(sass(cubin, name).encode() if drop or by_sass else cubin).hexdigest()

    with ThreadPoolExecutor(os.cpu_count() or 4) as ex:
        shas = dict(ex.map(one, sorted(variants(json.loads(Path(table).read_text())["entries"], drop))))
    hashes = {k: template_hash(s) for k, s in REGISTRY.items() if s.kind == "gemm"}
    Path(out).write_text(json.dumps({"cubins": shas, "hashes": hashes}))


def _run_dump(root: Path, table: Path, out: Path, drop: tuple[str, ...], by_sass: bool) -> dict:
    env = {**os.environ, "PYTHONPATH": str(root)}
    cmd = [sys.executable, __file__, "--dump", str(table), str(out), *(["--drop", ",".join(drop)] if drop else [])]
    cmd += ["--sass"] if by_sass else []
    subprocess.run(cmd, env=env, check=True, cwd=root)
    return json.loads(out.read_text())


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--base", help="the git revision whose templates the entries were tuned with")
    p.add_argument("--table", default=str(ROOT / "cumm/tuned/h200.json"))
    p.add_argument("--dry-run", action="store_true", help="compare and print; write nothing")
    p.add_argument("--drop", default="", help="parameters removed from the specs (comma-separated)")
    p.add_argument("--sass", action="store_true", help="compare SASS, not cubins byte for byte (see above)")
    p.add_argument("--dump", nargs=2, metavar=("TABLE", "OUT"), help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    drop = tuple(d for d in a.drop.split(",") if d)
    if a.dump:
        dump(*a.dump, drop=drop, by_sass=a.sass)
        return 0
    if not a.base:
        p.error("--base REV is required")
    table = Path(a.table).resolve()
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(["git", "archive", a.base, "cumm"], cwd=ROOT, check=True, capture_output=True).stdout
        tar = Path(tmp) / "base.tar"
        tar.write_bytes(archive)
        with tarfile.open(tar) as t:
            t.extractall(Path(tmp) / "base", filter="data")
        old = _run_dump(Path(tmp) / "base", table, Path(tmp) / "old.json", drop, a.sass)
        new = _run_dump(ROOT, table, Path(tmp) / "new.json", drop, a.sass)
    changed = {k for k, h in old["hashes"].items() if new["hashes"].get(k) != h}
    differ = {json.loads(j)[0] for j, sha in old["cubins"].items() if new["cubins"].get(j) != sha}
    keep = {k: (old["hashes"][k], new["hashes"][k]) for k in changed - differ}
    n = {k: sum(1 for j in old["cubins"] if json.loads(j)[0] == k) for k in changed}
    for k in sorted(changed):
        verdict = "machine code differs: its entries stay retired" if k in differ else "identical: kept"
        print(f"{k}: hash {old['hashes'][k]} -> {new['hashes'][k]}, {n[k]} variants compared, {verdict}")
    from cumm.ladder import REGISTRY

    data = json.loads(table.read_text())
    kept = 0
    for e in data["entries"].values():
        k = e["kernel"]
        for d in drop:  # a removed parameter: gone from the entries of the kernels that lost it
            if k in REGISTRY and d not in REGISTRY[k].defaults:
                e["config"].pop(d, None)
        if k in keep and e["template_hash"] == keep[k][0]:
            e["template_hash"] = keep[k][1]
            kept += 1
        for r, h in list(e.get("raced", {}).items()):
            if r in keep and h == keep[r][0]:
                e["raced"][r] = keep[r][1]
    print(f"{kept} of {len(data['entries'])} entries re-stamped" + (" (dry run: nothing written)" if a.dry_run else ""))
    if not a.dry_run:
        table.write_text(json.dumps(data, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
