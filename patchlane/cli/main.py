"""Parse and dispatch; each command lives in its own module and returns an exit code.

This is the only place a ``patchlane`` process decides its exit status (the table is
:class:`patchlane.common.exit_codes.ExitCode`). An expected failure, a
:class:`PatchlaneError`, prints one line and exits with its own code; an ``OSError`` names the
file and exits 74; anything else (a bare ``PatchlaneError`` included: its raise site named no
class) is a bug in patchlane and prints its traceback (exit 70), never a misleading "usage
error".
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..common.errors import PatchlaneError, SweepTerminated
from ..common.exit_codes import ExitCode
from .common import (
    FULL_WIDTH_ENV,
    add_comparison_options,
    add_rank_start_option,
    given_path,
    positive_int,
    positive_seconds,
    release_cache,
)


def _shard(text: str) -> str:
    """argparse type for --shard: rejected here, as a usage error, before anything runs."""
    from ..sweep.engine import Shard

    try:
        Shard.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _group(text: str) -> str:
    from .merge import group_name

    return group_name(text)


def _add_git(p: argparse.ArgumentParser) -> None:
    """``--git DIR``: ``upstream`` and ``retire`` answer from a local repository alike."""
    p.add_argument("--git", type=Path, metavar="DIR",
                   help="answer from this local clone or `git clone --mirror` of the upstream "
                   "repository instead of the GitHub API (no network; --offline does not "
                   "apply; `upstream` records its answers in the cache directory, where the "
                   "sweep's page reads them)")


def _parser() -> argparse.ArgumentParser:
    from .._version import __version__

    parser = argparse.ArgumentParser(
        prog="patchlane", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Local fixes for upstream bugs in torch, megatron-core and kernel "
        "libraries, carried honestly: each declared in a registry, gated on the releases it "
        "fixes, proven by a reproducer run both ways, tracked upstream and retired on purpose.",
        epilog="Exit codes: docs/cli.md (0 ok, 1 a reproducer failed, 2 usage, 3 registry "
        "refused, ...). Guide: docs/adding-an-entry.md.")
    parser.add_argument("--version", action="version", version=f"patchlane {__version__}")
    parser.add_argument("--full-width", action="store_true",
                        help="print tables whole on a terminal too (by default a row is cut to "
                        "the terminal's width there; piped or in a log it is always whole); "
                        "also PATCHLANE_FULL_WIDTH=1")
    sub = parser.add_subparsers(dest="command", required=True)
    for add in (_entry_commands, _run_command, _sweep_commands, _tracking_commands,
                _release_commands, _authoring_commands, _environment_commands):
        add(sub)
    return parser


def _entry_commands(sub: Any) -> None:
    """What the registry says and decided, one entry at a time."""
    p = sub.add_parser("status", help="entries and the decision taken for each")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--no-import", action="store_true",
                   help="do not import target modules (show gates and pending hooks only)")
    p.add_argument("--evidence", type=given_path, action="append", metavar="RUNS_ROOT",
                   help="say for each applied entry whether a passing run under RUNS_ROOT (what "
                   "`patchlane sweep --runs-root` wrote, or one run directory) proved it on "
                   "this stack: proven here, stale (proven here for content since changed: "
                   "which part), proven elsewhere (the nearest, and how it differs) or never "
                   "run; a run that cannot be verified proves nothing (repeatable; default: "
                   "$PATCHLANE_EVIDENCE)")

    p = sub.add_parser("show", help="everything the registry says about one entry, and its "
                                     "decision (as `status` takes it)")
    p.add_argument("id")
    p.add_argument("--no-import", action="store_true",
                   help="do not import the target module (its decision may stay pending)")

    p = sub.add_parser("fingerprint", help="print the current fingerprint of an entry's target")
    p.add_argument("id", nargs="?", help="the entry (omit with --object)")
    p.add_argument("--object", metavar="MODULE:QUALNAME",
                   help="fingerprint this object instead of an entry's target; reads no "
                   "registry (for a new entry, before it has a value to record)")
    p.add_argument("--source", type=Path, metavar="FILE",
                   help="fingerprint the target module's source file instead of importing it "
                   "(for releases that cannot be installed here)")
    p.add_argument("--record", action="store_true",
                   help="write the value into the entry, in place: fingerprint.sha256, and "
                   "fingerprint.releases for the installed release it came from (not with "
                   "--source: nothing ran there)")

    p = sub.add_parser("reproduce", help="run one entry's reproducer")
    p.add_argument("id")
    p.add_argument("--without-overlay", action="store_true",
                   help="run against the unpatched upstream (expected to fail while guarding)")
    p.add_argument("--lane", default="cpu", choices=("cpu", "cuda"))
    p.add_argument("--world-size", type=positive_int, action="append",
                   help="repeatable; default: every size the reproducer declares")
    p.add_argument("--timeout", type=positive_seconds, default=600.0, help="seconds per case")
    p.add_argument("--keep", type=Path, metavar="DIR",
                   help="keep each case's folder (rank logs and results) under DIR; by "
                   "default it is removed once the case is judged")


def _run_command(sub: Any) -> None:
    p = sub.add_parser(
        "run", help="run a command with patchlane active in every Python process it starts",
        description="Run CMD with patchlane active in every Python process it starts (torchrun "
        "and srun ranks, their children) without editing the script: a sitecustomize on "
        "PYTHONPATH does `import patchlane`; an existing sitecustomize still runs. E.g. "
        "`patchlane run -- torchrun --nproc-per-node 8 pretrain_gpt.py ...`, "
        "`srun patchlane run -- python train.py`.")
    p.add_argument("--registry", type=Path, metavar="FILE", action="append", default=[],
                   help="an extra registry file (added to PATCHLANE_REGISTRY); repeatable")
    p.add_argument("--strict", action="store_true",
                   help="PATCHLANE_STRICT=1: a refused or failed entry stops the process")
    p.add_argument("--reports", type=Path, metavar="DIR",
                   help="each process writes its patchlane.report() to DIR at exit")
    p.add_argument("--evidence", type=given_path, metavar="RUNS_ROOT",
                   help="PATCHLANE_EVIDENCE: each rank's exit line says per applied entry "
                   "whether a passing run under RUNS_ROOT proved it on that rank's stack")
    p.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD ARGS",
                   help="the command, after --")


def _sweep_commands(sub: Any) -> None:
    """The sweep, and the merge of its shards."""
    p = sub.add_parser("sweep", help="run every reproducer both ways into a run directory")
    p.add_argument("--lane", action="append", choices=("cpu", "cuda"),
                   help="repeatable; default: cpu, plus cuda when a GPU is present")
    p.add_argument("--only", action="append", metavar="ID", help="repeatable: limit to ids")
    p.add_argument("--timeout", type=positive_seconds, default=600.0, help="seconds per case")
    p.add_argument("--jobs", "-j", type=positive_int, default=max(1, (os.cpu_count() or 2) // 2),
                   help="cases run in parallel (default: half the CPUs)")
    p.add_argument("--shard", default="1/1", metavar="I/N", type=_shard,
                   help="run the I-th of N slices of the cases (1-based; Slurm: "
                   "$((SLURM_ARRAY_TASK_ID+1))/$SLURM_ARRAY_TASK_COUNT)")
    p.add_argument("--runs-root", type=Path,
                   help="where run directories go (default: $PATCHLANE_RUNS or ./runs)")
    p.add_argument("--run-dir", type=Path, help="exact run directory to create")
    p.add_argument("--resume", type=Path, metavar="RUN_DIR",
                   help="finish a killed sweep without redoing finished cases")
    add_comparison_options(p)
    p.add_argument("--group", type=_group, metavar="NAME",
                   help="the night this shard belongs to, recorded in its manifest (e.g. "
                   "$SLURM_ARRAY_JOB_ID): `patchlane merge --group NAME` joins the shards")
    p.add_argument("--wheelhouse", type=Path, metavar="DIR",
                   help="install every release side by side from DIR alone, with no package "
                   "index (`patchlane wheelhouse` fills it); a release it lacks skips its row")
    add_rank_start_option(p)
    p.add_argument("--json", action="store_true", help="print the JSON index")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress output")
    from .merge import add_parser as add_merge
    add_merge(sub)


def _tracking_commands(sub: Any) -> None:
    """Upstream's state, retirement, and the installed state's health."""
    p = sub.add_parser("upstream", help="upstream issue/PR/release state and retirement")
    p.add_argument("ids", nargs="*", metavar="ID")
    p.add_argument("--offline", action="store_true", help="answer from the cache only")
    p.add_argument("--json", action="store_true")
    p.add_argument("--cache-dir", type=Path)
    p.add_argument("--evidence", type=given_path, action="append", metavar="RUN_DIR",
                   help="sweep run directories to weigh for the retirement verdict")
    _add_git(p)

    p = sub.add_parser("retire", help="record a retirement in the registry, in place")
    p.add_argument("id")
    p.add_argument("--evidence", type=given_path, action="append", metavar="RUN_DIR",
                   help="sweep run directory showing upstream-fixed (repeatable)")
    p.add_argument("--offline", action="store_true")
    p.add_argument("--skip-upstream", action="store_true",
                   help="do not query upstream (the evidence must then suffice)")
    p.add_argument("--date", help="retirement date (default: today)")
    p.add_argument("--applied-upstream", help="DEP-3 Applied-Upstream value")
    p.add_argument("--force", metavar="REASON",
                   help="retire without complete evidence, recording why")
    p.add_argument("--cache-dir", type=Path)
    _add_git(p)

    p = sub.add_parser("delete", help="remove a retired entry from its registry file")
    p.add_argument("id")
    p.add_argument("--yes", action="store_true")

    p = sub.add_parser("doctor", help="verify installed targets, ledger and decisions")
    p.add_argument("--json", action="store_true")
    p.add_argument("--strict", action="store_true",
                   help="warnings (warn-policy violations, skipped gates) fail too")


def _release_commands(sub: Any) -> None:
    """Runs across upstream releases: the matrix, its wheelhouse, bisect and the radar."""
    p = sub.add_parser("matrix", help="run the sweep against release sets (matrix.yaml)")
    p.add_argument("--file", type=Path, default=None, metavar="MATRIX",
                   help="the release matrix (default: ./matrix.yaml when there is one, else "
                   "the one patchlane ships, beside its catalog)")
    p.add_argument("--set", action="append", dest="sets", metavar="NAME",
                   help="repeatable; default: every set")
    p.add_argument("--cache", type=Path, default=None,
                   help="where releases are installed side by side (default: "
                   "$PATCHLANE_RELEASE_CACHE, else ~/.cache/patchlane/releases)")
    p.add_argument("--runs-root", type=Path, default=Path("runs/matrix"))
    p.add_argument("--jobs", "-j", type=positive_int, default=1)
    p.add_argument("--timeout", type=positive_seconds, default=600.0)
    p.add_argument("--lane", choices=["cpu", "cuda"], default="cpu",
                   help="the lane to sweep; runs the sets whose `lanes` hold it (default cpu)")
    add_rank_start_option(p)
    p.add_argument("--wheelhouse", type=Path, metavar="DIR",
                   help="install every release from DIR alone (no index: an air-gapped box); "
                   "its sets and its matrix.yaml, unless --set / --file say otherwise")

    p = sub.add_parser("wheelhouse", help="download what a night needs on a machine with no "
                       "package index: patchlane, its support, the targets, every release "
                       "installed side by side (the matrix sets, ledger bad sides)")
    p.add_argument("dir", type=Path, help="the folder to fill (created if missing)")
    p.add_argument("--file", type=Path, default=None, metavar="MATRIX",
                   help="the release matrix (default: ./matrix.yaml when there is one, else "
                   "the one patchlane ships, beside its catalog)")
    p.add_argument("--set", action="append", dest="sets", metavar="NAME",
                   help="repeatable; default: every set whose lanes hold --lane")
    p.add_argument("--lane", action="append", choices=["cpu", "cuda"],
                   help="repeatable; the sets whose lanes hold one (default: both, a night's)")
    p.add_argument("--python", action="append", dest="pythons", metavar="X.Y",
                   help="repeatable: the interpreters of the machine that will use it (default "
                   "3.12, as NGC and the H100/H200 images); several: one folder each, DIR/pyX.Y")
    p.add_argument("--platform", action="append", dest="platforms", metavar="TAG",
                   help="repeatable; default: manylinux x86_64, glibc 2.17 and newer")
    p.add_argument("--torch-builds", action="store_true",
                   help="also the releases that bring a torch build with its dependencies (a "
                   "ledger reproducer's bad side: gigabytes each); without it, their rows are "
                   "skipped offline and say so")
    from .bisect import add_parser as add_bisect
    add_bisect(sub)
    from .radar import add_parser as add_radar
    add_radar(sub)


def _authoring_commands(sub: Any) -> None:
    """Writing entries: a new one, an upstream draft."""
    p = sub.add_parser("draft", help="write a public-ready upstream draft for an entry not "
                                     "yet forwarded, from sweep evidence")
    p.add_argument("id")
    p.add_argument("--evidence", type=given_path, action="append", metavar="RUN_DIR",
                   help="sweep run directories (repeatable): the affected releases")
    p.add_argument("--output", type=Path, default=None,
                   help="default: the entry's upstream.draft, else drafts/<id>.md")
    p.add_argument("--verify", action="store_true",
                   help="also run the reproducer (cpu, no overlay) against a copy of the "
                        "installed release with the proposed change written in")

    from .new import add_parser as add_new
    add_new(sub)


def _environment_commands(sub: Any) -> None:
    """patchlane in a whole environment: activation, and what its jobs used."""
    from .usage import add_parser as add_usage
    add_usage(sub)
    p = sub.add_parser(
        "constraints", help="the registries' version floors and pins as a pip/uv constraints file",
        description="Write the active version floors and packaging pins of the loaded "
        "registries as a constraints file (`pip install -c FILE`, `uv pip install -c FILE`): "
        "the registry stays the one source of truth. A floor or pin that holds only under a "
        "condition (`when:` an environment variable or another distribution's range) is "
        "written commented out, with its condition.")
    p.add_argument("--output", "-o", type=Path, metavar="FILE",
                   help="write the file (default: print it)")
    p = sub.add_parser(
        "activate", help="activate patchlane in every interpreter of this environment (.pth)",
        description="Show, write (--pth) or remove (--remove) a .pth file in site-packages that "
        "makes every interpreter of this environment `import patchlane` (through the lazy "
        "start: a process that imports no target reads one small watch list), reaching what a "
        "PYTHONPATH bootstrap cannot: python -E / -I and scrubbed environments. Off by "
        "default; both are idempotent.")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--pth", action="store_true", help="write the activation file")
    mode.add_argument("--remove", action="store_true", help="remove the activation file")
    p.add_argument("--site-dir", type=Path, metavar="DIR",
                   help="the site-packages directory (default: this interpreter's)")
    p.add_argument("--json", action="store_true")


def _dispatch(args: argparse.Namespace) -> int:
    from .. import startup
    from ..common.errors import ControlsError
    from ..deciding.controls import readable_with_evidence

    error = startup.startup_error()
    if isinstance(error, ControlsError) and not (
            args.command == "run" and args.evidence is not None
            and readable_with_evidence(os.environ, str(args.evidence))):
        # `import patchlane` kept going without its settings; no command does (nor `run`: its
        # processes would each start with nothing applied). `run --evidence` gives its
        # processes PATCHLANE_EVIDENCE: settings that need it are read with it.
        raise error
    return _COMMANDS[args.command](args)


# -- one handler per command: the arguments it reads, then the module that runs it ------------

def _status(args: argparse.Namespace) -> int:
    from .status import run_status
    return run_status(args.json, not args.no_import, tuple(args.evidence or ()))


def _show(args: argparse.Namespace) -> int:
    from .show import run_show
    return run_show(args.id, not args.no_import)


def _fingerprint(args: argparse.Namespace) -> int:
    from .fingerprint import run_fingerprint, run_fingerprint_object
    if (args.id is None) == (args.object is None):
        _parser().error("fingerprint: give an entry ID or --object MODULE:QUALNAME (one)")
    if args.object is not None:
        if args.record:
            _parser().error("fingerprint: --record needs an entry ID (--object reads no "
                            "registry)")
        return run_fingerprint_object(args.object, args.source)
    return run_fingerprint(args.id, args.source, args.record)


def _reproduce(args: argparse.Namespace) -> int:
    from .reproduce import run_reproduce
    return run_reproduce(args.id, args.without_overlay, args.lane, args.world_size,
                         args.timeout, args.keep)


def _run(args: argparse.Namespace) -> int:
    from ..launch.command import run_command
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not cmd:
        _parser().error("run: no command; usage: patchlane run [options] -- CMD ARGS...")
    return run_command(cmd, registry=args.registry, strict=args.strict,
                       reports=args.reports, evidence=args.evidence)


def _sweep(args: argparse.Namespace) -> int:
    from .sweep import SweepOptions, run_sweep_command
    return run_sweep_command(SweepOptions.from_args(args))


def _merge(args: argparse.Namespace) -> int:
    from .merge import run_merge
    return run_merge(args)


def _upstream(args: argparse.Namespace) -> int:
    from .upstream import run_upstream
    return run_upstream(args.ids, args.offline, args.json, args.cache_dir, args.evidence,
                        git=args.git)


def _retire(args: argparse.Namespace) -> int:
    from .upstream import run_retire
    return run_retire(args.id, args.evidence, args.offline, args.skip_upstream, args.date,
                      args.applied_upstream, args.force, args.cache_dir, git=args.git)


def _delete(args: argparse.Namespace) -> int:
    from .upstream import run_delete
    return run_delete(args.id, args.yes)


def _doctor(args: argparse.Namespace) -> int:
    from .doctor import run_doctor
    return run_doctor(args.json, args.strict)


def _matrix(args: argparse.Namespace) -> int:
    from .matrix import run_matrix_command
    return run_matrix_command(args.file, args.sets, release_cache(args.cache), args.runs_root,
                              args.jobs, args.timeout, lane=args.lane,
                              wheelhouse=args.wheelhouse, rank_start=args.rank_start)


def _wheelhouse(args: argparse.Namespace) -> int:
    from .matrix import run_wheelhouse_command
    return run_wheelhouse_command(args.dir, args.file, args.sets, args.lane, args.pythons,
                                  args.platforms, args.torch_builds)


def _draft(args: argparse.Namespace) -> int:
    from .draft import run_draft
    return run_draft(args.id, args.evidence or [], args.output, args.verify)


def _new(args: argparse.Namespace) -> int:
    from .new import run_new
    return run_new(args)


def _bisect(args: argparse.Namespace) -> int:
    from .bisect import run_bisect
    return run_bisect(args)


def _radar(args: argparse.Namespace) -> int:
    from .radar import run_radar
    return run_radar(args)


def _activate(args: argparse.Namespace) -> int:
    from .activate import run_activate
    return run_activate(args.pth, args.remove, args.site_dir, args.json)


def _constraints(args: argparse.Namespace) -> int:
    from .constraints import run_constraints
    return run_constraints(args.output)


def _usage(args: argparse.Namespace) -> int:
    from .usage import run_usage
    return run_usage(args)


_COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "status": _status, "show": _show, "fingerprint": _fingerprint, "reproduce": _reproduce,
    "run": _run, "sweep": _sweep, "merge": _merge, "upstream": _upstream, "retire": _retire,
    "delete": _delete, "doctor": _doctor, "matrix": _matrix, "wheelhouse": _wheelhouse,
    "draft": _draft, "new": _new, "bisect": _bisect, "radar": _radar, "activate": _activate,
    "usage": _usage, "constraints": _constraints,
}
"""Every command's handler: the one table `patchlane` dispatches through (a command the parser
knows and this table does not is a test failure, not a silent no-op)."""



def _stop_on_sigterm(command: str) -> Callable[[], None]:
    """SIGTERM (a scheduler's cancel) ends a command as Ctrl-C does, with exit 143 and one
    line, instead of -15 mid-write; the long commands handle it themselves, in order
    (:mod:`patchlane.sweep.stopping`). ``run`` leaves it to the command it starts.
    Returns what puts the caller's handler back: ``main()`` called in-process (a notebook,
    a test runner) must not leave its handler behind."""
    if command == "run" or threading.current_thread() is not threading.main_thread() \
            or signal.getsignal(signal.SIGTERM) is signal.SIG_IGN:
        return lambda: None

    def terminate(signum: int, frame: object) -> None:
        raise SweepTerminated(f"`patchlane {command}` stopped by SIGTERM")

    previous = signal.signal(signal.SIGTERM, terminate)

    def restore() -> None:
        # None: a handler installed from C; the default is the closest Python can put back.
        signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)

    return restore


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.full_width:
        os.environ[FULL_WIDTH_ENV] = "1"
    restore_logs = _logs_to_stderr()
    restore_sigterm = _stop_on_sigterm(args.command)
    restore_streams = _print_any_text()
    try:
        return _main(args)
    finally:
        restore_streams()
        restore_sigterm()
        restore_logs()


def _print_any_text() -> Callable[[], None]:
    """stdout and stderr write what they cannot encode as escapes (``\\udcff``), as Python's
    own tracebacks do, for the command's run. A reproducer's message or a path may hold a lone
    surrogate (a file name read with ``os.fsdecode``): printed strictly, a UTF-8 locale's
    stdout raised UnicodeEncodeError, and a sweep that went well exited 70, "a bug in
    patchlane". Returns what puts each stream's own setting back."""
    restore: list[Callable[[], None]] = []
    for stream in (sys.stdout, sys.stderr):
        errors = getattr(stream, "errors", None)
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is None or errors in (None, "backslashreplace", "surrogateescape"):
            continue
        try:
            reconfigure(errors="backslashreplace")
        except (ValueError, OSError):  # a detached or closed stream: left as it is
            continue
        restore.append(functools.partial(reconfigure, errors=errors))

    def back() -> None:
        for undo in restore:
            with contextlib.suppress(ValueError, OSError):
                undo()

    return back


