"""Which build of patchlane is running: the commit it came from and whether that tree was
clean. From an installed wheel, what the wheel's build recorded (``_build.json``, written by
``hatch_build.py``); from a checkout, git asked now. Receipts and the GPU check record it, so a
run says exactly which code ran."""

from __future__ import annotations

import json
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

__all__ = ["build"]

_PACKAGE = Path(__file__).resolve().parent


@cache
def build() -> dict[str, Any]:
    """``{"commit", "clean", "from"}``: ``from`` is ``wheel`` (recorded when it was built),
    ``checkout`` (git asked now) or ``unknown`` (neither: commit and clean are None)."""
    recorded = _PACKAGE / "_build.json"
    if recorded.is_file():
        try:
            data = json.loads(recorded.read_text(encoding="utf-8"))
            return {"commit": data.get("commit"), "clean": data.get("clean"), "from": "wheel"}
        except (OSError, ValueError, AttributeError):
            return {"commit": None, "clean": None, "from": "unknown"}
    root = _PACKAGE.parent
    if (root / ".git").exists():
        try:
            commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"],
                                    capture_output=True, text=True, timeout=10,
                                    check=True).stdout.strip()
            status = subprocess.run(["git", "-C", str(root), "status", "--porcelain",
                                     "--untracked-files=no"], capture_output=True, text=True,
                                    timeout=10, check=True).stdout
        except (OSError, subprocess.SubprocessError):
            return {"commit": None, "clean": None, "from": "unknown"}
        return {"commit": commit, "clean": status.strip() == "", "from": "checkout"}
    return {"commit": None, "clean": None, "from": "unknown"}
