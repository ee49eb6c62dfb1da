"""cumm's disk cache of sm_90a cubins heals itself: a cached file that does not verify (empty, truncated, altered,
written by an older cumm) or that the driver refuses is set aside as ``.corrupt`` with a warning and compiled
again, never loaded blind. The CPU tests compile a real wgmma cubin with NVRTC (no GPU needed); the GPU tests
run a fresh process on a corrupted cache."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from cumm.ladder import get_spec
from cumm.runtime import cache as _cache
from cumm.runtime import compile as _compile
from cumm.runtime.render import ALIGNED, render

ROOT = Path(__file__).resolve().parents[1]


# --------------------------------------------------------------------------------------------------
# The file format
# --------------------------------------------------------------------------------------------------


def test_pack_unpack_round_trip():
    blob = _cache.pack(b"\x7fELF and more\n\x00bytes")
    assert blob.startswith(b"cumm-cache-1 20 ") and blob.endswith(b"\x7fELF and more\n\x00bytes")
    assert _cache.unpack(blob) == b"\x7fELF and more\n\x00bytes"
    assert _cache.unpack(_cache.pack(b"")) == b""


def _flip(blob: bytes, at: int) -> bytes:
    return blob[:at] + bytes([blob[at] ^ 0x01]) + blob[at + 1 :]


DATA = bytes(range(256)) * 8
BLOB = _cache.pack(DATA)
HEADER = len(BLOB) - len(DATA)
BAD_FILES = {
    "empty": (b"", "empty"),
    "truncated": (BLOB[: len(BLOB) // 2], "truncated"),
    "last byte cut": (BLOB[:-1], "truncated"),
    "extended": (BLOB + b"\0", "extended"),
    "bit flip": (_flip(BLOB, HEADER + 1000), "sha256"),
    "header only": (BLOB[:HEADER], "truncated"),
    "header cut": (BLOB[: HEADER - 5], "header"),
    "raw cubin (no header)": (b"\x7fELF" + DATA, "header"),
    "header of another format": (b"cumm-cache-0" + BLOB[12:], "header"),
}


@pytest.mark.parametrize("case", list(BAD_FILES))
def test_unpack_rejects(case):
    blob, words = BAD_FILES[case]
    with pytest.raises(_cache.CorruptEntry, match=words):
        _cache.unpack(blob)


# --------------------------------------------------------------------------------------------------
# A real cubin through the cache: written by NVRTC's compile, corrupted, detected, set aside, rebuilt
# --------------------------------------------------------------------------------------------------


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CUMM_CACHE_DIR", str(tmp_path))
    return tmp_path


@pytest.fixture
def compiles(monkeypatch):
    """How many times NVRTC compiled (the cache misses)."""
    count = [0]
    real = _compile._nvrtc_compile

    def counting(*args, **kwargs):
        count[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(_compile, "_nvrtc_compile", counting)
    return count


def wgmma_cubin(**kwargs) -> bytes:
    spec = get_spec("wgmma")
    cfg = spec.resolve(None, 90)
    name, source = render(spec, cfg, ALIGNED)
    return _compile.arch_specific_cubin(spec, cfg, name, source, 90, **kwargs)


def cached_files(cache: Path) -> list[Path]:
    return sorted((cache / "cubin").glob("*.cubin"))


def test_a_cubin_is_cached_with_its_checksum_and_read_back(cache, compiles):
    cubin = wgmma_cubin()
    assert cubin[:4] == b"\x7fELF" and compiles[0] == 1
    (path,) = cached_files(cache)
    assert path.name.startswith("cumm_wgmma_") and _cache.unpack(path.read_bytes()) == cubin
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert wgmma_cubin() == cubin
    assert compiles[0] == 1, "a verified cached cubin is used, not compiled again"
    assert sorted(p.name for p in (cache / "cubin").iterdir()) == [path.name], "no temporary file left behind"


CORRUPTIONS = {
    "truncated": lambda b: b[: len(b) // 2],
    "empty": lambda b: b"",
    "bit flip": lambda b: _flip(b, len(b) - 4000),
    "last byte cut": lambda b: b[:-1],
    "raw cubin of an older cumm": lambda b: _cache.unpack(b),
}


@pytest.mark.parametrize("how", list(CORRUPTIONS))
def test_a_corrupt_cached_cubin_is_set_aside_and_rebuilt(cache, compiles, how):
    cubin = wgmma_cubin()
    (path,) = cached_files(cache)
    bad = CORRUPTIONS[how](path.read_bytes())
    path.write_bytes(bad)
    with pytest.warns(RuntimeWarning, match=r"not usable .*set aside as .*\.cubin\.corrupt and compiled again"):
        again = wgmma_cubin()
    assert again == cubin and compiles[0] == 2
    assert path.with_name(path.name + ".corrupt").read_bytes() == bad, "the bad file is kept aside, as it was"
    assert _cache.unpack(path.read_bytes()) == cubin, "the cache is repaired"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert wgmma_cubin() == cubin
    assert compiles[0] == 2


def test_a_cached_cubin_that_does_not_load_is_set_aside_and_rebuilt(cache, compiles):
    cubin = wgmma_cubin()
    (path,) = cached_files(cache)
    path.write_bytes(_cache.pack(b"verifies, but is no cubin"))

    class Refused(Exception):
        pass

    def load(data: bytes) -> str:
        if data[:4] != b"\x7fELF":
            raise Refused("CUDA_ERROR_INVALID_IMAGE: device kernel image is invalid")
        return "loaded"

    with pytest.warns(RuntimeWarning, match=r"verifies but does not load: Refused: CUDA_ERROR_INVALID_IMAGE"):
        assert wgmma_cubin(load=load, load_errors=(Refused,)) == "loaded"
    assert compiles[0] == 2 and _cache.unpack(path.read_bytes()) == cubin
    assert path.with_name(path.name + ".corrupt").exists()


def test_fetch_a_fresh_build_that_does_not_load_raises_and_is_not_cached(tmp_path):
    path = tmp_path / "x.cubin"

    def load(data):
        raise ValueError("refused")

    with pytest.raises(ValueError, match="refused"):
        _cache.fetch(path, lambda: b"fresh", load, (ValueError,))
    assert not path.exists()


def test_fetch_without_a_writable_cache_still_builds(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    path = blocker / "cubin" / "x.cubin"
    builds = []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(2):
            assert _cache.fetch(path, lambda: builds.append(1) or b"data") == b"data"
    assert len(builds) == 2


def test_set_aside_of_a_file_already_gone_is_quiet(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _cache.set_aside(tmp_path / "gone.cubin", "whatever") is None


def test_a_file_repaired_by_another_process_meanwhile_is_used(tmp_path, monkeypatch):
    """read() found a bad file, but another process had replaced it with a good one before it was set aside."""
    path = tmp_path / "x.cubin"
    path.write_bytes(b"")
    real_unpack = _cache.unpack
    calls = []

    def unpack(blob):
        calls.append(blob)
        if len(calls) == 1:  # the first read saw the empty file; now the good one is there
            path.write_bytes(_cache.pack(b"good"))
        return real_unpack(blob)

    monkeypatch.setattr(_cache, "unpack", unpack)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _cache.read(path) == b"good"
    assert not path.with_name("x.cubin.corrupt").exists()


def test_old_cache_files_are_never_looked_up(cache):
    """The format is part of the key: raw cubins of an older cumm (same source) are other files, left alone."""
    spec = get_spec("wgmma")
    name, source = render(spec, spec.resolve(None, 90), ALIGNED)
    path = _compile.cubin_path(name, source, ["-arch=sm_90a"], (12, 9))
    assert path.parent == cache / "cubin" and path.name.startswith(name + "-") and path.suffix == ".cubin"
    assert path != _compile.cubin_path(name, source, ["-arch=sm_90a"], (13, 0))


# --------------------------------------------------------------------------------------------------
# On the GPU: a fresh process on a corrupted cache gets correct results, a warning, the cache repaired
# --------------------------------------------------------------------------------------------------

_CHILD = """
import json, cupy, cumm
rng = cupy.random.default_rng(7)
a = rng.standard_normal((512, 256), dtype=cupy.float32).astype(cupy.float16)
b = rng.standard_normal((256, 512), dtype=cupy.float32).astype(cupy.float16)
c = cumm.matmul(a, b, kernel="wgmma")
ref = a.astype(cupy.float64) @ b.astype(cupy.float64)
err = float(cupy.linalg.norm(c.astype(cupy.float64) - ref) / cupy.linalg.norm(ref))
print(json.dumps({"err": err}))
"""


def _child(cache: Path) -> tuple[float, str]:
    env = {
        **os.environ,
        "CUMM_CACHE_DIR": str(cache),
        "CUPY_CACHE_DIR": str(cache / "cupy"),
        "PYTHONPATH": str(ROOT),
    }
    p = subprocess.run(
        [sys.executable, "-W", "default", "-c", _CHILD], env=env, capture_output=True, text=True, timeout=300
    )
    assert p.returncode == 0, f"exit {p.returncode}\n{p.stdout}\n{p.stderr}"
    return json.loads(p.stdout.strip().splitlines()[-1])["err"], p.stderr


GPU_CORRUPTIONS = {
    **{k: CORRUPTIONS[k] for k in ("truncated", "empty", "bit flip", "raw cubin of an older cumm")},
    # verifies, but the driver refuses it (PTX text that does not parse)
    "does not load": lambda b: _cache.pack(b"this is not PTX\n"),
}


@pytest.mark.gpu
@pytest.mark.parametrize("how", list(GPU_CORRUPTIONS))
def test_a_fresh_process_heals_a_corrupt_cache(tmp_path, sm90, how):
    err, stderr = _child(tmp_path)
    assert err < 1e-2 and "cumm: the cached file" not in stderr, stderr
    files = cached_files(tmp_path)
    assert files, "the wgmma cubin was not cached"
    good = {p: p.read_bytes() for p in files}
    for p in files:
        p.write_bytes(GPU_CORRUPTIONS[how](good[p]))

    err, stderr = _child(tmp_path)
    assert err < 1e-2, f"wrong results after the cache was corrupted ({how}): {err}"
    assert "RuntimeWarning: cumm: the cached file" in stderr and "set aside as" in stderr, stderr
    for p in files:
        assert _cache.unpack(p.read_bytes()) == _cache.unpack(good[p]), "the cache is repaired"
        assert p.with_name(p.name + ".corrupt").exists()

    err, stderr = _child(tmp_path)  # and stays repaired
    assert err < 1e-2 and "cumm: the cached file" not in stderr, stderr
