"""A wheelhouse: everything a night needs on a machine with no package index, prepared on one
that reaches it (``patchlane wheelhouse``), from a checkout or from the installed package.

One flat folder of wheels for a target interpreter and platform (``cp312``, manylinux x86_64 by
default; several interpreters: one such folder each, ``DIR/py3.11``, ``DIR/py3.12``):

- patchlane's own wheel (built from the checkout, or packed again from the installed package:
  :mod:`patchlane.releases.own_wheel`);
- the ``support`` wheels: what patchlane and megatron's training code import that a CUDA image
  may lack (pinned by ``constraints/`` where the checkout has them);
- the ``environment``: each target distribution of the registry (the box's torch, triton and
  numpy aside) at the release this environment runs, for a night's environment;
- the ``releases`` installed side by side: every release the chosen matrix sets install, and
  the bad side of each ledger reproducer (``BAD_SIDE``), each without its dependencies unless
  the reproducer asks for them.

A release that would bring a torch build (gigabytes; the box's own torch is the one under test)
is left out, and said so in ``skipped``, unless ``--torch-builds`` asks for it: a night then
reports those rows ``skipped: needs X, not in the wheelhouse``, never ``error``. Beside the
wheels: ``wheelhouse.json`` (read and trusted by :mod:`patchlane.sweep.wheelhouse_manifest`),
``matrix.yaml`` (the sets), ``benchmarks/`` and ``gpu-check`` when the checkout has them.

Offline, ``patchlane sweep --wheelhouse DIR`` and ``patchlane matrix --wheelhouse DIR`` install
every release from it with ``pip --no-index --find-links`` and nothing else.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from ..common.errors import PatchlaneError
from ..common.exit_codes import ExitCode
from ..common.versions import parse_version
from ..registry.records import Registry
from ..sweep.wheelhouse_files import sha256
from ..sweep.wheelhouse_manifest import MANIFEST, Wheelhouse, interpreter_folder
from .matrix import MatrixSet

__all__ = ["BOX_OWN", "PLATFORMS", "SUPPORT", "WheelhouseDownloadError", "prepare",
           "prepare_each"]

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


class WheelhouseDownloadError(PatchlaneError):
    """The package index refused or could not serve a wheel the wheelhouse needs."""

    exit_code = ExitCode.UPSTREAM_UNREACHABLE


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


def _download(out: Path, args: list[str], what: str, log: Callable[[str], None]) -> list[str]:
    """``pip download ARGS`` for ``out``: the names of every wheel the step needs, whether or
    not ``out`` held it already. pip downloads into a folder of its own, then each wheel
    replaces its namesake in ``out``: a refresh into last night's folder (what the radar's cron
    does) would otherwise find nothing new and record no wheel at all."""
    scratch = Path(tempfile.mkdtemp(prefix=".download-", dir=out))
    try:
        _pip(["download", "--quiet", "--dest", str(scratch), *args], what, log)
        names = sorted(p.name for p in scratch.glob("*.whl"))
        for name in names:
            os.replace(scratch / name, out / name)
        return names
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _own_wheel(out: Path, project_root: Path | None,
               log: Callable[[str], None]) -> str:
    """patchlane's own wheel in ``out``: built from the checkout (hatchling via pip's build
    isolation), else packed again from the installed package."""
    if project_root is None:
        from .own_wheel import pack_installed

        path = pack_installed(out)
        log(f"patchlane's own wheel packed from the installed package: {path.name}")
        return path.name
    before = {p.name for p in out.glob("*.whl")}
    _pip(["wheel", "--quiet", "--no-deps", "--wheel-dir", str(out), str(project_root)],
         "patchlane's own wheel", log)
    project = [n for n in _new_files(out, before) if n.startswith("patchlane-")] or sorted(
        p.name for p in out.glob("patchlane-*.whl"))
    if not project:
        raise WheelhouseDownloadError(f"pip built no patchlane wheel into {out}")
    return project[-1]


def _name(spec: str) -> str:
    """A release spec's distribution, as PEP 503 normalizes it."""
    return canonicalize_name(spec.partition("==")[0].strip())


def bad_sides(registry: Registry) -> dict[str, tuple[bool, list[str]]]:
    """Each ledger reproducer's bad-side release -> (installed with its dependencies, the
    entries whose case without them installs it)."""
    from ..sweep.reproduce import read_spec

    out: dict[str, tuple[bool, list[str]]] = {}
    for entry in registry.entries:
        if entry.reproducer is None or not entry.reproducer.is_file():
            continue
        spec = read_spec(entry)
        for release in spec.bad_side:
            deps, ids = out.get(release, (False, []))
            out[release] = (deps or release in spec.bad_side_deps, [*ids, entry.id])
    return out


