"""``patchlane draft ID``: a public-ready upstream draft for an entry with ``forwarded: no``."""

from __future__ import annotations

import datetime as _dt
import os
import sys
import tempfile
from pathlib import Path

from .. import startup
from ..authoring.draft import (
    affected_rows,
    apply_proposal,
    draft_paths,
    load_proposal,
    overlay_docstring,
    render_draft,
)
from ..common.exit_codes import ExitCode
from ..common.files import atomic_write
from ..deciding.controls import Controls
from ..registry import load_registries
from ..releases.changed_release import run_with_changed_file
from .common import entry_of, shipped_with_patchlane


def run_draft(entry_id: str, evidence: list[Path], output: Path | None, verify: bool) -> int:
    # The registry is read with the draft rule relaxed: this command writes the very draft
    # that rule asks for (every other rule still holds).
    controls = Controls.from_env(os.environ)
    registry = load_registries(startup.registry_paths(controls), drafts_required=False,
                               isolated=True)
    for refused in registry.rejected:  # said, as the startup says it; the others' entries load
        print(f"patchlane: registry {refused.path} refused, its entries not drafted: {refused}",
              file=sys.stderr)
    entry = entry_of(registry, entry_id)
    md, change = draft_paths(entry)
    applied = (apply_proposal(load_proposal(change), entry.target.distribution,
                              target_module=entry.target.module)
               if change.is_file() else None)
    verified = None
    if verify and applied is not None:
        with tempfile.TemporaryDirectory(prefix="patchlane-draft-") as tmp:
            verified = run_with_changed_file(entry, site=applied.site,
                                             relative=applied.relative, text=applied.changed,
                                             workdir=Path(tmp))
    rows = affected_rows(entry, evidence)
    text = render_draft(entry, rows, applied,
                        today=_dt.date.today(), overlay_doc=overlay_docstring(entry),
                        verified=verified)
    shipped = shipped_with_patchlane(entry.source)
    # An entry of the catalog installed with patchlane: its draft is part of the installed
    # package, which no command edits; yours goes to the working directory.
    target = output or (Path.cwd() / "drafts" / md.name if shipped else md)
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(target, text)
    print(f"{entry_id}: wrote {target} ({len(text.splitlines())} lines"
          + (f"; change against {applied.against}" if applied else
             "; no change file: " + str(change)) + ")")
    if shipped and output is None:
        print(f"  {entry_id} is an entry of the catalog installed with patchlane: its own draft "
              f"stays at {md} (the installed package is not edited); this one is yours to send")
    for row in rows:
        if row.stale:
            print(f"  stale: run {row.run} ({row.release}, {row.lane} ws{row.world_size}) ran "
                  f"another {', '.join(row.stale)} than today's; sweep again for evidence of "
                  "this one")
    if verified is not None:
        for size, outcome, message in verified:
            print(f"  with the change, no overlay, world size {size}: {outcome}"
                  + (f" ({message or 'no message: the rank log says why'})"
                     if outcome != "pass" else ""))
        failing = [size for size, outcome, _ in verified if outcome != "pass"]
        if failing or not verified:
            # the exit status is said in words, never only a code
            print(f"{entry_id}: not verified: "
                  + (f"the reproducer does not pass with the proposed change applied and no "
                     f"overlay (world size {', '.join(map(str, failing))}); the draft says so"
                     if failing else "no case ran with the change")
                  + f"; fix: correct {change}", file=sys.stderr)
            return ExitCode.REPRODUCER_FAILED
    if entry.upstream.draft is None and entry.upstream.forwarded == "no" and not shipped:
        # the registry asks for a draft only of an entry not forwarded
        print(f"  add `draft: {os.path.relpath(target, entry.source.parent)}` under the entry's "
              "upstream: in the registry")
    return ExitCode.OK
