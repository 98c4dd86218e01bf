"""``patchlane run [--registry FILE] [--strict] [--reports DIR] -- CMD ARGS...``: the
environment that activates patchlane in every Python process of CMD, then ``exec`` of CMD (it
takes this process's place: signals from ``torchrun``, ``srun`` or a scheduler reach it
directly and its exit status is the job's)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from .activate import REPORTS_ENV
from .job import RUN_ID_ENV, new_run_id

__all__ = ["BOOTSTRAP", "launch_env", "run_command"]

BOOTSTRAP = Path(__file__).resolve().parent / "bootstrap"


def launch_env(env: Mapping[str, str], *, registry: Path | None = None, strict: bool = False,
               reports: Path | None = None) -> dict[str, str]:
    """``env`` with the bootstrap folder first on ``PYTHONPATH`` (once) and the options as the
    lane's own variables, absolute paths so ranks started in other directories agree."""
    out = dict(env)
    parts = [p for p in out.get("PYTHONPATH", "").split(os.pathsep)
             if p and Path(p).resolve() != BOOTSTRAP]
    out["PYTHONPATH"] = os.pathsep.join([str(BOOTSTRAP), *parts])
    if registry is not None:
        out["PATCHLANE_REGISTRY"] = os.pathsep.join(
            [str(registry.resolve()), *[p for p in out.get("PATCHLANE_REGISTRY", "").split(
                os.pathsep) if p and Path(p).resolve() != registry.resolve()]])
    if strict:
        out["PATCHLANE_STRICT"] = "1"
    if reports is not None:
        out[REPORTS_ENV] = str(reports.resolve())
    out[RUN_ID_ENV] = new_run_id()  # one per invocation: the job its reports belong to
    return out


def run_command(command: Sequence[str], *, registry: Path | None = None, strict: bool = False,
                reports: Path | None = None) -> int:
    """Exec ``command`` with :func:`launch_env`; returns only if it cannot be started."""
    if not command:
        raise ValueError("patchlane run: no command; usage: patchlane run [options] -- CMD ...")
    if registry is not None and not registry.is_file():
        raise FileNotFoundError(f"patchlane run: --registry {registry}: no such file; fix: "
                                "give the path of a registry.yaml")
    env = launch_env(os.environ, registry=registry, strict=strict, reports=reports)
    os.execvpe(command[0], list(command), env)
    raise AssertionError("unreachable")  # pragma: no cover