def _environment(registry: Registry, python: str,
                 chosen: Iterable[str]) -> tuple[list[str], dict[str, str]]:
    """The registry's target distributions at the release a night's environment runs: the one
    installed here (same interpreter), else the newest the chosen sets hold."""
    from importlib import metadata

    here = python == f"{sys.version_info.major}.{sys.version_info.minor}"
    wanted = sorted({canonicalize_name(e.target.distribution) for e in registry.entries
                     if e.target.distribution} - set(BOX_OWN))
    specs, skipped = [], {}
    for dist in wanted:
        version = None
        if here:
            try:
                version = metadata.version(dist)
            except metadata.PackageNotFoundError:
                version = None
        if version is None:  # the newest release a chosen set holds (an unreadable one: none)
            held = [(parsed, s) for s in chosen if _name(s) == dist
                    for parsed in [parse_version(s.partition("==")[2])] if parsed is not None]
            version = max(held)[1].partition("==")[2] if held else None
        if version is None:
            skipped[f"environment {dist}"] = (f"not installed here and no chosen set holds a "
                                              f"release of it for Python {python}; fix: "
                                              f"install it here, or --set a set that does")
        else:
            specs.append(f"{dist}=={version}")
    return specs, skipped


def _kit_file(name: str, project_root: Path | None) -> Path | None:
    """A file the wheelhouse carries beside its wheels (``night``, ``gpu-check``, a benchmark):
    the checkout's (``scripts/``, ``benchmarks/``), else the one the wheel ships
    (``_bundle/kit/``)."""
    if project_root is not None:
        path = project_root / (name if "/" in name else f"scripts/{name}")
    else:
        from ..startup import default_registry_path

        path = default_registry_path().parent / "kit" / name
    return path if path.is_file() else None


def _held_from_before(out: Path) -> None:
    """Refuse to prepare into ``out`` while it holds a release file the last prepare did not
    record, or one it recorded that has changed since. A prepare records the hash of every
    wheel the folder holds at its end, and ``pip download`` keeps a file already there under
    the name it would download: a wheel planted between nights would be installed and recorded
    as trusted. What the last prepare recorded, unchanged, may stay; so may a wheel it recorded
    that is gone (downloaded again if a step needs it)."""
    from ..sweep.wheelhouse_files import takes, unfit
    from ..sweep.wheelhouse_manifest import WheelhouseError

    if not out.is_dir() or not any(takes(p.name) for p in out.iterdir()):
        return
    recorded = _recorded(out)
    there = {name: value for name, value in recorded.items() if (out / name).is_file()}
    why = unfit(out, there, "fix: remove it from the folder; the prepare downloads it again")
    if why is not None:
        raise WheelhouseError(f"wheelhouse {out}: {why}. A prepare records every wheel the "
                              "folder holds as trusted, so it refuses one it did not put there")


_PENDING = ".prepare-unfinished.json"
"""What a prepare that did not finish had written into the folder (name -> sha256): its own
downloads, trusted by the next prepare as the manifest's wheels are."""


