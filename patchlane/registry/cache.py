"""The validated registry, cached between processes, so `import patchlane` costs the same with 9
entries or 200.

Parsing YAML and validating entries grows with the registry (about 0.4 ms per entry with PyYAML's
C parser; 200 entries cost more than the whole 15 ms import budget). What comes out is a pure
function of what validation reads, so :func:`load` keeps it in one pickle per registry set: the
registry's startup rows (plain strings, all `import patchlane` reads) and, as one nested
pickle, its entries, rebuilt only when something first asks for them (a hook firing,
``patchlane.report()``): rebuilding 200 entries (paths, specifier sets) alone would cost
~2.5 ms. It is reused when everything validation read is as it was:

- every registry file's bytes are exactly those cached (compared, not hashed or timestamped);
- the validator is the same: patchlane's version, the size and mtime of every module of
  :mod:`patchlane.registry` (its validation and the classes the pickle holds) and of
  :mod:`patchlane.common.versions` (which ranges it accepts), Python's and packaging's versions;
- every file whose existence validation checked (overlays, reproducers, checks, drafts) is
  where it was: the mtime of each directory on the way from the registry's folder to it and of
  the directory it resolves into (adding, removing, renaming or re-linking a file there
  changes it; one ``lstat`` per directory, not per file), and where a symlink is on the way,
  what it resolves to now.

Anything else (a changed file, a corrupt, foreign or wrong-shaped cache file) falls back to the
full parse and validation, whose errors are the only ones a registry can raise; a registry that
fails validation is never cached.

Trust. The cache says which overlay files a training job imports, so it is trusted exactly as
much as the registry and the overlays themselves: it is used only when nobody but the current
user (and root) can have written it. A data-only format (JSON, marshal) would not change that:
a planted cache naming another overlay file runs code just as a planted pickle does, so what is
protected is who can write it, not what it may hold. It is read only when

- the cache directory and every directory above it belong to the current user or root and no
  one else can write to them (an ancestor with the sticky bit, such as ``/tmp``, may be
  writable by all: nobody can rename what another user owns in it). A directory writable by
  its group passes only when that group is the user's own private group, as on systems that
  give each user a group of their own (the rule Debian's OpenSSH applies to ``~/.ssh``);
- the cache file, opened through that checked real path without following a symlink, is a
  regular file with one link, owned by the current user and writable by nobody else.

A directory that fails the first rule is not used at all (neither read nor written) and says so
once per process, at WARNING, with the fix. The directory defaults to
``$XDG_CACHE_HOME/patchlane/registry`` (``~/.cache``), created ``0700``;
``PATCHLANE_REGISTRY_CACHE=0`` turns the cache off, an absolute path moves it
(:mod:`patchlane.deciding.controls`).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from .._version import __version__
from ..common import private_files
from ..common.errors import RegistryError
from .kinds import Kind
from .reader import read_registry_bytes
from .records import Entry, Registry, StartupRow

__all__ = ["LazyKey", "load"]

log = logging.getLogger("patchlane")

FORMAT = 5
KEEP = 32
"""Cache files kept per directory (one per registry set; a test suite makes many)."""

_KINDS = frozenset(kind.value for kind in Kind)
_warned: set[str] = set()


def _validator() -> tuple[Any, ...]:
    import packaging

    return (FORMAT, __version__, _validator_modules(), sys.implementation.cache_tag,
            packaging.__version__)


def _validator_modules() -> tuple[tuple[str, int, int], ...]:
    """Every module of :mod:`patchlane.registry` (its kinds' modules included),
    :mod:`patchlane.common.versions` and :mod:`patchlane.installed.gates`: a change to any of
    them (the schema, the reader, the records whose classes the pickle names, the rules for
    version ranges, a distribution's import name) is a new validator."""
    from ..lazy.watchlist import module_stamps

    return module_stamps(("registry", "registry/per_kind"), ("common/versions", "installed/gates"))


def load_registries(paths: Sequence[Path]) -> Registry:
    """:func:`patchlane.registry.load_registries`, imported on a miss only: a start this cache
    serves never imports the YAML parser or the schema."""
    from .loader import load_registries as parse_and_validate

    # isolated: a process starts with every file that holds, a refused one named in .rejected
    return parse_and_validate(paths, isolated=True)


def _loads(data: bytes) -> Any:
    # _pickle, the C unpickler pickle.py wraps: pickle.py itself costs ~2 ms to import
    try:
        from _pickle import loads
    except ImportError:  # pragma: no cover - not CPython
        from pickle import loads
    return loads(data)


class _CachedRegistry(Registry):
    """A :class:`Registry` from the cache: its startup rows at once, its entries unpickled
    on first use (thread-safely, once)."""

    def __init__(self, blob: bytes, rows: tuple[StartupRow, ...], sources: tuple[Path, ...],
                 contents: tuple[bytes, ...], paths: Sequence[Path]) -> None:
        # Not the dataclass __init__: `entries` is the property below, not a field value.
        object.__setattr__(self, "sources", sources)
        object.__setattr__(self, "contents", contents)
        object.__setattr__(self, "checked", ())
        self.__dict__["startup_rows"] = rows  # what Registry.startup_rows would compute
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
                    entries = self._unpickled()
                    if entries is None:  # never an error: the files are the same, parse them
                        entries = load_registries(self.__dict__["_paths"]).entries
                    self.__dict__["_entries"] = entries
                    del self.__dict__["_blob"]
        assert entries is not None
        return entries

    def _unpickled(self) -> tuple[Entry, ...] | None:
        """The cached entries, or None when they are not the ones the startup rows describe."""
        try:
            entries = _loads(self.__dict__["_blob"])
        except Exception:
            return None
        rows = self.__dict__["startup_rows"]
        if type(entries) is not tuple or len(entries) != len(rows) or not all(
                type(e) is Entry and e.id == row.id for e, row in zip(entries, rows, strict=True)):
            return None
        return entries


def _name(paths: Sequence[Path]) -> str:
    # crc32 and adler32 of the set's paths: a short stable file name. A collision only costs a
    # miss, since the cache file stores (and is checked against) the full paths and bytes.
    raw = "\0".join(map(str, paths)).encode()
    return f"{zlib.crc32(raw):08x}{zlib.adler32(raw):08x}.pickle"


# -- who can write the cache (patchlane.common.private_files) ------------------------------------

def _usable_dir(directory: Path, *, create: bool) -> str | None:
    """The real path of ``directory`` when only this user can change what it holds (made,
    ``0700``, when ``create``); None otherwise (said once per process when it is shared)."""
    try:
        if create:
            missing = []
            at = directory
            while not os.path.lexists(at) and at != at.parent:
                missing.append(at)
                at = at.parent
            for folder in reversed(missing):  # every level private, not only the last
                folder.mkdir(mode=0o700, exist_ok=True)
        real = os.path.realpath(directory)
        why = private_files.shared(real)
    except (OSError, ValueError) as exc:  # missing (a first start), or cannot be made
        if create:
            log.debug("registry cache not written to %s: %s", directory, exc)
        return None
    if why is None:
        return real
    if real not in _warned:
        _warned.add(real)
        log.warning("registry cache %s not used: %s, so another user could plant a "
                    "registry there that this process would trust; the registry is parsed and "
                    "validated at every start instead. Fix: make it private (chmod go-w) or "
                    "point PATCHLANE_REGISTRY_CACHE at a directory only you can write (or set "
                    "it to 0)", directory, why)
    return None


def _read(file: str) -> Any:
    """The unpickled cache file, or None: not a private regular file of this user
    (:func:`patchlane.common.private_files.read`), or not a pickle."""
    data = private_files.read(file)
    if data is None:
        log.debug("no usable registry cache at %s (missing, or not a private regular "
                  "file of this user)", file)
        return None
    try:
        return _loads(data)
    except Exception:  # a corrupt or foreign file is a miss, never an error
        return None


# -- what validation read --------------------------------------------------------------------

def _inputs(registry: Registry) -> tuple[dict[str, int], tuple[tuple[str, str], ...]] | None:
    """(directory -> mtime, (written, resolved) of each path with a symlink on the way) for
    every file validation checked; None when one is no longer what validation saw (it changed
    while we validated: the next start caches it)."""
    folders = sorted({str(source.parent) for source in registry.sources}, key=len)
    dirs: set[str] = set()
    links: list[tuple[str, str]] = []
    for written_path, resolved_path in registry.checked:
        written, resolved = str(written_path), str(resolved_path)
        # Each folder on the way below the registry's folder (the shortest that holds it: the
        # safe side), read without following it: replacing one, or re-pointing a symlink,
        # changes its own mtime. The registry's folder itself is a resolved path (a file
        # there, or a __pycache__, would otherwise be a miss).
        folder = next((f for f in folders if written.startswith(os.path.join(f, ""))), None)
        if folder is not None:
            for part in Path(written[len(os.path.join(folder, "")):]).parts[:-1]:
                folder = os.path.join(folder, part)
                dirs.add(folder)
        dirs.add(os.path.dirname(resolved))  # where the file itself is listed
        if os.path.normpath(written) != resolved:
            links.append((written, resolved))
    try:
        stamps = {d: os.lstat(d).st_mtime_ns for d in sorted(dirs)}
    except OSError:
        return None
    # After the stamps: a file removed or re-linked since validation is caught here, or else
    # after the stamps were taken, which the next start sees.
    for written_path, resolved_path in registry.checked:
        if not written_path.is_file() or os.path.realpath(written_path) != str(resolved_path):
            return None
    return stamps, tuple(links)


def _rows_ok(rows: object) -> bool:
    """Whether ``rows`` are startup rows: the decider trusts every field's type."""
    if type(rows) is not tuple:
        return False
    from ..lazy.watchlist import row_ok

    return all(type(row) is StartupRow and row_ok(row) and row.kind in _KINDS for row in rows)


_Hit = tuple[bytes, tuple[StartupRow, ...], dict[str, int], tuple[tuple[str, str], ...]]


def _fresh(cached: object, validator: tuple[Any, ...], sources: list[Path],
           contents: tuple[bytes, ...]) -> _Hit | None:
    """(entries blob, startup rows, directory stamps, links) when ``cached`` is a well-formed
    cache of exactly these inputs, still as they were; None for anything else, whatever its
    shape."""
    if type(cached) is not dict or cached.get("validator") != validator \
            or cached.get("sources") != sources or cached.get("contents") != contents:
        return None
    blob, rows = cached.get("entries"), cached.get("rows")
    dirs, links = cached.get("dirs"), cached.get("links")
    if type(blob) is not bytes or type(dirs) is not dict or type(links) is not tuple \
            or not _rows_ok(rows):
        return None
    try:  # one stat per directory, no walk over entries
        for folder, ns in dirs.items():
            if type(folder) is not str or type(ns) is not int \
                    or os.lstat(folder).st_mtime_ns != ns:
                return None
        for link in links:
            written, resolved = link
            if type(written) is not str or os.path.realpath(written) != resolved:
                return None
    except (OSError, ValueError, TypeError):  # gone, a NUL in a name, not a pair
        return None
    return blob, rows, dirs, links  # type: ignore[return-value]  # _rows_ok checked them


def _write(directory: str, file: str, payload: dict[str, Any]) -> None:
    import pickle

    try:
        # entries as a nested pickle: a start that hits the cache unpickles only the rest
        payload = {**payload, "entries": pickle.dumps(payload["entries"],
                                                      protocol=pickle.HIGHEST_PROTOCOL)}
        # concurrent ranks read the old file or the new one
        private_files.write(file, pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL))
        private_files.prune(directory, ".pickle", KEEP, file)
    except (OSError, pickle.PicklingError) as exc:
        log.debug("registry cache not written to %s: %s", directory, exc)


class LazyKey(NamedTuple):
    """What keys the lazy start's watch list (patchlane.lazy.watchlist): the registry set the
    settings name and the ``sys.path`` stamps, taken before entry points were read."""

    settings: tuple[Any, ...]
    path: tuple[tuple[str, int], ...]


def load(paths: Sequence[Path], directory: Path | None, lazy: LazyKey | None = None) -> Registry:
    """:func:`patchlane.registry.load_registries`, answered from the cache in ``directory``
    when it is still valid and only this user can have written it (None: no cache). With
    ``lazy``, the lazy start's watch list for this set is brought up to date beside the cache
    whenever the set is known valid (a hit, or a validation whose inputs held still)."""
    if directory is None:
        return load_registries(paths)
    resolved: list[Path] = []
    named: list[str] = []
    for raw in paths:
        path = Path(raw).resolve()
        if path not in resolved:  # as load_registries: one file named twice is one registry
            resolved.append(path)
            named.append(os.path.abspath(raw))
    # Stamped before they are read: a file changed meanwhile leaves a stale watch list, never a
    # fresh one of what is no longer there.
    stamps = _source_stamps(named, resolved) if lazy is not None else None
    # Regular files of bounded size only (a FIFO would hang here): RegistryError otherwise,
    # and then the full load refuses that file alone (never cached).
    try:
        contents = tuple(read_registry_bytes(p) for p in resolved)
    except RegistryError:
        return load_registries(paths)
    name = _name(resolved)
    validator = _validator()
    real = _usable_dir(directory, create=False)
    if real is not None:
        hit = _fresh(_read(os.path.join(real, name)), validator, resolved, contents)
        if hit is not None:
            if lazy is not None and stamps is not None:
                _write_watchlist(real, lazy, stamps, hit[2], hit[3], hit[1])
            return _CachedRegistry(hit[0], hit[1], tuple(resolved), contents, paths)
    registry = load_registries(paths)
    if registry.rejected:
        return registry  # a refused file is read and said again at every start: never cached
    if list(registry.sources) != resolved or registry.contents != contents:
        return registry  # a registry file changed between the two reads: the next start caches
    # The cache directory is made before the stamps are taken: it may be among their folders.
    real = real or _usable_dir(directory, create=True)
    inputs = _inputs(registry)
    if inputs is not None and real is not None:
        _write(real, os.path.join(real, name),
               {"validator": validator, "sources": resolved, "contents": contents,
                "rows": registry.startup_rows, "entries": registry.entries,
                "dirs": inputs[0], "links": inputs[1]})
        if lazy is not None and stamps is not None:
            _write_watchlist(real, lazy, stamps, inputs[0], inputs[1], registry.startup_rows)
    return registry


def _source_stamps(named: list[str], resolved: list[Path]) -> list[Any] | None:
    from ..lazy.watchlist import stamp

    try:
        return [(raw, str(real), stamp(str(real))) for raw, real in zip(named, resolved,
                                                                         strict=True)]
    except OSError:  # missing: reading it raises the registry error
        return None


def _write_watchlist(real: str, lazy: LazyKey, stamps: list[Any], dirs: dict[str, int],
                     links: tuple[tuple[str, str], ...],
                     rows: tuple[StartupRow, ...]) -> None:
    from ..lazy import watchlist

    if watchlist.write(real, lazy.settings, lazy.path, stamps, tuple(sorted(dirs.items())),
                       links, rows) is None:
        log.debug("the lazy start's watch list was not written to %s", real)
