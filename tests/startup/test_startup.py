"""Where registries come from at `import patchlane`: default, PATCHLANE_REGISTRY, entry points."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from ..conftest import FakeTarget, make_fake

REPORT = "import json, patchlane; print(json.dumps(patchlane.report()))"


def report(env: dict[str, str]) -> dict[str, object]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("PATCHLANE_")}
    full.update(env)
    out = subprocess.run([sys.executable, "-c", REPORT], capture_output=True, text=True,
                         env=full, cwd="/", timeout=120)
    assert out.returncode == 0, out.stderr
    data: dict[str, object] = json.loads(out.stdout)
    return data


def ids(data: dict[str, object]) -> list[str]:
    return [e["id"] for e in data["entries"]]  # type: ignore[attr-defined, index]


def test_default_registry_is_loaded() -> None:
    assert "mcore_rerun_sentinel" in ids(report({}))


def test_default_registry_can_be_switched_off(fake_target: FakeTarget) -> None:
    fake_target.write_registry()
    data = report({"PATCHLANE_DEFAULT_REGISTRY": "0",
                   "PATCHLANE_REGISTRY": str(fake_target.registry)})
    assert ids(data) == [fake_target.entry_id]


def test_several_registries_merge_in_order(fake_target: FakeTarget, tmp_path: Path) -> None:
    other = make_fake(tmp_path / "other")
    fake_target.write_registry()
    other.write_registry()
    paths = os.pathsep.join([str(fake_target.registry), str(other.registry),
                             str(fake_target.registry)])
    data = report({"PATCHLANE_REGISTRY": paths})
    default = [e["id"] for e in report({})["entries"]]  # type: ignore[attr-defined]
    assert ids(data) == [*default, fake_target.entry_id, other.entry_id]
    assert len(data["registries"]) == 3  # type: ignore[arg-type]


def test_entry_point_registries(fake_target: FakeTarget, tmp_path: Path) -> None:
    fake_target.write_registry()
    plugin = tmp_path / "plugin"
    dist_info = plugin / "plreg_team-1.0.dist-info"
    dist_info.mkdir(parents=True)
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: plreg-team\nVersion: 1.0\n")
    (dist_info / "entry_points.txt").write_text(
        "[patchlane.registries]\nteam = plreg_team:registries\n")
    (plugin / "plreg_team.py").write_text(
        f"def registries():\n    return [{str(fake_target.registry)!r}]\n")
    env = {"PYTHONPATH": str(plugin), "PATCHLANE_DEFAULT_REGISTRY": "0"}
    assert ids(report(env)) == [fake_target.entry_id]
    assert ids(report(env | {"PATCHLANE_ENTRY_POINTS": "0"})) == []
