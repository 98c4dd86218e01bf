"""The release matrix: the sweep run against sets of real upstream releases, with the verdict
each entry must get on each set (``matrix.yaml``).

A set's releases are installed once into ``.cache/releases/<spec>`` with
``pip install --no-deps --target`` and put first on ``PYTHONPATH`` for a sweep subprocess, so
the gate, the probe and the reproducer all see exactly that release (its metadata and code),
next to the torch of the current environment. No virtual environment per set: a set costs a
download, not a torch install.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from packaging.utils import canonicalize_name

from ..common.errors import MatrixError, MatrixRunError
from ..common.exit_codes import SWEEP_BASE
from ..common.files import read_regular
from ..registry import Entry
from ..reproducer import LANES, Lane
from ..runs.index import RunIndex
from ..runs.verdicts import Verdict
from ..sweep import rank_start as rank_start_mod
from ..sweep.installs import RELEASE_SPEC, first_on_path, install_dir
from ..sweep.stopping import SIGNAL_POLL_SECONDS, stopped, stopping_signals

__all__ = ["MatrixResult", "MatrixSet", "install_dir", "interpreter", "load_matrix", "parse_matrix",
           "run_set", "sweep_releases"]

_SPEC = RELEASE_SPEC


def interpreter() -> str:
    """This interpreter's ``major.minor``, as matrix sets name it."""
    return f"{sys.version_info.major}.{sys.version_info.minor}"


@dataclass(frozen=True)
class MatrixSet:
    name: str
    install: tuple[str, ...]
    expect: Mapping[str, Verdict]
    python: tuple[str, ...] = ()
    """Interpreters (``major.minor``) the set runs on; empty: any. megatron-core >= 0.17 has
    only cp312 wheels, so those sets say ``python: ["3.12"]``."""
    deps: tuple[str, ...] = ()
    """Specs of ``install`` installed with their dependencies: a torch release brings its own
    CUDA libraries and triton, which the venv's torch does not match."""
    lanes: tuple[Lane, ...] = ("cpu",)
    """The lanes the set is swept on (``lanes: [cuda]``: the prepared GPU check's sets, which
    the CPU test suite leaves to a GPU)."""

    def releases_of(self, distribution: str) -> tuple[str, ...]:
        """The releases of ``distribution`` the set installs (names compared as PEP 503
        normalizes them)."""
        name = canonicalize_name(distribution)
        return tuple(spec.partition("==")[2] for spec in self.install
                     if canonicalize_name(spec.partition("==")[0]) == name)

    def runs_here(self) -> bool:
        return not self.python or interpreter() in self.python


@dataclass
class MatrixResult:
    name: str
    ok: bool
    mismatches: list[str]
    verdicts: dict[str, list[Verdict]]
    run_dir: Path
    exit_code: int
    not_run: list[str] = field(default_factory=list)
    """Rows the lane kept out (see :data:`NOT_ON_THIS_LANE`)."""


def load_matrix(path: Path) -> list[MatrixSet]:
    try:
        # a FIFO or a device named as the matrix is refused, never waited on
        text = read_regular(path).decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise MatrixError(f"{path}: cannot read the release matrix: {exc}; fix: name the "
                          "matrix.yaml file") from None
    return parse_matrix(path, text)


