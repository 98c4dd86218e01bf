"""Running one reproducer case: an entry, a mode (with / without its overlay), a lane, a world size.

Every rank runs in its own fresh interpreter (``python -m patchlane.sweep.runner``), so the
overlay is
applied (or not) by the real import-time walk, exactly as in a training job. A reproducer is a
plain Python file that defines::

    LANES = ("cpu", "cuda")        # lanes it supports, as literals
    WORLD_SIZES = (1, 2)           # world sizes it supports, as literals
    REQUIRES = ("triton",)         # optional: modules it imports beyond its target
    def run(ctx: ReproContext) -> None: ...

A module in ``REQUIRES`` that the environment lacks makes the case ``skipped``, with that
reason, never an ``error``: a stack without liger-kernel cannot run a reproducer that uses it,
and nobody has to act on that.

``run`` raises ``AssertionError`` when the upstream bug shows (that is a *fail*); any other
exception is an *error* of the harness or the environment, never a verdict. The assertion must
be the reproducer's own (raised in its file, or in ``patchlane.testing``): one raised inside the
code under test is an error too (the runner's ``_foreign_assertion``).
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..common.errors import ReproducerError
from ..registry import Entry
from ..reproducer import LANES, Lane, Mode, ReproContext, RunOutcome, parse_lane
from ..runs.manifest import CaseResult, worst_rank
from .installs import RELEASE_SPEC, with_releases
from .provenance import redact_text
from .rank_start import RankStart, rank_starts, warm_allowed
from .wheelhouse_manifest import NotInWheelhouse

__all__ = [
    "LANES",
    "CaseInterrupted",
    "CaseResult",
    "Lane",
    "Mode",
    "ReproContext",
    "ReproducerSpec",
    "RunOutcome",
    "case_env",
    "clip",
    "log_tail",
    "parse_lane",
    "read_spec",
    "run_case",
]

@dataclass(frozen=True)
class ReproducerSpec:
    lanes: tuple[Lane, ...]
    world_sizes: tuple[int, ...]
    bad_side: tuple[str, ...] = ()
    """A ledger reproducer's releases on the bad side of its bound (``BAD_SIDE =
    ("numpy==2.4.1",)``): installed side by side for the case without the entry, so one sweep
    sees both sides. Empty for a source patch (its overlay is the difference)."""
    bad_side_deps: tuple[str, ...] = ()
    """Those of ``bad_side`` installed with their dependencies (``BAD_SIDE_DEPS``): a torch
    build imports only beside the CUDA libraries it was built with."""
    requires: tuple[str, ...] = ()
    """Modules the reproducer imports beyond its target (``REQUIRES = ("triton",)``): where
    one is not installed the case is skipped, naming it."""

    def missing(self) -> list[str]:
        """The modules of ``requires`` this interpreter cannot find (found, not imported)."""
        import importlib.util

        absent = []
        for name in self.requires:
            try:
                found = importlib.util.find_spec(name) is not None
            except (ImportError, ValueError):  # a parent package missing or broken
                found = False
            if not found:
                absent.append(name)
        return absent


def read_spec(entry: Entry) -> ReproducerSpec:
    """Read LANES / WORLD_SIZES (and a ledger reproducer's BAD_SIDE) as literals, without
    importing the reproducer (or torch)."""
    if entry.reproducer is None:
        raise ReproducerError(entry.id, "the registry entry declares no reproducer")
    tree = ast.parse(entry.reproducer.read_text(encoding="utf-8"), str(entry.reproducer))
    values: dict[str, tuple[Any, ...]] = {}
    for node in tree.body:
        # `LANES = ...` and the annotated `LANES: tuple[str, ...] = ...` alike: reading only
        # the first would silently run an annotated reproducer on cpu, world size 1
        if isinstance(node, ast.Assign):
            pairs = [(target, node.value) for target in node.targets]
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            pairs = [(node.target, node.value)]
        else:
            continue
        for target, value in pairs:
            for name in _SPEC_NAMES:
                if isinstance(target, ast.Name) and target.id == name:
                    values[name] = _spec_literal(entry, name, value)
                elif name in {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}:
                    raise _spec_error(entry, name, value, f"`{ast.unparse(target)} = ...`",
                                      f"write `{name} = (...)` on a line of its own")
    declared = values.get("LANES", ("cpu",))
    sizes = values.get("WORLD_SIZES", (1,))
    if not declared or not sizes or any(n < 1 for n in sizes):
        raise ReproducerError(entry.id, f"{entry.reproducer}: LANES and WORLD_SIZES must be "
                                        f"non-empty literals; found {declared!r}, {sizes!r}")
    try:
        lanes = tuple(parse_lane(lane, f"{entry.reproducer}: LANES") for lane in declared)
    except ValueError as exc:
        raise ReproducerError(entry.id, str(exc)) from None
    bad_side = values.get("BAD_SIDE", ())
    wrong = [spec for spec in bad_side if not RELEASE_SPEC.match(spec)]
    if wrong:
        raise ReproducerError(entry.id, f"{entry.reproducer}: BAD_SIDE: found {wrong!r}; "
                                        "expected exact releases such as \"numpy==2.4.1\"; fix: "
                                        "pin each release on the bad side of the bound")
    deps = values.get("BAD_SIDE_DEPS", ())
    stray = [spec for spec in deps if spec not in bad_side]
    if stray:
        raise ReproducerError(entry.id, f"{entry.reproducer}: BAD_SIDE_DEPS: found {stray!r}, "
                                        f"not in BAD_SIDE {list(bad_side)!r}; expected the "
                                        "releases of BAD_SIDE to install with their "
                                        "dependencies; fix: list each in BAD_SIDE too")
    requires = values.get("REQUIRES", ())
    bad_name = [name for name in requires
                if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*", name)]
    if bad_name:
        raise ReproducerError(entry.id, f"{entry.reproducer}: REQUIRES: found {bad_name!r}; "
                                        "expected importable module names such as \"triton\"; "
                                        "fix: name the modules, not distributions")
    return ReproducerSpec(lanes=lanes, world_sizes=sizes, bad_side=bad_side, bad_side_deps=deps,
                          requires=requires)


_SPEC_NAMES = {"LANES": str, "WORLD_SIZES": int, "BAD_SIDE": str, "BAD_SIDE_DEPS": str,
               "REQUIRES": str}
"""What each name the sweep reads from a reproducer must hold: a literal tuple of these."""


def _spec_error(entry: Entry, name: str, node: ast.expr, found: str, fix: str) -> ReproducerError:
    kind = "strings" if _SPEC_NAMES[name] is str else "integers"
    example = '("cpu", "cuda")' if _SPEC_NAMES[name] is str else "(1, 2)"
    return ReproducerError(
        entry.id, f"{entry.reproducer}, line {node.lineno}: {name}: found {found}; expected a "
        f"literal tuple of {kind}, such as {name} = {example} (the sweep reads it without "
        f"importing the reproducer); fix: {fix}")


def _spec_literal(entry: Entry, name: str, node: ast.expr) -> tuple[Any, ...]:
    """``node`` as the literal tuple ``name`` must be; a :class:`ReproducerError` naming the
    file, the line and what was found otherwise."""
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise _spec_error(entry, name, node, f"`{_shown(node)}`, not a literal",
                          "write the values out as literals") from None
    want = _SPEC_NAMES[name]
    if not isinstance(value, (tuple, list)) or not all(
            type(item) is want for item in value):  # bool is an int, "1" is not: exactly
        raise _spec_error(entry, name, node, f"{value!r}",
                          f"make it a tuple of {'strings' if want is str else 'integers'}")
    return tuple(value)


def _shown(node: ast.expr) -> str:
    text = ast.unparse(node)
    return text if len(text) <= 80 else text[:79] + "…"


def case_env(entry: Entry, mode: Mode, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of one case: only this entry (and what it ``depends_on``, applied in
    both modes: the bug it fixes may exist only with them) is considered, strictly."""
    env = dict(os.environ if base is None else base)
    registries = [str(p) for p in _extra_registries(entry)]
    env["PATCHLANE_ONLY"] = ",".join([entry.id, *entry.depends_on])
    env["PATCHLANE_STRICT"] = "1"
    # A case is how evidence is made: requiring it there would refuse the very run that proves
    # an overlay, and reading it would cost every rank of every case a runs root's reading.
    env.pop("PATCHLANE_EVIDENCE", None)
    env.pop("PATCHLANE_REQUIRE_EVIDENCE", None)
    if mode is Mode.WITHOUT:
        env["PATCHLANE_DISABLE"] = entry.id
    else:
        env.pop("PATCHLANE_DISABLE", None)
    if registries:
        known = [p for p in env.get("PATCHLANE_REGISTRY", "").split(os.pathsep) if p]
        env["PATCHLANE_REGISTRY"] = os.pathsep.join(dict.fromkeys(known + registries))
    return env


def _extra_registries(entry: Entry) -> list[Path]:
    from ..startup import is_default_registry

    return [] if is_default_registry(entry.source) else [entry.source]


RANK_GRACE_SECONDS = 30.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run_case(
    entry: Entry,
    mode: Mode,
    *,
    lane: Lane = "cpu",
    world_size: int = 1,
    timeout: float = 600.0,
    workdir: Path | None = None,
    env: Mapping[str, str] | None = None,
    flat: bool = False,
    bad_side: bool = True,
    stop: threading.Event | None = None,
    start: RankStart | None = None,
) -> CaseResult:
    """Run one case: ``world_size`` ranks, each a fresh interpreter (or, with ``start`` warm,
    one forked from a server that imported torch, where :func:`~.rank_start.warm_allowed`
    allows it; None: ``PATCHLANE_RANK_START``, fresh unless set), sharing a work dir
    (``workdir/<mode>-<lane>-ws<N>``, or ``workdir`` itself when ``flat``). ``bad_side``: a
    ledger reproducer's case without its entry runs on its ``BAD_SIDE`` releases; a caller
    that puts its own release first (a bisection step) turns that off. ``stop``: once set
    (a sweep interrupted), ranks still running are killed and :class:`CaseInterrupted` is
    raised: the case has no result. Each rank's output goes to ``rank<N>.log``, at most
    :data:`LOG_HEAD_BYTES` + :data:`LOG_TAIL_BYTES` of it (:class:`_CappedLog`).

    Without ``workdir`` the case runs in a temporary folder removed once it is judged: the
    result keeps each failing rank's log tail, and its ranks' ``log`` is None. A caller that
    wants the files passes the folder to keep them in."""
    if entry.reproducer is None:
        raise ReproducerError(entry.id, "the registry entry declares no reproducer")
    if workdir is None:
        with tempfile.TemporaryDirectory(prefix=f"patchlane-{entry.id}-",
                                         ignore_cleanup_errors=True) as scratch:
            result = run_case(entry, mode, lane=lane, world_size=world_size, timeout=timeout,
                              workdir=Path(scratch), env=env, flat=flat, bad_side=bad_side,
                              stop=stop, start=start)
        for record in result.ranks:
            record["log"] = None  # removed with the folder
        return result
    started = time.monotonic()
    # Absolute before any rank gets it: a rank runs the reproducer, which may change
    # directory, and then writes its result into this folder (a relative runs root, ./runs by
    # default, would then name another folder and the case would read as an error).
    root = workdir.absolute()
    root.mkdir(parents=True, exist_ok=True)
    case_dir = root if flat else root / f"{mode.value}-{lane}-ws{world_size}"
    case_dir.mkdir(parents=True, exist_ok=True)
    child_env = case_env(entry, mode, env)
    spec = read_spec(entry)
    bad = spec.bad_side if mode is Mode.WITHOUT and bad_side else ()
    # Marked before the bad side is installed: an install takes the case's time (its deadline
    # counts from here, as its ranks' wait counts from `started`), and it starts no process
    # that outlives it.
    token = _mark_case(child_env, timeout)
    if bad:
        # A ledger entry's case without it runs on the bad side of its bound, installed
        # side by side: one sweep shows both sides (the bound is measured, not read).
        try:
            child_env = with_releases(child_env, bad, deps=spec.bad_side_deps)
        except (OSError, subprocess.CalledProcessError, NotInWheelhouse) as exc:
            # No verdict without the bad side: an error of the case, never a crash of the sweep
            # (offline, the plan skips a row whose bad side the wheelhouse lacks before this).
            return CaseResult(entry.id, mode, lane, world_size, RunOutcome.ERROR,
                              f"cannot install the bad side {list(bad)}: {exc}", "setup",
                              time.monotonic() - started)
    if start is None:
        from ..deciding.controls import ToolSettings

        start = RankStart(ToolSettings.from_env().rank_start)
    refused = warm_allowed(entry, lane, bool(bad)) if start is RankStart.WARM else None
    if refused is not None:
        start = RankStart.FRESH
    how: dict[str, Any] = {}
    procs: list[subprocess.Popen[bytes]] = []
    logs: list[_CappedLog] = []
    timed_out = interrupted = False
    killed: list[bool] = []
    with rank_starts(child_env, start) as command:
        try:
            for rank in range(world_size):
                cmd, how = command(
                    ["--entry", entry.id, "--mode", mode.value, "--lane", lane, "--rank",
                     str(rank), "--world-size", str(world_size), "--workdir", str(case_dir)])
                proc = subprocess.Popen(cmd, env=child_env, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, start_new_session=True)
                procs.append(proc)
                logs.append(_CappedLog.start(proc, case_dir / f"rank{rank}.log"))
            timed_out, interrupted = _wait_for_ranks(procs, started + timeout, stop)
        finally:
            killed = _end_ranks(procs, logs, token)
    if interrupted:
        raise CaseInterrupted(f"{entry.id} ({mode.value}, {lane}, world size {world_size}): "
                              "stopped before it finished; no result")
    result = _aggregate(entry, mode, lane, world_size, case_dir, procs, timed_out, timeout,
                        killed, child_env)
    result.seconds = time.monotonic() - started
    result.rank_start = {**how, **({"warm_refused": refused} if refused else {})}
    return result


def _mark_case(child_env: dict[str, str], timeout: float) -> str:
    """Give every process of the case its token (even one that leaves the ranks' sessions, with
    setsid: at the end of the case, whatever carries it is killed, :func:`_reap`), its deadline
    (a rank outlives no case, even when its parent dies) and its rendezvous. The token."""
    token = uuid.uuid4().hex
    child_env[CASE_TOKEN] = token
    child_env[CASE_DEADLINE] = f"{time.time() + timeout + DEADLINE_GRACE_SECONDS:.0f}:" \
        f"{os.getpid()}"
    child_env["MASTER_ADDR"] = "127.0.0.1"
    child_env["MASTER_PORT"] = str(_free_port())
    return token


def _wait_for_ranks(procs: list[subprocess.Popen[bytes]], deadline: float,
                    stop: threading.Event | None) -> tuple[bool, bool]:
    """Wait for every rank to exit; ``(timed_out, interrupted)``."""
    first_exit: float | None = None
    while any(p.poll() is None for p in procs):
        now = time.monotonic()
        if stop is not None and stop.is_set():
            # Killed at once by the caller, as at the end of every case: an interrupted case
            # runs again from the start, in a new attempt directory, when resumed.
            return False, True
        if now >= deadline:
            return True, False
        if first_exit is None and any(p.poll() not in (None, 0) for p in procs):
            first_exit = now
        # A rank that died leaves its peers blocked in a collective: give them a grace
        # period to report their own outcome, then stop waiting for the full timeout.
        if first_exit is not None and now - first_exit > RANK_GRACE_SECONDS:
            break
        time.sleep(0.05)
    return False, False


def _end_ranks(procs: list[subprocess.Popen[bytes]], logs: list[_CappedLog],
               token: str) -> list[bool]:
    """End the case: every rank's whole session killed, also after a normal exit (a child it
    left behind must not write into the case directory after the receipt), whatever carries
    the case's token reaped, every log finished. Which ranks were still running."""
    killed = [False] * len(procs)
    for rank, proc in enumerate(procs):
        running = proc.poll() is None
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        if running:
            proc.wait()
            killed[rank] = True
    _reap(token)
    for log in logs:  # every writer of the pipes is gone: each log ends now
        log.finish()
    return killed


class CaseInterrupted(Exception):
    """A case stopped before it finished (its ``stop`` event was set): its ranks were killed
    and it has no result to record; a resumed sweep runs it again."""


# Caps on what a case keeps. A reproducer's own text (its assertion message, a traceback, its
# output) is copied into the rank's result, the receipt, the manifest (rewritten and fsynced
# at every state change) and every report, several times over: a 20 MB assertion message
# became a 40 MB manifest, 60 MB of HTML and an index.json past the size later sweeps read.
# What is kept is the beginning (what went wrong) and the end (how it ended, the values
# compared), with a note saying how much was left out between.
MESSAGE_HEAD_CHARS = 2000
MESSAGE_TAIL_CHARS = 1000
"""A message (an assertion's text, an exception's) becomes a verdict's reason, read in a
table cell: three thousand characters say everything a person reads there."""
TRACEBACK_HEAD_CHARS = 10_000
TRACEBACK_TAIL_CHARS = 10_000
"""A traceback keeps its outermost frames and its innermost ones with the exception line."""
LOG_HEAD_BYTES = 2 * 2**20
LOG_TAIL_BYTES = 2 * 2**20
"""A rank log keeps the first 2 MiB (startup, the first errors: written as they come, so a
running case can be watched) and the last 2 MiB (how it ended, where the sweep's log tail is
read: written when the rank's output ends): at most 4 MiB a rank, for a reproducer flooding
its output with hundreds of megabytes."""


_CLIP_NOTE_ROOM = 200
"""A text at most this much past ``head + tail`` is kept whole: room for the note, so a text
clipped once (the rank clips, the sweep clips what a rank reports) is never clipped again."""


def clip(text: str, head: int, tail: int) -> str:
    """``text``, or its first ``head`` and last ``tail`` characters with a note of what was
    left out between them."""
    if len(text) <= head + tail + _CLIP_NOTE_ROOM:
        return text
    return (f"{text[:head]} [… truncated: kept the first {head} and the last {tail} of "
            f"{len(text)} characters …] {text[len(text) - tail:]}")


class _CappedLog:
    """A rank's output (stdout and stderr, one pipe) copied into its log: the first
    :data:`LOG_HEAD_BYTES` as they come, the last :data:`LOG_TAIL_BYTES` kept in memory and
    written when the output ends, with a line saying how many bytes were left out between.
    A thread per rank drains the pipe, so a rank never blocks on a full one; a log that
    cannot be written (a full disk) is still drained. Hand-written: no library caps a
    subprocess's output this way (``logging.handlers.RotatingFileHandler`` rotates whole
    files and keeps neither the head nor one bounded file)."""

    def __init__(self, source: Any, path: Path) -> None:
        self._source = source
        self._path = path
        self._thread = threading.Thread(target=self._copy, name=f"patchlane-log-{path.name}",
                                        daemon=True)

    @classmethod
    def start(cls, proc: subprocess.Popen[bytes], path: Path) -> _CappedLog:
        log = cls(proc.stdout, path)
        log._thread.start()
        return log

    def finish(self, timeout: float = 10.0) -> None:
        # Only a process that escaped every kill could still hold the pipe open: the log is
        # left as far as it got rather than waited for.
        self._thread.join(timeout)

    def _copy(self) -> None:
        fd = self._source.fileno()
        total = written = 0
        tail: deque[bytes] = deque()
        kept = 0
        try:
            out = open(self._path, "wb", buffering=0)  # noqa: SIM115 - closed below
        except OSError:
            out = None
        try:
            while chunk := os.read(fd, 1 << 16):
                total += len(chunk)
                if written < LOG_HEAD_BYTES:
                    room = LOG_HEAD_BYTES - written
                    head, chunk = chunk[:room], chunk[room:]
                    written += len(head)
                    out = _write(out, head)
                if chunk:
                    tail.append(chunk)
                    kept += len(chunk)
                    while kept - len(tail[0]) >= LOG_TAIL_BYTES:  # whole chunks past the cap
                        kept -= len(tail.popleft())
            end = b"".join(tail)[-LOG_TAIL_BYTES:]
            left_out = total - written - len(end)
            if left_out:
                out = _write(out, (f"\n[patchlane: truncated: kept the first {written} and the "
                                   f"last {len(end)} of {total} bytes of this rank's output; "
                                   f"{left_out} bytes left out here]\n").encode())
            _write(out, end)
        finally:
            self._source.close()
            if out is not None:
                out.close()


def _write(out: Any, data: bytes) -> Any:
    """``data`` into ``out``; None (and nothing more written) once a write failed."""
    if out is None:
        return None
    try:
        out.write(data)
        return out
    except OSError:
        out.close()
        return None


CASE_TOKEN = "PATCHLANE_CASE_TOKEN"
CASE_DEADLINE = "PATCHLANE_CASE_DEADLINE"
"""A rank's own deadline (seconds since the epoch) and its parent's pid (``deadline:pid``):
the rank ends itself past the deadline, or once the process that started it is gone (a
killed sweep, bisect or radar), so a case never outlives what judges it, holding a GPU."""
DEADLINE_GRACE_SECONDS = 30.0
"""How long past the case's timeout a rank waits for its parent to kill it before it goes."""


def _reap(token: str) -> list[int]:
    """Kill every process whose environment carries this case's token (Linux ``/proc``):
    what escaped the ranks' sessions with ``setsid``. Read by hand, not with psutil, which is
    not a dependency of patchlane. Elsewhere nothing is found and the sessions' kill stands.
    Returns the pids killed."""
    needle = f"{CASE_TOKEN}={token}".encode()
    killed: list[int] = []
    proc = Path("/proc")
    for _ in range(3):  # a process may fork while we look: look again
        found = []
        for entry in proc.iterdir() if proc.is_dir() else ():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                environ = (entry / "environ").read_bytes()
            except OSError:
                continue
            if needle in environ.split(b"\0"):
                found.append(int(entry.name))
        for pid in found:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
        if not found:
            break
        time.sleep(0.05)
    return killed


TAIL_LINES = 20
TAIL_CHARS = 4096
# Only the end of a rank log is read: a reproducer that floods its output must not make the
# sweep read gigabytes to find the last twenty lines.
_TAIL_READ = 64 * 1024
# Control characters (NUL, escape sequences, a rank's stray binary output) make receipts and
# reports unreadable; tabs and newlines stay.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
# Python 3.11+ underlines the failing part of each traceback source line with ^^^ / ~~~: in
# a twenty-line tail those markers would push out the lines that say why.
_MARKERS = re.compile(r"^\s*[~^]+\s*$")
# The line that says why, in a Python traceback: ``pkg.mod.SomeError: message``.
_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt|Warning)\b")


