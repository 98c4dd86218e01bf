"""Writing files so that no reader and no crash ever sees half of one.

One implementation for every record patchlane keeps (manifests, receipts, reports, the
registry rewritten by ``retire``, the upstream cache): a temp file in the same directory,
flushed and fsynced, renamed over the target, then the directory fsynced so the rename itself
survives a power loss. Hand-written rather than a dependency: the maintained choices
(``atomicwrites`` is archived upstream) add nothing over these twenty lines, and this keeps
line endings and bytes exactly as given.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["atomic_write", "atomic_write_json"]


def atomic_write(path: Path, data: bytes | str, *, encoding: str = "utf-8") -> None:
    """Replace ``path`` with ``data`` atomically and durably. ``str`` is written as given
    (``newline=""``: a CRLF file stays CRLF). On any error the target is untouched and the
    temp file is removed."""
    path = Path(path)
    raw = data.encode(encoding) if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(raw)
            handle.flush()
            os.fsync(handle.fileno())
        with contextlib.suppress(OSError):  # keep the target's permissions where it exists
            os.chmod(tmp, os.stat(path).st_mode & 0o7777)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def atomic_write_json(path: Path, data: Any) -> None:
    atomic_write(path, json.dumps(data, indent=2, default=str) + "\n")


def _fsync_dir(directory: Path) -> None:
    # POSIX: the rename is durable once the directory entry is. Not possible on Windows, and
    # some filesystems refuse it; the data itself is already synced then.
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
