"""A package patchlane requires but this interpreter cannot import: one line that names it,
the requirement patchlane was installed with, and the command that fixes it, instead of a
traceback from deep inside the first import of a target.

Standard library only (the missing package may be any of the others); the requirement is read
from patchlane's own installed metadata (``Requires-Dist``), the one place it is declared.
"""

from __future__ import annotations

import sys

from .errors import MissingDependencyError

__all__ = ["REQUIRED", "missing_dependency", "say_missing"]

REQUIRED = {"wrapt": "wrapt", "yaml": "PyYAML", "packaging": "packaging",
            "requests": "requests", "filelock": "filelock"}
"""Import name -> distribution, for each package pyproject.toml's ``dependencies`` lists."""


def missing_dependency(error: ImportError) -> MissingDependencyError | None:
    """The error to raise instead of ``error`` when it is one of patchlane's own requirements
    that failed to import; None for anything else (a target's own import error stays as it
    is)."""
    name = (getattr(error, "name", None) or "").partition(".")[0]
    distribution = REQUIRED.get(name)
    if distribution is None:
        return None
    requirement = _requirement(distribution)
    return MissingDependencyError(
        f"patchlane needs {requirement}, which {sys.executable} cannot import ({error}); "
        f"fix: {sys.executable} -m pip install '{requirement}' (or reinstall patchlane with "
        "its dependencies)")


def say_missing(error: ImportError) -> int | None:
    """For a command that ``error`` stopped: one line on stderr naming the requirement it
    failed to import and the fix, and the command's exit code (69); None when it is no
    requirement of patchlane's."""
    missing = missing_dependency(error)
    if missing is None:
        return None
    sys.stderr.write(f"patchlane: error: {missing}\n")
    return int(missing.exit_code)


def _requirement(distribution: str) -> str:
    """``wrapt>=1.14``: as patchlane's installed metadata requires it (the name alone in a
    checkout on ``PYTHONPATH``, which has no metadata)."""
    import re
    from importlib import metadata

    def normal(name: str) -> str:  # PEP 503
        return re.sub(r"[-_.]+", "-", name).lower()

    try:
        requires = metadata.requires("patchlane") or []
    except metadata.PackageNotFoundError:
        return distribution
    for line in requires:
        spec = line.partition(";")[0].replace(" ", "")
        name = re.match(r"[A-Za-z0-9._-]+", spec)
        if name is not None and normal(name.group()) == normal(distribution):
            return spec
    return distribution
