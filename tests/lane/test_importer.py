"""Import-time mechanics on a fake target: lazy hooks, idempotence, threads, revert, drift,
strict mode, controls, probe and audit. (Framework mechanics only; see tests/releases/.)"""

from __future__ import annotations

import importlib
import logging
import sys
import threading
from typing import Any

import pytest
import wrapt

from patchlane.audit import Outcome
from patchlane.errors import OverlayError, StrictModeError
from patchlane.fingerprint import compute

from ..conftest import FakeTarget


def wrapper_depth(obj: Any) -> int:
    """How many wrapt FunctionWrappers sit between the attribute and the plain function."""
    depth = 0
    while isinstance(obj, wrapt.FunctionWrapper):
        depth += 1
        obj = obj.__wrapped__
    return depth


def greet_attr(module: Any) -> Any:
    return vars(module.Greeter)["greet"]


def test_applies_lazily_when_the_target_is_imported(fake_target: FakeTarget) -> None:
    lane = fake_target.lane()
    assert fake_target.module not in sys.modules  # import patchlane must not import targets
    assert lane.audit.latest()[fake_target.entry_id].outcome is Outcome.PENDING
    module = fake_target.import_target()
    decision = lane.audit.latest()[fake_target.entry_id]
    assert decision.outcome is Outcome.APPLIED, decision
    assert decision.installed == "1.2.0"
    assert decision.fingerprint_found in decision.fingerprint_expected
    assert module.Greeter().greet("x") == "patched hello x"
    assert lane.audit.hits[fake_target.entry_id] == 1


def test_applies_at_once_when_the_target_is_already_imported(fake_target: FakeTarget) -> None:
    module = fake_target.import_target()
    assert module.Greeter().greet("x") == "hello x"
    lane = fake_target.lane()
    assert lane.audit.latest()[fake_target.entry_id].outcome is Outcome.APPLIED
    assert module.Greeter().greet("x") == "patched hello x"


def test_import_twice_and_apply_twice_leave_exactly_one_wrapper(fake_target: FakeTarget) -> None:
    lane = fake_target.lane()
    module = fake_target.import_target()
    importlib.import_module(fake_target.module)
    lane.apply()
    lane.apply()
    lane.start()
    assert wrapper_depth(greet_attr(module)) == 1
    applied = [d for d in lane.audit.history() if d.outcome is Outcome.APPLIED]
    assert len(applied) == 1
    assert module.Greeter().greet("y") == "patched hello y"


def test_reload_reapplies_exactly_one_wrapper(fake_target: FakeTarget) -> None:
    lane = fake_target.lane()
    module = fake_target.import_target()
    old_class = module.Greeter
    module = importlib.reload(module)
    assert module.Greeter is not old_class  # the reload built a fresh, unwrapped class
    assert wrapper_depth(greet_attr(module)) == 1
    assert module.Greeter().greet("z") == "patched hello z"
    importlib.reload(module)
    lane.apply()
    assert wrapper_depth(greet_attr(module)) == 1


def test_a_second_lane_never_stacks_a_second_wrapper(fake_target: FakeTarget) -> None:
    first = fake_target.lane()
    module = fake_target.import_target()
    second = fake_target.lane()
    assert wrapper_depth(greet_attr(module)) == 1
    assert first.is_applied(fake_target.entry_id)
    assert "another patchlane lane" in second.audit.latest()[fake_target.entry_id].reason


def test_eight_threads_importing_at_once_end_with_one_wrapper(fake_target: FakeTarget) -> None:
    lane = fake_target.lane()
    barrier = threading.Barrier(8)
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            barrier.wait()
            importlib.import_module(fake_target.module)
            lane.apply()
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    module = sys.modules[fake_target.module]
    assert wrapper_depth(greet_attr(module)) == 1
    assert len([d for d in lane.audit.history() if d.outcome is Outcome.APPLIED]) == 1


def test_revert_restores_the_original_and_apply_brings_it_back(fake_target: FakeTarget) -> None:
    lane = fake_target.lane()
    module = fake_target.import_target()
    original = wrapper_depth(greet_attr(module))
    assert original == 1
    decision = lane.revert(fake_target.entry_id)
    assert decision.outcome is Outcome.REVERTED
    assert wrapper_depth(greet_attr(module)) == 0
    assert module.Greeter().greet("a") == "hello a"
    assert not lane.is_applied(fake_target.entry_id)
    with pytest.raises(OverlayError, match="nothing to revert"):
        lane.revert(fake_target.entry_id)
    lane.apply()
    assert module.Greeter().greet("a") == "patched hello a"


