"""Real-upstream fixtures: releases of megatron-core installed side by side in .cache/.

Each release is installed once with ``pip install --no-deps --target`` and put first on the
reproducer's PYTHONPATH, so distribution metadata (what the gate reads) and code both come from
that release, while torch and the rest come from the test environment.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from patchlane.releases.matrix import install_dir

from .warm_python import WarmPython

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".cache" / "releases"


def release_dir(distribution: str, version: str) -> Path:
    return install_dir(f"{distribution}=={version}", CACHE)


@pytest.fixture(scope="session")
def warm_python() -> Iterator[WarmPython]:
    """One interpreter per pytest worker that has imported torch, forking a child per run of a
    release (``warm_python.py``); started by the first run asked of it."""
    server = WarmPython()
    try:
        yield server
    finally:
        server.close()


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


def release_for(entry_id: str) -> tuple[str, dict[str, str] | None]:
    """The megatron-core release to exercise ``entry_id`` on with this interpreter: the
    installed one when the entry's gate admits it, else the newest matrix release that runs
    here and that the gate admits (put first on PYTHONPATH via the returned env). The 3.12
    venv installs 0.19.2, past the rerun sentinel's gate; 0.17.1 is the newest it covers."""
    from packaging.version import Version

    from patchlane import startup
    from patchlane.releases.matrix import load_matrix

    entry = startup.current().registry.get(entry_id)
    assert entry.applies_to is not None
    dist = entry.target.distribution
    installed = megatron_version() if dist == "megatron-core" else None
    if installed is not None and entry.applies_to.contains(installed, prereleases=True):
        return installed, None
    candidates = [spec.split("==")[1] for s in load_matrix(ROOT / "matrix.yaml") if s.runs_here()
                  for spec in s.install if spec.startswith(f"{dist}==")]
    admitted = [v for v in candidates if entry.applies_to.contains(v, prereleases=True)]
    if not admitted:
        pytest.skip(f"no {dist} release in {entry.applies_to} runs on this interpreter")
    version = max(admitted, key=Version)
    return version, release_env(dist, version)
