"""Is an installed distribution what its wheel installed? Files checked against ``RECORD``.

The installed tree is not authoritative just because it imports: a locally edited
site-packages file is exactly the kind of unrecorded patch patchlane exists to prevent.
"""

from __future__ import annotations

import base64
import csv
import hashlib
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

__all__ = ["RecordCheck", "verify_distribution"]


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

    @property
    def ok(self) -> bool:
        return self.error is None and not self.modified and not self.missing

    def as_dict(self) -> dict[str, object]:
        return {
            "distribution": self.distribution, "version": self.version, "ok": self.ok,
            "checked": self.checked, "modified": list(self.modified),
            "missing": list(self.missing), "unhashed": self.unhashed, "error": self.error,
            "location": self.location,
        }


def _digest(path: Path, algorithm: str) -> str:
    h = hashlib.new(algorithm)
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return base64.urlsafe_b64encode(h.digest()).rstrip(b"=").decode()


def verify_distribution(name: str) -> RecordCheck:
    """Hash every file the distribution's RECORD lists and compare."""
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
    modified: list[str] = []
    missing: list[str] = []
    checked = unhashed = 0
    for row in csv.reader(text.splitlines()):
        if not row or not row[0]:
            continue
        item, recorded = row[0], row[1] if len(row) > 1 else ""
        # Byte-code caches are rewritten by the interpreter (a wheel may ship .pyc in RECORD):
        # a changed cache is not an edited package.
        mode, sep, value = recorded.partition("=")
        if not sep or item.endswith(".pyc"):
            unhashed += 1
            continue
        path = Path(str(dist.locate_file(item)))
        if not path.exists():
            missing.append(item)
            continue
        checked += 1
        if _digest(path, mode) != value:
            modified.append(item)
    root = Path(str(dist.locate_file(""))).resolve()
    return RecordCheck(name, version, checked, tuple(modified), tuple(missing), unhashed,
                       location=str(root))
