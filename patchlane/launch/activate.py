"""What ``patchlane/launch/bootstrap/sitecustomize.py`` does in each process: activate the
lane, optionally leave a per-process report, then run the ``sitecustomize`` it shadows."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import os
import socket
import sys
import time
from pathlib import Path

__all__ = ["REPORTS_ENV", "activate", "chain"]

REPORTS_ENV = "PATCHLANE_RUN_REPORTS"
"""A folder: each process writes ``patchlane.report()`` there at exit (``patchlane run
--reports DIR``), so a job's ranks can be audited afterwards without touching the script."""


def activate() -> None:
    """After ``import patchlane`` succeeded in a process started by ``patchlane run`` (strict
    mode stops a rejected registry before this, in the bootstrap): arrange the per-process
    report when asked for."""
    import patchlane

    folder = os.environ.get(REPORTS_ENV)
    if folder:
        import atexit

        atexit.register(_write_report, Path(folder), patchlane)


def _write_report(folder: Path, patchlane: object) -> None:
    # At exit, so hits and late decisions are in. Never raises: a report is a by-product.
    try:
        report = patchlane.report()  # type: ignore[attr-defined]
        report["process"] = {
            "host": socket.gethostname(), "pid": os.getpid(), "ppid": os.getppid(),
            "argv": sys.argv,
            "rank": os.environ.get("RANK"), "local_rank": os.environ.get("LOCAL_RANK"),
            "world_size": os.environ.get("WORLD_SIZE"), "at": time.time()}
        folder.mkdir(parents=True, exist_ok=True)
        role = f"rank{report['process']['rank']}" if report["process"]["rank"] else "process"
        path = folder / f"{role}-{socket.gethostname()}-{os.getpid()}.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(report, indent=1, default=str), encoding="utf-8")
        os.replace(tmp, path)
    except Exception as exc:  # pragma: no cover - disk full, folder removed
        sys.stderr.write(f"patchlane run: could not write the process report: {exc}\n")


def chain(here: str) -> None:
    """Run the ``sitecustomize`` that ``here`` (the bootstrap folder) shadows: the next one on
    ``sys.path``, exactly as ``site`` would have run it, under the same module name."""
    here = os.path.realpath(here)
    rest = [p for p in sys.path if os.path.realpath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)
