"""A sweep stopped by a signal, through the real command on a fake target: Ctrl-C (SIGINT) and
SIGTERM cancel the queued cases, kill the running case's ranks (in their own sessions, so the
terminal's Ctrl-C never reaches them), record the interruption in the manifest, write the
report of what finished and exit 130 / 143; ``--resume`` then runs the rest."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from patchlane.common.exit_codes import ExitCode
from patchlane.runs.manifest import RunDir

from ..conftest import FakeTarget
from .test_sweep_faults import GUARDING, env_for, multi_registry

pytestmark = pytest.mark.slow

# Sleeps while PL_TEST_SLOW is set (the first sweep), and records its pid first, so the test
# can tell whether a rank outlived the sweep.
SLOW = GUARDING.replace(
    "def run(ctx):\n",
    "def run(ctx):\n    import os, time\n"
    "    (ctx.workdir / f'pid{ctx.rank}').write_text(str(os.getpid()))\n"
    "    if os.environ.get('PL_TEST_SLOW'):\n        time.sleep(120)\n")


def _wait_for(predicate: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _foreground_job() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie has exited: only its parent's wait is missing
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(") ", 1)[1].startswith("Z"))


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, ExitCode.INTERRUPTED),
                                              (signal.SIGTERM, ExitCode.TERMINATED)])
def test_a_signal_stops_the_sweep_in_order_and_resume_finishes_it(
        fake_target: FakeTarget, tmp_path: Path, signum: signal.Signals,
        code: ExitCode) -> None:
    multi_registry(fake_target, {"a": GUARDING, "b": SLOW, "c": GUARDING})
    slow_id = f"{fake_target.entry_id}_b"
    run_dir = tmp_path / "run"
    cmd = [sys.executable, "-m", "patchlane.cli.main", "sweep", "--run-dir", str(run_dir),
           "--jobs", "1", "--quiet"]
    env = env_for(fake_target) | {"PL_TEST_SLOW": "1"}
    # Its own session, as a job on a terminal: Ctrl-C goes to the whole process group there.
    # A foreground job's Ctrl-C is never ignored, whatever ran this test: a test runner started
    # with `&` from a script inherits SIGINT ignored, and a sweep that inherits that rightly
    # leaves it ignored (nohup, a background job).
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True, preexec_fn=_foreground_job)
    pid_file = run_dir / "cases" / f"{slow_id}--cpu--ws1--without" / "attempt1" / "pid0"
    try:
        _wait_for(pid_file.exists, 90, "the slow case's rank to start")
        rank_pid = int(pid_file.read_text())
        if signum == signal.SIGINT:
            os.killpg(proc.pid, signum)  # Ctrl-C: the terminal signals the foreground group
        else:
            proc.send_signal(signum)  # kill, a scheduler: the sweep's own process
        # A hang guard only, with room for a loaded machine (the suite runs on several workers
        # at once): "2 of 6 case(s) finished, 4 left" below is what catches the old sweep,
        # which ran every queued case (two minutes of sleep) before it exited.
        _, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == code, err
    name = signal.Signals(signum).name
    assert f"sweep stopped by {name}: 2 of 6 case(s) finished, 4 left" in err, err
    assert f"--resume {run_dir}" in err and "Traceback" not in err
    _wait_for(lambda: not _alive(rank_pid), 10, "the killed rank to be gone")

    manifest = RunDir.open(run_dir).manifest
    assert manifest["interrupted"]["by"] == name
    assert manifest["interrupted"]["unfinished"] == 4
    states = {cid: case["state"] for cid, case in manifest["cases"].items()}
    assert "running" not in states.values(), states
    # the stopped case is back in the queue; the third entry never started
    assert [cid for cid, state in states.items() if state == "queued"] == [
        f"{slow_id}--cpu--ws1--without", f"{slow_id}--cpu--ws1--with",
        f"{fake_target.entry_id}_c--cpu--ws1--without",
        f"{fake_target.entry_id}_c--cpu--ws1--with"]
    assert not (run_dir / "cases" / f"{fake_target.entry_id}_c--cpu--ws1--without").exists()
    assert sorted(p.name for p in (run_dir / "receipts").iterdir()) == sorted(
        f"{fake_target.entry_id}_a--cpu--ws1--{m}.json" for m in ("with", "without"))
    # the report of what finished
    index = json.loads((run_dir / "index.json").read_text())
    verdicts = {r["entry_id"]: (r["verdict"], r["reason"]) for r in index["rows"]}
    assert verdicts[f"{fake_target.entry_id}_a"][0] == "guarding"
    assert verdicts[slow_id] == ("error", "case did not finish (resume the run)")
    assert (run_dir / "report.html").is_file() and (run_dir / "junit.xml").is_file()

    if signum != signal.SIGINT:
        return
    before = {p.name: p.read_bytes() for p in (run_dir / "receipts").iterdir()}
    resumed = subprocess.run([*cmd[:4], "--resume", str(run_dir), "--quiet"],
                             env=env_for(fake_target), capture_output=True, text=True,
                             timeout=180)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "resuming" not in resumed.stderr  # --quiet
    manifest = RunDir.open(run_dir).manifest
    assert "interrupted" not in manifest
    assert all(c["state"] == "failed" if c["mode"] == "without" else c["state"] == "ok"
               for c in manifest["cases"].values()), manifest["cases"]
    after = {p.name: p.read_bytes() for p in (run_dir / "receipts").iterdir()}
    assert len(after) == 6 and all(after[name] == data for name, data in before.items())
    # the stopped case ran again in a new attempt directory
    assert manifest["cases"][f"{slow_id}--cpu--ws1--without"]["attempts"] == 2


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_repeated_signals_never_cost_the_report(fake_target: FakeTarget, tmp_path: Path,
                                                signum: signal.Signals) -> None:
    """Ctrl-C pressed again and again, a scheduler's repeated SIGTERM: the orderly stop still
    writes the report of what finished (the second signal killed the writing of it, leaving
    the manifest and receipts alone)."""
    multi_registry(fake_target, {"a": GUARDING, "b": SLOW})
    slow_id = f"{fake_target.entry_id}_b"
    run_dir = tmp_path / "run"
    cmd = [sys.executable, "-m", "patchlane.cli.main", "sweep", "--run-dir", str(run_dir),
           "--jobs", "1", "--quiet"]
    proc = subprocess.Popen(cmd, env=env_for(fake_target) | {"PL_TEST_SLOW": "1"},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=_foreground_job)
    pid_file = run_dir / "cases" / f"{slow_id}--cpu--ws1--without" / "attempt1" / "pid0"
    try:
        _wait_for(pid_file.exists, 90, "the slow case's rank to start")
        for _ in range(8):
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signum)
            time.sleep(0.03)
        _, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    # its code, or the same signal's death once the report is written (a shell's $? is the
    # same 128 + signal either way)
    code = ExitCode.INTERRUPTED if signum == signal.SIGINT else ExitCode.TERMINATED
    assert proc.returncode in (code, -signum), err
    for name in ("index.json", "summary.md", "junit.xml", "report.html"):
        assert (run_dir / name).is_file(), (name, err)
    index = json.loads((run_dir / "index.json").read_text())
    assert {r["entry_id"]: r["verdict"] for r in index["rows"]}[f"{fake_target.entry_id}_a"] \
        == "guarding"
