"""Two entries on one function stack in registry order and revert independently; patched
callables pickle, copy and cross a multiprocessing pool like unpatched ones (issue 14 items 2
and 3). Mechanics on a fake target."""

from __future__ import annotations

import copy
import pickle
from typing import Any

from patchlane.deciding.audit import AuditLog, Outcome
from patchlane.deciding.controls import Controls
from patchlane.deciding.decider import Decider
from patchlane.registry import load_registries
from patchlane.targets.protocol import layers_at

from ..conftest import FakeTarget

SECOND = "second_layer"


def two_on_one_function(fake: FakeTarget) -> Decider:
    (fake.root / "patches" / f"{SECOND}.py").write_text(
        "def overlay(wrapped, instance, args, kwargs):\n"
        "    return '[' + wrapped(*args, **kwargs) + ']'\n")
    (fake.root / "reproducers" / f"{SECOND}.py").write_text(
        "LANES = ('cpu',)\nWORLD_SIZES = (1,)\ndef run(ctx):\n    pass\n")
    second: dict[str, Any] = fake.entry(id=SECOND, overlay=f"patches/{SECOND}.py",
                                        reproducer=f"reproducers/{SECOND}.py",
                                        upstream={"forwarded": "https://example.invalid/pull/5"})
    fake.write_registry(fake.entry(), second)
    decider = Decider(load_registries([fake.registry]), Controls.from_env({}), AuditLog())
    decider.start()
    fake.import_target()
    return decider


def test_two_entries_stack_in_registry_order_and_both_are_applied(
        fake_target: FakeTarget) -> None:
    decider = two_on_one_function(fake_target)
    greeter = fake_target.import_target().Greeter
    assert greeter().greet("a") == "[patched hello a]"  # the first entry is innermost
    assert decider.is_applied(fake_target.entry_id) and decider.is_applied(SECOND)
    assert len(list(layers_at(greeter, "greet", vars(greeter)["greet"]))) == 2
    for _ in range(3):  # re-walks add nothing
        decider.apply()
    assert len(list(layers_at(greeter, "greet", vars(greeter)["greet"]))) == 2
    assert greeter().greet("a") == "[patched hello a]"


def test_reverting_the_inner_entry_keeps_the_outer_one(fake_target: FakeTarget) -> None:
    decider = two_on_one_function(fake_target)
    greeter = fake_target.import_target().Greeter
    assert decider.revert(fake_target.entry_id).outcome is Outcome.REVERTED
    assert greeter().greet("a") == "[hello a]"  # the reverted overlay no longer runs
    assert not decider.is_applied(fake_target.entry_id) and decider.is_applied(SECOND)
    decider.revert(SECOND)
    assert greeter().greet("a") == "hello a"  # and the outer's revert does not bring it back
    assert list(layers_at(greeter, "greet", vars(greeter)["greet"])) == []


def test_patched_callables_pickle_copy_and_cross_a_pool(fake_target: FakeTarget) -> None:
    import multiprocessing

    decider = fake_target.decider()
    module = fake_target.import_target()
    assert decider.is_applied(fake_target.entry_id)
    method, bound = module.Greeter.greet, module.Greeter().greet
    assert pickle.loads(pickle.dumps(method))(module.Greeter(), "a") == "patched hello a"
    assert pickle.loads(pickle.dumps(bound))("b") == "patched hello b"
    assert copy.deepcopy(method) is method and copy.copy(bound) is bound
    with multiprocessing.get_context("fork").Pool(1) as pool:
        assert pool.map(module.Greeter().greet, ["c"]) == ["patched hello c"]
