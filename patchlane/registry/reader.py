"""Reading a registry file: its bytes and its text, and nothing more.

Every way a file can hurt the process before it is parsed is refused here with a
:class:`RegistryError` naming it: not a regular file (a FIFO would block `import patchlane`),
too large, not UTF-8. No YAML here: a start the validated-registry cache serves reads the
files' bytes to compare them and never parses them (:mod:`.safe_yaml` does, on a miss).
"""

from __future__ import annotations

import os
from pathlib import Path

from ..common.errors import RegistryError

__all__ = ["MAX_REGISTRY_BYTES", "decode", "read_registry_bytes"]


MAX_REGISTRY_BYTES = 16 * 2**20
"""A registry larger than this is refused before it is read: 2,000 entries take ~1 MiB."""


def read_registry_bytes(path: Path) -> bytes:
    """A registry file's bytes: a regular file of at most :data:`MAX_REGISTRY_BYTES`, or a
    :class:`RegistryError` naming it."""
    import stat

    from ..common.private_files import file_kind, open_regular

    try:
        # Only a regular file: a FIFO would block `import patchlane` forever and /dev/zero
        # would exhaust memory (open_regular checks the opened file, so a swap is seen).
        mode = os.stat(path).st_mode
        if not stat.S_ISREG(mode):
            raise RegistryError(path, "not a regular file", found=file_kind(mode),
                                expected="a YAML file",
                                fix="point PATCHLANE_REGISTRY at the registry file itself")
        fd, info = open_regular(path)
        with open(fd, "rb", closefd=True) as handle:
            if info.st_size > MAX_REGISTRY_BYTES:
                raise RegistryError(path, "registry file too large", found=info.st_size,
                                    expected=f"at most {MAX_REGISTRY_BYTES} bytes",
                                    fix="split it into several registries")
            return handle.read(MAX_REGISTRY_BYTES + 1)
    except OSError as exc:
        raise RegistryError(path, f"cannot read registry: {exc.strerror}",
                            fix="check PATCHLANE_REGISTRY and the file permissions") from None


def decode(path: Path, raw: bytes) -> str:
    """A registry file's bytes as text: UTF-8, or a :class:`RegistryError` naming the byte."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RegistryError(path, f"not UTF-8 text (byte {exc.start})",
                            fix="save the registry as UTF-8") from None
