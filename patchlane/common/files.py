"""Writing files so that no reader and no crash ever sees half of one.

One implementation for every record patchlane keeps (manifests, receipts, reports, the
registry rewritten by ``retire``, the upstream cache): a temp file in the same directory,
flushed and fsynced, renamed over the target, then the directory fsynced so the rename itself
survives a power loss. Hand-written rather than a dependency: the maintained choices
(``atomicwrites`` is archived upstream) add nothing over these twenty lines, and this keeps
line endings and bytes exactly as given.

A new file gets the mode ``open()`` would give it under the process umask (0644 under umask
022): a run's records are read by dashboards and CI uploaders running as other users.
:func:`tempfile.mkstemp` always creates 0600, so the temp file is created here with mode 0666
and the kernel applies the umask; reading the umask instead (``os.umask`` sets it to read it)
would change it for every other thread for that instant.

Records written by other runs are read with :func:`read_regular`: a FIFO or a device where a
record belongs would block ``open()`` (a FIFO waits for a writer) or never end.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
from pathlib import Path
from typing import Any

from .private_files import file_kind, open_regular

__all__ = ["NotARegularFile", "atomic_write", "atomic_write_json", "read_regular", "resolved"]

_NEW_FILE_MODE = 0o666
"""What a new record is created with, before the umask (as ``open(path, "w")`` does)."""


def atomic_write(path: Path, data: bytes | str, *, encoding: str = "utf-8",
                 mode: int = _NEW_FILE_MODE) -> None:
    """Replace ``path`` with ``data`` atomically and durably. ``str`` is written as given
    (``newline=""``: a CRLF file stays CRLF). A new file gets ``mode`` less the umask (the
    mode ``open()`` gives a new file; pass 0o600 for a private one); an existing file keeps
    its permissions. On any error the target is untouched and the temp file is removed."""
    path = Path(path)
    raw = data.encode(encoding) if isinstance(data, str) else data
    fd, tmp = _create_temp(path, mode)
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


def _create_temp(path: Path, mode: int) -> tuple[int, str]:
    """A new, exclusively created temp file beside ``path`` (as :func:`tempfile.mkstemp`
    makes one, but with ``mode`` less the umask instead of 0600)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        tmp = str(path.parent / f".{path.name}.{os.urandom(6).hex()}.tmp")
        try:
            return os.open(tmp, flags, mode), tmp
        except FileExistsError:  # another writer's temp file has this name: draw again
            continue
    raise FileExistsError(errno.EEXIST, "no free temp file name beside it", str(path))


class NotARegularFile(OSError):
    """A record path that holds something other than a regular file (a FIFO, a directory, a
    device): it is unreadable as a record, and opening it could block."""

    def __str__(self) -> str:
        return f"{self.filename}: {self.strerror}"


def _check_regular(path: Path, mode: int) -> None:
    if not stat.S_ISREG(mode):
        raise NotARegularFile(errno.EINVAL, f"is {file_kind(mode)}, not a regular file; "
                              "expected a file patchlane wrote (remove or rename it)", str(path))


def read_regular(path: Path, limit: int | None = None) -> bytes:
    """The bytes of the regular file ``path`` (at most ``limit + 1`` of them when ``limit`` is
    given, so a caller can tell a file over its limit). Anything else raises
    :class:`NotARegularFile` without blocking: checked before opening (a device is never
    opened), and opened non-blocking and checked again on the open file (it could have been
    swapped in between)."""
    path = Path(path)
    _check_regular(path, os.stat(path).st_mode)
    try:
        fd, _ = open_regular(path)
    except OSError as exc:
        if exc.errno != errno.EINVAL:
            raise
        _check_regular(path, os.stat(path).st_mode)  # swapped in between: name what it is
        raise
    with os.fdopen(fd, "rb") as handle:
        return handle.read() if limit is None else handle.read(limit + 1)


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


def resolved(path: Path) -> Path:
    """``path`` with its links resolved, else absolute (a link loop, a folder it cannot
    read): two names of one run directory compare equal, and a name that cannot be resolved
    still compares."""
    try:
        return path.resolve()
    except OSError:
        return path.absolute()
