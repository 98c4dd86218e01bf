"""The pytest plugin, run in a nested pytest against fake-target reproducers."""

from __future__ import annotations

import pytest

from ..conftest import FakeTarget

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.slow

TEST_FILE = """
from patchlane.sweep.pytest_plugin import test_patchlane_reproducer  # noqa: F401
"""


def setup(pytester: pytest.Pytester, fake: FakeTarget, repro: str,
          monkeypatch: pytest.MonkeyPatch) -> None:
    (fake.root / "reproducers" / f"{fake.entry_id}.py").write_text(repro)
    fake.write_registry()
    monkeypatch.setenv("PATCHLANE_DEFAULT_REGISTRY", "0")
    monkeypatch.setenv("PATCHLANE_REGISTRY", str(fake.registry))
    monkeypatch.setenv("PYTHONPATH", str(fake.root))
    monkeypatch.delenv("PATCHLANE_STRICT", raising=False)
    pytester.makeconftest('pytest_plugins = ["patchlane.sweep.pytest_plugin"]\n')
    pytester.makepyfile(test_patches=TEST_FILE)


def repro(fake: FakeTarget, expected: str) -> str:
    return ("LANES = ('cpu',)\nWORLD_SIZES = (1,)\n\ndef run(ctx):\n"
            f"    import {fake.module} as t\n"
            f"    assert t.Greeter().greet('a') == {expected!r}, 'bug shows'\n")


def test_guarding_entry_gives_two_passing_cases(pytester: pytest.Pytester,
                                                fake_target: FakeTarget,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    setup(pytester, fake_target, repro(fake_target, "patched hello a"), monkeypatch)
    result = pytester.runpytest_subprocess("-v")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([f"*{fake_target.entry_id}-cpu-ws1-without] PASSED*",
                                 f"*{fake_target.entry_id}-cpu-ws1-with] PASSED*"])


def test_broken_overlay_fails_the_with_case(pytester: pytest.Pytester, fake_target: FakeTarget,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    setup(pytester, fake_target, repro(fake_target, "something else"), monkeypatch)
    result = pytester.runpytest_subprocess("-v")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*broken with its overlay*"])


def test_upstream_fixed_warns_or_fails_when_asked(pytester: pytest.Pytester,
                                                  fake_target: FakeTarget,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    setup(pytester, fake_target, repro(fake_target, "hello a"), monkeypatch)
    fake_target.write_overlay("def overlay(w, i, a, k):\n    return w(*a, **k)\n")
    result = pytester.runpytest_subprocess("-v")
    result.assert_outcomes(passed=2, warnings=1)
    result.stdout.fnmatch_lines(["*UpstreamFixedWarning*retirement candidate*"])
    strict = pytester.runpytest_subprocess("--patchlane-strict-upstream")
    strict.assert_outcomes(passed=1, failed=1)


def test_retired_entry_runs_only_its_regression_guard(pytester: pytest.Pytester,
                                                      fake_target: FakeTarget,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    setup(pytester, fake_target, repro(fake_target, "hello a"), monkeypatch)
    fake_target.write_registry(fake_target.entry(status="retired"))
    result = pytester.runpytest_subprocess("-v")
    result.assert_outcomes(passed=1, warnings=1)  # without only: upstream-fixed, as it should be
    result.stdout.fnmatch_lines([f"*{fake_target.entry_id}-cpu-ws1-without] PASSED*"])
    assert "-with]" not in result.stdout.str()


def test_past_the_gate_without_only_still_affected_fails(pytester: pytest.Pytester,
                                                         fake_target: FakeTarget,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    setup(pytester, fake_target, repro(fake_target, "patched hello a"), monkeypatch)
    fake_target.write_registry(fake_target.entry(applies_to=">=1.0,<1.2"))  # 1.2.0 is past it
    result = pytester.runpytest_subprocess("-v")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"*{fake_target.entry_id}-cpu-ws1-without-past-gate*FAILED*",
                                 "*still affected*extend applies_to*"])
    assert "-with]" not in result.stdout.str()


def test_past_the_gate_upstream_fixed_warns(pytester: pytest.Pytester, fake_target: FakeTarget,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    setup(pytester, fake_target, repro(fake_target, "hello a"), monkeypatch)
    fake_target.write_registry(fake_target.entry(applies_to=">=1.0,<1.2"))
    result = pytester.runpytest_subprocess("-v")
    result.assert_outcomes(passed=1, warnings=1)
    result.stdout.fnmatch_lines(["*UpstreamFixedWarning*retirement candidate*"])
