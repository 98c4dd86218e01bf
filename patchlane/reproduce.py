"""Running one reproducer case: an entry, a mode (with / without its overlay), a lane, a world size.

Every rank runs in its own fresh interpreter (``python -m patchlane._runner``), so the overlay is
applied (or not) by the real import-time walk, exactly as in a training job. A reproducer is a
plain Python file that defines::

    LANES = ("cpu", "cuda")        # lanes it supports, as literals
    WORLD_SIZES = (1, 2)           # world sizes it supports, as literals
    def run(ctx: ReproContext) -> None: ...

``run`` raises ``AssertionError`` when the upstream bug shows (that is a *fail*); any other
exception is an *error* of the harness or the environment, never a verdict.
"""

from __future__ import annotations

import ast
import contextlib
import enum
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import ReproducerError
from .registry import Entry

__all__ = [
    "CaseResult",
    "Mode",
    "ReproContext",
    "ReproducerSpec",
    "RunOutcome",
    "case_env",
    "read_spec",
    "run_case",
]


class Mode(str, enum.Enum):
    WITH = "with"
    WITHOUT = "without"


class RunOutcome(str, enum.Enum):
    PASS = "pass"
    FAIL = "fail"
    ERROR = "error"


@dataclass(frozen=True)
class ReproContext:
    entry_id: str
    mode: Mode
    lane: str
    rank: int
    world_size: int
    workdir: Path
    """A directory shared by every rank of this case."""
    init_method: str
    """A ``file://`` rendezvous for ``torch.distributed.init_process_group``."""

    @property
    def device(self) -> str:
        return f"cuda:{self.rank}" if self.lane == "cuda" else "cpu"

    @property
    def backend(self) -> str:
        return "nccl" if self.lane == "cuda" else "gloo"

    @contextlib.contextmanager
    def process_group(self) -> Iterator[Any]:
        """This case's process group (gloo on cpu, NCCL with one GPU per rank on cuda), torn
        down on exit; yields the default group."""
        import torch
        import torch.distributed as dist

        if self.lane == "cuda":
            torch.cuda.set_device(self.rank)
        dist.init_process_group(self.backend, init_method=self.init_method, rank=self.rank,
                                world_size=self.world_size)
        try:
            yield dist.group.WORLD
        finally:
            dist.destroy_process_group()


@dataclass(frozen=True)
class ReproducerSpec:
    lanes: tuple[str, ...]
    world_sizes: tuple[int, ...]


@dataclass
class CaseResult:
    entry_id: str
    mode: Mode
    lane: str
    world_size: int
    outcome: RunOutcome
    message: str
    stage: str = ""
    """For errors: import, setup, run, timeout, crash."""
    seconds: float = 0.0
    ranks: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "entry_id": self.entry_id,
            "mode": self.mode.value,
            "lane": self.lane,
            "world_size": self.world_size,
            "outcome": self.outcome.value,
            "message": self.message,
            "stage": self.stage,
            "seconds": round(self.seconds, 3),
            "ranks": self.ranks,
        }


def read_spec(entry: Entry) -> ReproducerSpec:
    """Read LANES / WORLD_SIZES as literals, without importing the reproducer (or torch)."""
    if entry.reproducer is None:
        raise ReproducerError(entry.id, "the registry entry declares no reproducer")
    tree = ast.parse(entry.reproducer.read_text(encoding="utf-8"), str(entry.reproducer))
    values: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name) and target.id in ("LANES", "WORLD_SIZES"):
                values[target.id] = ast.literal_eval(node.value)
    lanes = tuple(values.get("LANES", ("cpu",)))
    sizes = tuple(int(n) for n in values.get("WORLD_SIZES", (1,)))
    if not lanes or not sizes or any(n < 1 for n in sizes):
        raise ReproducerError(entry.id, f"{entry.reproducer}: LANES and WORLD_SIZES must be "
                                        f"non-empty literals; found {lanes!r}, {sizes!r}")
    return ReproducerSpec(lanes=lanes, world_sizes=sizes)