def log_tail(path: Path, env: Mapping[str, str]) -> str:
    """The last lines of a rank log, secrets redacted, at most TAIL_LINES / TAIL_CHARS."""
    try:
        with path.open("rb") as fh:
            size = fh.seek(0, os.SEEK_END)
            fh.seek(max(0, size - _TAIL_READ))
            data = fh.read()
    except OSError:
        return ""
    if size > _TAIL_READ and b"\n" in data:
        data = data.split(b"\n", 1)[1]  # drop the partial first line
    text = _CONTROL.sub("\ufffd", data.decode("utf-8", errors="replace"))
    # Redacted before it is cut to size, so a cut can never split a secret out of its pattern.
    lines = [line for line in text.splitlines() if not _MARKERS.match(line)]
    tail = redact_text("\n".join(lines[-TAIL_LINES:]), env).rstrip()
    return tail if len(tail) <= TAIL_CHARS else "…" + tail[-(TAIL_CHARS - 1):]


def _why(tail: str) -> str:
    """One line of ``tail`` for a table: the exception line of a traceback, else the last line."""
    lines = [line.strip() for line in tail.splitlines() if line.strip()]
    found = next((line for line in reversed(lines) if _EXCEPTION_LINE.match(line)),
                 lines[-1] if lines else "")
    return found if len(found) <= 200 else found[:199] + "…"


