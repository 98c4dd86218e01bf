"""Long commands stop cleanly on Ctrl-C and SIGTERM (a scheduler cancelling the job): what runs
is stopped at once, the command exits 130 or 143, never -15 with its children orphaned."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from patchlane.common.errors import SweepInterrupted, SweepTerminated


def _signal_self_in(seconds: float, signum: int) -> None:
    threading.Timer(seconds, os.kill, (os.getpid(), signum)).start()


def test_matrix_and_radar_pass_the_signal_to_their_child_sweep(tmp_path: Path) -> None:
    from patchlane.releases.matrix import _run_child_sweep

    marker = tmp_path / "child-got-it"
    child = [sys.executable, "-c",
             "import signal, sys, time\n"
             f"def bye(*a):\n    open({str(marker)!r}, 'w').write('term')\n    sys.exit(143)\n"
             "signal.signal(signal.SIGTERM, bye)\nprint('running', flush=True)\ntime.sleep(60)\n"]
    _signal_self_in(1.0, signal.SIGTERM)
    started = time.monotonic()
    with pytest.raises(SweepTerminated) as stopped:
        _run_child_sweep(child, dict(os.environ), "matrix set demo", "matrix")
    assert time.monotonic() - started < 20
    assert marker.read_text() == "term"  # the child sweep got the same signal
    assert str(stopped.value).startswith("matrix stopped by SIGTERM: matrix set demo's sweep "
                                         "stopped with it (exit 143)")
    assert int(stopped.value.exit_code) == 143


def test_bisect_stops_its_running_case_and_records_the_interruption(tmp_path: Path) -> None:
    from patchlane.cli.bisect import _stoppable
    from patchlane.sweep.reproduce import CaseInterrupted

    runner = SimpleNamespace(stop=threading.Event())
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "0.4.0.json").write_text("{}")

    def search() -> None:  # a case that runs until its stop is set, as run_case does
        runner.stop.wait(60)
        raise CaseInterrupted("stopped")

    # Ctrl-C as a terminal delivers it, whatever this test process inherited: a suite started
    # as a script's background job ignores SIGINT, which bisect rightly leaves ignored, and
    # the case would then run its full minute and stop on its own
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    started = time.monotonic()
    _signal_self_in(1.0, signal.SIGINT)
    try:
        with pytest.raises(SweepInterrupted) as stopped:
            _stoppable(search, runner, tmp_path)
    finally:
        signal.signal(signal.SIGINT, previous)
    # the signal stopped the case (its stop was set), not the case's own end
    assert runner.stop.is_set() and time.monotonic() - started < 30
    assert not isinstance(stopped.value, SweepTerminated)
    assert int(stopped.value.exit_code) == 130
    assert str(stopped.value) == ("bisect stopped by SIGINT: 1 release(s) ran (their records "
                                  f"are in {tmp_path}); run bisect again to finish")
    assert (tmp_path / "interrupted.json").read_text().count('"SIGINT"') == 1


@pytest.mark.parametrize(("deadline_in", "parent"), [(1, "mine"), (3600, "gone")],
                         ids=["past-its-deadline", "its-parent-gone"])
def test_a_rank_never_outlives_its_case(deadline_in: int, parent: str) -> None:
    """A rank ends itself (and its session) past its case's deadline, or once the command
    that started it is gone (killed outright): no orphan holding a GPU."""
    import subprocess

    code = ("import os, time\nfrom patchlane.sweep.runner import _watch_deadline\n"
            f"parent = os.getppid() if {parent!r} == 'mine' else 1\n"
            f"_watch_deadline(f'{{time.time() + {deadline_in}:.0f}}:{{parent}}')\n"
            "time.sleep(120)\n")
    started = time.monotonic()
    out = subprocess.run([sys.executable, "-c", code], start_new_session=True, timeout=60)
    assert out.returncode in (137, -9), out.returncode
    assert time.monotonic() - started < 30


def test_main_in_process_gives_back_the_callers_sigterm_handler(
        capsys: pytest.CaptureFixture[str]) -> None:
    """``main()`` called in a notebook or a test runner installs its SIGTERM handler for the
    command only: afterwards SIGTERM does what the caller had set, not raise a patchlane error
    inside whatever runs next."""
    from patchlane.cli.main import main

    def mine(signum: int, frame: object) -> None:
        return None

    before = signal.signal(signal.SIGTERM, mine)
    try:
        main(["status"])
        assert signal.getsignal(signal.SIGTERM) is mine
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        main(["status"])
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    finally:
        signal.signal(signal.SIGTERM, before)
