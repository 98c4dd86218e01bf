"""The lazy start's watch list: which top-level modules matter to a registry set, and when that is
still true.

Written by the validated-registry cache (:func:`patchlane.registry.cache.load`) each time it
loads a registry set, beside its cache files (same directory, same trust rule:
:mod:`patchlane.common.private_files`), and read by :mod:`patchlane.lazy.arm` at every
``import patchlane`` before anything else of patchlane is imported. So it is read with
``marshal`` (built in, data only) and checked with ``stat`` calls, one per file or directory it
depends on, never a walk over entries: reading it costs the same for 9 entries or 2,000.

One file per registry set *and* per ``sys.path`` (processes of one job share both; a process
with another ``PYTHONPATH`` keeps its own file rather than rewriting everybody's). It holds:

- a header: the format, patchlane's version and Python's cache tag; the size and mtime of every
  module that computes what the watch list holds (:mod:`patchlane.registry` and
  :mod:`patchlane.common.versions`, which the registry cache keys on too, and this package); the
  settings that choose the registry set (the bundled registry, ``PATCHLANE_REGISTRY``,
  ``PATCHLANE_ENTRY_POINTS``); the mtime of every ``sys.path`` directory, where a
  distribution declaring a ``patchlane.registries`` entry point would be installed; every
  registry file's path, size, mtime, ctime and inode; the mtime of every directory holding a
  file validation checked (overlays, reproducers: the registry cache's own stamps); and the
  watched top-level names;
- the startup rows (what the startup walk records per entry before its module is imported),
  read only to name the ids ``PATCHLANE_DISABLE`` / ``PATCHLANE_ONLY`` may use and for the
  line of a process whose startup never ran.

Anything that differs, or a file that is missing, foreign, corrupt or of another shape, makes
the watch list unusable: ``import patchlane`` then takes the full path, which writes a new one. The
registry itself is still validated by the registry cache when the startup loads; the watch list only
decides *when* that happens. The entry Python puts first for the invocation itself (the
script's folder, the current directory for ``-m``, ``''`` for ``-c``) and patchlane's own
bootstrap folder are left out of the ``sys.path`` key: the first differs from script to script
and changes with the job's own files, and neither is where a distribution is installed (one
dropped there is found when the startup loads). ``site`` and ``sitecustomize`` run before Python
puts that entry there, a script's ``import patchlane`` after: both find the same watch list.
"""

import marshal
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing and collections cost more to import than this whole lazy path
    from collections.abc import Iterable, Sequence
    from typing import Any

    RowTuple = tuple[str, str, bool, str, str | None, tuple[str, ...], str, str | None, str]
    """A :class:`patchlane.registry.StartupRow` as plain data."""

__all__ = [
    "FORMAT",
    "WatchList",
    "default_registry",
    "file_name",
    "module_stamps",
    "path_key",
    "read",
    "registry_set",
    "row_ok",
    "rows_of",
    "stamp",
    "watched",
    "write",
]

FORMAT = 2
MAGIC = b"patchlane lazy index\n"
SUFFIX = ".lazy"
_FIRST_READ = 1 << 14
"""Bytes read at a start: the header of a registry's watch list fits (the rows are read only on
demand)."""
_MAX_HEADER = 1 << 26
KEEP = 32
"""Watch-list files kept per directory (one per registry set and ``sys.path``)."""

_HERE = os.path.dirname(os.path.abspath(__file__))
_PACKAGE = os.path.dirname(_HERE)
_SUFFIX = os.path.splitext(__file__)[1]
_BOOTSTRAP = os.path.join(_PACKAGE, "launch", "bootstrap")


def default_registry() -> str:
    """The registry bundled with patchlane: ``_bundle/registry.yaml`` in an installed wheel,
    ``registry.yaml`` at the root of a source checkout."""
    here = os.path.dirname(os.path.realpath(os.path.join(_PACKAGE, "__init__" + _SUFFIX)))
    bundled = os.path.join(here, "_bundle", "registry.yaml")
    if os.path.isfile(bundled):
        return bundled
    return os.path.join(os.path.dirname(here), "registry.yaml")


def registry_set(default: bool, registries: "Iterable[str | os.PathLike[str]]",
                 entry_points: bool) -> "tuple[Any, ...]":
    """What the settings say the registry set is, as the watch list is keyed: the bundled registry
    (or ""), the ``PATCHLANE_REGISTRY`` files made absolute, and whether entry points count."""
    return (default_registry() if default else "",
            tuple(os.path.abspath(os.fspath(p)) for p in registries), bool(entry_points))


