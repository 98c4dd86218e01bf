"""``patchlane fingerprint ID``: the current fingerprint of the target, to record deliberately."""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path

from .. import fingerprint
from ..errors import StrictModeError, UsageError
from ..gates import resolve_version
from .common import decider


def run_fingerprint(entry_id: str, source: Path | None = None) -> int:
    entry = decider().registry.get(entry_id)
    if entry.fingerprint is None or not entry.target.module or not entry.target.qualname:
        # Asked of an entry that has nothing to fingerprint: the request, not an overlay, is
        # wrong.
        raise UsageError(f"{entry_id}: a {entry.kind.value} entry has no source fingerprint; "
                         "only a source_patch with a target object has one")
    qualnames = entry.fingerprint.qualnames(entry.target.qualname)
    if source is not None:
        value = fingerprint.compute_from_source(source.read_text(encoding="utf-8"), qualnames)
        # read, not run: never record it under fingerprint.releases as if a run had seen it
        label = f"{source} (read from source: nothing ran)"
    else:
        try:
            module = importlib.import_module(entry.target.module)
        except StrictModeError:
            # Strict mode refused the import (drift is exactly when a maintainer runs this):
            # read the installed module's source instead of importing it.
            spec = importlib.util.find_spec(entry.target.module)
            if spec is None or spec.origin is None:
                raise
            value = fingerprint.compute_from_source(
                Path(spec.origin).read_text(encoding="utf-8"), qualnames)
            where = f"read from {spec.origin}: the import was refused"
        else:
            value = fingerprint.compute(module, qualnames)
            where = f"imported from {module.__file__}"
        version, version_source = resolve_version(entry.target.distribution, module=None,
                                                  version_from=entry.target.version_from)
        label = f"{entry.target.distribution} {version} ({version_source}; {where})"
    recorded = value in entry.fingerprint.sha256
    print(value)
    print(f"# {label}: "
          + ("matches the registry" if recorded else
             "NOT in the registry: review the upstream change and the reproducer, then add it "
             "under fingerprint.sha256"))
    return 0


def run_fingerprint_object(target: str, source: Path | None = None) -> int:
    """``patchlane fingerprint --object MODULE:QUALNAME``: no registry is read, so a new entry
    (which the registry refuses until it records a value) can get its first one."""
    module_name, sep, qualname = target.partition(":")
    if not sep or not module_name or not qualname:
        raise UsageError(f"--object: expected MODULE:QUALNAME, found {target!r}; e.g. "
                         "megatron.core.rerun_state_machine:RerunStateMachine.state_dict")
    if source is not None:
        value = fingerprint.compute_from_source(source.read_text(encoding="utf-8"), [qualname])
        label = f"{source} (read from source: nothing ran)"
    else:
        module = importlib.import_module(module_name)
        value = fingerprint.compute(module, [qualname])
        label = f"{target} imported from {module.__file__}"
    print(value)
    print(f"# {label}: record it under the entry's fingerprint.sha256 (and fingerprint.releases "
          "for the release that ran)")
    return 0
