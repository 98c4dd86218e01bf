"""A reproducer run against a copy of a real release with one file changed: the check that a
change proposed upstream (``patchlane draft --verify``), not only the overlay, fixes the bug.

The release's top package is copied (``__pycache__`` left out) into a scratch directory put
first on ``PYTHONPATH``, the changed file is written into the copy, and the entry's reproducer
runs *without* its overlay on the cpu lane at each world size it declares. The installed
release is never touched.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from ..registry import Entry
from ..sweep.reproduce import Mode, read_spec, run_case

__all__ = ["run_with_changed_file"]


def run_with_changed_file(entry: Entry, *, site: Path, relative: str, text: str, workdir: Path,
                          timeout: float = 600.0) -> list[tuple[int, str, str]]:
    """``(world size, outcome, message)`` per world size. ``site`` holds the release's top
    package; ``relative`` (``megatron/core/x.py``) is the file to replace with ``text``."""
    top = relative.split("/", 1)[0]
    copy = workdir / "release"
    if (site / top).is_dir():
        shutil.copytree(site / top, copy / top, ignore=shutil.ignore_patterns("__pycache__"))
    else:  # a single-file module (``relative`` is the file itself): nothing else to copy
        copy.mkdir(parents=True, exist_ok=True)
    (copy / relative).write_text(text, encoding="utf-8")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(copy), env.get("PYTHONPATH")]))
    results = []
    for size in read_spec(entry).world_sizes:
        result = run_case(entry, Mode.WITHOUT, lane="cpu", world_size=size, timeout=timeout,
                          workdir=workdir / f"ws{size}", env=env)
        results.append((size, result.outcome.value, result.message))
    return results