def _invocation_entry() -> "str | None":
    """The entry Python put first on ``sys.path`` for this invocation, when it is there: ``''``
    for ``-c`` or a prompt, the current directory for ``-m``, the script's folder for a
    script. None before Python has put it there (``site`` and ``sitecustomize`` run first) or
    when it puts none (``-P``, ``-I``)."""
    if getattr(sys.flags, "safe_path", False) or not sys.path:
        return None
    first = sys.path[0]
    if first == "":
        return first
    candidates = set()
    try:  # noqa: SIM105 - contextlib costs ~3 ms to import; this module loads everywhere
        candidates.add(os.getcwd())
    except OSError:
        pass
    argv = getattr(sys, "argv", None) or [""]
    if argv[0] and argv[0] not in ("-c", "-m") and os.path.isfile(argv[0]):
        candidates.add(os.path.dirname(os.path.realpath(argv[0])))
    return first if first in candidates else None


def path_key(entry_points: bool) -> tuple[tuple[str, int], ...]:
    """``(directory, mtime_ns)`` for each ``sys.path`` entry but the invocation's own (the
    first, :func:`_invocation_entry`) and patchlane's bootstrap folder, in order (-1:
    missing). Installing or removing a distribution changes its directory's mtime.
    Empty when entry points are off: then no distribution adds registries."""
    if not entry_points:
        return ()
    first = _invocation_entry()
    key: list[tuple[str, int]] = []
    for at, entry in enumerate(sys.path):
        if not isinstance(entry, str) or entry == _BOOTSTRAP or (at == 0 and entry == first):
            continue
        try:
            mtime = os.stat(entry).st_mtime_ns
        except (OSError, ValueError):
            mtime = -1
        key.append((entry, mtime))
    return tuple(key)


def module_stamps(packages: "tuple[str, ...]",
                  modules: "tuple[str, ...]") -> tuple[tuple[str, int, int], ...]:
    """(name, size, mtime) of every module of patchlane's subpackages ``packages`` (listed from
    their folders, so a module added to one is keyed without anyone remembering to) and of its
    modules ``modules`` (paths under ``patchlane/``, ``installed/gates``), in the package's own
    suffix (``.pyc`` in a sourceless install): what keys a cache on the code that computed it
    (this watch list, the validated registry)."""
    found: list[tuple[str, int, int]] = []
    for package in packages:
        try:
            with os.scandir(os.path.join(_PACKAGE, package)) as listing:
                for item in listing:
                    if item.name.endswith(_SUFFIX) and item.is_file():
                        info = item.stat()
                        found.append((f"{package}/{item.name}", info.st_size,
                                      info.st_mtime_ns))
        except OSError:  # pragma: no cover - a broken install: key on what is there
            pass
    for name in modules:
        try:
            info = os.stat(os.path.join(_PACKAGE, name + _SUFFIX))
            found.append((name + _SUFFIX, info.st_size, info.st_mtime_ns))
        except OSError:  # pragma: no cover - a broken install
            pass
    found.sort()
    return tuple(found)


def _validator() -> tuple[tuple[str, int, int], ...]:
    """The modules that compute what the watch list holds: the registry package,
    :mod:`patchlane.common.versions`, :mod:`patchlane.installed.gates`, this package and the
    version file."""
    return module_stamps(("registry", "registry/per_kind", "lazy"),
                         ("common/versions", "_version", "installed/gates"))


def _digest(data: bytes) -> str:
    # A short stable file name (zlib would cost an extension-module load at every start). A
    # collision only costs a miss: the header holds, and is checked against, the full key.
    h = 0xCBF29CE484222325
    for i in range(0, len(data), 8):
        h = ((h ^ int.from_bytes(data[i:i + 8], "little")) * 0x100000001B3) & (2**64 - 1)
    return f"{h:016x}"


def file_name(settings: "tuple[Any, ...]", paths: tuple[tuple[str, int], ...]) -> str:
    return _digest(marshal.dumps((settings, tuple(p for p, _ in paths)))) + SUFFIX


def watched(rows: "Iterable[RowTuple]") -> tuple[str, ...]:
    """The top-level names whose import decides something: each active entry's module (a
    source patch's target, a floor's or pin's ``when.imported``) and a config entry's
    settings modules. Retired entries and those checked on demand wait for nothing."""
    names: set[str] = set()
    for _id, _kind, active, _dist, module, modules, _waiting, _applies, decided_by in rows:
        if not active or decided_by == "on demand":
            continue
        for name in ((module,) if module else ()) + tuple(modules):
            names.add(name.partition(".")[0])
    return tuple(sorted(names))


class WatchList:
    """A fresh watch list: the watched names, and the rows on demand."""

    __slots__ = ("_head", "file", "watch")

    def __init__(self, file: str, watch: tuple[str, ...], head: bytes) -> None:
        self.file = file
        self.watch = watch
        self._head = head

    def rows(self) -> "tuple[RowTuple, ...] | None":
        """The startup rows, read now (a start reads only the header, so it costs the same
        with 9 entries or 2,000); None when the file is no longer the one this start read
        (rewritten meanwhile) or they are not of the expected shape."""
        from ..common import private_files

        data = private_files.read(self.file)
        if data is None or not data.startswith(self._head):
            return None
        return rows_of(data[len(self._head):])