def case_env(entry: Entry, mode: Mode, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of one case: only this entry is considered, strictly."""
    env = dict(os.environ if base is None else base)
    registries = [str(p) for p in _extra_registries(entry)]
    env["PATCHLANE_ONLY"] = entry.id
    env["PATCHLANE_STRICT"] = "1"
    if mode is Mode.WITHOUT:
        env["PATCHLANE_DISABLE"] = entry.id
    else:
        env.pop("PATCHLANE_DISABLE", None)
    if registries:
        known = [p for p in env.get("PATCHLANE_REGISTRY", "").split(os.pathsep) if p]
        env["PATCHLANE_REGISTRY"] = os.pathsep.join(dict.fromkeys(known + registries))
    return env


def _extra_registries(entry: Entry) -> list[Path]:
    from ._startup import default_registry_path

    default = default_registry_path().resolve()
    return [] if entry.source == default else [entry.source]


RANK_GRACE_SECONDS = 30.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run_case(
    entry: Entry,
    mode: Mode,
    *,
    lane: str = "cpu",
    world_size: int = 1,
    timeout: float = 600.0,
    workdir: Path | None = None,
    env: Mapping[str, str] | None = None,
    flat: bool = False,
) -> CaseResult:
    """Run one case: ``world_size`` fresh interpreters, one per rank, sharing a work dir
    (``workdir/<mode>-<lane>-ws<N>``, or ``workdir`` itself when ``flat``)."""
    if entry.reproducer is None:
        raise ReproducerError(entry.id, "the registry entry declares no reproducer")
    started = time.monotonic()
    root = Path(tempfile.mkdtemp(prefix=f"patchlane-{entry.id}-")) if workdir is None else workdir
    root.mkdir(parents=True, exist_ok=True)
    case_dir = root if flat else root / f"{mode.value}-{lane}-ws{world_size}"
    case_dir.mkdir(parents=True, exist_ok=True)
    child_env = case_env(entry, mode, env)
    child_env["MASTER_ADDR"] = "127.0.0.1"
    child_env["MASTER_PORT"] = str(_free_port())
    procs: list[subprocess.Popen[bytes]] = []
    logs = []
    for rank in range(world_size):
        log_file = open(case_dir / f"rank{rank}.log", "wb")  # noqa: SIM115 - closed below
        logs.append(log_file)
        cmd = [sys.executable, "-m", "patchlane._runner", "--entry", entry.id, "--mode",
               mode.value, "--lane", lane, "--rank", str(rank), "--world-size", str(world_size),
               "--workdir", str(case_dir)]
        procs.append(subprocess.Popen(cmd, env=child_env, stdout=log_file,
                                      stderr=subprocess.STDOUT, start_new_session=True))
    timed_out = False
    deadline = started + timeout
    first_exit: float | None = None
    try:
        while any(p.poll() is None for p in procs):
            now = time.monotonic()
            if now >= deadline:
                timed_out = True
                break
            if first_exit is None and any(p.poll() not in (None, 0) for p in procs):
                first_exit = now
            # A rank that died leaves its peers blocked in a collective: give them a grace
            # period to report their own outcome, then stop waiting for the full timeout.
            if first_exit is not None and now - first_exit > RANK_GRACE_SECONDS:
                break
            time.sleep(0.05)
    finally:
        killed = [False] * len(procs)
        for rank, proc in enumerate(procs):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                killed[rank] = True
        for log_file in logs:
            log_file.close()
    result = _aggregate(entry, mode, lane, world_size, case_dir, procs, timed_out, timeout,
                        killed)
    result.seconds = time.monotonic() - started
    return result


def _tail(path: Path, lines: int = 25) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def _aggregate(entry: Entry, mode: Mode, lane: str, world_size: int, case_dir: Path,
               procs: Sequence[subprocess.Popen[bytes]], timed_out: bool,
               timeout: float, killed: Sequence[bool]) -> CaseResult:
    ranks: list[dict[str, Any]] = []
    for rank, proc in enumerate(procs):
        result_file = case_dir / f"rank{rank}.json"
        data: dict[str, Any]
        if result_file.is_file():
            data = json.loads(result_file.read_text(encoding="utf-8"))
        elif timed_out:
            data = {"outcome": "error", "stage": "timeout",
                    "message": f"rank {rank} did not finish within {timeout:.0f}s"}
        elif proc.returncode == -signal.SIGKILL and killed[rank]:
            data = {"outcome": "error", "stage": "timeout",
                    "message": f"rank {rank} still running {RANK_GRACE_SECONDS:.0f}s after a "
                               "peer exited (blocked in a collective?)"}
        elif proc.returncode is not None and proc.returncode < 0:
            data = {"outcome": "error", "stage": "crash",
                    "message": f"rank {rank} killed by signal {-proc.returncode}"}
        else:
            data = {"outcome": "error", "stage": "bootstrap",
                    "message": f"rank {rank} exited {proc.returncode} before reporting"}
        if (data.get("outcome") == "error" and proc.returncode == -signal.SIGKILL
                and not killed[rank]):
            data["stage"] = "oom"  # a SIGKILL we did not send is the kernel's OOM killer
        data["rank"] = rank
        data["exit_code"] = proc.returncode
        data["log"] = str(case_dir / f"rank{rank}.log")
        if data.get("outcome") != "pass":
            data["log_tail"] = _tail(case_dir / f"rank{rank}.log")
        ranks.append(data)
    outcomes = [r.get("outcome") for r in ranks]
    if "error" in outcomes:
        worst = next(r for r in ranks if r.get("outcome") == "error")
        outcome, stage = RunOutcome.ERROR, str(worst.get("stage", "run"))
    elif "fail" in outcomes:
        worst = next(r for r in ranks if r.get("outcome") == "fail")
        outcome, stage = RunOutcome.FAIL, ""
    else:
        worst = ranks[0]
        outcome, stage = RunOutcome.PASS, ""
    return CaseResult(entry.id, mode, lane, world_size, outcome,
                      str(worst.get("message", "")), stage, ranks=ranks)
