"""The wheelhouse's trust check for the kit's own scripts (``night``, ``gpu-check``), which run
before patchlane is installed: standard library only, imported from the folder they lie in.

The rule is patchlane's own, loaded from its files (``patchlane wheelhouse`` copies both beside
this one; in a checkout, the package's): ``common/private_files.py``, who may write the folder
(this user or root alone, every folder above it too, a sticky one such as ``/tmp`` aside), and
``sweep/wheelhouse_files.py``, what it may hold (exactly the wheels it recorded, unchanged; no
other file pip's ``--find-links`` reads) and how pip installs from it alone (``--isolated``, no
configuration file: a machine's ``PIP_FIND_LINKS`` or pip.conf adds no second source).
"""

from __future__ import annotations

import functools
import importlib.util
import os
from pathlib import Path
from typing import Any

PREPARE = "prepare it again with `patchlane wheelhouse DIR` on a machine with the package index"
RULES = {"private_files": "common", "wheelhouse_files": "sweep"}
"""patchlane's modules the check applies -> their package folder in a checkout."""


@functools.cache
def _rule(name: str) -> Any:
    """patchlane's module ``name`` (standard library only), loaded from its file: the copy beside
    this one in a kit, or the package's in a checkout (``scripts/`` beside ``patchlane/``); None
    when neither is there."""
    here = Path(__file__).resolve().parent
    for path in (here / f"{name}.py", here.parent / "patchlane" / RULES[name] / f"{name}.py"):
        if path.is_file():
            spec = importlib.util.spec_from_file_location(f"_kit_{name}", path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module
    return None


def pip_alone(env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """pip's options and environment to install from a wheelhouse alone (after :func:`problem`
    found the rule's files)."""
    files = _rule("wheelhouse_files")
    return list(files.PIP_ALONE), files.pip_env(env)


def problem(root: Path, house: dict) -> str | None:
    """What makes the wheelhouse ``root`` (manifest ``house``) unfit to install from, or None."""
    missing = [f"{name}.py" for name in RULES if _rule(name) is None]
    if missing:
        return f"{Path(__file__).resolve().parent}: {', '.join(missing)} missing beside " \
            f"kit_trust.py; fix: {PREPARE}"
    why = _rule("private_files").shared(os.path.realpath(root))
    if why is not None:
        return f"{why}: a wheel planted there would be installed and run; fix: make it " \
            "writable by you alone (chmod go-w), or copy it to a folder of yours"
    hashes = house.get("hashes")
    if not isinstance(hashes, dict) or not all(
            isinstance(k, str) and isinstance(v, str) and "/" not in k
            for k, v in hashes.items()):
        return f"{root / 'wheelhouse.json'}: hashes: expected the sha256 of each wheel; " \
            f"fix: {PREPARE}"
    result: str | None = _rule("wheelhouse_files").unfit(root, hashes, f"fix: {PREPARE}")
    return result
