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

__all__ = ["REPORTS_ENV", "SUMMARY_ENV", "activate", "chain"]

REPORTS_ENV = "PATCHLANE_RUN_REPORTS"
"""A folder: each process writes ``patchlane.report()`` there at exit (``patchlane run
--reports DIR``), so a job's ranks can be audited afterwards without touching the script."""


SUMMARY_ENV = "PATCHLANE_RUN_SUMMARY"
"""``0`` silences the one line each rank prints at exit (default on)."""
_ROOT_MARK = "PATCHLANE_RUN_ROOT"  # the rank identity of the nearest rank root, inherited


def _identity() -> str:
    rank = os.environ.get("RANK") or os.environ.get("SLURM_PROCID")
    return f"rank {rank}" if rank is not None else "main"


def activate() -> None:
    """After ``import patchlane`` succeeded in a process started by ``patchlane run`` (strict
    mode stops a rejected registry before this, in the bootstrap): arrange the per-process
    report when asked for, and the line a rank prints at exit."""
    import atexit

    import patchlane

    folder = os.environ.get(REPORTS_ENV)
    if folder:
        atexit.register(_write_report, Path(folder), patchlane)
    # One line per rank, from the process that *is* the rank (or the command itself when
    # nothing is distributed): its children (data-loader, checkpoint-writer workers) inherit
    # the mark and stay quiet.
    me = _identity()
    if os.environ.get(_ROOT_MARK) != me and os.environ.get(SUMMARY_ENV, "1") != "0":
        os.environ[_ROOT_MARK] = me
        atexit.register(_print_summary, me, patchlane)


def _print_summary(me: str, patchlane: object) -> None:
    try:
        if me == "main" and "torch/distributed/run.py" in (sys.argv[0] if sys.argv else ""):
            return  # torchrun's agent: it trains nothing; its ranks speak for themselves
        report = patchlane.report()  # type: ignore[attr-defined]
        groups: dict[str, list[str]] = {}
        for entry in report["entries"]:
            outcome = (entry.get("decision") or {}).get("outcome") or "pending"
            label = entry["id"] + (f" (hits {entry['hits']})" if entry.get("hits") else "")
            groups.setdefault(outcome, []).append(label)
        parts = " | ".join(f"{k}: {', '.join(v)}" for k, v in sorted(groups.items()))
        error = report.get("startup_error")
        sys.stderr.write(f"patchlane run: {me} (pid {os.getpid()}, {socket.gethostname()}): "
                         + (f"registry rejected: {error} | " if error else "")
                         + (parts or "no entries") + "\n")
        sys.stderr.flush()
    except Exception:  # pragma: no cover - never let the summary change the exit status
        pass


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
