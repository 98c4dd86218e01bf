"""What ``patchlane/launch/bootstrap/sitecustomize.py`` does in each process: activate
patchlane, optionally leave a per-process report, then run the ``sitecustomize`` it shadows."""

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

    from ..deciding.reporting import Report

# Loaded in every interpreter `patchlane run` starts, before the command: only os and sys here
# (socket, pathlib and importlib.util each cost more than the whole lazy start). What a process
# writes or prints at exit imports what it needs then.

__all__ = ["REPORTS_ENV", "SUMMARY_ENV", "activate", "chain", "hand_over", "summary_setting"]

REPORTS_ENV = "PATCHLANE_RUN_REPORTS"
"""A folder: each process writes ``patchlane.report()`` there at exit (``patchlane run
--reports DIR``), so a job's ranks can be audited afterwards without touching the script."""


SUMMARY_ENV = "PATCHLANE_RUN_SUMMARY"
"""``0`` silences the one line each rank prints at exit (default on)."""


def summary_setting() -> bool | None:
    """``PATCHLANE_RUN_SUMMARY`` read as every ``PATCHLANE_*`` yes/no is (default on); None
    when it is neither (``patchlane run`` refuses it before the command)."""
    from .. import switch_values  # os only: what the lazy start reads settings with

    return switch_values.flag(os.environ.get(SUMMARY_ENV), True)
_ROOT_MARK = "PATCHLANE_RUN_ROOT"  # the rank identity of the nearest rank root, inherited
_claim: list[str | None] = []
"""The mark as it was before this process claimed the rank's line (empty: it did not)."""


def _identity() -> str:
    rank = os.environ.get("RANK") or os.environ.get("SLURM_PROCID")
    return f"rank {rank}" if rank is not None else "main"


def activate() -> None:
    """After ``import patchlane`` succeeded in a process started by ``patchlane run`` (strict
    mode stops a rejected registry before this, in the bootstrap): arrange, at exit, the
    per-process report when asked for and the line a rank prints."""
    import atexit

    folder = os.environ.get(REPORTS_ENV)
    # One line per rank, from the process that *is* the rank (or the command itself when
    # nothing is distributed): its children (data-loader, checkpoint-writer workers) inherit
    # the mark and stay quiet.
    me: str | None = None
    identity = _identity()
    # torchrun's agent trains nothing: it holds the rankless mark (so rankless processes it
    # starts stay quiet) and prints nothing (_print_summary), never a rank's. Under `srun
    # patchlane run -- torchrun` it read SLURM_PROCID as its rank, claimed "rank 0", and the
    # real rank 0 then took the mark as its own and stayed quiet.
    if _torchrun_agent():
        identity = "main"
    if os.environ.get(_ROOT_MARK) != identity and summary_setting() is not False:
        _claim[:] = [os.environ.get(_ROOT_MARK)]
        os.environ[_ROOT_MARK] = me = identity
    if folder or me:
        atexit.register(_at_exit, folder or None, me)


def hand_over(env: dict[str, str]) -> None:
    """Before this process ``exec``s the command (a nested ``patchlane run``): give the rank's
    line to the command, in ``env``, the environment it gets.

    ``exec`` replaces this process, so its at-exit line would never print, while the mark it
    claimed would keep the command, the process that does run and exit, quiet: no line at all.
    The innermost command prints it (exactly once): it is the process that ran the work, so its
    report has the decisions and the hit counts; the launchers around it only exec."""
    if _claim:
        previous = _claim[0]
        if previous is None:
            env.pop(_ROOT_MARK, None)
        else:
            env[_ROOT_MARK] = previous


def _at_exit(folder: str | None, me: str | None) -> None:
    # At exit, so hits and late decisions are in; one report serves both. Never raises: both
    # are by-products and must not change the command's exit status.
    try:
        report = _report(folder)
    except Exception as exc:  # pragma: no cover - a decider that cannot report
        sys.stderr.write(f"patchlane run: no report at exit: {exc}\n")
        return
    if folder is not None:
        from pathlib import Path

        _write_report(Path(folder), report)
    if me is not None:
        _print_summary(me, report)


def _report(folder: str | None) -> "Report":
    """What this process decided. A process whose startup never ran (it imported no target)
    says so from the lazy start's watch list, without loading it, when only the line is asked for;
    a report file or a proof ("proven here?") needs the whole startup, loaded here."""
    if folder is None and not os.environ.get("PATCHLANE_EVIDENCE"):
        from ..lazy.arm import untouched_report

        untouched = untouched_report()
        if untouched is not None:
            return untouched  # type: ignore[return-value]  # the fields the line reads
    import patchlane

    return patchlane.report()


def _torchrun_agent() -> bool:
    """Whether this process is torchrun's agent (`torchrun` or `python -m
    torch.distributed.run`): it trains nothing; its ranks speak for themselves."""
    program = sys.argv[0] if sys.argv else ""
    return "torch/distributed/run.py" in program or os.path.basename(program) == "torchrun"


