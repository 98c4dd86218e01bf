"""continued_by: the entry that guards a bug on releases past another entry's gate. The
reference is validated when the registry loads (the sweep's `covered` verdict is in
tests/evidence/test_sweep.py)."""

from __future__ import annotations

from typing import Any

import pytest

from patchlane.common.errors import RegistryError
from patchlane.registry import load_registries

from ..conftest import FakeTarget

NEXT = "next_release_fix"


def successor(fake: FakeTarget, **overrides: Any) -> dict[str, Any]:
    (fake.root / "patches" / f"{NEXT}.py").write_text(
        "def overlay(wrapped, instance, args, kwargs):\n    return wrapped(*args, **kwargs)\n")
    (fake.root / "reproducers" / f"{NEXT}.py").write_text(
        "LANES = ('cpu',)\nWORLD_SIZES = (1,)\n\ndef run(ctx):\n    pass\n")
    entry = fake.entry(id=NEXT, applies_to=">=1.2,<2.0", overlay=f"patches/{NEXT}.py",
                       reproducer=f"reproducers/{NEXT}.py",
                       upstream={"issue": "https://example.invalid/issues/2",
                                 "forwarded": "https://example.invalid/pull/3"})
    entry.update(overrides)
    return entry


def test_a_valid_continuation_loads(fake_target: FakeTarget) -> None:
    fake_target.write_registry(fake_target.entry(applies_to=">=1.0,<1.2", continued_by=NEXT),
                               successor(fake_target))
    registry = load_registries([fake_target.registry])
    assert registry.get(fake_target.entry_id).continued_by == NEXT
    assert registry.get(NEXT).continued_by is None


@pytest.mark.parametrize(("value", "message", "found"), [
    ("no_such_entry", "unknown continuation", "no_such_entry"),
    ("Not-An-Id", "not an entry id", "Not-An-Id"),
    (["a_list"], "not an entry id", "['a_list']"),
])
def test_bad_continuations_are_named(fake_target: FakeTarget, value: object, message: str,
                                     found: str) -> None:
    fake_target.write_registry(fake_target.entry(continued_by=value), successor(fake_target))
    with pytest.raises(RegistryError, match=message) as info:
        load_registries([fake_target.registry])
    assert info.value.entry_id == fake_target.entry_id and info.value.key == "continued_by"
    assert str(info.value.found) == found


def test_itself_another_distribution_and_a_cycle_are_refused(fake_target: FakeTarget) -> None:
    me = fake_target.entry_id
    fake_target.write_registry(fake_target.entry(continued_by=me))
    with pytest.raises(RegistryError, match="an entry cannot continue itself"):
        load_registries([fake_target.registry])
    fake_target.write_registry(
        fake_target.entry(continued_by=NEXT),
        successor(fake_target, target={"distribution": "other-dist",
                                       "object": f"{fake_target.module}:Greeter.greet"}))
    with pytest.raises(RegistryError, match="same distribution") as info:
        load_registries([fake_target.registry])
    assert "other-dist" in str(info.value.found)
    fake_target.write_registry(fake_target.entry(continued_by=NEXT),
                               successor(fake_target, continued_by=me))
    with pytest.raises(RegistryError, match="continuation cycle") as info:
        load_registries([fake_target.registry])
    assert info.value.found in (f"{me} -> {NEXT} -> {me}", f"{NEXT} -> {me} -> {NEXT}")


def test_a_misspelling_gets_a_suggestion(fake_target: FakeTarget) -> None:
    fake_target.write_registry(fake_target.entry(continued_by=NEXT + "x"),
                               successor(fake_target))
    with pytest.raises(RegistryError, match=f"did you mean '{NEXT}'"):
        load_registries([fake_target.registry])
