"""``patchlane fingerprint ID``: the current fingerprint of the target, to record deliberately."""

from __future__ import annotations

import importlib
from pathlib import Path

from .. import fingerprint
from ..errors import OverlayError
from ..gates import installed_version
from ._common import lane


def run_fingerprint(entry_id: str, source: Path | None = None) -> int:
    entry = lane().registry.get(entry_id)
    if entry.fingerprint is None or not entry.target.module or not entry.target.qualname:
        raise OverlayError(entry_id, f"a {entry.kind.value} entry has no source fingerprint")
    qualnames = (entry.target.qualname, *entry.fingerprint.covers)
    if source is not None:
        value = fingerprint.compute_from_source(source.read_text(encoding="utf-8"), qualnames)
        label = str(source)
    else:
        module = importlib.import_module(entry.target.module)
        value = fingerprint.compute(module, qualnames)
        label = f"{entry.target.distribution} {installed_version(entry.target.distribution)}"
    recorded = value in entry.fingerprint.sha256
    print(value)
    print(f"# {label}: "
          + ("matches the registry" if recorded else
             "NOT in the registry: review the upstream change and the reproducer, then add it "
             "under fingerprint.sha256"))
    return 0