def parse_matrix(path: Path, text: str) -> list[MatrixSet]:
    """The sets of a release matrix's ``text`` (``path``: where it is, for messages)."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise MatrixError(f"{path}: cannot read the release matrix: {exc}") from None
    if not isinstance(data, dict) or data.get("schema") != 1 or not isinstance(
            data.get("sets"), list):
        raise MatrixError(f"{path}: expected `schema: 1` and a `sets:` list")
    sets = []
    for i, raw in enumerate(data["sets"]):
        where = f"{path}: sets[{i}]"
        if not isinstance(raw, dict) or set(raw) - {"name", "install", "expect", "python",
                                                    "deps", "lanes"}:
            raise MatrixError(f"{where}: expected keys name, install, expect and optionally "
                              f"python, deps, lanes (found "
                              f"{sorted(raw) if isinstance(raw, dict) else raw})")
        python = raw.get("python") or []
        if isinstance(python, str):
            python = [python]
        if not isinstance(python, list) or not all(
                isinstance(p, str) and re.fullmatch(r"3\.\d+", p) for p in python):
            raise MatrixError(f"{where}: python {python!r}: expected a list of interpreter "
                              "versions such as [\"3.12\"]")
        install = raw.get("install") or []
        bad = [s for s in install if not isinstance(s, str) or not _SPEC.match(s)]
        if bad:
            raise MatrixError(f"{where}: install {bad!r}: pin each release as NAME==VERSION")
        expect = raw.get("expect") or {}
        parsed: dict[str, Verdict] = {}
        wrong: dict[str, object] = {}
        for key, value in expect.items() if isinstance(expect, dict) else ():
            verdict = _verdict(value)
            if verdict is None:
                wrong[key] = value
            else:
                parsed[str(key)] = verdict
        if not raw.get("name") or not isinstance(expect, dict) or not expect or wrong:
            raise MatrixError(f"{where}: needs a name and `expect: {{entry: verdict}}` with "
                              f"verdicts from {[v.value for v in Verdict]} "
                              f"(found {wrong or expect})")
        deps = raw.get("deps") or []
        if not isinstance(deps, list) or any(d not in install for d in deps):
            raise MatrixError(f"{where}: deps {deps!r}: expected a list of specs that are "
                              "also in install")
        lanes = raw.get("lanes") or ["cpu"]
        if not isinstance(lanes, list) or not lanes or any(lane not in LANES for lane in lanes):
            raise MatrixError(f"{where}: lanes {lanes!r}: expected a list of lanes from "
                              f"{list(LANES)}")
        sets.append(MatrixSet(str(raw["name"]), tuple(install), parsed, tuple(python),
                              tuple(deps), tuple(lanes)))
    return sets


def _verdict(value: object) -> Verdict | None:
    try:
        return Verdict(value)
    except ValueError:
        return None


def sweep_releases(name: str, install: Sequence[str], only: Sequence[str], *, cache: Path,
                   run_dir: Path, jobs: int = 1, timeout: float = 600.0,
                   lanes: Sequence[Lane] | None = None,
                   deps: Sequence[str] = (),
                   wheelhouse: Path | None = None,
                   command: str = "matrix",
                   rank_start: str | None = None) -> tuple[RunIndex, int]:
    """The sweep of ``only`` in a child interpreter that sees the releases ``install`` first
    on ``PYTHONPATH`` (each installed side by side; ``deps`` with their dependencies; from
    ``wheelhouse`` alone when given), into ``run_dir``: its index and exit status. What a
    release-matrix set and the radar run. ``rank_start``: ``--rank-start`` of the child sweep
    (None: its ``PATCHLANE_RANK_START``, as this process has it)."""
    paths = [str(install_dir(spec, cache, spec in deps, wheelhouse=wheelhouse))
             for spec in install]
    own = dict(os.environ)
    own.setdefault("PYTHONWARNINGS", "ignore")
    env = first_on_path(own, paths)
    cmd = [sys.executable, "-m", "patchlane.cli.main", "sweep", "--run-dir", str(run_dir),
           "--jobs", str(jobs), "--timeout", str(timeout), "--quiet",
           *(["--rank-start", rank_start] if rank_start else [])]
    for lane in lanes or ["cpu"]:
        cmd += ["--lane", lane]
    for entry_id in only:
        cmd += ["--only", entry_id]
    # Warm ranks: this process lends the child its warm-rank server, kept for the next set's
    # child, so a matrix imports torch once and not once per set.
    lending: contextlib.AbstractContextManager[dict[str, str]] = (
        rank_start_mod.lend(own, paths) if _warm_cases(only, lanes or ["cpu"], rank_start)
        else contextlib.nullcontext({}))
    with lending as lent:
        returncode, output = _run_child_sweep(cmd, {**env, **lent}, name, command)
    # The sweep's own index on disk, read through the one model (not its stdout); only a
    # sweep that finished (0, or 32 | bits) wrote one for this run.
    try:
        if returncode != 0 and not returncode & SWEEP_BASE:
            raise ValueError(returncode)
        return RunIndex.load(run_dir), returncode
    except (OSError, ValueError, KeyError, TypeError):
        raise MatrixRunError(f"{name}: the sweep wrote no readable index in {run_dir} (exit "
                             f"{returncode}):\n{output[-3000:]}") from None


def _warm_cases(only: Sequence[str], lanes: Sequence[str], rank_start: str | None) -> bool:
    """Whether a child sweep of ``only`` (empty: every entry) may start a case's ranks warm:
    warm asked for (``rank_start``, else the setting), the CPU lane, and an entry a warm start
    is allowed for."""
    from ..deciding.controls import ToolSettings

    start = rank_start or ToolSettings.from_env().rank_start
    if start != rank_start_mod.RankStart.WARM.value or "cpu" not in lanes:
        return False
    wanted = set(only)
    return any(rank_start_mod.warm_allowed(e, "cpu", False) is None
               for e in _registry_entries() if not wanted or e.id in wanted)


def _run_child_sweep(cmd: list[str], env: Mapping[str, str], name: str,
                     command: str) -> tuple[int, str]:
    """Run the child sweep; on Ctrl-C or SIGTERM pass the same signal on (the child stops its
    cases, writes the report of what finished and exits), then stop this command too."""
    with tempfile.TemporaryFile("w+") as out, stopping_signals() as caught:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, text=True)
        try:
            while proc.poll() is None:
                if caught.signum is not None:
                    proc.send_signal(caught.signum)
                    proc.wait()
                    out.seek(0)
                    raise stopped(caught.signum, f"{name}'s sweep stopped with it (exit "
                                  f"{proc.returncode}); what ran is in its run directory",
                                  command)
                time.sleep(SIGNAL_POLL_SECONDS)
        finally:
            if proc.poll() is None:  # an error of ours: never leave the child sweep running
                proc.kill()
                proc.wait()
        out.seek(0)
        return proc.returncode, out.read()


NOT_ON_THIS_LANE = ("lane unavailable", "reproducer declares lanes")
"""Reasons of a skipped row that say the lane, not the release, kept the case out: one GPU
cannot run world size 2, and a CPU-only reproducer has no cuda case. Such a row is no verdict
to compare with the set's expectation; it is listed as not run."""


