"""Only the reproducer's own ``AssertionError`` says "the bug shows". An assertion raised
inside the code under test (upstream refusing the reproducer's input, as liger-kernel 0.6.1
refuses ``reduction='none'``) is an error of the case, with where it was raised: read as a
fail, it would call a release affected that never ran the buggy path. Fake targets: this
tests the runner's own classification."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchlane.registry import load_registries
from patchlane.sweep.reproduce import Mode, RunOutcome, run_case

from ..conftest import FakeTarget
from .test_sweep_faults import env_for, multi_registry

pytestmark = pytest.mark.slow

HEAD = "LANES = ('cpu',)\nWORLD_SIZES = (1,)\n\n"
REPRODUCERS = {
    # upstream's own assert stops the run before the bug is looked at
    "foreign": HEAD + ("def run(ctx):\n    import {module}, fake_upstream_checks\n"
                       "    fake_upstream_checks.refuse('none')\n"),
    # the reproducer catches it and says, in its own words, that this is the bug
    "own": HEAD + ("def run(ctx):\n    import {module}, fake_upstream_checks\n"
                   "    try:\n        fake_upstream_checks.refuse('none')\n"
                   "    except AssertionError as exc:\n"
                   "        raise AssertionError(f'the bug shows: {exc}') from None\n"),
    "plain": HEAD + "def run(ctx):\n    import {module}\n    assert 1 + 1 == 3, 'the bug shows'\n",
}


@pytest.mark.parametrize(("name", "outcome"), [("foreign", RunOutcome.ERROR),
                                               ("own", RunOutcome.FAIL),
                                               ("plain", RunOutcome.FAIL)])
def test_only_the_reproducers_assertion_is_a_fail(fake_target: FakeTarget, tmp_path: Path,
                                                  name: str, outcome: RunOutcome) -> None:
    (fake_target.root / "fake_upstream_checks.py").write_text(
        "def refuse(reduction):\n"
        "    assert reduction in ('mean', 'sum'), \"reduction must be 'mean' or 'sum'\"\n")
    registry = load_registries([multi_registry(fake_target, REPRODUCERS)])
    entry = registry.get(f"{fake_target.entry_id}_{name}")
    result = run_case(entry, Mode.WITHOUT, workdir=tmp_path / "case",
                      env=env_for(fake_target), timeout=120)
    assert result.outcome is outcome, (result.outcome, result.message)
    if outcome is RunOutcome.ERROR:
        assert result.stage == "run"
        assert "fake_upstream_checks.py:2" in result.message, result.message
        assert "not by the reproducer" in result.message
        assert "reduction must be" in result.message
