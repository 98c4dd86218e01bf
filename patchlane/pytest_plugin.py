"""Run patchlane reproducers inside a team's own pytest, both modes as parametrized cases.

Opt in explicitly (it is not auto-loaded, because loading it imports patchlane, which applies
overlays in the test process)::

    # conftest.py
    pytest_plugins = ["patchlane.pytest_plugin"]

    # test_patches.py
    from patchlane.pytest_plugin import test_patchlane_reproducer  # noqa: F401

Each case is ``<entry>-<lane>-ws<N>-<mode>``. ``with`` must pass; ``without`` must fail (the
bug is still upstream); a ``without`` case that passes is reported with a
:class:`UpstreamFixedWarning` (a retirement candidate, not a test failure) unless
``--patchlane-strict-upstream`` makes it fail. ``--patchlane-only ID`` limits the entries.
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest

from . import _startup
from .gates import check_gate
from .registry import Kind
from .reproduce import Mode, RunOutcome, read_spec, run_case

__all__ = ["UpstreamFixedWarning", "test_patchlane_reproducer"]


class UpstreamFixedWarning(UserWarning):
    """A reproducer passed without its overlay: upstream fixed it; plan the retirement."""


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("patchlane")
    group.addoption("--patchlane-only", action="append", default=None, metavar="ID",
                    help="only these registry entries (repeatable)")
    group.addoption("--patchlane-lane", action="append", default=None,
                    choices=("cpu", "cuda"), help="lanes to run (default: cpu)")
    group.addoption("--patchlane-strict-upstream", action="store_true",
                    help="fail (instead of warn) when a reproducer passes without its overlay")
    group.addoption("--patchlane-timeout", type=float, default=600.0,
                    help="seconds per case")


def _cases(config: pytest.Config) -> list[Any]:
    only = config.getoption("--patchlane-only")
    lanes = config.getoption("--patchlane-lane") or ["cpu"]
    params = []
    for entry in _startup.current().registry.entries:
        if entry.kind is not Kind.SOURCE_PATCH or entry.reproducer is None:
            continue
        if only and entry.id not in only:
            continue
        spec = read_spec(entry)
        gate = check_gate(entry.target.distribution, entry.applies_to)
        for lane in lanes:
            for size in spec.world_sizes:
                for mode in (Mode.WITHOUT, Mode.WITH):
                    marks = []
                    if lane not in spec.lanes:
                        marks.append(pytest.mark.skip(reason=f"lane {lane} not declared"))
                    elif entry.active and not gate.open:
                        marks.append(pytest.mark.skip(reason=f"gate: {gate.reason}"))
                    params.append(pytest.param((entry.id, lane, size, mode), marks=marks,
                                               id=f"{entry.id}-{lane}-ws{size}-{mode.value}"))
    return params


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "patchlane_case" in metafunc.fixturenames:
        metafunc.parametrize("patchlane_case", _cases(metafunc.config))


def test_patchlane_reproducer(patchlane_case: tuple[str, str, int, Mode],
                              request: pytest.FixtureRequest) -> None:
    entry_id, lane, size, mode = patchlane_case
    if lane == "cuda":
        torch = pytest.importorskip("torch")
        if torch.cuda.device_count() < size:
            pytest.skip(f"needs {size} CUDA device(s)")
    entry = _startup.current().registry.get(entry_id)
    result = run_case(entry, mode, lane=lane, world_size=size,
                      timeout=request.config.getoption("--patchlane-timeout"))
    detail = f"{result.message} (logs: {[r.get('log') for r in result.ranks]})"
    if result.outcome is RunOutcome.ERROR:
        pytest.fail(f"{entry_id} [{mode.value} overlay]: error at {result.stage}: {detail}")
    if mode is Mode.WITH:
        assert result.outcome is RunOutcome.PASS, f"{entry_id} broken with its overlay: {detail}"
    elif result.outcome is RunOutcome.PASS:
        message = (f"{entry_id}: reproducer passes without the overlay on this release: "
                   "upstream-fixed, a retirement candidate")
        if request.config.getoption("--patchlane-strict-upstream"):
            pytest.fail(message)
        warnings.warn(message, UpstreamFixedWarning, stacklevel=1)
