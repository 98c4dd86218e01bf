"""The wheelhouse's trust check for the kit's own scripts (``night``, ``gpu-check``), which run
before patchlane is installed: standard library only, imported from the folder they lie in.

The same rule as ``patchlane.sweep.wheelhouse_manifest`` applies once patchlane runs, checked
here first because the scripts install from the folder before it can (with patchlane's own
``private_files.py``, copied beside this file): the folder and every
folder above it belong to this user or root and are writable by no one else (a sticky ancestor
such as ``/tmp`` aside); every file pip's ``--find-links`` would take as a release is a wheel
the wheelhouse recorded, with the SHA-256 it recorded (and no HTML page, whose links pip would
follow); every wheel it recorded is there. And
pip installs from the folder alone: ``--isolated`` and no configuration file, so a machine's
``PIP_FIND_LINKS`` or pip.conf adds no second source.
"""

from __future__ import annotations

import hashlib
import importlib.util
import mimetypes
import os
from pathlib import Path
from typing import Any

ARCHIVES = (".whl", ".zip", ".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz", ".tar.xz", ".txz",
            ".tar.lz", ".tar.lzma", ".tlz")
"""What pip's ``--find-links`` takes from a folder as a release (its archive extensions)."""

PREPARE = "prepare it again with `patchlane wheelhouse DIR` on a machine with the package index"

PIP_ALONE = ["--isolated", "--no-index"]
"""pip options that read no index and none of pip's variables or user configuration."""


def pip_env(env: dict[str, str]) -> dict[str, str]:
    """``env`` with no pip configuration file read (pip honours it under ``--isolated``)."""
    return {**env, "PIP_CONFIG_FILE": os.devnull}


def _private_files() -> Any:
    """patchlane's own trust rule (``patchlane/common/private_files.py``: ``os`` and ``stat``
    only), loaded from its file: the copy beside this one in a kit, or the package's in a
    checkout (``scripts/`` beside ``patchlane/``)."""
    here = Path(__file__).resolve().parent
    for path in (here / "private_files.py", here.parent / "patchlane" / "common" /
                 "private_files.py"):
        if path.is_file():
            spec = importlib.util.spec_from_file_location("_kit_private_files", path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module
    return None


def problem(root: Path, house: dict) -> str | None:
    """What makes the wheelhouse ``root`` (manifest ``house``) unfit to install from, or None."""
    rule = _private_files()
    if rule is None:
        return f"{Path(__file__).resolve().parent}: private_files.py is missing beside " \
            "kit_trust.py"
    why = rule.shared(os.path.realpath(root))
    if why is not None:
        return f"{why}: a wheel planted there would be installed and run; fix: make it " \
            "writable by you alone (chmod go-w), or copy it to a folder of yours"
    hashes = house.get("hashes")
    if not isinstance(hashes, dict) or not all(
            isinstance(k, str) and isinstance(v, str) and "/" not in k
            for k, v in hashes.items()):
        return f"{root / 'wheelhouse.json'}: hashes: expected the sha256 of each wheel; " \
            f"fix: {PREPARE}"
    unknown = sorted(p.name for p in root.iterdir() if takes(p.name) and p.name not in hashes)
    if unknown:
        return f"{root / unknown[0]} is no wheel it recorded ({len(unknown)} such); fix: " \
            "remove it from the folder (pip would take it as a release, or follow its links)"
    for name, value in sorted(hashes.items()):
        path = root / name
        if not path.is_file():
            return f"{path} is recorded but not there; fix: {PREPARE}"
        if _sha256(path) != value:
            return f"{path} is not the wheel it recorded (sha256 differs); fix: {PREPARE}"
    return None


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return "sha256:" + digest.hexdigest()


def takes(name: str) -> bool:
    """Whether pip's ``--find-links`` reads the file ``name`` of a folder: a release archive,
    or an HTML page whose links it follows wherever they lead."""
    return name.lower().endswith(ARCHIVES) or \
        mimetypes.guess_type(name, strict=False)[0] == "text/html"
