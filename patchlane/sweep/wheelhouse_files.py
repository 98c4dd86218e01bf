"""What a wheelhouse folder may hold, and how pip installs from it alone: one rule for the sweep
(:mod:`patchlane.sweep.wheelhouse_manifest`) and for the kit's own scripts, which check the
folder before patchlane is installed (``scripts/kit_trust.py``).

Standard library only, with no import of patchlane: ``patchlane wheelhouse`` copies this file
into the folder beside ``night`` and ``gpu-check``, which load it from there.
"""

from __future__ import annotations

import hashlib
import mimetypes
import os
from collections.abc import Mapping
from pathlib import Path

__all__ = ["ARCHIVES", "PIP_ALONE", "pip_env", "sha256", "takes", "unfit"]

ARCHIVES = (".whl", ".zip", ".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz", ".tar.xz", ".txz",
            ".tar.lz", ".tar.lzma", ".tlz")
"""What pip's ``--find-links`` takes from a folder as a release (its archive extensions)."""

PIP_ALONE = ("--isolated", "--no-index")
"""pip options that read no index and none of pip's ``PIP_*`` variables or user configuration
(a machine's ``PIP_FIND_LINKS`` would add a second source); :func:`pip_env` drops its
configuration files."""


def pip_env(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` for a pip that installs from a wheelhouse alone: no configuration file read
    (``PIP_CONFIG_FILE=/dev/null``, which pip honours even under ``--isolated``; a site-wide
    pip.conf may name find-links of its own)."""
    return {**env, "PIP_CONFIG_FILE": os.devnull}


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return "sha256:" + digest.hexdigest()


def takes(name: str) -> bool:
    """Whether pip's ``--find-links`` reads the file ``name`` of a folder: a release archive,
    or an HTML page whose links it follows wherever they lead."""
    return name.lower().endswith(ARCHIVES) or \
        mimetypes.guess_type(name, strict=False)[0] == "text/html"


def unfit(root: Path, hashes: Mapping[str, str], fix: str) -> str | None:
    """Why the files of ``root`` are not exactly the wheels ``hashes`` records, unchanged, or
    None. Every file pip's ``--find-links`` reads counts, not the wheels alone: a source archive
    beside them (``liger_kernel-0.8.1+evil.tar.gz`` satisfies ``==0.8.1``, ranks first and runs
    its build backend at install). ``fix``: what to do about a wheel missing or changed."""
    unknown = sorted(p.name for p in root.iterdir() if takes(p.name) and p.name not in hashes)
    if unknown:
        return (f"{unknown[0]} is no wheel it recorded ({len(unknown)} such); fix: remove it "
                "from the folder (pip would take it as a release, or follow its links)")
    missing = sorted(name for name in hashes if not (root / name).is_file())
    if missing:
        return f"{missing[0]} is recorded but not there ({len(missing)} such); {fix}"
    changed = [name for name, value in sorted(hashes.items()) if sha256(root / name) != value]
    if changed:
        return (f"{changed[0]} is not the wheel it recorded (sha256 differs; {len(changed)} "
                f"such); {fix}")
    return None
