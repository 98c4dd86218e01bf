"""A small real nightly for the report tests: two `patchlane sweep` runs, through the command
line, into one runs root, on a fake target (the framework's own mechanics, never evidence that a
real patch works).

Five entries, one per thing the page must show: guarding; a reproducer that errors by an
exception (stage run, with a traceback in its log); a rank that dies before reporting (stage
bootstrap: only its log says why); upstream-fixed (a retirement candidate with GitHub links
whose state sits in the upstream cache); and one that is guarding in the first run and broken
in the second, with markup and markdown in its reason. The upstream cache is written here, so
no request is ever sent.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from patchlane.upstream.cache import CacheEntry, ResponseCache

from ..conftest import OVERLAY_SOURCE, FakeTarget

HEAD = "LANES = ('cpu',)\nWORLD_SIZES = (1,)\n\n"
GUARDING = HEAD + ("def run(ctx):\n    import {module} as t\n"
                   "    assert t.Greeter().greet('a') == 'patched hello a', 'bug shows'\n")
ERRORS = HEAD + ("def run(ctx):\n    print('setting up the fake scratch space')\n"
                 "    raise KeyError('scratch-7781 is not an assertion')\n")
DIES = HEAD + ("def run(ctx):\n    import os, sys\n"
               "    print('bootstrap-5523: the rank gives up before reporting', file=sys.stderr)\n"
               "    sys.stderr.flush()\n    os._exit(3)\n")
FIXED = HEAD + "def run(ctx):\n    import {module} as t\n    t.Greeter().greet('a')\n"
BROKEN_REASON = "still wrong <b>&amp;</b> | pipe __init__ `tick`"
BROKEN = HEAD + ("def run(ctx):\n    import {module} as t\n"
                 f"    assert t.Greeter().greet('a') == 'never', {BROKEN_REASON!r}\n")

ISSUE = "https://github.com/example-org/fakeproj/issues/7"
PR = "https://github.com/example-org/fakeproj/pull/8"


@dataclass
class Nightly:
    root: Path
    first: Path
    second: Path
    ids: dict[str, str]
    """role -> entry id."""
    cache: Path


def _write_registry(fake: FakeTarget, sources: dict[str, str]) -> dict[str, str]:
    entries, ids = [], {}
    for role, source in sources.items():
        entry_id = f"{fake.entry_id}_{role}"
        ids[role] = entry_id
        (fake.root / "patches" / f"{entry_id}.py").write_text(OVERLAY_SOURCE)
        (fake.root / "reproducers" / f"{entry_id}.py").write_text(
            source.replace("{module}", fake.module))
        extra = {}
        if role == "fixed":
            extra = {"upstream": {"issue": ISSUE, "pr": PR, "forwarded": PR},
                     "summary": "greets without the patch since upstream's fix"}
        entries.append(fake.entry(id=entry_id, overlay=f"patches/{entry_id}.py",
                                  reproducer=f"reproducers/{entry_id}.py", **extra))
    fake.registry.write_text(yaml.safe_dump({"schema": 1, "entries": entries},
                                            sort_keys=False))
    return ids


def _seed_cache(cache: Path) -> None:
    """What `patchlane upstream` would have cached for the issue and the PR."""
    store = ResponseCache(cache)
    api = "https://api.github.com/repos/example-org/fakeproj"
    now = time.time()
    store.write(f"{api}/issues/7", CacheEntry(
        {"number": 7, "state": "closed", "state_reason": "completed",
         "closed_at": "2026-04-25T08:00:00Z", "title": "greet forgets the patch",
         "html_url": ISSUE}, now, None, None))
    store.write(f"{api}/pulls/8", CacheEntry(
        {"number": 8, "state": "closed", "merged": True, "merged_at": "2026-04-24T10:00:00Z",
         "merge_commit_sha": "a" * 40, "milestone": {"title": "1.3.0"},
         "title": "greet: patch it", "html_url": PR}, now, None, None))


def env_for(fake: FakeTarget, cache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PATCHLANE_")}
    env["PYTHONPATH"] = str(fake.root)
    env["PATCHLANE_DEFAULT_REGISTRY"] = "0"
    env["PATCHLANE_REGISTRY"] = str(fake.registry)
    env["PATCHLANE_CACHE"] = str(cache)
    env["CI"] = "1"
    return env


def _sweep(run_dir: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "patchlane.cli.main", "sweep", "--run-dir", str(run_dir),
           "--jobs", "2", "--timeout", "60", "--quiet"]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)


def two_nights(fake: FakeTarget, root: Path) -> Nightly:
    """Two sweeps into ``root``: the second finds the first by itself (no --compare, no
    --history) and reports the one verdict that changed."""
    cache = root.parent / "upstream-cache"
    _seed_cache(cache)
    roles = {"guard": GUARDING, "errors": ERRORS, "dies": DIES, "fixed": FIXED,
             "flips": GUARDING}
    ids = _write_registry(fake, roles)
    env = env_for(fake, cache)
    first, second = root / "night1", root / "night2"
    out = _sweep(first, env)
    assert (first / "report.html").is_file(), out.stdout + out.stderr
    # The next night the overlay no longer fixes one entry: a verdict change to report.
    (fake.root / "reproducers" / f"{ids['flips']}.py").write_text(
        BROKEN.replace("{module}", fake.module))
    out = _sweep(second, env)
    assert (second / "report.html").is_file(), out.stdout + out.stderr
    return Nightly(root, first, second, ids, cache)
