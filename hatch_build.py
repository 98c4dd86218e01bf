"""Wheel build hook: record which commit of patchlane the wheel was built from, and whether the
tree was clean, as ``patchlane/_build.json``: receipts and the GPU check name that build, so
a run from an installed wheel says exactly which code ran
(``patchlane.sweep.provenance.build``)."""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


def _git(root: str, *args: str) -> str | None:
    try:
        return subprocess.run(["git", "-C", root, *args], capture_output=True, text=True,
                              timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None


class CustomBuildHook(BuildHookInterface):  # type: ignore[misc]
    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        commit = _git(self.root, "rev-parse", "HEAD")
        status = _git(self.root, "status", "--porcelain", "--untracked-files=no")
        record = {"commit": commit, "clean": None if status is None else status == "",
                  "built_from": "git checkout" if commit else "a tree without git"}
        out = Path(tempfile.mkdtemp(prefix="patchlane-build-")) / "_build.json"
        out.write_text(json.dumps(record, sort_keys=True) + "\n", encoding="utf-8")
        build_data["force_include"][str(out)] = "patchlane/_build.json"
