"""A registry of fake entries whose reproducers sleep, for the sweep benchmarks
(bench_sweep.py, bench_schedule.py): the framework's own mechanics (planning, scheduling,
subprocesses, receipts), never evidence about a patch. One fake distribution, one target, one
entry per (id, seconds), each a full source patch with overlay, reproducer and draft."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from pathlib import Path

import yaml

SOURCE = "class Greeter:\n    def greet(self, name):\n        return 'hello ' + name\n"


def write_sleep_registry(root: Path, package: str, cases: Sequence[tuple[str, float]]) -> Path:
    """Write the fake package ``package`` (distribution ``package`` with ``-`` for ``_``,
    version 1.0.0) and a registry under ``root``; put ``root`` on PYTHONPATH to use it."""
    from patchlane.installed.fingerprint import compute_from_source

    dist = package.replace("_", "-")
    pkg = root / package
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "target.py").write_text(SOURCE)
    meta = root / f"{package}-1.0.0.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0.0\n")
    for folder in ("patches", "reproducers", "drafts"):  # not forwarded: a draft is required
        (root / folder).mkdir()
    entries = []
    for entry_id, seconds in cases:
        (root / "drafts" / f"{entry_id}.md").write_text("# benchmark entry\n")
        (root / "patches" / f"{entry_id}.py").write_text(
            "def overlay(w, i, a, k):\n    return 'patched ' + w(*a, **k)\n")
        (root / "reproducers" / f"{entry_id}.py").write_text(textwrap.dedent(f"""\
            LANES = ("cpu",)
            WORLD_SIZES = (1,)

            def run(ctx):
                import time
                import {package}.target as t
                time.sleep({seconds})
                assert t.Greeter().greet("a") == "patched hello a", "bug shows"
            """))
        entries.append({
            "id": entry_id, "kind": "source_patch", "summary": "benchmark",
            "target": {"distribution": dist, "object": f"{package}.target:Greeter.greet"},
            "applies_to": ">=1,<2",
            "upstream": {"forwarded": "no", "draft": f"drafts/{entry_id}.md"},
            "retire_when": {"probe": True}, "overlay": f"patches/{entry_id}.py",
            "reproducer": f"reproducers/{entry_id}.py",
            "fingerprint": {"sha256": [compute_from_source(SOURCE, ["Greeter.greet"])]},
            "owner": "bench", "added": "2026-11-22", "status": "active"})
    path = root / "registry.yaml"
    path.write_text(yaml.safe_dump({"schema": 1, "entries": entries}, sort_keys=False))
    return path
