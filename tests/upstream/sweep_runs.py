"""Run directories as ``patchlane sweep`` writes them, for the retirement tests: the manifest
(its plan and cases, each with its receipt's SHA-256), the receipts, and the index and reports
written by the sweep's own code (``verdicts`` and ``write_reports``) from them. Only running
the reproducers is left out: each case's outcome is given."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from patchlane.runs.manifest import RunDir, case_id
from patchlane.runs.rows import PlannedRow, RowRule
from patchlane.sweep.engine import verdicts
from patchlane.sweep.reports import write_reports
from patchlane.sweep.reproduce import Mode

DISTRIBUTION = "megatron-core"

# The outcomes (without, with) that give each verdict of a both-ways row (rows.verdict_of).
OUTCOMES = {"upstream-fixed": ("pass", "pass"), "guarding": ("fail", "pass"),
            "broken": ("fail", "fail"), "error": ("error", "pass")}


REPO = Path(__file__).resolve().parents[2]


def _content(entry_id: str) -> dict[str, str]:
    """What a sweep records of the reproducer and the overlay (whose probe it asked) it ran:
    this checkout's, where the catalog has the entry."""
    from patchlane.common.errors import UnknownEntryError
    from patchlane.registry import load_registries
    from patchlane.registry.content import entry_content

    try:
        entry = load_registries([REPO / "registry.yaml"]).get(entry_id)
    except UnknownEntryError:
        return {}
    return {part: value for part, value in entry_content(entry).items()
            if part in ("reproducer", "overlay")}


def receipt(run_id: str, entry_id: str, world_size: int, mode: Mode, outcome: str,
            installed: str, probe: str | None) -> dict[str, Any]:
    """The fields of a receipt (receipts.build_receipt) that verdicts and retirement read."""
    return {
        "content": _content(entry_id),
        "schema_version": 1, "kind": "patchlane.receipt", "run_id": run_id,
        "case_id": case_id(entry_id, "cpu", world_size, mode), "entry_id": entry_id,
        "entry_kind": "source_patch", "mode": mode.value, "lane": "cpu",
        "world_size": world_size, "outcome": outcome,
        "stage": "run" if outcome == "error" else None,
        "message": {"pass": "", "fail": "AssertionError: the bug shows",
                    "error": "RuntimeError: the harness broke"}[outcome],
        "stderr_tail": None, "started": "2027-01-02T00:00:00+00:00",
        "finished": "2027-01-02T00:00:01+00:00", "seconds": 1.0,
        "provenance": {"source": "rank0",
                       "runtime": {"python": "3.12.1", "platform": "linux",
                                   "host_class": "cpu", "patchlane": "0",
                                   "distributions": {DISTRIBUTION: installed}, "torch": None},
                       "record": {"distribution": DISTRIBUTION, "ok": True, "checked": 1,
                                  "modified": [], "missing": []},
                       "environment": {}, "patchlane": "0", "registry_digest": None,
                       "patch_set": None, "git": None, "applies_to": None},
        "comparison_key": {"lane": "cpu", "python": "3.12"},
        "audit": ({"decision": {"outcome": probe}} if mode is Mode.WITH and probe else None),
        "probe": None,
        "ranks": [],
    }


def sweep_run(root: Path, entry_id: str, *rows: tuple[str, str, str | None],
              name: str = "run-1") -> Path:
    """A run directory: one both-ways row of ``entry_id`` per ``(verdict, installed, probe
    outcome in the with-overlay receipt)`` (world sizes 1, 2, ...), and a broken row of
    another entry."""
    run = RunDir.create(root / name, {"run_id": name, "lanes": ["cpu"], "shard": "1/1"})
    planned = [(entry_id, i + 1, *row) for i, row in enumerate(rows)]
    planned.append(("someone_else", 1, "broken", "0.18.0", None))
    run.manifest["rows"] = [
        (PlannedRow(e, "cpu", ws, RowRule.SKIPPED, installed, "lane unavailable")
         if verdict == "skipped" else PlannedRow(e, "cpu", ws, RowRule.BOTH_WAYS, installed)
         ).as_dict() for e, ws, verdict, installed, _ in planned]
    run.save()
    for e, ws, verdict, installed, probe in planned:
        if verdict == "skipped":  # planned, never run: no case
            continue
        for mode, outcome in zip((Mode.WITHOUT, Mode.WITH), OUTCOMES[verdict], strict=True):
            cid = case_id(e, "cpu", ws, mode)
            run.add_case(cid, {"entry_id": e, "lane": "cpu", "world_size": ws,
                               "mode": mode.value})
            run.settle(cid, receipt(name, e, ws, mode, outcome, installed, probe))
    write_reports(run, verdicts(run))
    return run.path


def edit_json(path: Path, change: Any) -> None:
    """``path``'s JSON, changed in place by ``change(data)``, written back."""
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data, indent=2))
