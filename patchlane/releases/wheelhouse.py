"""A wheelhouse: everything an air-gapped GPU box needs to run the release matrix and the GPU
benchmarks, prepared on a machine that reaches the package index (``patchlane wheelhouse``).

One flat folder of wheels for a target interpreter and platform (``cp312``, manylinux x86_64 by
default): patchlane's own wheel, what it and megatron's training code import that a CUDA image
may lack (the ``support`` wheels, pinned by ``constraints/`` where the checkout has them), and
every release the chosen matrix sets install, each without its dependencies (torch, triton and
numpy are the box's own). Beside them: ``wheelhouse.json`` (what is there and for what),
``matrix.yaml`` (the sets),
``benchmarks/`` and ``gpu-check`` (the one command to run on the box).

Offline, ``patchlane matrix --wheelhouse DIR`` installs each set's releases from it with
``pip --no-index --find-links`` and nothing else. Sets that install a torch build are left out
(gigabytes, and the box's torch is the one under test), and so said.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import PatchlaneError, UsageError
from ..exit_codes import ExitCode
from ..files import read_regular
from .matrix import MatrixSet

__all__ = ["MANIFEST", "PLATFORMS", "SUPPORT", "Wheelhouse", "WheelhouseDownloadError",
           "WheelhouseError", "find_links", "load", "prepare"]

MANIFEST = "wheelhouse.json"
SCHEMA = 1
PLATFORMS = ("manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux_2_24_x86_64",
             "manylinux_2_27_x86_64", "manylinux_2_28_x86_64", "manylinux_2_31_x86_64",
             "manylinux_2_34_x86_64", "manylinux_2_35_x86_64", "manylinux_2_39_x86_64")
"""Linux x86-64 with glibc 2.17 or newer: what NGC and the H100/H200 images run. pip matches a
platform tag exactly, so each manylinux level a wheel may be published for is named."""
SUPPORT = ("wrapt", "packaging", "pyyaml", "requests", "filelock",
           "six", "regex", "pydantic", "psutil")
"""patchlane's own dependencies, and what ``megatron.training`` imports beyond megatron-core
(the strict-load reproducer saves and loads through it). Downloaded with their dependencies."""
BOX_OWN = ("torch", "triton", "numpy")
"""Never downloaded: the GPU box's own builds are what the check is about."""
BENCHMARKS = (
    ("bench_dsa_streamed_fn.py", "megatron-core", "each"),
    ("bench_flce.py", "liger-kernel", "newest"),
)
"""GPU benchmarks the check runs, each beside the releases of one distribution that the sets
install: each of them (the DSA scores: 0.16's method and 0.17+'s function are two targets), or
the newest (FLCE: compared with the fixed liger-kernel release)."""


class WheelhouseError(UsageError):
    """A wheelhouse folder that cannot be used as asked (missing, malformed, or without a set
    the command names)."""


class WheelhouseDownloadError(PatchlaneError):
    """The package index refused or could not serve a wheel the wheelhouse needs."""

    exit_code = ExitCode.UPSTREAM_UNREACHABLE


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
    """Matrix set name -> why it is not in the wheelhouse."""
    benchmarks: tuple[dict[str, Any], ...] = ()
    """``{"script": ..., "install": [specs]}``: what the GPU check runs, beside what."""
    hashes: dict[str, str] = field(default_factory=dict)
    """Wheel file name -> ``sha256:<hex>`` of every wheel in the folder, as downloaded:
    checked by :func:`load` before anything is installed from it."""

    def as_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "python": self.python, "platforms": list(self.platforms),
                "sets": {k: list(v) for k, v in self.sets.items()}, "project": self.project,
                "support": list(self.support), "skipped": dict(self.skipped),
                "benchmarks": list(self.benchmarks), "hashes": dict(sorted(self.hashes.items())),
                "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def _sha256(path: Path) -> str:
    import hashlib

    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return "sha256:" + digest.hexdigest()


def _trusted(root: Path, path: Path, data: dict[str, Any], fix: str) -> dict[str, str]:
    """The wheelhouse's recorded hashes, once the folder is trusted as the release cache is
    (only this user or root can write it) and every wheel in it is one it recorded, unchanged:
    a release installed from it is kept in the release cache and reused by later runs."""
    from ..private_files import shared

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
    unknown = sorted(p.name for p in root.glob("*.whl") if p.name not in hashes)
    if unknown:
        raise WheelhouseError(f"wheelhouse {root}: {unknown[0]} is no wheel it recorded "
                              f"({len(unknown)} such); {fix}")
    changed = [name for name, value in sorted(hashes.items())
               if (root / name).is_file() and _sha256(root / name) != value]
    if changed:
        raise WheelhouseError(f"wheelhouse {root}: {changed[0]} is not the wheel it recorded "
                              f"(sha256 differs; {len(changed)} such); {fix}")
    return dict(hashes)


