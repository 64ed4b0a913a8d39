"""An on-disk memo of results that are pure functions of files: parsed catalog specs and
unit conversion factors.

Parsing the 26 hardware files with pint costs about half a second (most of it importing
pint, more where dask is installed); reading the parsed specs back costs a few
milliseconds. Each entry is keyed by what its result depends on: the text inputs (a spec
file's path, size and modification time; a pair of unit names) and a fingerprint of the
code that computes it (every file of the inferlab package, the versions of Python,
pydantic, pint and PyYAML as found on disk). Any change to either gives a new key, so an
entry is never stale; it is only ever unused.

The cache lives in ``$INFERLAB_CACHE_DIR``, else ``$XDG_CACHE_HOME/inferlab``, else
``~/.cache/inferlab``. ``INFERLAB_CACHE_DIR=off`` (or empty) turns it off. Entries are
pickles, read only from that directory, which belongs to the user; a directory that cannot
be written, or an entry that cannot be read, falls back to computing the result.
"""

from __future__ import annotations

import functools
import hashlib
import os
import pickle
import sys
import tempfile
from collections.abc import Callable
from importlib.util import find_spec
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

#: Packages whose code decides what a spec parses to (their files' stat enters the key).
_DEPENDENCIES = ("pydantic", "pydantic_core", "pint", "yaml")
_OFF = ("", "0", "off", "no", "false")


@functools.cache
def cache_dir() -> Path | None:
    """The cache directory, or None when the cache is off."""
    explicit = os.environ.get("INFERLAB_CACHE_DIR")
    if explicit is not None:
        return None if explicit.strip().lower() in _OFF else Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "inferlab"


def _stat_key(path: Path | str) -> str:
    try:
        st = os.stat(path)
    except OSError:
        return f"{path}:missing"
    return f"{path}:{st.st_size}:{st.st_mtime_ns}"


@functools.cache
def code_fingerprint() -> str:
    """A digest of the code every entry depends on: the inferlab package's files and the
    installed versions of its parsing dependencies (by the stat of their ``__init__``)."""
    digest = hashlib.sha256(sys.version.encode())
    package = Path(__file__).resolve().parent
    for root, dirs, files in os.walk(package):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith((".py", ".txt")):
                digest.update(_stat_key(os.path.join(root, name)).encode())
    for name in _DEPENDENCIES:
        spec = find_spec(name)
        digest.update(_stat_key(spec.origin if spec and spec.origin else name).encode())
    return digest.hexdigest()[:32]


def file_key(path: Any) -> str:
    """What a result computed from the file at ``path`` depends on: its path, size and
    modification time (a file that is not on disk, such as one inside a zip, gets its text)."""
    try:
        return _stat_key(os.fspath(path)) if os.path.exists(os.fspath(path)) else path.read_text(encoding="utf-8")
    except (TypeError, OSError, UnicodeDecodeError):
        return repr(path)


def memo(kind: str, key: str, compute: Callable[[], T]) -> T:
    """``compute()``, read from the cache when an entry for ``(kind, key)`` and this code exists,
    and written to it otherwise. Exceptions of ``compute`` pass through and are not cached."""
    folder = cache_dir()
    if folder is None:
        return compute()
    name = hashlib.sha256(f"{code_fingerprint()}\0{kind}\0{key}".encode()).hexdigest()[:40]
    path = folder / f"{kind}-{name}.pickle"
    try:
        with open(path, "rb") as fh:
            return pickle.load(fh)
    except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ImportError, TypeError, ValueError):
        pass
    value = compute()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{kind}-", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as fh:
                pickle.dump(value, fh, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except (OSError, pickle.PicklingError, TypeError, AttributeError):
        pass
    return value
