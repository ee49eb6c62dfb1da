"""Tuned tables: where they live, how they are read, written and searched; and cumm's cache directory.

``tuned.json`` in the user cache dir (``$CUMM_CACHE_DIR``, else ``$XDG_CACHE_HOME/cumm``, else ``~/.cache/cumm``)
and the tables shipped in ``cumm/tuned/*.json`` (user entries win). Entries are keyed by GPU name, compute
capability, kernel, dtype and the shape they were tuned at: one entry per rung and shape. (Keyed by power-of-two
bucket, a race at 512 x 5120 x 5120 replaced the entries of 512 x 4096 x 4096, and the Llama output projection at
512 tokens fell from 0.99 to 0.76x cuBLAS on the H200.) Each stores its bucket (M, N, K each rounded to the nearest
power of two in log space), the configuration, ms, TFLOP/s, the kernel's template hash at tuning time and the
schema version; an entry the tuner saved as the winner of a race of rungs also has ``"raced"``, each raced rung's
template hash (auto uses a lower rung's win only against the top rung as it is now); the losers' entries are saved
too, without it: what each rung runs when named. Entries whose template hash differs from the current template
are ignored. Writes take an ``fcntl`` lock on ``<file>.lock`` and replace the file atomically; an unreadable file
is warned about once and treated as empty.

``kernel="auto"`` (``_auto``) reads entries through :func:`lookup`; the tuner (``_tune``) writes them with
:func:`save_entries`. This module sits below both.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import math
import os
import tempfile
import threading
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from importlib import resources
from pathlib import Path

from ..ladder import REGISTRY, get_spec
from ..runtime.cache import cache_dir
from ..runtime.render import template_hash

try:
    import fcntl
except ImportError:  # pragma: no cover - not on POSIX: only the in-process lock
    fcntl = None

SCHEMA = 1
TABLE_NAME = "tuned.json"
MAX_DISTANCE = 3.0  # log2 units over (M, N, K): farther tuned entries are not used by kernel="auto"


def bucket_dim(x: int) -> int:
    """``x`` rounded to the nearest power of two in log space (1 for x <= 1); exact integer arithmetic."""
    if x <= 1:
        return 1
    p = 1 << (x.bit_length() - 1)  # p <= x < 2p; round up when log2(x) - log2(p) > 1/2, i.e. x*x > 2*p*p
    return 2 * p if x * x > 2 * p * p else p


def bucket(M: int, N: int, K: int) -> tuple[int, int, int]:
    return bucket_dim(M), bucket_dim(N), bucket_dim(K)


def user_table_path() -> Path:
    return cache_dir() / TABLE_NAME


def shipped_tables() -> list:
    """The package's ``cumm/tuned/*.json`` (importlib.resources Traversables), sorted by name."""
    try:
        d = resources.files("cumm").joinpath("tuned")
        return sorted((p for p in d.iterdir() if p.name.endswith(".json")), key=lambda p: p.name)
    except (FileNotFoundError, NotADirectoryError, ModuleNotFoundError):
        return []


def entry_shape(e: Mapping) -> list[int]:
    """The shape an entry was tuned at (its bucket for an entry written without one)."""
    return e.get("shape") or e["bucket"]


def entry_key(e: Mapping) -> str:
    b = "x".join(str(int(v)) for v in entry_shape(e))
    return f"{e['gpu']}|sm_{int(e['cc'])}|{e['kernel']}|{e['dtype']}|{b}"


def make_entry(
    gpu: str,
    cc: int,
    kernel: str,
    dtype: str,
    shape: Sequence[int],
    config: Mapping[str, int],
    ms: float,
    tflops: float,
    **extra,
) -> dict:
    return dict(
        schema=SCHEMA,
        gpu=gpu,
        cc=int(cc),
        kernel=kernel,
        dtype=dtype,
        bucket=list(bucket(*shape)),
        shape=[int(v) for v in shape],
        config={k: int(v) for k, v in config.items()},
        ms=float(ms),
        tflops=float(tflops),
        template_hash=template_hash(get_spec(kernel)),
        tuned_at=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        **extra,
    )


_warned: set[str] = set()


def _warn_once(key: str, message: str) -> None:
    if key not in _warned:
        _warned.add(key)
        warnings.warn(message, RuntimeWarning, stacklevel=3)


