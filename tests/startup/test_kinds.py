"""One record per entry kind (patchlane.registry.kinds.KINDS), read wherever kinds differ.

Every kind must have every part; the startup and the lazy start decide from a row's
``startup`` (taken from the record), never from a kind's name.
"""

from __future__ import annotations

import re
from pathlib import Path

from patchlane.registry import KINDS, Kind, KindRules, Startup, StartupRow, load_registries
from patchlane.registry.schema import _COMMON_OPTIONAL, _COMMON_REQUIRED

ROOT = Path(__file__).resolve().parents[2]


def test_every_kind_has_every_part() -> None:
    assert set(KINDS) == set(Kind)
    for kind, rules in KINDS.items():
        assert isinstance(rules, KindRules) and len(rules) == len(KindRules._fields), kind
        assert rules.required, kind  # every kind says what it needs
        assert not set(rules.required) & set(rules.optional), kind
        assert not set(rules.required) & set(_COMMON_REQUIRED), kind
        assert isinstance(rules.startup, Startup), kind
        assert rules.new_options and "retire_release" in rules.new_options, kind
        # an option of `patchlane new` names a key the kind takes (or a common one)
        keys = set(rules.required) | set(rules.optional) | set(_COMMON_OPTIONAL)
        assert {o for o in rules.new_options if o not in (
            "distribution", "retire_release", "settings")} <= keys | {"applies_to"}, kind
    assert {r.startup for r in KINDS.values()} == set(Startup)  # each way is some kind's


def test_each_row_carries_how_the_startup_decides_it() -> None:
    registry = load_registries([ROOT / "registry.yaml"])
    assert {e.kind for e in registry.entries} == set(Kind)  # the default registry has them all
    for entry in registry.entries:
        row = StartupRow.of(entry)
        assert row.startup == KINDS[entry.kind].startup.value, entry.id


def test_the_lazy_start_and_the_walk_name_no_kind() -> None:
    """The lazy start reads a row's ``startup``; a kind's name there would have to be edited
    for every new kind."""
    names = re.compile("|".join(rf"[\"']{re.escape(k.value)}[\"']" for k in Kind))
    for path in [*sorted((ROOT / "patchlane" / "lazy").glob("*.py")),
                 ROOT / "patchlane" / "importer.py"]:
        code = [line for line in path.read_text().splitlines()
                if not line.lstrip().startswith("#")]
        found = [line for line in code if names.search(line) and "Kind." not in line]
        assert not found, (path.name, found)
        if path.parent.name == "lazy":
            assert not any("Kind." in line for line in code), path.name
