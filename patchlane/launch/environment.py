"""The environment ``patchlane run`` gives its command: the bootstrap folder first on
``PYTHONPATH`` and the options as the startup's own variables.

Light on purpose (``os`` only): the fast ``patchlane run`` (:mod:`patchlane.cli.entry`) builds
it and execs without loading the rest of the command line or the startup.
"""

import os

from .activate import REPORTS_ENV, is_bootstrap
from .job import RUN_ID_ENV, new_run_id

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

__all__ = ["BOOTSTRAP", "EVIDENCE_ENV", "launch_env"]

BOOTSTRAP = os.path.join(os.path.dirname(os.path.realpath(__file__)), "bootstrap")
"""The folder whose ``sitecustomize.py`` activates patchlane in each interpreter."""
EVIDENCE_ENV = "PATCHLANE_EVIDENCE"


def _absolute(path: "str | os.PathLike[str]") -> str:
    # What Path.resolve() answers (symlinks resolved as far as the path exists), from os.path
    return os.path.realpath(os.fspath(path))


def launch_env(env: "Mapping[str, str]", *,
               registry: "Sequence[str | os.PathLike[str]] | None" = None,
               strict: bool = False, reports: "str | os.PathLike[str] | None" = None,
               evidence: "str | os.PathLike[str] | None" = None) -> dict[str, str]:
    """``env`` with the bootstrap folder first on ``PYTHONPATH`` (once) and the options as the
    startup's own variables, absolute paths so ranks started in other directories agree.
    ``registry``: each ``--registry`` file, in the order given, before those
    ``PATCHLANE_REGISTRY`` names already (each once)."""
    out = dict(env)
    out["PYTHONPATH"] = _pythonpath(out.get("PYTHONPATH", ""))
    if registry:
        given = list(dict.fromkeys(_absolute(path) for path in registry))
        out["PATCHLANE_REGISTRY"] = os.pathsep.join(
            [*given, *[p for p in out.get("PATCHLANE_REGISTRY", "").split(os.pathsep)
                       if p and _absolute(p) not in given]])
    if strict:
        out["PATCHLANE_STRICT"] = "1"
    if reports is not None:
        out[REPORTS_ENV] = _absolute(reports)
    out[RUN_ID_ENV] = new_run_id()  # one per invocation: the job its reports belong to
    if evidence is not None:  # each rank's line says whether its overlays were proven there
        out[EVIDENCE_ENV] = _absolute(evidence)
    return out


def _pythonpath(user: str) -> str:
    """The bootstrap folder, then the user's ``PYTHONPATH`` exactly as it was.

    An empty element is not noise: Python reads it as the current directory, so a script
    that imports a module beside where it is started from works only while that element
    stays. An unset or empty ``PYTHONPATH`` adds nothing (Python ignores an empty one), so
    none is made up here: ``BOOTSTRAP:`` would put the current directory on ``sys.path``
    where it was not. An earlier bootstrap folder (a nested ``patchlane run``) is dropped,
    so it stays first and once."""
    if not user:
        return BOOTSTRAP
    kept = [p for p in user.split(os.pathsep) if not p or not is_bootstrap(p)]
    return os.pathsep.join([BOOTSTRAP, *kept]) if kept else BOOTSTRAP