def _print_summary(me: str, report: "Report") -> None:
    if me == "main" and _torchrun_agent():
        return  # torchrun's agent: its ranks speak for themselves
    # One line per rank that fits a log: the entries someone reads it for (what is on the call
    # path, with its hits, and anything that went wrong) by name; the rest counted. Every entry
    # and its reason is in `patchlane status` and the report (`patchlane run --reports DIR`).
    named: dict[str, list[str]] = {}
    counted: dict[str, int] = {}
    for entry in report["entries"]:
        decision = entry["decision"]
        outcome = (decision["outcome"] if decision else None) or "pending"
        notes = [f"hits {entry['hits']}"] if entry.get("hits") else []
        proof = entry.get("evidence")
        if proof is not None:  # PATCHLANE_EVIDENCE (`patchlane run --evidence`): proven here?
            differs, changed = proof["differs"], proof.get("changed") or []
            notes.append(proof["answer"] + (f": nearest {', '.join(differs)}" if differs else "")
                         + (f" ({', '.join(changed)} changed since)" if changed else ""))
        if outcome in _NAMED or proof is not None:
            label = entry["id"] + (f" ({'; '.join(notes)})" if notes else "")
            named.setdefault(outcome, []).append(label)
        else:
            counted[outcome] = counted.get(outcome, 0) + 1
    parts = " | ".join([f"{k}: {', '.join(v)}" for k, v in sorted(named.items())]
                       + [f"{k}: {n}" for k, n in sorted(counted.items())])
    read = report.get("evidence")
    if read is not None and read["unreadable"]:  # said, so a "never run" is not taken on trust
        parts += f" | evidence: {len(read['unreadable'])} run(s) or receipt(s) left out " \
                 f"unread (first: {read['unreadable'][0]})"
    error = report.get("startup_error")
    refused = [r["path"] for r in report.get("rejected_registries") or ()]
    sys.stderr.write(f"patchlane run: {me} (pid {os.getpid()}, {_hostname()}): "
                     + (f"registry rejected: {error} | " if error else "")
                     + (f"registry refused, its entries not applied: {', '.join(refused)} | "
                        if refused else "")
                     + (parts or "no entries") + "\n")
    sys.stderr.flush()


# Named in the exit line (the rest are counted): on the call path, or someone must look.
_NAMED = frozenset({"applied", "config: applied", "refused: drift", "refused: evidence",
                    "failed: error", "ledger: violation", "reverted"})


def _hostname() -> str:
    # os.uname() is the same gethostname(2) answer, without importing socket (~9 ms)
    uname = getattr(os, "uname", None)
    if uname is not None:
        return str(uname().nodename)
    import socket  # pragma: no cover - Windows

    return socket.gethostname()


def _write_report(folder: "Path", report: "Report") -> None:
    import time

    from ..common.files import atomic_write_json
    from .job import job_of, stack

    process = {"host": _hostname(), "pid": os.getpid(), "ppid": os.getppid(),
               "argv": sys.argv, "rank": os.environ.get("RANK"),
               "local_rank": os.environ.get("LOCAL_RANK"),
               "world_size": os.environ.get("WORLD_SIZE"), "at": time.time(),
               # what `patchlane usage` counts jobs and stacks by (launch/job.py)
               "job": job_of(os.environ), "stack": stack()}
    role = f"rank{process['rank']}" if process["rank"] else "process"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        atomic_write_json(folder / f"{role}-{process['host']}-{process['pid']}.json",
                          {**report, "process": process})
    except OSError as exc:  # disk full, folder removed
        sys.stderr.write(f"patchlane run: could not write the process report: {exc}\n")


_BOOTSTRAP_TAIL = os.sep + os.path.join("patchlane", "launch", "bootstrap")


def is_bootstrap(path: str) -> bool:
    """Whether ``path`` is the bootstrap folder of this patchlane or of another install (a
    launcher's venv and a job's venv, nested ``patchlane run``): only one stays on
    ``PYTHONPATH`` (patchlane.launch.environment), and :func:`chain` runs neither as the
    ``sitecustomize`` a bootstrap shadows (each ran the other's, until RecursionError)."""
    return os.path.realpath(path).endswith(_BOOTSTRAP_TAIL)


def chain(here: str) -> None:
    """Run the ``sitecustomize`` that ``here`` (the bootstrap folder) shadows: the next one on
    ``sys.path``, exactly as ``site`` would have run it, under the same module name."""
    # Every patchlane's bootstrap, not this one's alone: another install's (nested `patchlane
    # run` across two venvs) would run this one's in turn, and so on until RecursionError.
    here = os.path.realpath(here)
    rest = [p for p in sys.path
            if os.path.realpath(p or os.curdir) != here and not is_bootstrap(p or os.curdir)]
    # importlib.machinery.PathFinder and importlib.util.module_from_spec are these two, from
    # the import system's own frozen modules (always loaded): importlib.util alone would cost
    # ~3 ms in every interpreter, for a sitecustomize that is usually not there.
    external = sys.modules["_frozen_importlib_external"]
    spec = external.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = sys.modules["_frozen_importlib"].module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)
