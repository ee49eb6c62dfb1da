"""cumm's on-disk cache of compiled artifacts (the sm_90a cubins of the warpgroup rungs), one that heals itself.

Each file is a one-line header, ``cumm-cache-1 <length> <sha256>``, then the artifact's bytes; it is written to a
temporary file in the same directory and renamed into place, so a reader sees a whole file or none. A file is
verified before its bytes are used; one that does not verify (empty, truncated, altered, no header), and one
that verifies but that the driver refuses to load, is set aside as ``<file>.corrupt`` (renamed, never loaded
again) with a RuntimeWarning, and the artifact is built and written again. The cache is best effort: a
directory that cannot be written costs a compile per process, nothing else.

The artifact of a file is what follows its first line (``tail -n +2 FILE > kernel.cubin`` for ``cuobjdump``).
CuPy's own cache (``CUPY_CACHE_DIR``, the other rungs) checks a SHA-1 of each file in the same way and compiles
again silently when it does not match; the tuned tables are JSON, set aside as ``.corrupt`` by ``plan.store``.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

FORMAT = b"cumm-cache-1"  # part of every cache key too: files of another format are never looked up
T = TypeVar("T")


def cache_dir() -> Path:
    """cumm's cache directory: ``$CUMM_CACHE_DIR``, else ``$XDG_CACHE_HOME/cumm``, else ``~/.cache/cumm`` (the
    user's tuned table, :mod:`cumm.plan.store`, and the cubins below ``cubin/``)."""
    env = os.environ.get("CUMM_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "cumm"


class CorruptEntry(Exception):
    """A cached file that does not verify; the message says how."""


def pack(data: bytes) -> bytes:
    """``data`` with its header: the bytes of a cache file."""
    return b"%s %d %s\n" % (FORMAT, len(data), hashlib.sha256(data).hexdigest().encode()) + data


def unpack(blob: bytes) -> bytes:
    """The artifact of a cache file's bytes; CorruptEntry if they do not verify."""
    if not blob:
        raise CorruptEntry("the file is empty")
    head, newline, data = blob.partition(b"\n")
    fields = head.split(b" ")
    if not newline or len(fields) != 3 or fields[0] != FORMAT or not fields[1].isdigit():
        raise CorruptEntry(f"no {FORMAT.decode()} header (truncated, or not written by cumm)")
    length, digest = int(fields[1]), fields[2].decode("ascii", "replace")
    if len(data) != length:
        raise CorruptEntry(f"{len(data)} bytes where the header says {length} (truncated or extended)")
    if hashlib.sha256(data).hexdigest() != digest:
        raise CorruptEntry("its sha256 does not match the header's (altered)")
    return data


def write(path: Path, data: bytes) -> bool:
    """Store ``data`` at ``path`` atomically (temporary file, fsync, rename); False if it could not be written."""
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(pack(data))
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
        return True
    except OSError:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        return False


def set_aside(path: Path, reason: str) -> Path | None:
    """Rename ``path`` to ``<path>.corrupt`` (replacing an older one) and warn; the renamed path, or None if
    another process got there first (or the directory is read-only, then the file is only skipped)."""
    aside = path.with_name(path.name + ".corrupt")
    try:
        os.replace(path, aside)
    except FileNotFoundError:  # set aside (and perhaps already rebuilt) by another process
        return None
    except OSError as e:
        warnings.warn(
            f"cumm: the cached file {path} is not usable ({reason}) and could not be set aside ({e}); "
            "it is ignored and the artifact compiled again",
            RuntimeWarning,
            stacklevel=3,
        )
        return None
    warnings.warn(
        f"cumm: the cached file {path} is not usable ({reason}); set aside as {aside.name} and compiled again",
        RuntimeWarning,
        stacklevel=3,
    )
    return aside


def read(path: Path) -> bytes | None:
    """The verified artifact at ``path``; None if there is none, or if the file did not verify (it is then set
    aside, with a warning)."""
    try:
        blob = path.read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as e:
        warnings.warn(f"cumm: cannot read the cached file {path} ({e}); compiling again", RuntimeWarning, stacklevel=2)
        return None
    try:
        return unpack(blob)
    except CorruptEntry as e:
        # Another process may have replaced a bad file with a good one since it was read: set aside only what
        # still fails.
        try:
            return unpack(path.read_bytes())
        except (OSError, CorruptEntry):
            set_aside(path, str(e))
            return None


def fetch(
    path: Path,
    build: Callable[[], bytes],
    load: Callable[[bytes], T] | None = None,
    load_errors: tuple[type[BaseException], ...] = (),
) -> T | bytes:
    """The artifact cached at ``path`` (verified), else ``build()``'s, stored there; passed through ``load``
    when given. A cached artifact that verifies but whose ``load`` raises one of ``load_errors`` is set aside
    and built again; an error from loading a fresh build propagates (the artifact, not the cache, is at fault)
    and nothing is cached."""
    data = read(path)
    if data is not None:
        if load is None:
            return data
        try:
            return load(data)
        except load_errors as e:
            set_aside(path, f"it verifies but does not load: {type(e).__name__}: {e}")
    data = build()
    out = data if load is None else load(data)  # kept only if it loads
    write(path, data)
    return out
