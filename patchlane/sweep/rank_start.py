"""How a case's ranks start: ``fresh`` (the default, and what the nightly's proof runs), each a
new ``python -m patchlane.sweep.runner``; or ``warm``, each forked from a server that imported
torch once (:mod:`patchlane.sweep.warm_server`), for the CPU lane's ranks that allow it.

Most of a CPU megatron rank is the import of torch and megatron-core, not the reproducer: a
case costs 12.2 CPU seconds fresh and 3.5 warm, the server's preload included
(``benchmarks/bench_rank_start.py``, megatron-core 0.19.2). What a warm rank changes, and so
where it is not used:

* torch is imported before patchlane's hooks. So only an entry its overlay decides (wrapping
  its target when that is imported) may start warm, and only when its target is not torch; the
  entries it depends on are held to the same; a ledger reproducer's case on its bad side
  starts fresh (its releases come first on the path, torch possibly among them).
* Only the CPU lane: a CUDA rank starts fresh (CUDA must never be initialised in a process
  that forks, and the GPU lane's ranks are the nightly's proof on the real machine).
* A warm rank's peak RSS leaves out torch's pages it shares with the server, so it reads lower
  (about 270 MiB less for a megatron rank), and every warm rank of a server has the same hash
  seed. The receipt says ``rank_start: warm`` and what was ``preloaded``, so no one reads its
  figures as a fresh rank's.
* torch's compiler (``torch._dynamo``), preloaded for megatron-core, imports triton, which
  reads ``TRITON_INTERPRET`` when it is imported: a reproducer that sets the environment
  (:func:`sets_environment`) starts fresh, as liger-kernel's CPU reproducers do.
* A rank that never imports torch (neither its reproducer nor its target's distribution
  does: a team's pure-Python target) starts fresh: a server would only add torch's import.
* A server that cannot import torch (a stack without it) answers so: its ranks start fresh.
* What a warm rank spawns with ``multiprocessing`` (megatron-core's checkpoint writer starts a
  spawn-context Manager, which imports torch to read each write result) is forked from the same
  server, with the rank's environment, command line and descriptors: torch is there before it
  runs, as in the rank. Anything else a rank starts (a subprocess, the resource tracker) starts
  as it would without the server.

One server per environment (the case's environment less patchlane's own settings and the
rendezvous: what torch could read when it is imported), started on the first warm case and
stopped when the sweep's process ends (its stdin closes), or earlier when the process has more
than :data:`KEPT_SERVERS` and no case of it runs. A case whose ``PYTHONPATH`` differs from a
server's only by folders that hold nothing the server imported or looked for while it
preloaded (:func:`shadowing`) is served by that server, with the ``sys.path`` a fresh rank has
(``warm_server.rebuild_path``): a changed copy of a release (``patchlane draft --verify``) or a
bisect step's release shares the server instead of importing torch again.

A process that starts child sweeps (a release-matrix set's, the radar's) lends them a server
of its own (:func:`lend`): the child's cases it serves fork from it, so the sets of one
``patchlane matrix`` import torch once, not once per set. The child never stops a lent server;
a case it does not serve (another environment, a set whose own torch comes first on the path)
gets a server of the child's own, as before.
"""

from __future__ import annotations

import ast
import atexit
import contextlib
import enum
import hashlib
import importlib.machinery
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..registry import Entry
from ..registry.kinds import KINDS, DecidedBy
from .installs import first_on_path

__all__ = ["KEPT_SERVERS", "LENT", "RankStart", "lend", "rank_starts", "shadowing",
           "shutdown", "warm_allowed"]