def rows_of(blob: bytes) -> "tuple[RowTuple, ...] | None":
    try:
        rows = marshal.loads(blob)
    except (EOFError, ValueError, TypeError):
        return None
    if type(rows) is not tuple or not all(type(row) is tuple and row_ok(row) for row in rows):
        return None
    return rows


def row_ok(row: "tuple[object, ...]") -> bool:
    """Whether ``row`` has a startup row's fields, each of its type (the decider and the exit
    line trust them): one check for this watch list and the registry cache's startup rows."""
    if len(row) != 9:
        return False
    entry_id, kind, active, dist, module, modules, waiting, applies, decided_by = row
    return (type(entry_id) is str and type(kind) is str and type(active) is bool
            and type(dist) is str and type(waiting) is str and type(decided_by) is str
            and (module is None or type(module) is str)
            and (applies is None or type(applies) is str)
            and type(modules) is tuple and all(type(m) is str for m in modules))


def stamp(path: str) -> tuple[int, int, int, int]:
    info = os.stat(path)
    return (info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino)


def _header(settings: "tuple[Any, ...]", paths: tuple[tuple[str, int], ...]) -> "dict[str, Any]":
    # patchlane's version is _version.py's size and mtime, in the validator
    return {"format": FORMAT,
            "python": sys.implementation.cache_tag, "validator": _validator(),
            "settings": settings, "path": paths}


def read(directory: str, settings: "tuple[Any, ...]",
         paths: tuple[tuple[str, int], ...]) -> WatchList | None:
    """The watch list for this registry set and ``sys.path`` in ``directory`` (a real path the
    caller checked with :func:`patchlane.common.private_files.shared`), when it is still true; None
    otherwise, whatever the file holds."""
    from ..common import private_files

    file = os.path.join(directory, file_name(settings, paths))
    at = len(MAGIC) + 8
    data = private_files.read(file, _FIRST_READ)
    if data is None or not data.startswith(MAGIC) or len(data) < at:
        return None
    size = int.from_bytes(data[len(MAGIC):at], "little")
    if size > _MAX_HEADER:  # not a watch list this code wrote
        return None
    if len(data) < at + size:  # a header longer than the first read: read it whole
        data = private_files.read(file, at + size)
        if data is None or len(data) < at + size:
            return None
    try:
        header = marshal.loads(memoryview(data)[at:at + size])
    except (EOFError, ValueError, TypeError):
        return None
    if type(header) is not dict or header.get("expect") != _header(settings, paths):
        return None
    if not _still(header):
        return None
    watch = header.get("watch")
    if type(watch) is not tuple or not all(type(name) is str for name in watch):
        return None
    return WatchList(file, watch, data[:at + size])


def _still(header: "dict[str, Any]") -> bool:
    """Whether every file and directory the header stamped is as it was."""
    sources, dirs, links = header.get("sources"), header.get("dirs"), header.get("links")
    if type(sources) is not tuple or type(dirs) is not tuple or type(links) is not tuple:
        return False
    try:
        for raw, real, recorded in sources:
            if os.path.realpath(raw) != real or stamp(real) != recorded:
                return False
        for folder, ns in dirs:
            if os.lstat(folder).st_mtime_ns != ns:
                return False
        for written, resolved in links:
            if os.path.realpath(written) != resolved:
                return False
    except (OSError, ValueError, TypeError):  # gone, a NUL in a name, not of that shape
        return False
    return True


def write(directory: str, settings: "tuple[Any, ...]", paths: tuple[tuple[str, int], ...],
          sources: "Sequence[tuple[str, str, tuple[int, int, int, int]]]",
          dirs: "Sequence[tuple[str, int]]", links: "Sequence[tuple[str, str]]",
          rows: "Sequence[RowTuple]") -> str | None:
    """Write the watch list of a registry set the registry cache just loaded (``sources``: each
    file as named, its real path, and its stamp taken *before* it was read, so a change while
    loading leaves a stale watch list, never a wrong fresh one). Kept as it is when the file there
    already says the same. Returns the file written or kept; None when it could not be."""
    plain = tuple(tuple(row) for row in rows)  # marshal takes tuples, not named tuples
    header = {"expect": _header(settings, paths), "sources": tuple(sources),
              "dirs": tuple(dirs), "links": tuple(links), "watch": watched(rows)}
    head = marshal.dumps(header)
    data = MAGIC + len(head).to_bytes(8, "little") + head + marshal.dumps(plain)
    file = os.path.join(directory, file_name(settings, paths))
    from ..common import private_files

    if private_files.read(file) == data:
        return file
    try:
        private_files.write(file, data)
        private_files.prune(directory, SUFFIX, KEEP, file)
    except OSError:
        return None
    return file
