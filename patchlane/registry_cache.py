"""The validated registry, cached between processes, so `import patchlane` costs the same with 9
entries or 200.

Parsing YAML and validating entries grows with the registry (about 0.4 ms per entry with PyYAML's
C parser; 200 entries cost more than the whole 15 ms import budget). What comes out is a pure
function of the registry files' bytes, the validator's code and the overlay / reproducer / check
files existing, so :func:`load` keeps it in one pickle per registry set: the registry's startup
index (plain strings, all `import patchlane` reads) and, as one nested pickle, its entries,
rebuilt only when something first asks for them (a hook firing, ``patchlane.report()``):
rebuilding 200 entries (paths, specifier sets) alone would cost ~2.5 ms. It is reused when

- every registry file's bytes are exactly those cached (compared, not hashed or timestamped),
- the validator is the same: patchlane's version, the size and mtime of every module of
  :mod:`patchlane.registry` (its validation and the classes the pickle holds), Python's and
  packaging's versions,
- every directory holding an overlay, reproducer or check file has the mtime it had (adding,
  removing or renaming a file there changes it): one ``stat`` per directory, not per file.

Anything else (a changed file, a corrupt or foreign cache file, an unwritable directory) falls
back to the full parse and validation, whose errors are the only ones a registry can raise; a
registry that fails validation is never cached. The cache file is read only when the current
user owns it and nobody else can write it, since unpickling runs code. The directory defaults
to ``$XDG_CACHE_HOME/patchlane/registry`` (``~/.cache``); ``PATCHLANE_REGISTRY_CACHE=0`` turns
the cache off, a path moves it.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from . import registry as _registry
from ._version import __version__
from .registry import Entry, Registry, StartupRow, read_registry_bytes

__all__ = ["load"]

log = logging.getLogger("patchlane")

FORMAT = 2
KEEP = 32
"""Cache files kept per directory (one per registry set; a test suite makes many)."""


def _validator() -> tuple[Any, ...]:
    import packaging

    return (FORMAT, __version__, _registry_modules(), sys.implementation.cache_tag,
            packaging.__version__)


def _registry_modules() -> tuple[tuple[str, int, int], ...]:
    """(name, size, mtime) of every module of :mod:`patchlane.registry`: a change to any of
    them (the schema, the reader, the records whose classes the pickle names) is a new
    validator. Listed from its folder rather than named here, so a module added to the package
    is keyed without anyone remembering to; the suffix is the package's own (``.pyc`` in a
    sourceless install)."""
    folder, init = os.path.split(_registry.__file__)
    suffix = os.path.splitext(init)[1]
    modules = []
    with os.scandir(folder) as listing:
        for item in listing:
            if item.name.endswith(suffix) and item.is_file():
                info = item.stat()
                modules.append((item.name, info.st_size, info.st_mtime_ns))
    return tuple(sorted(modules))


def load_registries(paths: Sequence[Path]) -> Registry:
    """:func:`patchlane.registry.load_registries`, imported on a miss only: a start this cache
    serves never imports the YAML parser or the schema."""
    from .registry.loader import load_registries as parse_and_validate

    return parse_and_validate(paths)


def _file_dirs(entries: Sequence[Entry]) -> dict[str, int]:
    dirs: set[str] = set()
    for entry in entries:
        gate = entry.compat_gate
        for path in (entry.overlay, entry.reproducer, gate.check_file if gate else None):
            if path is not None:
                dirs.add(os.path.dirname(path))
    return {d: os.stat(d).st_mtime_ns for d in sorted(dirs)}


def _loads(data: bytes) -> Any:
    # _pickle, the C unpickler pickle.py wraps: pickle.py itself costs ~2 ms to import
    try:
        from _pickle import loads
    except ImportError:  # pragma: no cover - not CPython
        from pickle import loads
    return loads(data)


class _CachedRegistry(Registry):
    """A :class:`Registry` from the cache: its startup index at once, its entries unpickled
    on first use (thread-safely, once)."""

    def __init__(self, blob: bytes, index: tuple[StartupRow, ...], sources: tuple[Path, ...],
                 contents: tuple[bytes, ...], paths: Sequence[Path]) -> None:
        # Not the dataclass __init__: `entries` is the property below, not a field value.
        object.__setattr__(self, "sources", sources)
        object.__setattr__(self, "contents", contents)
        self.__dict__["startup_index"] = index  # what Registry.startup_index would compute
        self.__dict__["_blob"] = blob
        self.__dict__["_paths"] = tuple(paths)
        self.__dict__["_lock"] = threading.Lock()

    @property
    def entries(self) -> tuple[Entry, ...]:
        entries: tuple[Entry, ...] | None = self.__dict__.get("_entries")
        if entries is None:
            with self.__dict__["_lock"]:
                entries = self.__dict__.get("_entries")
                if entries is None:
                    try:
                        entries = _loads(self.__dict__["_blob"])
                    except Exception:  # never an error: the files are the same, parse them
                        entries = load_registries(self.__dict__["_paths"]).entries
                    self.__dict__["_entries"] = entries
                    del self.__dict__["_blob"]
        assert entries is not None
        return entries


def _name(paths: Sequence[Path]) -> str:
    # crc32 and adler32 of the set's paths: a short stable file name. A collision only costs a
    # miss, since the cache file stores (and is checked against) the full paths and bytes.
    raw = "\0".join(map(str, paths)).encode()
    return f"{zlib.crc32(raw):08x}{zlib.adler32(raw):08x}.pickle"


def _read(file: Path) -> Any:
    try:
        with open(file, "rb") as handle:
            info = os.fstat(handle.fileno())
            getuid = getattr(os, "getuid", None)
            if getuid is not None and (info.st_uid != getuid() or info.st_mode & 0o022):
                log.debug("patchlane: ignoring registry cache %s (not owned by this user, or "
                          "writable by others)", file)
                return None
            data = handle.read()
    except OSError:
        return None
    try:
        return _loads(data)
    except Exception:  # a corrupt or foreign file is a miss, never an error
        return None


def _write(directory: Path, file: Path, payload: dict[str, Any]) -> None:
    import pickle
    import tempfile

    try:
        # entries as a nested pickle: a start that hits the cache unpickles only the rest
        payload = {**payload, "entries": pickle.dumps(payload["entries"],
                                                      protocol=pickle.HIGHEST_PROTOCOL)}
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=".pickle")
        try:
            with os.fdopen(fd, "wb") as handle:
                pickle.dump(payload, handle, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, file)  # atomic: concurrent ranks read the old file or the new one
        except BaseException:
            os.unlink(tmp)
            raise
        old = sorted((p for p in directory.glob("*.pickle") if p != file),
                     key=lambda p: p.stat().st_mtime_ns)
        for stale in old[: max(0, len(old) + 1 - KEEP)]:
            stale.unlink(missing_ok=True)
    except (OSError, pickle.PicklingError) as exc:
        log.debug("patchlane: registry cache not written to %s: %s", directory, exc)


def load(paths: Sequence[Path], directory: Path | None) -> Registry:
    """:func:`patchlane.registry.load_registries`, answered from the cache in ``directory``
    when it is still valid (None: no cache)."""
    if directory is None:
        return load_registries(paths)
    resolved: list[Path] = []
    for raw in paths:
        path = Path(raw).resolve()
        if path not in resolved:  # as load_registries: one file named twice is one registry
            resolved.append(path)
    # Regular files of bounded size only (a FIFO would hang here): RegistryError otherwise.
    contents = tuple(read_registry_bytes(p) for p in resolved)
    file = directory / _name(resolved)
    validator = _validator()
    cached = _read(file)
    if isinstance(cached, dict) and cached.get("validator") == validator \
            and cached.get("sources") == resolved and cached.get("contents") == contents:
        try:  # the directories recorded at write time: one stat each, no walk over entries
            fresh = all(os.stat(d).st_mtime_ns == ns for d, ns in cached["dirs"].items())
        except OSError:
            fresh = False
        if fresh:
            return _CachedRegistry(cached["entries"], cached["index"], tuple(resolved),
                                   contents, paths)
    registry = load_registries(paths)
    files = [p for e in registry.entries
             for p in (e.overlay, e.reproducer, e.compat_gate.check_file if e.compat_gate else None)
             if p is not None]
    if list(registry.sources) == resolved and registry.contents == contents \
            and all(map(os.path.isfile, files)):
        # Only what is still true now: not when a registry file changed between the two reads
        # or a file it names vanished since validation (the next start caches it).
        _write(directory, file, {"validator": validator, "sources": resolved,
                                 "contents": contents, "index": registry.startup_index,
                                 "entries": registry.entries,
                                 "dirs": _file_dirs(registry.entries)})
    return registry
