"""A wheelhouse folder as every install reads it: ``wheelhouse.json`` (what it holds and for
what), trusted only as the release cache is, each wheel's SHA-256 checked before anything is
installed from it. ``patchlane wheelhouse`` (:mod:`patchlane.releases.wheelhouse`) fills one
on a machine that reaches the package index; the sweep, the matrix and their side-by-side
installs (:mod:`patchlane.sweep.installs`) read it on a machine that does not.

A wheelhouse prepared for several interpreters is one folder per interpreter below the one
named (``DIR/py3.11``, ``DIR/py3.12``): :func:`resolve` picks this interpreter's.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..common.errors import UsageError
from ..common.files import read_regular
from .wheelhouse_files import PIP_ALONE, unfit

__all__ = [
    "MANIFEST",
    "SCHEMA",
    "NotInWheelhouse",
    "Wheelhouse",
    "WheelhouseError",
    "find_links",
    "in_use",
    "interpreter_folder",
    "load",
    "normalized",
    "resolve",
]

MANIFEST = "wheelhouse.json"
SCHEMA = 1


class WheelhouseError(UsageError):
    """A wheelhouse folder that cannot be used as asked (missing, malformed, or without a set
    the command names)."""



class NotInWheelhouse(WheelhouseError):
    """A release to install side by side that the wheelhouse in use does not hold: the row
    that needs it is skipped, never an error (``needs X, not in the wheelhouse``)."""

    def __init__(self, spec: str, root: Path) -> None:
        super().__init__(f"needs {spec}, not in the wheelhouse ({root}); add it with "
                         "`patchlane wheelhouse` on a machine with the package index")
        self.spec = spec


@dataclass(frozen=True)
class Wheelhouse:
    root: Path
    python: str
    """``major.minor`` the wheels are for."""
    platforms: tuple[str, ...]
    sets: dict[str, tuple[str, ...]]
    """Matrix set name -> the release specs downloaded for it."""
    project: str
    """patchlane's own wheel (a file name in ``root``)."""
    support: tuple[str, ...]
    """Support wheel file names."""
    skipped: dict[str, str] = field(default_factory=dict)
    """A matrix set's name, or a release spec, -> why it is not in the wheelhouse."""
    benchmarks: tuple[dict[str, Any], ...] = ()
    """``{"script": ..., "install": [specs]}``: what the GPU check runs, beside what."""
    hashes: dict[str, str] = field(default_factory=dict)
    """Wheel file name -> ``sha256:<hex>`` of every wheel in the folder, as downloaded:
    checked by :func:`load` before anything is installed from it."""
    releases: tuple[str, ...] = ()
    """Every release spec (``NAME==VERSION``) downloaded to be installed side by side: the
    sets' releases and the ledger reproducers' bad sides. A side-by-side install from the
    wheelhouse of a spec not here is refused before pip runs (:meth:`holds`)."""
    environment: tuple[str, ...] = ()
    """The targets' releases a night's environment installs beside patchlane (the box's
    torch, triton and numpy aside)."""

    def holds(self, spec: str) -> bool:
        """Whether ``spec`` was downloaded into this wheelhouse to be installed side by side."""
        return normalized(spec) in {normalized(s) for s in (*self.releases, *(
            s for specs in self.sets.values() for s in specs))}

    def as_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "python": self.python, "platforms": list(self.platforms),
                "sets": {k: list(v) for k, v in self.sets.items()}, "project": self.project,
                "support": list(self.support), "skipped": dict(self.skipped),
                "releases": list(self.releases), "environment": list(self.environment),
                "benchmarks": list(self.benchmarks), "hashes": dict(sorted(self.hashes.items())),
                "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def normalized(spec: str) -> str:
    """``NAME==VERSION`` with the name as PEP 503 normalizes it (``Megatron_Core`` is
    ``megatron-core``)."""
    from packaging.utils import canonicalize_name

    name, _, version = spec.partition("==")
    return canonicalize_name(name.strip()) + "==" + version.strip()


def interpreter_folder(python: str) -> str:
    """The folder below a wheelhouse for several interpreters holding ``python``'s wheels."""
    return f"py{python}"


def resolve(root: Path) -> Path:
    """``root`` itself when it holds a ``wheelhouse.json``, else its folder for this
    interpreter (``root/py3.12``) when it has one: what ``--wheelhouse DIR`` and
    ``PATCHLANE_WHEELHOUSE`` name."""
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    mine = root / interpreter_folder(here)
    if not (root / MANIFEST).exists() and (mine / MANIFEST).exists():
        return mine
    return root


