"""Is an installed distribution what its wheel installed? Files checked against ``RECORD``.

The installed tree is not authoritative just because it imports: a locally edited
site-packages file is exactly the kind of unrecorded patch patchlane exists to prevent.
"""

from __future__ import annotations

import base64
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
    files = dist.files
    version = dist.version
    if files is None:
        return RecordCheck(name, version, error="no RECORD (installed without one)")
    modified: list[str] = []
    missing: list[str] = []
    checked = unhashed = 0
    location = None
    for item in files:
        # Byte-code caches are rewritten by the interpreter (a wheel may ship .pyc in RECORD):
        # a changed cache is not an edited package.
        if item.hash is None or item.name.endswith(".pyc"):
            unhashed += 1
            continue
        path = Path(str(item.locate()))
        location = location or str(path.parent)
        if not path.exists():
            missing.append(str(item))
            continue
        checked += 1
        if _digest(path, item.hash.mode) != item.hash.value:
            modified.append(str(item))
    root = Path(str(dist.locate_file(""))).resolve()
    return RecordCheck(name, version, checked, tuple(modified), tuple(missing), unhashed,
                       location=str(root))