def _logs_to_stderr() -> Callable[[], None]:
    """A command's stdout carries its output only, whatever logging the process sets up. A
    handler already on stdout (the process configured logging before this command ran) writes to
    stderr from here on; an imported target may put another there (Megatron-LM's training code
    does), which the commands that import targets move once they are imported
    (:func:`patchlane.cli.common.stdout_for_output`). patchlane's own records do not propagate to
    the process's handlers here: its own (patchlane.deciding.logs.Unconfigured) prints the
    warnings and errors on stderr, named, as Python's last resort showed them. Returns what
    puts the process's logging back as it was: a program that runs a command in its own
    process (a notebook, a test) keeps its own."""
    import logging

    from ..deciding import logs

    logger = logging.getLogger("patchlane")
    propagated = logger.propagate
    logs.off_stdout()
    logger.propagate = False

    def restore() -> None:
        logger.propagate = propagated
        logs.back_on_stdout()

    return restore


def _main(args: argparse.Namespace) -> int:
    try:
        return int(_dispatch(args))
    except PatchlaneError as exc:
        if exc.exit_code is ExitCode.INTERNAL_ERROR:
            return _bug(args.command)
        print(f"patchlane: error: {exc}", file=sys.stderr)
        return int(exc.exit_code)
    except OSError as exc:  # the environment refused, not a bug: name the file
        where = f": {exc.filename}" if exc.filename else ""
        print(f"patchlane: error: {exc.strerror or exc}{where}", file=sys.stderr)
        return int(ExitCode.IO_ERROR)
    except KeyboardInterrupt:
        print("patchlane: interrupted", file=sys.stderr)
        return int(ExitCode.INTERRUPTED)
    except ImportError as exc:
        # a requirement imported lazily by the command (filelock, requests): one line naming
        # it and the fix (exit 69), as at `import patchlane`; any other import error is a bug
        from ..common.dependencies import say_missing

        code = say_missing(exc)
        return _bug(args.command) if code is None else code
    except Exception:
        return _bug(args.command)


def _bug(command: str) -> int:
    """Report the exception being handled as a bug in patchlane (exit 70)."""
    traceback.print_exc()
    print(f"patchlane: internal error in `patchlane {command}`: this is a bug in "
          "patchlane (the traceback above says where); please report it with the command "
          "you ran", file=sys.stderr)
    return int(ExitCode.INTERNAL_ERROR)


# Last: under `python -m patchlane.cli.main` everything above must exist before main() runs.
if __name__ == "__main__":
    sys.exit(main())