def _clip_report(data: dict[str, Any]) -> None:
    """What a rank reports, within the caps (the runner keeps to them; a rank result written
    by anything else may not)."""
    caps = {"message": (MESSAGE_HEAD_CHARS, MESSAGE_TAIL_CHARS),
            "traceback": (TRACEBACK_HEAD_CHARS, TRACEBACK_TAIL_CHARS)}
    for key, (head, tail) in caps.items():
        if isinstance(data.get(key), str):
            data[key] = clip(data[key], head, tail)


def _rank_outcome(rank: int, data: dict[str, Any]) -> RunOutcome:
    """The outcome a rank's record states; a record without a valid one is an error (and says
    so in the record), never a pass."""
    try:
        return RunOutcome(data.get("outcome"))
    except ValueError:
        data["message"] = (f"rank {rank} reported outcome {data.get('outcome')!r}, not one of "
                           f"{[o.value for o in RunOutcome]}")
        data["outcome"], data["stage"] = RunOutcome.ERROR.value, "verify"
        return RunOutcome.ERROR


def _aggregate(entry: Entry, mode: Mode, lane: Lane, world_size: int, case_dir: Path,
               procs: Sequence[subprocess.Popen[bytes]], timed_out: bool,
               timeout: float, killed: Sequence[bool], env: Mapping[str, str]) -> CaseResult:
    ranks: list[dict[str, Any]] = []
    error = RunOutcome.ERROR.value
    for rank, proc in enumerate(procs):
        result_file = case_dir / f"rank{rank}.json"
        data: dict[str, Any]
        reported = result_file.is_file()
        if reported:
            data = json.loads(result_file.read_text(encoding="utf-8"))
            _clip_report(data)
        elif timed_out:
            data = {"outcome": error, "stage": "timeout",
                    "message": f"rank {rank} did not finish within {timeout:.0f}s"}
        elif proc.returncode == -signal.SIGKILL and killed[rank]:
            data = {"outcome": error, "stage": "timeout",
                    "message": f"rank {rank} still running {RANK_GRACE_SECONDS:.0f}s after a "
                               "peer exited (blocked in a collective?)"}
        elif proc.returncode is not None and proc.returncode < 0:
            data = {"outcome": error, "stage": "crash",
                    "message": f"rank {rank} killed by signal {-proc.returncode}"}
        else:
            data = {"outcome": error, "stage": "bootstrap",
                    "message": f"rank {rank} exited {proc.returncode} before reporting"}
        outcome = _rank_outcome(rank, data)
        if (outcome is RunOutcome.ERROR and proc.returncode == -signal.SIGKILL
                and not killed[rank]):
            data["stage"] = "oom"  # a SIGKILL we did not send is the kernel's OOM killer
        data["rank"] = rank
        data["exit_code"] = proc.returncode
        data["log"] = str(case_dir / f"rank{rank}.log")
        if outcome is not RunOutcome.PASS:
            tail = log_tail(case_dir / f"rank{rank}.log", env)
            data["stderr_tail"] = tail
            # What a rank reports about itself can quote its environment as freely as its log.
            for key in ("message", "traceback"):
                if isinstance(data.get(key), str):
                    data[key] = redact_text(data[key], env)
            why = _why(tail)
            if not reported and data.get("stage") == "bootstrap" and why:
                # It died before it could say why: its own last words do.
                data["message"] = f"{data['message']}: {why}"
        ranks.append(data)
    # The case is as bad as its worst rank (error, then fail), and says what that rank said.
    worst = worst_rank(ranks) or ranks[0]
    outcome = RunOutcome(worst["outcome"])
    stage = str(worst.get("stage", "run")) if outcome is RunOutcome.ERROR else ""
    return CaseResult(entry.id, mode, lane, world_size, outcome,
                      str(worst.get("message", "")), stage, ranks=ranks,
                      stderr_tail=worst.get("stderr_tail") if outcome is RunOutcome.ERROR
                      else None)