def _recorded(out: Path) -> dict[str, str]:
    """The hashes the last prepare recorded (its manifest), with those of a prepare that did
    not finish since (:data:`_PENDING`); nothing for a file that cannot be read."""
    recorded: dict[str, str] = {}
    for name in (MANIFEST, _PENDING):
        try:
            data = json.loads((out / name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # none (or unreadable): nothing in the folder was recorded by it
        hashes = data.get("hashes") if isinstance(data, dict) else None
        if isinstance(hashes, dict):
            recorded.update({k: v for k, v in hashes.items()
                             if isinstance(k, str) and isinstance(v, str)})
    return recorded


def _note_unfinished(out: Path, before: Mapping[str, str]) -> None:
    """A prepare stopped half-way (the index refused, Ctrl-C): record what it wrote, so the
    next prepare trusts its own downloads rather than refusing every night after until the
    folder is cleaned by hand."""
    from ..sweep.wheelhouse_files import takes

    try:
        hashes = {p.name: sha256(p) for p in sorted(out.iterdir())
                  if takes(p.name) and p.is_file()}  # each wheel read once: gigabytes of them
        written = {name: value for name, value in hashes.items() if before.get(name) != value}
        unfinished = {**_recorded(out), **written}
        (out / _PENDING).write_text(json.dumps({"hashes": unfinished}, indent=1) + "\n",
                                    encoding="utf-8")
    except OSError:
        pass  # the folder refuses: the next prepare names what it cannot trust


def prepare(out: Path, sets: Sequence[MatrixSet], *, python: str,
            platforms: Sequence[str], project_root: Path | None,
            constraints_for: Callable[[str], Path | None], matrix_file: Path,
            registry: Registry | None = None,
            torch_builds: bool = False, log: Callable[[str], None] = print) -> Wheelhouse:
    """Download into ``out`` what a night needs (see the module docstring)."""
    _held_from_before(out)
    out.mkdir(parents=True, exist_ok=True)
    before = _recorded(out)
    try:
        house = _prepare(out, sets, python=python, platforms=platforms,
                         project_root=project_root, constraints_for=constraints_for,
                         matrix_file=matrix_file, registry=registry, torch_builds=torch_builds,
                         log=log)
    except BaseException:
        _note_unfinished(out, before)
        raise
    (out / _PENDING).unlink(missing_ok=True)
    return house


def _prepare(out: Path, sets: Sequence[MatrixSet], *, python: str,
             platforms: Sequence[str], project_root: Path | None,
             constraints_for: Callable[[str], Path | None], matrix_file: Path,
             registry: Registry | None, torch_builds: bool,
             log: Callable[[str], None]) -> Wheelhouse:
    target = _target_args(python, platforms)
    constraints = constraints_for(python)
    pins = ["-c", str(constraints)] if constraints is not None else []
    project = _own_wheel(out, project_root, log)
    support = [n for n in _download(out, [*target, *pins, *SUPPORT], "support wheels", log)
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
    releases = sorted({s for specs in chosen.values() for s in specs})
    environment: list[str] = []
    if registry is not None:
        for release, (deps, ids) in sorted(bad_sides(registry).items()):
            if deps and _name(release) in BOX_OWN and not torch_builds:
                skipped[release] = (f"the bad side of {', '.join(ids)}: installs {release} "
                                    "with its dependencies (a torch build, gigabytes); add it "
                                    "with --torch-builds")
                continue
            _pip(["download", "--quiet", *([] if deps else ["--no-deps"]), "--dest", str(out),
                  *target, release], f"the bad side of {', '.join(ids)}", log)
            releases.append(release)
        environment, missing = _environment(registry, python, releases)
        skipped.update(missing)
        if environment:
            _pip(["download", "--quiet", "--no-deps", "--dest", str(out), *target,
                  *environment], "the environment's targets", log)
    from packaging.version import Version

    benchmarks = []
    for script, dist, which in BENCHMARKS:
        held = sorted({spec for specs in chosen.values() for spec in specs
                       if spec.split("==")[0] == dist},
                      key=lambda spec: Version(spec.split("==")[1]), reverse=True)
        for spec in held if which == "each" else held[:1]:
            benchmarks.append({"script": script, "install": [spec]})
    house = Wheelhouse(out, python, tuple(platforms), chosen, project, tuple(support),
                       skipped, tuple(benchmarks),
                       {p.name: sha256(p) for p in sorted(out.glob("*.whl"))},
                       tuple(sorted(set(releases))), tuple(environment))
    shutil.copy2(matrix_file, out / "matrix.yaml")
    for name in ("night", "gpu-check", "kit_trust.py",
                 *(f"benchmarks/{b['script']}" for b in benchmarks)):
        source = _kit_file(name, project_root)
        if source is not None:
            (out / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, out / name)
    # the rule kit_trust.py checks the folder with, before patchlane is installed: the
    # package's own modules (standard library only), not a second copy of them
    from ..common import private_files
    from ..sweep import wheelhouse_files

    for rule in (private_files, wheelhouse_files):
        shutil.copy2(str(rule.__file__), out / Path(str(rule.__file__)).name)
    (out / MANIFEST).write_text(json.dumps(house.as_dict(), indent=1) + "\n", encoding="utf-8")
    return house


def prepare_each(out: Path, pythons: Sequence[str], **kwargs: Any) -> dict[str, Wheelhouse]:
    """One wheelhouse per interpreter: ``out`` itself for one, ``out/py3.11`` ... for more (what
    :func:`patchlane.sweep.wheelhouse_manifest.resolve` finds)."""
    if len(pythons) == 1:
        return {pythons[0]: prepare(out, python=pythons[0], **kwargs)}
    houses = {python: prepare(out / interpreter_folder(python), python=python, **kwargs)
              for python in pythons}
    first = out / interpreter_folder(pythons[0])
    if (first / "night").is_file():  # `pythonX.Y DIR/night DIR RUNS` finds its interpreter's
        for name in ("night", "kit_trust.py", "private_files.py",  # folder, and the check
                     "wheelhouse_files.py"):
            shutil.copy2(first / name, out / name)
    return houses
