"""Upstream releases installed side by side: ``pip install --no-deps --target`` into a cache
directory per interpreter, put first on ``PYTHONPATH`` for the processes that must see that
release instead of the environment's own (a release-matrix set, a ledger reproducer's bad side,
a bisection step). No virtual environment per release: a release costs a download.

The cache holds code that ``radar``, ``bisect`` and ``matrix`` import, so it is trusted only as
the registry cache is (:mod:`patchlane.common.private_files`): the cache directory and every
directory above it must belong to this user (or root) and be writable by no one else, or
nothing is installed there nor reused from there. Each install records its content
(``.complete``: the SHA-256 of every file pip wrote, bytecode caches aside), and a reuse
re-reads it: an install changed since, or a folder with a bare marker from elsewhere, is
installed afresh, never run.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from typing import Any

from ..common.errors import UsageError

__all__ = [
    "RELEASE_SPEC",
    "ReleaseCacheError",
    "default_cache",
    "first_on_path",
    "install_dir",
    "installed_content",
    "record_install",
    "stop_installs",
    "with_releases",
]


class ReleaseCacheError(UsageError):
    """A release cache directory other users could write: its code would run as whoever runs
    ``radar``, ``bisect`` or ``matrix``."""


MARKER = ".complete"
_MARKER_SCHEMA = 2


def _files(target: Path) -> list[tuple[str, Path]]:
    """Every file under ``target`` but the marker and bytecode caches (Python writes those
    beside what it imports), by relative path."""
    out = []
    for path in target.rglob("*"):
        relative = path.relative_to(target)
        if relative.parts[0] == MARKER or "__pycache__" in relative.parts:
            continue
        if path.is_symlink() or path.is_file():
            out.append((relative.as_posix(), path))
    return sorted(out)


def installed_content(target: Path) -> dict[str, str]:
    """``relative path -> sha256`` of every file under ``target`` (a link: where it points):
    what an install held when it was recorded."""
    out: dict[str, str] = {}
    for relative, path in _files(target):
        if path.is_symlink():
            out[relative] = "symlink:" + os.readlink(path)
            continue
        digest = hashlib.sha256()
        with path.open("rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
        out[relative] = digest.hexdigest()
    return out


def installed_stamps(target: Path) -> dict[str, list[int]]:
    """``relative path -> [size, mtime_ns, ctime_ns]`` of every file under ``target``: what
    tells, without reading a byte, that nothing was written since the install was recorded.
    The kernel sets ``ctime`` on every write, rename or mode change and no tool of this user
    can set it back, so an install changed since (or planted to look recorded) differs here;
    re-hashing a 5 GB torch on every reuse would cost more than the case it serves."""
    out: dict[str, list[int]] = {}
    for relative, path in _files(target):
        info = path.lstat()
        out[relative] = [info.st_size, info.st_mtime_ns, info.st_ctime_ns]
    return out


def _recorded(target: Path, spec: str) -> bool:
    """Whether ``target`` holds ``spec`` exactly as its marker recorded it."""
    try:
        data = json.loads((target / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return (isinstance(data, dict) and data.get("schema") == _MARKER_SCHEMA
            and data.get("spec") == spec and data.get("stamps") == installed_stamps(target))


def _private(cache: Path) -> None:
    from ..common.private_files import shared

    cache.mkdir(parents=True, exist_ok=True, mode=0o700)
    real = os.path.realpath(cache)
    why = shared(real)
    if why is not None:
        raise ReleaseCacheError(
            f"release cache {cache}: {why}; its releases are imported by radar, bisect and "
            "matrix, so a cache others can write is not used; fix: point "
            "PATCHLANE_RELEASE_CACHE (or --cache) at a directory only you can write")

RELEASE_SPEC = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*==[A-Za-z0-9.+!-]+$")
"""One exact release: ``NAME==VERSION``."""


def default_cache() -> Path:
    """``PATCHLANE_RELEASE_CACHE``, else ``$XDG_CACHE_HOME/patchlane/releases`` (``~/.cache``)."""
    from ..deciding.controls import ToolSettings

    given = ToolSettings.from_env().release_cache
    if given is not None:
        return given
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "patchlane" / "releases"


def install_dir(spec: str, cache: Path, deps: bool = False, *, log: Path | None = None,
                wheelhouse: Path | None = None) -> Path:
    """The directory holding ``spec`` (``NAME==VERSION``) installed for this interpreter,
    installed once. ``log``: pip's output goes to this file instead of this process's stdout
    and stderr (a caller printing JSON on stdout must not get pip's lines in it).
    ``wheelhouse`` (else ``PATCHLANE_WHEELHOUSE``): install from that folder only
    (``--no-index``), as an air-gapped box must; a release it does not hold raises
    :class:`~patchlane.sweep.wheelhouse_manifest.NotInWheelhouse` before pip runs. A failed
    install raises ``subprocess.CalledProcessError``."""
    from .wheelhouse_manifest import NotInWheelhouse, in_use

    house = in_use(wheelhouse)
    if house is not None and not house.holds(spec):
        raise NotInWheelhouse(spec, house.root)
    # One directory per interpreter: a wheel installed for cp311 is not the cp312 one.
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    _private(cache / tag)
    target = cache / tag / (spec.replace("==", "-") + ("+deps" if deps else ""))
    from filelock import FileLock

    # Two commands sharing the cache (a matrix beside a bisect, or two test sessions) must not
    # install the same release into the same folder at once: one installs, the other waits
    # and then finds it recorded.
    with FileLock(str(target.with_name(f".{target.name}.lock"))):
        return _install_locked(spec, target, deps, log, house.root if house else None)


def _install_locked(spec: str, target: Path, deps: bool, log: Path | None,
                    wheelhouse: Path | None) -> Path:
    if target.exists():
        from ..common.private_files import shared

        why = shared(os.path.realpath(target))
        if why is not None:
            raise ReleaseCacheError(
                f"release {target}: {why}; an install others could have written is neither "
                "reused nor replaced; fix: remove it, or point PATCHLANE_RELEASE_CACHE (or "
                "--cache) at a directory only you can write")
    if not _recorded(target, spec):
        # What an interrupted or failed install left, or an install changed since (or planted
        # with a marker of its own), is no release: pip --target would keep those files
        # rather than replace them.
        shutil.rmtree(target, ignore_errors=True)
        from .wheelhouse_files import pip_env
        from .wheelhouse_manifest import find_links

        offline = find_links(wheelhouse) if wheelhouse else []
        # from the wheelhouse alone: none of pip's own settings (a machine's find-links)
        env: dict[str, Any] = {"env": pip_env(os.environ)} if wheelhouse else {}
        # --no-compile: pip's own compile writes bytecode Python re-validates by timestamp;
        # _compile writes the hash-checked kind after it. --no-cache-dir: this folder is the
        # cache of this release; pip's would keep its wheels a second time, for good (2.8 GB for
        # torch 2.15.0's CUDA build with its dependencies, on top of the 5.3 GB installed here).
        cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--no-compile", "--no-cache-dir",
               *([] if deps else ["--no-deps"]), "--disable-pip-version-check", *offline,
               "--target", str(target), spec]
        if log is None:
            _step(cmd, **env)
        else:
            log.parent.mkdir(parents=True, exist_ok=True)
            with log.open("wb") as out:
                _step(cmd, stdout=out, stderr=subprocess.STDOUT, **env)
        _compile(target, log)
        record_install(target, spec)
    return target


def _compile(target: Path, log: Path | None) -> None:
    """Byte-compile what pip installed, once. Where ``PYTHONDONTWRITEBYTECODE`` is set (CI
    images and many containers set it) Python writes no bytecode on import, so without this
    every rank of every case compiles what it imports afresh. Measured: a rank's
    ``import torch, torch._dynamo`` from a torch 2.15.0 install took 9.3 to 9.9 s from source
    and 3.9 to 4.8 s compiled, against 15 s once to compile it with its dependencies
    (megatron-core's import gains 0.4 to 0.7 s a rank).

    ``checked-hash``: Python uses a ``.pyc`` only while it matches the hash of its source, so
    what runs is the source the marker records, whatever else is written into ``__pycache__``
    later. A file that does not compile is left to fail where it is imported, as it would
    without bytecode: compiling is a saving, never a condition of the install. A compile
    stopped by a signal (:func:`stop_installs`) stops the install as a stopped pip does."""
    cmd = [sys.executable, "-m", "compileall", "-q", "-j", "0",
           "--invalidation-mode", "checked-hash", str(target)]
    if log is None:
        code = _step(cmd, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    else:
        with log.open("ab") as out:
            code = _step(cmd, check=False, stdout=out, stderr=subprocess.STDOUT)
    if code < 0:
        raise subprocess.CalledProcessError(code, cmd)


_RUNNING: set[subprocess.Popen[bytes]] = set()
_RUNNING_LOCK = threading.Lock()


def _step(cmd: list[str], check: bool = True, **streams: Any) -> int:
    """Run one step of an install (pip, then compileall), known to :func:`stop_installs`
    while it runs; its exit status (negative: the signal that ended it), CalledProcessError
    on failure when ``check``."""
    proc = subprocess.Popen(cmd, **streams)
    with _RUNNING_LOCK:
        _RUNNING.add(proc)
    try:
        code = proc.wait()
    finally:
        with _RUNNING_LOCK:
            _RUNNING.discard(proc)
    if code != 0 and check:
        raise subprocess.CalledProcessError(code, cmd)
    return code


def stop_installs() -> None:
    """Terminate every install step (pip, compileall) this process is running (Ctrl-C or
    SIGTERM to a command that installs releases: a slow download must not outlive it); the
    install fails and its folder, never recorded, is not reused."""
    with _RUNNING_LOCK:
        running = list(_RUNNING)
    for proc in running:
        with contextlib.suppress(OSError):
            proc.terminate()


def record_install(target: Path, spec: str) -> None:
    """Mark ``target`` as holding ``spec``, with the content it holds now: what
    :func:`install_dir` reuses later, and only while that content is unchanged."""
    marker = {"schema": _MARKER_SCHEMA, "spec": spec, "files": installed_content(target),
              "stamps": installed_stamps(target)}
    (target / MARKER).write_text(json.dumps(marker, sort_keys=True), encoding="utf-8")


def with_releases(env: Mapping[str, str], specs: Iterable[str],
                  cache: Path | None = None, deps: Collection[str] = ()) -> dict[str, str]:
    """``env`` with each of ``specs`` installed and first on ``PYTHONPATH``; those also in
    ``deps`` with their dependencies."""
    return first_on_path(env, [str(install_dir(spec, cache or default_cache(),
                                               deps=spec in deps)) for spec in specs])


def first_on_path(env: Mapping[str, str], folders: Iterable[str]) -> dict[str, str]:
    """``env`` with ``folders`` first on its ``PYTHONPATH``, in their order."""
    out = dict(env)
    out["PYTHONPATH"] = os.pathsep.join([*folders, *filter(None, [env.get("PYTHONPATH")])])
    return out