def test_revert_of_an_inherited_attribute_removes_the_shadow(fake_target: FakeTarget) -> None:
    fake_target.target_file.write_text(fake_target.target_file.read_text() + (
        "\n\nclass Base:\n    def greet(self, name):\n        return 'base ' + name\n"
        "\n\nclass Child(Base):\n    pass\n"))
    module = fake_target.import_target()
    # Child.greet is Base.greet reached through Child: only the imported module can say so.
    entry = fake_target.entry(target={"distribution": fake_target.distribution,
                                      "object": f"{fake_target.module}:Child.greet"})
    entry["fingerprint"] = {"sha256": [compute(module, ("Child.greet",))]}
    fake_target.write_registry(entry)
    lane = fake_target.lane()
    decision = lane.audit.latest()[fake_target.entry_id]
    if decision.outcome is Outcome.FAILED_ERROR:
        pytest.fail(decision.reason)
    assert module.Child().greet("b") == "patched base b"
    assert module.Base().greet("b") == "base b"  # the parent class is untouched
    lane.revert(fake_target.entry_id)
    assert "greet" not in vars(module.Child)


def test_drift_is_refused_by_default(fake_target: FakeTarget) -> None:
    fake_target.write_registry()  # fingerprint of the release we verified
    fake_target.target_file.write_text(
        fake_target.target_file.read_text().replace('f"hello {name}"', 'f"hi {name}"'))
    lane = fake_target.lane()
    module = fake_target.import_target()
    decision = lane.audit.latest()[fake_target.entry_id]
    assert decision.outcome is Outcome.REFUSED_DRIFT
    assert decision.fingerprint_found not in decision.fingerprint_expected
    assert f"patchlane fingerprint {fake_target.entry_id}" in decision.reason
    assert wrapper_depth(greet_attr(module)) == 0
    assert module.Greeter().greet("c") == "hi c"


def test_drift_with_policy_warn_applies_and_says_so(fake_target: FakeTarget) -> None:
    entry = fake_target.entry()
    entry["fingerprint"]["policy"] = "warn"
    fake_target.write_registry(entry)
    fake_target.target_file.write_text(
        fake_target.target_file.read_text().replace('f"hello {name}"', 'f"hi {name}"'))
    lane = fake_target.lane()
    module = fake_target.import_target()
    decision = lane.audit.latest()[fake_target.entry_id]
    assert decision.outcome is Outcome.APPLIED
    assert "drift tolerated" in decision.reason
    assert module.Greeter().greet("c") == "patched hi c"


def test_reformatting_the_target_is_not_drift(fake_target: FakeTarget) -> None:
    fake_target.write_registry()
    fake_target.target_file.write_text(fake_target.target_file.read_text().replace(
        "    def greet(self, name):\n",
        "    def greet(self, name):  # a comment\n        '''Docstring added.'''\n\n"))
    lane = fake_target.lane()
    fake_target.import_target()
    assert lane.audit.latest()[fake_target.entry_id].outcome is Outcome.APPLIED


@pytest.mark.parametrize(
    ("env", "reason"),
    [
        ({"PATCHLANE_DISABLE": "{id}"}, "PATCHLANE_DISABLE"),
        ({"PATCHLANE_DISABLE": "other,{id} "}, "PATCHLANE_DISABLE"),
        ({"PATCHLANE_ONLY": "other_entry"}, "PATCHLANE_ONLY"),
    ],
)
def test_controls_disable(fake_target: FakeTarget, env: dict[str, str], reason: str) -> None:
    lane = fake_target.lane({k: v.format(id=fake_target.entry_id) for k, v in env.items()})
    module = fake_target.import_target()
    decision = lane.audit.latest()[fake_target.entry_id]
    assert decision.outcome is Outcome.SKIPPED_DISABLED
    assert reason in decision.reason
    assert module.Greeter().greet("d") == "hello d"


def test_only_listing_the_entry_applies_it(fake_target: FakeTarget) -> None:
    lane = fake_target.lane({"PATCHLANE_ONLY": fake_target.entry_id})
    fake_target.import_target()
    assert lane.audit.latest()[fake_target.entry_id].outcome is Outcome.APPLIED


def test_gate_closed_skips_with_reason(fake_target: FakeTarget) -> None:
    fake_target.write_registry(fake_target.entry(applies_to=">=1.3,<2.0"))
    lane = fake_target.lane()
    module = fake_target.import_target()
    decision = lane.audit.latest()[fake_target.entry_id]
    assert decision.outcome is Outcome.SKIPPED_GATE
    assert "1.2.0 is outside" in decision.reason
    assert module.Greeter().greet("e") == "hello e"


def test_probe_reports_upstream_fixed_and_keeps_the_overlay_out(fake_target: FakeTarget) -> None:
    fake_target.target_file.write_text(
        fake_target.target_file.read_text().replace("FIXED = False", "FIXED = True"))
    lane = fake_target.lane()
    module = fake_target.import_target()
    decision = lane.audit.latest()[fake_target.entry_id]
    assert decision.outcome is Outcome.UPSTREAM_FIXED
    assert wrapper_depth(greet_attr(module)) == 0


def test_overlay_without_overlay_function_fails_loudly(fake_target: FakeTarget) -> None:
    fake_target.write_overlay("def not_the_overlay(*a):\n    pass\n")
    lane = fake_target.lane()
    module = fake_target.import_target()
    decision = lane.audit.latest()[fake_target.entry_id]
    assert decision.outcome is Outcome.FAILED_ERROR
    assert "defines no callable `overlay`" in decision.reason
    assert wrapper_depth(greet_attr(module)) == 0


