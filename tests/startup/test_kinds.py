"""One row of facts per entry kind (patchlane.registry.kinds.KINDS) and one module per kind
(patchlane.registry.per_kind.PARTS), read wherever kinds differ.

Every kind must have every part; the startup and the lazy start decide from a row's
``startup`` (taken from the record), never from a kind's name; no module outside the kinds'
own compares a kind's name.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from patchlane.authoring.new import _COMMON_FLAGS
from patchlane.registry import KINDS, DecidedBy, Kind, KindRules, StartupRow, load_registries
from patchlane.registry.per_kind import PARTS, KindParts, NewOption, new_options
from patchlane.registry.per_kind.protocol import Drafting
from patchlane.registry.schema import _COMMON_OPTIONAL, _COMMON_REQUIRED

ROOT = Path(__file__).resolve().parents[2]


def test_every_kind_has_every_part() -> None:
    assert set(KINDS) == set(Kind)
    for kind, rules in KINDS.items():
        assert isinstance(rules, KindRules) and len(rules) == len(KindRules._fields), kind
        assert rules.required, kind  # every kind says what it needs
        assert not set(rules.required) & set(rules.optional), kind
        assert not set(rules.required) & set(_COMMON_REQUIRED), kind
        assert isinstance(rules.decided_by, DecidedBy), kind
        assert rules.new_options and "retire_release" in rules.new_options, kind
        # an option of `patchlane new` names a key the kind takes (or a common one)
        keys = set(rules.required) | set(rules.optional) | set(_COMMON_OPTIONAL)
        assert {o for o in rules.new_options if o not in (
            "distribution", "version_from", "retire_release", "settings")} \
            <= keys | {"applies_to"}, kind
    assert {r.decided_by for r in KINDS.values()} == set(DecidedBy)  # each way is some kind's


def test_each_row_carries_how_the_startup_decides_it() -> None:
    registry = load_registries([ROOT / "registry.yaml"])
    assert {e.kind for e in registry.entries} == set(Kind)  # the default registry has them all
    for entry in registry.entries:
        row = StartupRow.of(entry)
        assert row.decided_by == KINDS[entry.kind].decided_by.value, entry.id


def test_the_lazy_start_and_the_walk_name_no_kind() -> None:
    """The lazy start reads a row's ``startup``; a kind's name there would have to be edited
    for every new kind."""
    names = re.compile("|".join(rf"[\"']{re.escape(k.value)}[\"']" for k in Kind))
    for path in [*sorted((ROOT / "patchlane" / "lazy").glob("*.py")),
                 ROOT / "patchlane" / "deciding" / "decider.py"]:
        code = [line for line in path.read_text().splitlines()
                if not line.lstrip().startswith("#")]
        found = [line for line in code if names.search(line) and "Kind." not in line]
        assert not found, (path.name, found)
        if path.parent.name == "lazy":
            assert not any("Kind." in line for line in code), path.name


def test_every_kind_has_a_module_with_every_part() -> None:
    assert set(PARTS) == set(Kind)
    parts = [name for name, _ in inspect.getmembers(KindParts)
             if not name.startswith("_")] + list(KindParts.__annotations__)
    assert set(parts) == {"OPTIONS", "parse", "decide", "judge", "write"}
    for kind, module in PARTS.items():
        for name in parts:
            assert hasattr(module, name), (kind, name)
        for name in ("parse", "decide", "judge", "write"):
            signature = inspect.signature(getattr(module, name))
            assert list(signature.parameters) == list(
                inspect.signature(getattr(KindParts, name)).parameters)[1:], (kind, name)
        assert all(isinstance(o, NewOption) for o in module.OPTIONS), kind
        # a kind's own options are options it takes; `patchlane new` offers each once
        assert {o.name for o in module.OPTIONS} <= KINDS[kind].new_options, kind
    flags = [option.flag for option, _ in new_options().values()]
    assert len(flags) == len(set(flags))
    for name in KINDS[Kind.SOURCE_PATCH].new_options | KINDS[Kind.CONFIG].new_options:
        assert name in new_options() or name in _COMMON_FLAGS, name


def test_each_kind_decides_as_its_startup_says() -> None:
    """A kind decided at an import has a ledger check there; one decided on demand judges a
    configuration; the others answer None to both (checked on the default registry)."""
    registry = load_registries([ROOT / "registry.yaml"])
    for entry in registry.entries:
        startup = KINDS[entry.kind].decided_by
        decided = PARTS[entry.kind].decide(entry)
        assert (decided is not None) is (startup is DecidedBy.LEDGER), entry.id
        if startup is not DecidedBy.ON_DEMAND:
            assert PARTS[entry.kind].judge(entry, object()) is None, entry.id
        if startup is DecidedBy.LEDGER:
            assert entry.when is not None and entry.requirement_text, entry.id
        if startup is DecidedBy.CONFIG:
            assert StartupRow.of(entry).modules, entry.id


def test_drafting_is_what_patchlane_new_lends() -> None:
    """The authoring side implements every part of the protocol a kind's writer is given."""
    from patchlane.authoring.new import _Draft

    for name, _ in inspect.getmembers(Drafting):
        if not name.startswith("_"):
            assert hasattr(_Draft, name), name
    for name in Drafting.__annotations__:
        assert name in _Draft.__dataclass_fields__, name


def test_no_module_outside_the_kinds_compares_a_kind() -> None:
    """A kind's difference lives in its module and its row: code elsewhere reads the row's
    facts (with_overlay, startup, own_probe) or the module's parts, so a new kind edits
    neither."""
    member = re.compile(r"Kind\.(" + "|".join(k.name for k in Kind) + r")\b")
    allowed = {"registry/kinds.py", "registry/per_kind/__init__.py", "registry/records.py"}
    defaults = re.compile(r"(kind: Kind = |default=)Kind\.SOURCE_PATCH")  # the default kind
    found = []
    for path in sorted((ROOT / "patchlane").rglob("*.py")):
        rel = path.relative_to(ROOT / "patchlane").as_posix()
        if rel in allowed:
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if member.search(line) and not defaults.search(line):
                found.append(f"{rel}:{number}: {line.strip()}")
    assert not found, found


def test_a_kind_without_a_part_or_with_one_of_another_shape_is_refused_when_registered() -> None:
    import types

    from patchlane.registry.per_kind import KindPartsError, register
    from patchlane.registry.per_kind import config as config_parts

    def module(**parts: object) -> types.ModuleType:
        made = types.ModuleType("teamkind")
        for name in ("OPTIONS", "parse", "decide", "judge", "write"):
            setattr(made, name, getattr(config_parts, name))
        for name, value in parts.items():
            if value is None:
                delattr(made, name)
            else:
                setattr(made, name, value)
        return made

    assert register(Kind.CONFIG, module()) is not None
    with pytest.raises(KindPartsError, match=r"teamkind \(the config kind's parts\): judge: "
                                             r"found None, expected a function \(entry, config\)"):
        register(Kind.CONFIG, module(judge=None))
    with pytest.raises(KindPartsError, match=r"decide\(entry, strict\): expected the parameters "
                                             r"\(entry\)"):
        register(Kind.CONFIG, module(decide=lambda entry, strict: None))
    with pytest.raises(KindPartsError, match=r"OPTIONS: found \['--x'\], expected a tuple"):
        register(Kind.CONFIG, module(OPTIONS=["--x"]))