def _read_raw(text: str | None, where: str) -> tuple[dict[str, dict], bool]:
    """(entries by key, readable) of a table's text; entries are kept raw (other schemas survive merges)."""
    if text is None:
        return {}, True
    try:
        doc = json.loads(text)
        if not isinstance(doc, dict) or not isinstance(doc.get("entries", {}), dict):
            raise ValueError("expected an object with an 'entries' object")
    except (ValueError, RecursionError) as e:
        _warn_once(where, f"cumm: ignoring the unreadable tuned table {where} ({e}); it counts as empty")
        return {}, False
    return {k: v for k, v in doc.get("entries", {}).items() if isinstance(v, dict)}, True


def _read_path(path) -> str | None:
    try:
        return path.read_text()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as e:
        _warn_once(str(path), f"cumm: cannot read the tuned table {path} ({e}); it counts as empty")
        return None


def read_table(path) -> dict[str, dict]:
    """Entries of one table file (a Path or a Traversable); missing or unreadable -> {} (warned once)."""
    return _read_raw(_read_path(path), str(path))[0]


_INT_FIELDS = ("schema", "cc")


def _dims(x) -> bool:
    return isinstance(x, list) and len(x) == 3 and all(isinstance(v, int) and v >= 1 for v in x)


def _rekeyed(entries: Mapping[str, dict]) -> dict[str, dict]:
    """``entries`` under :func:`entry_key` (a table written when entries were keyed by bucket keeps its entries,
    each under its shape's key); entries this version cannot read keep their keys."""
    return {entry_key(v) if _well_formed(v) else k: v for k, v in entries.items()}


def _well_formed(e: Mapping) -> bool:
    try:
        return (
            all(isinstance(e[k], int) and not isinstance(e[k], bool) for k in _INT_FIELDS)
            and all(isinstance(e[k], str) for k in ("gpu", "kernel", "dtype", "template_hash"))
            and isinstance(e["bucket"], list)
            and len(e["bucket"]) == 3
            and all(isinstance(v, int) and v >= 1 for v in e["bucket"])
            and _dims(entry_shape(e))
            and isinstance(e["config"], dict)
            and all(isinstance(k, str) and isinstance(v, int) for k, v in e["config"].items())
            and all(isinstance(e[k], (int, float)) and e[k] > 0 for k in ("ms", "tflops"))
        )
    except (KeyError, TypeError):
        return False


def _usable(e: Mapping) -> bool:
    """Current schema, a known kernel whose template is unchanged, and a configuration it accepts."""
    if not _well_formed(e) or e["schema"] != SCHEMA:
        return False
    spec = REGISTRY.get(e["kernel"])
    if spec is None or spec.kind != "gemm" or e["template_hash"] != template_hash(spec):
        return False
    try:
        spec.resolve(e["config"], e["cc"])
    except Exception:
        return False
    return True


_index: dict[tuple, list[dict]] = {}
_listeners: list[Callable[[], None]] = []
_index_lock = threading.Lock()


def tuned_entries(gpu: str, cc: int, dtype: str = "float32") -> list[dict]:
    """Usable entries for this GPU, compute capability and dtype: shipped tables, then the user's (wins).

    Read once per process (per user-table path); :func:`clear_caches` forgets them.
    """
    upath = str(user_table_path())
    key = (upath, gpu, int(cc), dtype)
    hit = _index.get(key)
    if hit is None:
        with _index_lock:
            merged: dict[str, dict] = {}
            for t in shipped_tables():
                merged.update(_rekeyed(read_table(t)))
            merged.update(_rekeyed(read_table(Path(upath))))
            hit = [
                e
                for e in merged.values()
                if _usable(e) and e["gpu"] == gpu and e["cc"] == int(cc) and e["dtype"] == dtype
            ]
            hit.sort(key=entry_key)
            _index[key] = hit
    return hit


def _log2_distance(a: Sequence[int], b: Sequence[int]) -> float:
    return math.sqrt(sum((math.log2(x) - math.log2(y)) ** 2 for x, y in zip(a, b, strict=True)))