def _registry_entries() -> list[Entry]:
    """The entries of the registry set a child sweep started from here loads (the same
    settings: this process's environment)."""
    from ..deciding.controls import Controls
    from ..registry import load_registries
    from ..startup import registry_paths

    return list(load_registries(registry_paths(Controls.from_env())).entries)


def _registry_ids() -> set[str]:
    return {e.id for e in _registry_entries()}


def run_set(matrix_set: MatrixSet, *, cache: Path, runs_root: Path, jobs: int = 1,
            timeout: float = 600.0, lanes: list[Lane] | None = None,
            wheelhouse: Path | None = None, rank_start: str | None = None) -> MatrixResult:
    run_dir = runs_root / f"{matrix_set.name}-py{interpreter()}"
    # An expected entry the registry lacks (renamed, deleted) is this set's mismatch; the
    # sweep refuses an unknown --only id, so only the known ones go to it.
    known = _registry_ids()
    index, returncode = sweep_releases(
        f"matrix set {matrix_set.name}", matrix_set.install,
        [entry_id for entry_id in matrix_set.expect if entry_id in known],
        cache=cache, run_dir=run_dir, jobs=jobs, timeout=timeout, lanes=lanes,
        deps=matrix_set.deps, wheelhouse=wheelhouse, rank_start=rank_start)
    verdicts: dict[str, list[Verdict]] = {}
    not_run: list[str] = []
    for row in index.rows:
        if (row.verdict is Verdict.SKIPPED and row.reason.startswith(NOT_ON_THIS_LANE)
                and matrix_set.expect.get(row.entry_id) is not Verdict.SKIPPED):
            not_run.append(f"{row.entry_id} ({row.lane}, world size {row.world_size}): "
                           f"{row.reason}")
            continue
        verdicts.setdefault(row.entry_id, []).append(row.verdict)
    mismatches = []
    for entry_id, want in matrix_set.expect.items():
        got = verdicts.get(entry_id)
        if entry_id not in known:
            mismatches.append(f"{entry_id}: expected {want.value}, but the registry has no "
                              "such entry")
        elif not got:
            if any(line.startswith(f"{entry_id} (") for line in not_run):
                continue
            mismatches.append(f"{entry_id}: expected {want.value}, but the sweep had no row "
                              "for it")
        elif any(v is not want for v in got):
            mismatches.append(f"{entry_id}: expected {want.value}, got "
                              f"{[v.value for v in got]}")
    return MatrixResult(matrix_set.name, not mismatches, mismatches, verdicts, run_dir,
                        returncode, not_run)