def test_overlay_that_raises_on_load_fails_loudly(fake_target: FakeTarget) -> None:
    fake_target.write_overlay("raise ImportError('needs a kernel library')\n")
    lane = fake_target.lane()
    fake_target.import_target()
    decision = lane.audit.latest()[fake_target.entry_id]
    assert decision.outcome is Outcome.FAILED_ERROR
    assert "needs a kernel library" in decision.reason


@pytest.mark.parametrize("case", ["drift", "gate", "error"])
def test_strict_mode_raises_on_every_problem(fake_target: FakeTarget, case: str) -> None:
    if case == "drift":
        fake_target.write_registry(fake_target.entry(
            fingerprint={"sha256": ["sha256:" + "0" * 32]}))
    elif case == "gate":  # a gate that cannot be evaluated: no distribution metadata
        entry = fake_target.entry()
        entry["target"] = {**entry["target"], "distribution": "plfake-not-installed"}
        fake_target.write_registry(entry)
    else:
        fake_target.write_overlay("def overlay(w, i, a, k):\n    return w(*a, **k)\n"
                                  "def probe(m):\n    raise ValueError('probe broke')\n")
    fake_target.lane({"PATCHLANE_STRICT": "1"})
    with pytest.raises(StrictModeError) as info:
        fake_target.import_target()
    assert info.value.entry_id == fake_target.entry_id
    assert "PATCHLANE_STRICT" in str(info.value)
    # the failed import left no half-initialised module behind
    assert fake_target.module not in sys.modules


def test_strict_mode_accepts_a_gate_that_excludes_the_installed_release(
        fake_target: FakeTarget) -> None:
    # a registry carries entries for several releases: one for another release is no error
    fake_target.write_registry(fake_target.entry(applies_to=">=2.0,<3.0"))
    lane = fake_target.lane({"PATCHLANE_STRICT": "1"})
    module = fake_target.import_target()
    assert lane.audit.latest()[fake_target.entry_id].outcome is Outcome.SKIPPED_GATE
    assert module.Greeter().greet("g") == "hello g"


def test_strict_mode_does_not_raise_for_requested_or_good_outcomes(
        fake_target: FakeTarget) -> None:
    lane = fake_target.lane({"PATCHLANE_STRICT": "1", "PATCHLANE_DISABLE": fake_target.entry_id})
    fake_target.import_target()
    assert lane.audit.latest()[fake_target.entry_id].outcome is Outcome.SKIPPED_DISABLED


def test_each_decision_is_logged(fake_target: FakeTarget,
                                 caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="patchlane")
    fake_target.lane()
    fake_target.import_target()
    messages = [r.getMessage() for r in caplog.records if r.name == "patchlane"]
    assert any(fake_target.entry_id in m and "applied" in m for m in messages), messages


def test_hit_counter_counts_calls_of_the_overlay_only(fake_target: FakeTarget) -> None:
    lane = fake_target.lane()
    module = fake_target.import_target()
    for _ in range(5):
        module.Greeter().greet("h")
    module.shout("not patched")
    assert lane.audit.hits[fake_target.entry_id] == 5


def test_retired_entries_are_recorded_and_never_applied(fake_target: FakeTarget) -> None:
    fake_target.write_registry(fake_target.entry(status="retired"))
    lane = fake_target.lane()
    module = fake_target.import_target()
    assert lane.audit.latest()[fake_target.entry_id].outcome is Outcome.RETIRED
    assert module.Greeter().greet("r") == "hello r"


def test_two_entries_on_one_module_are_each_pending_then_decided(
        fake_target: FakeTarget) -> None:
    second = fake_target.entry(
        id=fake_target.entry_id + "_b", overlay=f"patches/{fake_target.entry_id}_b.py",
        reproducer=f"reproducers/{fake_target.entry_id}.py",
        target={"distribution": fake_target.distribution,
                "object": f"{fake_target.module}:shout"},
        fingerprint={"sha256": [fake_target.fingerprint(("shout",))]})
    (fake_target.root / "patches" / f"{fake_target.entry_id}_b.py").write_text(
        "def overlay(w, i, a, k):\n    return 'loud ' + w(*a, **k)\n")
    (fake_target.root / "reproducers" / f"{fake_target.entry_id}_b.py").write_text("")
    second["reproducer"] = f"reproducers/{fake_target.entry_id}_b.py"
    fake_target.write_registry(fake_target.entry(), second)
    lane = fake_target.lane()
    latest = lane.audit.latest()
    assert latest[fake_target.entry_id].outcome is Outcome.PENDING
    assert latest[second["id"]].outcome is Outcome.PENDING
    module = fake_target.import_target()
    latest = lane.audit.latest()
    assert latest[second["id"]].outcome is Outcome.APPLIED, latest[second["id"]]
    assert module.shout("x") == "loud X"
    assert module.Greeter().greet("y") == "patched hello y"