def _trusted(root: Path, path: Path, data: dict[str, Any], fix: str) -> dict[str, str]:
    """The wheelhouse's recorded hashes, once the folder is trusted as the release cache is
    (only this user or root can write it) and every wheel in it is one it recorded, unchanged:
    a release installed from it is kept in the release cache and reused by later runs."""
    from ..common.private_files import shared

    why = shared(os.path.realpath(root))
    if why is not None:
        raise WheelhouseError(f"wheelhouse {root}: {why}; a wheel planted there would be "
                              "installed, kept in the release cache and run by later jobs; "
                              "fix: make it writable by you alone (chmod go-w), or copy it "
                              "to a folder of yours")
    hashes = data.get("hashes")
    if not isinstance(hashes, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in hashes.items()):
        raise WheelhouseError(f"{path}: hashes: found {hashes!r}, expected the sha256 of "
                              f"each wheel (`patchlane wheelhouse` records them); {fix}")
    why = unfit(root, hashes, fix)
    if why is not None:
        raise WheelhouseError(f"wheelhouse {root}: {why}")
    return dict(hashes)


def find_links(root: Path) -> list[str]:
    """pip arguments that install from ``root`` and nothing else (run with
    :func:`patchlane.sweep.wheelhouse_files.pip_env`)."""
    return [*PIP_ALONE, "--find-links", str(root)]


def load(root: Path) -> Wheelhouse:
    """The wheelhouse in ``root``; a :class:`WheelhouseError` naming the file and the fix."""
    path = root / MANIFEST
    fix = "fix: prepare it with `patchlane wheelhouse DIR` on a machine with the package index"
    try:
        data = json.loads(read_regular(path).decode("utf-8"))  # a FIFO: refused, not waited on
    except FileNotFoundError:
        raise WheelhouseError(f"{path}: not found: {root} is no wheelhouse; {fix}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise WheelhouseError(f"{path}: cannot read it ({exc}); {fix}") from None
    keys = {"schema", "python", "platforms", "sets", "project", "support"}
    if not isinstance(data, dict) or data.get("schema") != SCHEMA or keys - set(data):
        found = sorted(data) if isinstance(data, dict) else type(data).__name__
        raise WheelhouseError(f"{path}: expected schema {SCHEMA} with keys {sorted(keys)}; "
                              f"found {found}; {fix}")
    sets = data["sets"]
    if not isinstance(sets, dict) or not all(
            isinstance(v, list) and all(isinstance(s, str) for s in v) for v in sets.values()):
        raise WheelhouseError(f"{path}: sets: expected {{set name: [release specs]}}; {fix}")

    def names(value: object) -> bool:  # wheel file names in the folder, not paths
        return isinstance(value, str) and bool(value) and "/" not in value \
            and "\\" not in value and not value.startswith(".")

    def specs(value: object) -> bool:  # NAME==VERSION release specs
        return isinstance(value, list) and all(
            isinstance(v, str) and "==" in v for v in value)

    wrong = {key: data[key] for key, ok in (
        ("python", isinstance(data["python"], str) and bool(data["python"])),
        ("platforms", isinstance(data["platforms"], list)
         and all(isinstance(p, str) for p in data["platforms"])),
        ("project", names(data["project"])),
        ("support", isinstance(data["support"], list)
         and all(names(s) for s in data["support"])),
        ("skipped", isinstance(data.get("skipped") or {}, dict)),
        ("benchmarks", isinstance(data.get("benchmarks") or [], list)),
        ("releases", specs(data.get("releases") or [])),
        ("environment", specs(data.get("environment") or [])),
    ) if not ok and key in data}
    if wrong:
        key, value = next(iter(wrong.items()))
        raise WheelhouseError(f"{path}: {key}: found {value!r}, expected "
                              + {"python": "the interpreter, e.g. \"3.12\"",
                                 "platforms": "a list of platform tags",
                                 "project": "the patchlane wheel's file name",
                                 "support": "a list of wheel file names in the folder",
                                 "skipped": "an object", "benchmarks": "a list",
                                 "releases": "a list of NAME==VERSION specs",
                                 "environment": "a list of NAME==VERSION specs"}[key]
                              + f"; {fix}")
    missing = [name for name in [data["project"], *data["support"]]
               if not (root / name).is_file()]
    if missing:
        raise WheelhouseError(f"{path}: names wheels that are not in {root}: {missing}; the "
                              f"folder was copied in part; {fix}")
    hashes = _trusted(root, path, data, fix)
    return Wheelhouse(root, str(data["python"]), tuple(data["platforms"]),
                      {k: tuple(v) for k, v in sets.items()}, str(data["project"]),
                      tuple(data["support"]), dict(data.get("skipped") or {}),
                      tuple(data.get("benchmarks") or ()), hashes,
                      tuple(data.get("releases") or ()), tuple(data.get("environment") or ()))


def in_use(given: Path | None = None) -> Wheelhouse | None:
    """The wheelhouse side-by-side installs come from: ``given``, else
    ``PATCHLANE_WHEELHOUSE``, resolved to this interpreter's folder and trusted (read once per
    process and folder); None: the package index."""
    from ..deciding.controls import ToolSettings

    root = given or ToolSettings.from_env().wheelhouse
    return None if root is None else _loaded(str(resolve(root).absolute()))


@functools.lru_cache(maxsize=8)
def _loaded(root: str) -> Wheelhouse:
    return load(Path(root))