def find_links(root: Path) -> list[str]:
    """pip arguments that install from ``root`` and nothing else."""
    return ["--no-index", "--find-links", str(root)]


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

    wrong = {key: data[key] for key, ok in (
        ("python", isinstance(data["python"], str) and bool(data["python"])),
        ("platforms", isinstance(data["platforms"], list)
         and all(isinstance(p, str) for p in data["platforms"])),
        ("project", names(data["project"])),
        ("support", isinstance(data["support"], list)
         and all(names(s) for s in data["support"])),
        ("skipped", isinstance(data.get("skipped") or {}, dict)),
        ("benchmarks", isinstance(data.get("benchmarks") or [], list)),
    ) if not ok and key in data}
    if wrong:
        key, value = next(iter(wrong.items()))
        raise WheelhouseError(f"{path}: {key}: found {value!r}, expected "
                              + {"python": "the interpreter, e.g. \"3.12\"",
                                 "platforms": "a list of platform tags",
                                 "project": "the patchlane wheel's file name",
                                 "support": "a list of wheel file names in the folder",
                                 "skipped": "an object", "benchmarks": "a list"}[key]
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
                      tuple(data.get("benchmarks") or ()), hashes)


def _target_args(python: str, platforms: Sequence[str]) -> list[str]:
    """pip download's cross-target arguments; none when the target is this interpreter and
    platform (pip then picks what this machine runs)."""
    if python == f"{sys.version_info.major}.{sys.version_info.minor}" and not platforms:
        return []
    args = ["--only-binary=:all:", "--python-version", python, "--implementation", "cp",
            "--abi", f"cp{python.replace('.', '')}"]
    for platform in platforms:
        args += ["--platform", platform]
    return args


def _pip(args: list[str], what: str, log: Callable[[str], None]) -> None:
    cmd = [sys.executable, "-m", "pip", *args]
    log("$ " + " ".join(cmd))
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        tail = "\n".join((out.stderr or out.stdout).strip().splitlines()[-8:])
        raise WheelhouseDownloadError(f"{what}: pip exited {out.returncode}:\n{tail}")


def _new_files(root: Path, before: set[str]) -> list[str]:
    return sorted(p.name for p in root.glob("*.whl") if p.name not in before)


def prepare(out: Path, sets: Sequence[MatrixSet], *, python: str,
            platforms: Sequence[str], project_root: Path | None,
            constraints: Path | None, matrix_file: Path,
            log: Callable[[str], None] = print) -> Wheelhouse:
    """Download into ``out`` what the GPU check needs (see the module docstring)."""
    out.mkdir(parents=True, exist_ok=True)
    target = _target_args(python, platforms)
    pins = ["-c", str(constraints)] if constraints is not None else []
    # patchlane's own wheel: built from the checkout (hatchling via pip's build isolation)
    if project_root is None:
        raise WheelhouseError("patchlane wheelhouse runs from a checkout of patchlane (its "
                              "wheel is built from it); fix: run it there")
    before = {p.name for p in out.glob("*.whl")}
    _pip(["wheel", "--quiet", "--no-deps", "--wheel-dir", str(out), str(project_root)],
         "patchlane's own wheel", log)
    project = [n for n in _new_files(out, before) if n.startswith("patchlane-")] or sorted(
        p.name for p in out.glob("patchlane-*.whl"))
    if not project:
        raise WheelhouseDownloadError(f"pip built no patchlane wheel into {out}")
    before = {p.name for p in out.glob("*.whl")}
    _pip(["download", "--quiet", "--dest", str(out), *target, *pins, *SUPPORT],
         "support wheels", log)
    support = [n for n in _new_files(out, before)
               if n.split("-")[0].lower().replace("_", "-") not in BOX_OWN]
    chosen: dict[str, tuple[str, ...]] = {}
    skipped: dict[str, str] = {}
    for matrix_set in sets:
        if matrix_set.deps:
            skipped[matrix_set.name] = (f"installs {', '.join(matrix_set.deps)} with its "
                                        "dependencies (a torch build: the box's own is the one "
                                        "under test)")
            continue
        if matrix_set.python and python not in matrix_set.python:
            skipped[matrix_set.name] = f"runs on Python {', '.join(matrix_set.python)} only"
            continue
        _pip(["download", "--quiet", "--no-deps", "--dest", str(out), *target,
              *matrix_set.install], f"matrix set {matrix_set.name}", log)
        chosen[matrix_set.name] = matrix_set.install
    from packaging.version import Version

    benchmarks = []
    for script, dist, which in BENCHMARKS:
        releases = sorted({spec for specs in chosen.values() for spec in specs
                           if spec.split("==")[0] == dist},
                          key=lambda spec: Version(spec.split("==")[1]), reverse=True)
        for spec in releases if which == "each" else releases[:1]:
            benchmarks.append({"script": script, "install": [spec]})
    house = Wheelhouse(out, python, tuple(platforms), chosen, project[-1], tuple(support),
                       skipped, tuple(benchmarks),
                       {p.name: _sha256(p) for p in sorted(out.glob("*.whl"))})
    shutil.copy2(matrix_file, out / "matrix.yaml")
    scripts = sorted({str(b["script"]) for b in benchmarks})
    if scripts and (project_root / "benchmarks").is_dir():
        (out / "benchmarks").mkdir(exist_ok=True)
        for name in scripts:
            shutil.copy2(project_root / "benchmarks" / name, out / "benchmarks" / name)
    gpu_check = project_root / "scripts" / "gpu-check"
    if gpu_check.is_file():
        shutil.copy2(gpu_check, out / "gpu-check")
    (out / MANIFEST).write_text(json.dumps(house.as_dict(), indent=1) + "\n", encoding="utf-8")
    return house