_HERE = Path(__file__).resolve().parent
_PER_CASE = ("MASTER_ADDR", "MASTER_PORT")
"""Set per case, read by no import: a server serves every case whose environment differs from
its own only in these and in ``PATCHLANE_*`` (patchlane's settings, read by the rank's
``import patchlane``, after the fork)."""
_SET_OR_NOT = ("PYTEST_CURRENT_TEST",)
"""Whose value no import reads, only whether it is set: pytest names the test it runs in
``PYTEST_CURRENT_TEST``, a new value for each test (and each of its phases). A server serves a
case that has it set as the server had it set, whatever the value; a rank gets the case's own
value (its environment is the case's, whole, after the fork)."""
LENT = "PATCHLANE_WARM_SERVER"
"""The setting a process that starts a child sweep hands it down (:func:`lend`): the server it
lends, as JSON. Written by patchlane for its own child sweeps; nobody sets it by hand."""
KEPT_SERVERS = 2
"""Servers one process keeps. Each holds torch's pages (about 0.5 GB); a process that runs
cases in many environments (``patchlane draft --verify``: each change on its own copy of the
release, first on the path) would otherwise keep one per environment until it ends. Past this
many, an idle server (no case of it running) is stopped, the least recently used first; a
server with a case running never is."""


class RankStart(enum.Enum):
    FRESH = "fresh"
    WARM = "warm"


def warm_allowed(entry: Entry, lane: str, bad_side: bool) -> str | None:
    """Why a case's ranks must start fresh even when warm ones are asked for; None when a warm
    start proves the same (the reasons in the module's text). An entry it depends on is
    applied in both modes, so it is held to the same rules."""
    if lane != "cpu":
        return f"the {lane} lane starts every rank fresh"
    if bad_side:
        return "its case without the entry runs on its bad-side releases"
    if not uses_torch(entry):
        return ("neither its reproducer nor its target's distribution imports torch: a warm "
                "start would only add the server's import of it")
    if entry.reproducer is not None and sets_environment(entry.reproducer):
        return ("its reproducer sets the environment, which a module it imports after may "
                "read when imported, and a warm rank imported torch and triton before")
    checked = [entry]
    if entry.depends_on:
        from ..startup import current

        known = {e.id: e for e in current().registry.entries}
        missing = [name for name in entry.depends_on if name not in known]
        if missing:
            return f"the entries it depends on ({', '.join(missing)}) are not loaded here"
        checked += [known[name] for name in entry.depends_on]
    for one in checked:
        which = "the entry" if one is entry else f"{one.id}, which it depends on,"
        decided_by = KINDS[one.kind].decided_by
        if decided_by is not DecidedBy.WRAP:
            return (f"{which} is a {one.kind.value} entry, decided by {decided_by.value}: it "
                    "may set or check what torch reads when it is imported")
        if (one.target.module or "").partition(".")[0] == "torch":
            return f"{which} targets torch, which a warm rank imported before patchlane"
    return None


def uses_torch(entry: Entry) -> bool:
    """Whether a rank of ``entry`` imports torch, which a warm start saves: its target's
    distribution requires torch (installed metadata, as this sweep sees it), or its reproducer
    imports it (read, not run). A reproducer that cannot be read counts as one that does."""
    from importlib import metadata

    from packaging.requirements import InvalidRequirement, Requirement

    try:
        declared = metadata.requires(entry.target.distribution) or []
    except (metadata.PackageNotFoundError, ValueError):
        declared = []
    for line in declared:
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            continue
        if requirement.name == "torch" and (requirement.marker is None
                                            or requirement.marker.evaluate({"extra": ""})):
            return True
    if entry.reproducer is None:
        return False
    try:
        tree = ast.parse(entry.reproducer.read_text(encoding="utf-8"), str(entry.reproducer))
    except (OSError, SyntaxError, ValueError):
        return True
    for node in ast.walk(tree):
        names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                 else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
        if any(name.partition(".")[0] == "torch" for name in names):
            return True
    return False


_ENV_WRITERS = {"putenv", "unsetenv", "setenv", "delenv"}
_ENVIRON_WRITERS = {"setdefault", "update", "pop", "popitem", "clear", "__setitem__",
                    "__delitem__"}


