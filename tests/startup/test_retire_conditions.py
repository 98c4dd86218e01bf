"""Every declared retirement condition can be evaluated: ``probe: true`` needs something to
probe (a source patch's overlay probe, or a setting's built-in one), ``reproducer: true`` needs
a reproducer; and ``when.installed`` scopes a floor or pin to another package's range."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest
import yaml

from patchlane.common.errors import RegistryError
from patchlane.registry import Kind, load_registries

DEFAULT = Path(__file__).resolve().parents[2] / "registry.yaml"


def _pin(**extra: Any) -> dict[str, Any]:
    return {"id": "a_pin", "kind": "packaging_pin", "summary": "a pin",
            "target": {"distribution": "numpy"}, "pin": "<2.4",
            "upstream": {"issue": "https://example.invalid/issues/1", "forwarded": "no"},
            "retire_when": {"upstream_released": True}, "owner": "tests",
            "added": "2026-11-22", "status": "active", **extra}


def _load(tmp_path: Path, entry: dict[str, Any]) -> Any:
    path = tmp_path / "registry.yaml"
    path.write_text(yaml.safe_dump({"schema": 1, "entries": [entry]}, sort_keys=False))
    return load_registries([path])


@pytest.mark.parametrize(("extra", "key", "message"), [
    ({"retire_when": {"probe": True}}, "retire_when.probe", "a probe needs an overlay"),
    ({"retire_when": {"reproducer": True}}, "retire_when.reproducer",
     "retirement on the reproducer needs one"),
    ({"when": {"installed": {"triton": "three"}}}, "when.installed.triton",
     "invalid PEP 440 specifier"),
    ({"when": {"installed": {}}}, "when.installed", "empty condition"),
    ({"when": {"installed": ["triton"]}}, "when.installed", "wrong type"),
])
def test_unevaluable_conditions_are_refused_by_name(tmp_path: Path, extra: dict[str, Any],
                                                    key: str, message: str) -> None:
    with pytest.raises(RegistryError, match=message) as info:
        _load(tmp_path, _pin(**extra))
    assert info.value.entry_id == "a_pin" and info.value.key == key


def test_a_pin_scoped_to_another_package(tmp_path: Path) -> None:
    (entry,) = _load(tmp_path, _pin(when={"imported": "triton",
                                          "installed": {"triton": "<3.7"}})).entries
    assert entry.when is not None and str(entry.when.installed["triton"]) == "<3.7"


def test_the_default_registry_declares_only_evaluable_conditions() -> None:
    for entry in load_registries([DEFAULT]).entries:
        when = entry.retire_when
        if when.probe and entry.kind is Kind.SOURCE_PATCH:
            assert entry.overlay is not None
            tree = ast.parse(entry.overlay.read_text(encoding="utf-8"))
            probes = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "probe"]
            assert probes, f"{entry.id}: retire_when.probe, but its overlay defines no probe()"
        if when.reproducer:
            assert entry.reproducer is not None, entry.id
        if when.upstream_released:
            assert entry.upstream.issue or entry.upstream.pr, entry.id
