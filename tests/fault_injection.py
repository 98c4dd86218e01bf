"""Fault injection for the sweep and `retire` (issue 14): the ways a filesystem refuses,
applied to patchlane's own write path (``patchlane.common.files``) for the duration of a ``with``.

* :func:`disk_full` -- every ``fsync`` of a file being written raises ``ENOSPC``, as a full
  disk does once the page cache must reach it;
* :func:`read_only` -- a directory (and what is in it) loses its write permission.

They change how the OS answers, not patchlane: what is under test is what patchlane does
then (a clear error naming the file, exit 74 from the CLI, nothing half-written, no temp file
left behind).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def disk_full(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """``os.fsync`` on a regular file raises ENOSPC inside the block."""
    real = os.fsync

    def fsync(fd: int) -> None:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real(fd)

    with monkeypatch.context() as patched:
        patched.setattr(os, "fsync", fsync)
        yield


@contextlib.contextmanager
def read_only(directory: Path) -> Iterator[None]:
    """``directory`` without write permission inside the block (restored after)."""
    if os.geteuid() == 0:
        pytest.skip("root ignores directory permissions")
    mode = directory.stat().st_mode
    directory.chmod(mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    try:
        yield
    finally:
        directory.chmod(mode)