def sets_environment(path: Path) -> bool:
    """Whether the Python file at ``path`` writes the process environment: ``os.environ[...] =``
    (or ``del``), a mutating method of ``os.environ``, ``os.putenv`` / ``unsetenv``, or
    pytest's ``monkeypatch.setenv`` / ``delenv``. Read, not run; a file that cannot be read
    or parsed counts as one that does."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    except (OSError, SyntaxError, ValueError):
        return True

    def environ(node: ast.AST) -> bool:
        return (isinstance(node, ast.Attribute) and node.attr == "environ") or (
            isinstance(node, ast.Name) and node.id == "environ")

    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and environ(node.value) and not isinstance(
                node.ctx, ast.Load):
            return True
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            name = node.func.attr
            if name in _ENV_WRITERS or (name in _ENVIRON_WRITERS and environ(node.func.value)):
                return True
    return False


class _Server:
    def __init__(self, env: Mapping[str, str]) -> None:
        self.folder = tempfile.mkdtemp(prefix="patchlane-warm-")
        self.socket = os.path.join(self.folder, "server.sock")
        self.proc = subprocess.Popen(
            [sys.executable, "-P", str(_HERE / "warm_server.py"), self.socket], env=dict(env),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=open(os.path.join(self.folder, "server.log"), "wb"),  # noqa: SIM115
            start_new_session=True, cwd=self.folder)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        try:
            ready = json.loads(line)
        except ValueError:
            ready = {"ready": False, "error": f"said {line[:200]!r}"}
        self.ready = bool(ready.get("ready"))
        self.preloaded: list[str] = list(ready.get("preloaded", []))
        self.modules = frozenset(ready.get("modules", []))
        """The top-level names its preload imported or looked for: what a folder it is asked to
        serve must not hold."""
        self.env = dict(env)
        self.rest = _rest(env)
        """What :func:`_may_serve` compares of its environment besides ``PYTHONPATH``."""
        self.error = str(ready.get("error", ""))
        self.cases = 0
        """Cases whose ranks it starts now (:func:`rank_starts`): while any, it is kept."""
        self.used = time.monotonic()

    def serves(self, env: Mapping[str, str]) -> bool:
        """Whether a case in ``env`` may fork from this server (:func:`_may_serve`)."""
        return self.ready and _may_serve(self.rest, self.env.get("PYTHONPATH", ""),
                                         self.modules, env)

    def handle(self) -> str:
        """What :data:`LENT` says of this server: how to reach it, and what
        :func:`_may_serve` reads of it (its environment only as a digest)."""
        return json.dumps({"socket": self.socket, "pid": self.proc.pid,
                           "rest": self.rest, "pythonpath": self.env.get("PYTHONPATH", ""),
                           "modules": sorted(self.modules), "preloaded": self.preloaded})

    def stop(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            if self.proc.stdin is not None:
                self.proc.stdin.close()  # the server kills what still runs and exits
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for name in ("server.sock", "server.log", "spawn"):
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(self.folder, name))
        with contextlib.suppress(OSError):
            os.rmdir(self.folder)


class _Lent:
    """A server another process holds and lent this one (:data:`LENT`): its cases fork from it
    where it serves them; this process never stops it (its holder does, when it ends)."""

    def __init__(self, value: str) -> None:
        handle: Mapping[str, Any] = json.loads(value)
        self.value = value
        self.socket = str(handle["socket"])
        self.pid = int(handle["pid"])
        self.rest = str(handle["rest"])
        self.pythonpath = str(handle["pythonpath"])
        self.modules = frozenset(str(m) for m in handle["modules"])
        self.preloaded = [str(m) for m in handle["preloaded"]]
        self.ready, self.error = True, ""
        self.cases = 0
        self.used = time.monotonic()

    def serves(self, env: Mapping[str, str]) -> bool:
        try:
            os.kill(self.pid, 0)
        except OSError:  # gone (its holder ended): this process starts its own
            return False
        return (os.path.exists(self.socket)
                and _may_serve(self.rest, self.pythonpath, self.modules, env))

    def handle(self) -> str:
        return self.value  # lent on as it was lent (a child sweep's own child)


_SERVERS: dict[tuple[tuple[str, str], ...], _Server] = {}
_LOCK = threading.Lock()
_LENT_TO_ME: dict[str, _Lent | None] = {}
"""The server :data:`LENT` names, read once per value (None: unreadable)."""


def _rest(env: Mapping[str, str]) -> str:
    """A digest of what of ``env`` a server must share with a case besides ``PYTHONPATH``."""
    rest = [[k, v] for k, v in _server_key(env) if k != "PYTHONPATH"]
    return hashlib.sha256(json.dumps(rest).encode()).hexdigest()


def _may_serve(rest: str, pythonpath: str, modules: frozenset[str],
               env: Mapping[str, str]) -> bool:
    """Whether a case in ``env`` may fork from a server whose environment is ``rest`` (less
    ``PYTHONPATH``: :func:`_rest`) and ``pythonpath``, which imported or looked for
    ``modules``: the same environment but for folders of ``PYTHONPATH`` that hold nothing it
    imported, so what it imported is what a fresh rank in ``env`` would import."""
    return rest == _rest(env) and not shadowing(pythonpath, env.get("PYTHONPATH", ""), modules)


def _lent_to_me() -> _Lent | None:
    value = os.environ.get(LENT)
    if not value:
        return None
    if value not in _LENT_TO_ME:
        try:
            _LENT_TO_ME[value] = _Lent(value)
        except (ValueError, TypeError, KeyError):
            _LENT_TO_ME[value] = None  # not one patchlane wrote: this process starts its own
    return _LENT_TO_ME[value]


def shadowing(mine: str, theirs: str, modules: frozenset[str]) -> list[str]:
    """Why an interpreter that imported (or looked for) ``modules`` with ``PYTHONPATH=mine``
    cannot stand for a fresh one with ``PYTHONPATH=theirs``: each folder only one of them has
    that would change what it imported (:func:`_holds_any`), and the folders both have when
    their order differs (another could then find a module first). Empty: it can."""
    a, b = (path.split(os.pathsep) if path else [] for path in (mine, theirs))
    found = sorted(folder for folder in set(a) ^ set(b) if _holds_any(folder, modules))
    common = set(a) & set(b)
    if [p for p in a if p in common] != [p for p in b if p in common]:
        found.append("the folders both have, in another order")
    return found


def _holds_any(folder: str, modules: frozenset[str]) -> bool:
    """Whether ``folder`` on ``PYTHONPATH`` would change what a server imported: it holds one
    of ``modules`` (a package, a module, an extension, a namespace portion), or a distribution
    that declares entry points (torch loads its ``torch.backends`` ones at import). A relative
    or empty entry counts as holding everything (it depends on the working directory), and so
    does a path that is no folder (a zip or an egg: read whole, not by name); a path that does
    not exist holds nothing."""
    if not folder or not os.path.isabs(folder):
        return True
    if not os.path.exists(folder):
        return False
    if not os.path.isdir(folder):
        return True
    if any(Path(folder).glob("*.*-info/entry_points.txt")):
        return True
    for name in modules:
        try:
            if importlib.machinery.PathFinder.find_spec(name, [folder]) is not None:
                return True
        except (ImportError, ValueError, OSError):
            return True
    return False


def _server_env(env: Mapping[str, str]) -> dict[str, str]:
    """The environment a server for a case in ``env`` runs in: ``env`` less :data:`_PER_CASE`
    and ``PATCHLANE_*``."""
    return {k: v for k, v in env.items() if not k.startswith("PATCHLANE_") and k not in _PER_CASE}


def _server_key(env: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """Which server serves a case in ``env``: its :func:`_server_env`, with only whether each
    of :data:`_SET_OR_NOT` is set."""
    return tuple(sorted((k, "(set)" if k in _SET_OR_NOT else v)
                        for k, v in _server_env(env).items()))


def _hold(env: Mapping[str, str]) -> _Server | _Lent:
    """The server for ``env``, started if none runs (none of this process's, and the one lent
    to it does not serve ``env``), held for one case; idle servers past :data:`KEPT_SERVERS`
    stopped."""
    key = _server_key(env)
    with _LOCK:
        server: _Server | _Lent | None = _SERVERS.get(key)
        if isinstance(server, _Server) and server.proc.poll() is not None:  # it died
            del _SERVERS[key]
            server.stop()
            server = None
        if server is None:
            server = next((s for s in _SERVERS.values()
                           if s.proc.poll() is None and s.serves(env)), None)
        if server is None:
            lent = _lent_to_me()
            server = lent if lent is not None and lent.serves(env) else None
        if server is None:
            server = _SERVERS[key] = _Server(_server_env(env))
        server.cases += 1
        server.used = time.monotonic()
        idle = sorted((s.used, k) for k, s in _SERVERS.items() if s.cases == 0)
        surplus = [_SERVERS.pop(k) for _, k in idle[:max(0, len(_SERVERS) - KEPT_SERVERS)]]
    for old in surplus:
        old.stop()
    return server


@contextlib.contextmanager
def _held(env: Mapping[str, str]) -> Iterator[_Server | _Lent]:
    """The server for ``env`` (:func:`_hold`), held until the block ends."""
    server = _hold(env)
    try:
        yield server
    finally:
        with _LOCK:
            server.cases -= 1
            server.used = time.monotonic()


@contextlib.contextmanager
def rank_starts(env: Mapping[str, str], start: RankStart
                ) -> Iterator[Callable[[list[str]], tuple[list[str], dict[str, object]]]]:
    """For one case: a function giving the command that starts one rank (the runner's
    arguments in) and how it started (for its receipt: ``rank_start``, and for a warm one what
    was ``preloaded``, or why it started fresh after all). A warm case holds its server until
    the block ends: end the case's ranks inside it."""
    def fresh(runner_args: list[str]) -> list[str]:
        return [sys.executable, "-m", "patchlane.sweep.runner", *runner_args]

    if start is RankStart.FRESH:
        yield lambda args: (fresh(args), {"rank_start": RankStart.FRESH.value})
        return
    with _held(env) as server:
        if not server.ready:
            how: dict[str, object] = {
                "rank_start": RankStart.FRESH.value,
                "warm_refused": f"the warm-rank server could not preload torch: {server.error}"}
            yield lambda args: (fresh(args), how)
        else:
            shim = [sys.executable, "-I", "-S", str(_HERE / "warm_shim.py"), server.socket, "--"]
            warm: dict[str, object] = {"rank_start": RankStart.WARM.value,
                                       "preloaded": server.preloaded}
            yield lambda args: ([*shim, *args], warm)


@contextlib.contextmanager
def lend(env: Mapping[str, str], first: Sequence[str] = ()) -> Iterator[dict[str, str]]:
    """For a child process that sweeps in ``env`` with the folders ``first`` first on its
    ``PYTHONPATH`` (a matrix set's releases): a server of this process for ``env`` (kept from
    an earlier child, or started), held until the block ends, and the setting that lends it
    (``{LENT: ...}``). Nothing is lent (``{}``) where the server could not serve the child's
    cases: a folder of ``first`` holds torch (a set's own torch build: the child starts a
    server of its own, as it would have), or the server could not preload torch."""
    if any(_holds_any(folder, frozenset({"torch"})) for folder in first):
        yield {}
        return
    with _held(env) as server:
        yield {LENT: server.handle()} if server.serves(first_on_path(env, first)) else {}


def shutdown() -> None:
    """Stop every warm-rank server of this process (each kills the ranks it still has)."""
    with _LOCK:
        servers = list(_SERVERS.values())
        _SERVERS.clear()
    for server in servers:
        server.stop()


atexit.register(shutdown)
