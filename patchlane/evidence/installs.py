"""Upstream releases installed side by side: ``pip install --no-deps --target`` into a cache
directory per interpreter, put first on ``PYTHONPATH`` for the processes that must see that
release instead of the environment's own (a release-matrix set, a ledger reproducer's bad side,
a bisection step). No virtual environment per release: a release costs a download.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path

__all__ = ["RELEASE_SPEC", "default_cache", "install_dir", "with_releases"]

RELEASE_SPEC = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*==[A-Za-z0-9.+!-]+$")
"""One exact release: ``NAME==VERSION``."""


def default_cache() -> Path:
    """``PATCHLANE_RELEASE_CACHE``, else ``$XDG_CACHE_HOME/patchlane/releases`` (``~/.cache``)."""
    from ..controls import ToolSettings

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
    ``wheelhouse``: install from that folder only (``--no-index``), as an air-gapped box must.
    A failed install raises ``subprocess.CalledProcessError``."""
    # One directory per interpreter: a wheel installed for cp311 is not the cp312 one.
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    target = cache / tag / (spec.replace("==", "-") + ("+deps" if deps else ""))
    if not (target / ".complete").exists():
        # What an interrupted or failed install left is no release: pip --target would keep
        # those files rather than replace them.
        shutil.rmtree(target, ignore_errors=True)
        offline = ["--no-index", "--find-links", str(wheelhouse)] if wheelhouse else []
        cmd = [sys.executable, "-m", "pip", "install", "--quiet", *([] if deps else ["--no-deps"]),
               "--disable-pip-version-check", *offline, "--target", str(target), spec]
        if log is None:
            subprocess.run(cmd, check=True)
        else:
            log.parent.mkdir(parents=True, exist_ok=True)
            with log.open("wb") as out:
                subprocess.run(cmd, check=True, stdout=out, stderr=subprocess.STDOUT)
        (target / ".complete").write_text("ok\n")
    return target


def with_releases(env: Mapping[str, str], specs: Iterable[str],
                  cache: Path | None = None, deps: Collection[str] = ()) -> dict[str, str]:
    """``env`` with each of ``specs`` installed and first on ``PYTHONPATH``; those also in
    ``deps`` with their dependencies."""
    paths = [str(install_dir(spec, cache or default_cache(), deps=spec in deps))
             for spec in specs]
    out = dict(env)
    out["PYTHONPATH"] = os.pathsep.join([*paths, *filter(None, [env.get("PYTHONPATH")])])
    return out
