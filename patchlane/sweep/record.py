"""Is an installed distribution what its wheel installed? Files checked against ``RECORD``.

The installed tree is not authoritative just because it imports: a locally edited
site-packages file is exactly the kind of unrecorded patch patchlane exists to prevent.

``RECORD`` is itself a file anyone with write access can edit, so its rows are input, not
instructions. A row is hashed only when it names a path inside the directory the distribution
is installed in (where its ``.dist-info`` lives; a row that climbs out of it, such as pip's
``../../../bin/torchrun`` for a console script, is counted in ``outside`` and not read), and
only when what that path opens is a regular file of at most :data:`MAX_HASHED_BYTES`; a hash
algorithm ``hashlib`` does not guarantee is a finding naming the row. None of these stops the
check: each is reported, in ``unreadable``, and the rest of the rows are still checked.
"""

from __future__ import annotations

import base64
import csv
import errno
import hashlib
import os
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from ..common.private_files import file_kind, open_regular

__all__ = ["HASH_ALGORITHMS", "MAX_HASHED_BYTES", "RecordCheck", "verify_distribution"]

MAX_HASHED_BYTES = 4 * 2**30
"""The largest file hashed (4 GiB): well above the largest file a gated wheel installs (torch's
CUDA libraries are under 2 GiB), and a bound on the time a RECORD row can cost."""

HASH_ALGORITHMS = frozenset(a for a in hashlib.algorithms_guaranteed
                            if not a.startswith("shake_"))
"""The hash names a RECORD row may use: every algorithm ``hashlib`` guarantees, except the
SHAKE ones (their digest length is not fixed, and a row cannot say it). md5 and sha1 are
accepted although the wheel spec forbids them: a weak hash still shows an edited file."""


@dataclass(frozen=True)
class RecordCheck:
    distribution: str
    version: str | None
    checked: int = 0
    modified: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    unhashed: int = 0
    """Files RECORD lists without a hash (RECORD itself, .pyc written after install)."""
    error: str | None = None
    location: str | None = None
    details: dict[str, str] = field(default_factory=dict)
    unreadable: tuple[str, ...] = ()
    """Rows that could not be checked, each a sentence naming the RECORD file, the row, what
    was found and the fix (an unknown hash algorithm, not a regular file, over the size cap,
    a file that cannot be opened)."""
    outside: tuple[str, ...] = ()
    """Rows naming a path outside the install directory (console scripts, data files): not
    read."""

    @property
    def ok(self) -> bool:
        return self.error is None and not self.modified and not self.missing \
            and not self.unreadable

    def as_dict(self) -> dict[str, object]:
        return {
            "distribution": self.distribution, "version": self.version, "ok": self.ok,
            "checked": self.checked, "modified": list(self.modified),
            "missing": list(self.missing), "unhashed": self.unhashed, "error": self.error,
            "location": self.location, "unreadable": list(self.unreadable),
            "outside": list(self.outside),
        }


class _Unreadable(Exception):
    """A row's file cannot be hashed; the message says why."""


def _digest(path: Path, algorithm: str) -> str:
    # Opened without blocking (a FIFO would wait for a writer forever) and checked on the open
    # descriptor (no window between the check and the read): a regular file, within the cap.
    try:
        fd, info = open_regular(path)
    except OSError as exc:
        if exc.errno != errno.EINVAL:
            raise
        raise _Unreadable(f"not a regular file ({file_kind(os.stat(path).st_mode)})") from None
    if info.st_size > MAX_HASHED_BYTES:
        os.close(fd)
        raise _Unreadable(f"{info.st_size} bytes, over the {MAX_HASHED_BYTES}-byte cap on a "
                          "hashed file")
    with open(fd, "rb", closefd=True) as fh:
        h = hashlib.new(algorithm)
        size = 0
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            size += len(chunk)
            if size > MAX_HASHED_BYTES:  # it grew while being read
                raise _Unreadable(f"over the {MAX_HASHED_BYTES}-byte cap on a hashed file")
            h.update(chunk)
    return base64.urlsafe_b64encode(h.digest()).rstrip(b"=").decode()


