"""Real-upstream fixtures: releases of megatron-core installed side by side in .cache/.

Each release is installed once with ``pip install --no-deps --target`` and put first on the
reproducer's PYTHONPATH, so distribution metadata (what the gate reads) and code both come from
that release, while torch and the rest come from the test environment.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".cache" / "releases"


def release_dir(distribution: str, version: str) -> Path:
    target = CACHE / f"{distribution}-{version}"
    marker = target / ".complete"
    if not marker.exists():
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target",
             str(target), f"{distribution}=={version}"],
            check=True,
        )
        marker.write_text("ok\n")
    return target


def release_env(distribution: str, version: str) -> dict[str, str]:
    env = dict(os.environ)
    path = str(release_dir(distribution, version))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (path, env.get("PYTHONPATH")) if p)
    return env


def megatron_version() -> str | None:
    from importlib import metadata

    try:
        return metadata.version("megatron-core")
    except metadata.PackageNotFoundError:
        return None


requires_megatron = pytest.mark.skipif(megatron_version() is None,
                                       reason="megatron-core is not installed")
