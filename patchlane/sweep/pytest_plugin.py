"""Run patchlane reproducers inside a team's own pytest, both modes as parametrized cases.

Opt in explicitly (it is not auto-loaded, because loading it imports patchlane, which applies
overlays in the test process)::

    # conftest.py
    pytest_plugins = ["patchlane.sweep.pytest_plugin"]

    # test_patches.py
    from patchlane.sweep.pytest_plugin import test_patchlane_reproducer  # noqa: F401

Each case is ``<entry>-<lane>-ws<N>-<mode>``. ``with`` must pass; ``without`` must fail (the
bug is still upstream); a ``without`` case that passes is reported with a
:class:`UpstreamFixedWarning` (a retirement candidate, not a test failure) unless
``--patchlane-strict-upstream`` makes it fail. ``--patchlane-only ID`` limits the entries.

Past an entry's gate (an installed release above ``applies_to``, or inside
``retire_when.release``) only ``without`` runs, as in the sweep, and it is named
``...-without-past-gate``: passing there is an :class:`UpstreamFixedWarning`; failing there
fails the test as *still affected*: the job runs this release unprotected, and the entry's gate
needs a review.
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest

from .. import startup
from ..reproducer import LANES, Mode, parse_lane
from ..runs.rows import PlannedRow, RowRule
from ..runs.verdicts import ACTION, MEANING, Verdict
from .reproduce import run_case

__all__ = ["UpstreamFixedWarning", "test_patchlane_reproducer"]


class UpstreamFixedWarning(UserWarning):
    """A reproducer passed without its overlay: upstream fixed it; plan the retirement."""


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("patchlane")
    group.addoption("--patchlane-only", action="append", default=None, metavar="ID",
                    help="only these registry entries (repeatable)")
    group.addoption("--patchlane-lane", action="append", default=None,
                    choices=LANES, help="lanes to run (default: cpu)")
    group.addoption("--patchlane-strict-upstream", action="store_true",
                    help="fail (instead of warn) when a reproducer passes without its overlay")
    group.addoption("--patchlane-timeout", type=float, default=600.0,
                    help="seconds per case")


def _cases(config: pytest.Config) -> list[Any]:
    # The sweep's own planning decides what runs and why not (lane, gate, GPUs), so a team's
    # pytest and the nightly sweep never disagree about a case.
    from .engine import Shard, cuda_devices, plan

    only = config.getoption("--patchlane-only")
    lanes = [parse_lane(lane) for lane in config.getoption("--patchlane-lane") or ["cpu"]]
    registry = startup.current().registry
    gpus = cuda_devices() if "cuda" in lanes else 0
    params = []
    for row in plan(registry, lanes, gpus, set(only) if only else None, Shard(1, 1)):
        # The row's rule says which modes run (the overlay never applies past its gate or for
        # a retired entry); a skipped row shows its one case as skipped, with the reason.
        beyond = row.rule in (RowRule.PAST_GATE, RowRule.PAST_GATE_COVERED)
        marks = [pytest.mark.skip(reason=row.skip)] if row.skip else []
        suffix = "-past-gate" if beyond else ""
        for mode in row.modes or (Mode.WITHOUT, Mode.WITH):
            params.append(pytest.param((row, mode), marks=marks,
                                       id=f"{row.entry_id}-{row.lane}-ws{row.world_size}-"
                                          f"{mode.value}{suffix}"))
    return params


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "patchlane_case" in metafunc.fixturenames:
        metafunc.parametrize("patchlane_case", _cases(metafunc.config))


def test_patchlane_reproducer(
        patchlane_case: tuple[PlannedRow, Mode], request: pytest.FixtureRequest) -> None:
    row, mode = patchlane_case
    entry_id = row.entry_id
    entry = startup.current().registry.get(entry_id)
    # In pytest's own temporary folder (it keeps the last few sessions' and removes older
    # ones): the rank logs a failure names are still there to read.
    result = run_case(entry, mode, lane=row.lane, world_size=row.world_size,
                      timeout=request.config.getoption("--patchlane-timeout"),
                      workdir=request.getfixturevalue("tmp_path"))
    detail = f"{result.message} (logs: {[r.get('log') for r in result.ranks]})"
    # The verdict this case already decides, by the sweep's own rules (runs/rows.py); how a
    # verdict shows in a test is its JUnit status (runs/verdicts.py), as in the sweep's report.
    decided = row.case_verdict(mode, result)
    if decided is None:
        return
    verdict, reason = decided
    shown = MEANING[verdict].junit
    if shown == "error":
        pytest.fail(f"{entry_id} [{mode.value} overlay]: error at {result.stage}: {detail}")
    if shown == "failure":
        what = "broken with its overlay" if verdict is Verdict.BROKEN else \
            verdict.value.replace("-", " ")
        pytest.fail(f"{entry_id}: {what}: {reason} {ACTION[verdict]}. ({detail})")
    if verdict is Verdict.UPSTREAM_FIXED:
        message = (f"{entry_id}: reproducer passes without the overlay on this release: "
                   "upstream-fixed, a retirement candidate")
        if request.config.getoption("--patchlane-strict-upstream"):
            pytest.fail(message)
        warnings.warn(message, UpstreamFixedWarning, stacklevel=1)