def _inside(root: str, item: str) -> str | None:
    """The path ``item`` (a RECORD row's, relative to ``root``) names, when it stays inside
    ``root`` by its own spelling; None when it climbs out or is absolute."""
    # By spelling, not resolved: a symlink inside the tree may point anywhere (some installers
    # link files in from a store), and what it opens is checked on the open descriptor anyway.
    # A row that climbs out by "..", or is absolute, names something the distribution's own
    # files are not.
    if os.path.isabs(item) or (os.name == "nt" and ":" in item):
        return None
    path = os.path.normpath(os.path.join(root, item))
    return path if os.path.commonpath([root, path]) == root else None


def verify_distribution(name: str) -> RecordCheck:
    """Hash every file the distribution's RECORD lists inside its install directory, and
    compare."""
    try:
        dist = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return RecordCheck(name, None, error="not installed")
    version = dist.version
    # RECORD itself, not `dist.files`: from Python 3.12 importlib.metadata leaves out of
    # `files` the entries that no longer exist, which would hide exactly a deleted file.
    text = dist.read_text("RECORD")
    if text is None:
        return RecordCheck(name, version, error="no RECORD (installed without one)")
    root = os.path.normpath(os.path.abspath(str(dist.locate_file(""))))
    try:
        rows = list(csv.reader(text.splitlines()))
    except csv.Error as exc:
        return RecordCheck(name, version, error=f"RECORD is not CSV ({exc}); reinstall it: "
                           f"{_reinstall(name, version)}", location=root)
    record = next((row[0] for row in rows if row and row[0].endswith(".dist-info/RECORD")),
                  None)
    where = _inside(root, record) if record else None
    shown = where or f"the RECORD of {name}"
    modified: list[str] = []
    missing: list[str] = []
    unreadable: list[str] = []
    outside: list[str] = []
    checked = unhashed = 0
    for number, row in enumerate(rows, start=1):
        if not row or not row[0]:
            continue
        item, recorded = row[0], row[1] if len(row) > 1 else ""
        # Byte-code caches are rewritten by the interpreter (a wheel may ship .pyc in RECORD):
        # a changed cache is not an edited package.
        mode, sep, value = recorded.partition("=")
        if not sep or item.endswith(".pyc"):
            unhashed += 1
            continue
        path = _inside(root, item)
        if path is None:
            outside.append(item)
            continue
        algorithm = mode.lower()
        if algorithm not in HASH_ALGORITHMS:
            unreadable.append(f"{shown}: row {number} ({item}): hash algorithm {mode[:40]!r} "
                              f"is not one hashlib guarantees; expected one of "
                              f"{', '.join(sorted(HASH_ALGORITHMS))}. Fix: reinstall it: "
                              f"{_reinstall(name, version)}")
            continue
        try:
            digest = _digest(Path(path), algorithm)
        except FileNotFoundError:
            missing.append(item)
            continue
        except _Unreadable as exc:
            unreadable.append(f"{shown}: row {number} ({item}): {exc}; expected a regular file "
                              f"the wheel installed. Fix: reinstall it: "
                              f"{_reinstall(name, version)}")
            continue
        except ValueError as exc:  # a NUL in the name: no file can have it
            unreadable.append(f"{shown}: row {number} ({item!r}): not a file name ({exc}); "
                              "expected a path the wheel installed. Fix: reinstall it: "
                              f"{_reinstall(name, version)}")
            continue
        except OSError as exc:
            unreadable.append(f"{shown}: row {number} ({item}): cannot be read "
                              f"({exc.strerror or type(exc).__name__}). Fix: check its "
                              f"permissions, or reinstall it: {_reinstall(name, version)}")
            continue
        checked += 1
        if digest != value:
            modified.append(item)
    return RecordCheck(name, version, checked, tuple(modified), tuple(missing), unhashed,
                       location=str(Path(root).resolve()), unreadable=tuple(unreadable),
                       outside=tuple(outside))


def _reinstall(name: str, version: str | None) -> str:
    pin = f"=={version}" if version else ""
    return f"`pip install --force-reinstall --no-deps '{name}{pin}'`"