def lookup(
    gpu: str, cc: int, dtype: str, M: int, N: int, K: int, max_distance: float = MAX_DISTANCE, kernel: str | None = None
) -> dict | None:
    """The tuned entry whose shape is nearest to M x N x K (log2 distance), if within ``max_distance``.

    Among entries of the nearest shape (several kernels), the one with the most TFLOP/s wins; ``kernel``:
    that kernel's entries only.
    """
    q = (max(M, 1), max(N, 1), max(K, 1))
    best, best_key = None, None
    for e in tuned_entries(gpu, cc, dtype):
        if kernel is not None and e["kernel"] != kernel:
            continue
        k = (_log2_distance(q, entry_shape(e)), -e["tflops"], entry_key(e))
        if best_key is None or k < best_key:
            best, best_key = e, k
    if best is None or best_key[0] > max_distance:
        return None
    return best


def clear_caches() -> None:
    """Forget loaded tables and kernel="auto"'s memoized answers (after a table changed)."""
    with _index_lock:
        _index.clear()
    for fn in _listeners:
        fn()


def on_change(fn: Callable[[], None]) -> None:
    """Call ``fn`` whenever the tables change (memoized answers built on them must be forgotten)."""
    _listeners.append(fn)


_write_lock = threading.Lock()


@contextlib.contextmanager
def _locked(path: Path):
    with _write_lock:
        lock_path = path.with_name(path.name + ".lock")
        with open(lock_path, "a+") as lf:
            if fcntl is not None:
                fcntl.flock(lf.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                if fcntl is not None:
                    fcntl.flock(lf.fileno(), fcntl.LOCK_UN)


def _with_kept_race(current: Mapping | None, new: dict) -> dict:
    """``new``, with the race ``current`` (the entry it replaces) won, when ``new`` raced only its own rung (a
    ``tune --kernel`` run), with the same template, and ran at least as fast: a faster configuration of the race's
    winner wins that race too. Without it, re-tuning a lower rung alone dropped the record auto needs to trust its
    win over the top rung (plan/auto.py ``_raced``), and auto went back to the heuristic's rung."""
    won = current.get("raced") if current else None
    mine = new.get("raced")
    if (
        isinstance(won, dict)
        and (mine is None or set(mine) <= {new["kernel"]})
        and current["kernel"] == new["kernel"]
        and current.get("template_hash") == new.get("template_hash")
        and new.get("ms") is not None
        and current.get("ms") is not None
        and new["ms"] <= current["ms"]
    ):
        new["raced"] = {**won, **(mine or {})}
    return new


def _race_at(e: Mapping) -> tuple:
    """Where ``e`` raced: one winner per GPU, compute capability, dtype and shape."""
    return e.get("gpu"), e.get("cc"), e.get("dtype"), tuple(e.get("shape") or ())


def save_entries(
    entries: Iterable[Mapping], path: str | os.PathLike | None = None, drop_keys: Iterable[str] = ()
) -> Path:
    """Merge ``entries`` into the table at ``path`` (default: the user's ``tuned.json``), atomically.

    Under an exclusive lock on ``<path>.lock``: read the current file, drop ``drop_keys``, add the
    entries (same key = replaced, a race the replaced entry won kept: ``_with_kept_race``; an entry that won a race
    takes the mark from an older winner at its shape), write a temporary file in the same directory and
    ``os.replace`` it.
    A corrupt current file is kept aside as ``<path>.corrupt`` and replaced.
    """
    path = Path(path) if path is not None else user_table_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with _locked(path):
        current, ok = _read_raw(_read_path(path), str(path))
        current = _rekeyed(current)
        if not ok:
            with contextlib.suppress(OSError):
                os.replace(path, path.with_name(path.name + ".corrupt"))
        for k in drop_keys:
            current.pop(k, None)
        won = []
        for e in entries:
            k = entry_key(e)
            current[k] = _with_kept_race(current.get(k), dict(e))
            if set(e.get("raced") or ()) - {e.get("kernel")}:  # won a race against other rungs
                won.append(k)
        for k in won:  # a new race at this shape: the mark of an older one's winner there (or of a loser of this
            at = _race_at(current[k])  # race that kept it: _with_kept_race) goes
            for other, o in current.items():
                if other != k and o.get("raced") and _race_at(o) == at:
                    current[other] = {f: v for f, v in o.items() if f != "raced"}
        doc = {"schema": SCHEMA, "entries": dict(sorted(current.items()))}
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(doc, f, indent=1)
                f.write("\n")
                f.flush()
                os.fsync(f.fileno())
            os.chmod(tmp, 0o644)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    clear_caches()
    return path
