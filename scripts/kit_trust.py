"""The wheelhouse's trust check for the kit's own scripts (``night``, ``gpu-check``), which run
before patchlane is installed: standard library only, imported from the folder they lie in.

The same rule as ``patchlane.sweep.wheelhouse_manifest`` applies once patchlane runs, checked
here first because the scripts install from the folder before it can: the folder and every
folder above it belong to this user or root and are writable by no one else (a sticky ancestor
such as ``/tmp`` aside); every file pip's ``--find-links`` would take as a release is a wheel
the wheelhouse recorded, with the SHA-256 it recorded; every wheel it recorded is there. And
pip installs from the folder alone: ``--isolated`` and no configuration file, so a machine's
``PIP_FIND_LINKS`` or pip.conf adds no second source.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

ARCHIVES = (".whl", ".zip", ".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz", ".tar.xz", ".txz",
            ".tar.lz", ".tar.lzma", ".tlz")
"""What pip's ``--find-links`` takes from a folder as a release (its archive extensions)."""

PIP_ALONE = ["--isolated", "--no-index"]
"""pip options that read no index and none of pip's variables or user configuration."""


def pip_env(env: dict[str, str]) -> dict[str, str]:
    """``env`` with no pip configuration file read (pip honours it under ``--isolated``)."""
    return {**env, "PIP_CONFIG_FILE": os.devnull}


def _private_group(gid: int, uid: int) -> bool:
    try:
        import grp
        import pwd

        user, group = pwd.getpwuid(uid), grp.getgrgid(gid)
    except (ImportError, KeyError, OSError):
        return False
    return (user.pw_gid == gid and group.gr_name == user.pw_name
            and set(group.gr_mem) <= {user.pw_name})


def shared(folder: Path) -> str | None:
    """Why users other than this one (and root) could change what ``folder`` holds, or None."""
    getuid = getattr(os, "getuid", None)
    if getuid is None:  # pragma: no cover - Windows: ACLs, not mode bits
        return None
    uid, path, leaf = getuid(), os.path.realpath(folder), True
    while True:
        info = os.stat(path)
        if info.st_uid not in (uid, 0):
            return f"{path} belongs to another user (uid {info.st_uid})"
        mode = info.st_mode
        if mode & 0o022 and (leaf or not mode & stat.S_ISVTX) \
                and (mode & 0o002 or not _private_group(info.st_gid, uid)):
            return f"{path} can be written by other users (mode {stat.filemode(mode)})"
        parent = os.path.dirname(path)
        if parent == path:
            return None
        path, leaf = parent, False


def problem(root: Path, house: dict) -> str | None:
    """What makes the wheelhouse ``root`` (manifest ``house``) unfit to install from, or None."""
    why = shared(root)
    if why is not None:
        return f"{why}: a wheel planted there would be installed and run; fix: make it " \
            "writable by you alone (chmod go-w), or copy it to a folder of yours"
    hashes = house.get("hashes")
    if not isinstance(hashes, dict) or not all(
            isinstance(k, str) and isinstance(v, str) and "/" not in k
            for k, v in hashes.items()):
        return f"{root / 'wheelhouse.json'}: hashes: expected the sha256 of each wheel"
    unknown = sorted(p.name for p in root.iterdir()
                     if p.name.lower().endswith(ARCHIVES) and p.name not in hashes)
    if unknown:
        return f"{root / unknown[0]} is no wheel it recorded ({len(unknown)} such)"
    for name, value in sorted(hashes.items()):
        path = root / name
        if not path.is_file():
            return f"{path} is recorded but not there"
        if "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest() != value:
            return f"{path} is not the wheel it recorded (sha256 differs)"
    return None
