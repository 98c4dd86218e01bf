"""Real-upstream fixtures: releases of megatron-core installed side by side in .cache/.

Each release is installed once with ``pip install --no-deps --target`` and put first on the
reproducer's PYTHONPATH, so distribution metadata (what the gate reads) and code both come from
that release, while torch and the rest come from the test environment.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from patchlane.matrix import install_dir

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".cache" / "releases"


def release_dir(distribution: str, version: str) -> Path:
    return install_dir(f"{distribution}=={version}", CACHE)


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
