"""Receipts: one JSON record per case, with enough provenance to be compared months later.

The schema lives beside this module (``schemas/receipt.schema.json``, JSON Schema draft 2020-12)
and carries ``schema_version``; :func:`validate` checks a receipt against it with
``jsonschema``, and says how to install it where it is missing (a check of the required keys
alone would pass receipts the schema rejects).
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from .._version import __version__
from ..common.errors import PatchlaneError
from ..common.exit_codes import ExitCode
from ..registry import Entry
from ..registry.content import entry_content
from .provenance import build, comparison_key, environment_overlay, runtime
from .reproduce import CaseResult

__all__ = ["RECEIPT_SCHEMA_VERSION", "SchemaValidatorMissing", "build_receipt", "schema",
           "validate"]

RECEIPT_SCHEMA_VERSION = 1
_SCHEMA_FILE = Path(__file__).with_name("schemas") / "receipt.schema.json"


def build_receipt(*, run_id: str, case_id: str, entry: Entry, result: CaseResult,
                  started: str, finished: str, header: dict[str, Any]) -> dict[str, Any]:
    rank0 = result.ranks[0] if result.ranks else {}
    # The rank's own view (it imported torch and the target) is the provenance; when the case
    # died before reporting, the sweep's view stands in and says so.
    run = rank0.get("runtime")
    source = "rank0"
    if run is None:
        run, source = runtime([entry.target.distribution, "torch"]), "sweep"
    return {
        "schema_version": RECEIPT_SCHEMA_VERSION,
        "kind": "patchlane.receipt",
        "run_id": run_id,
        "case_id": case_id,
        "entry_id": entry.id,
        "entry_kind": entry.kind.value,
        "mode": result.mode.value,
        "lane": result.lane,
        "world_size": result.world_size,
        "outcome": result.outcome.value,
        "stage": result.stage or None,
        "message": result.message,
        # What ran: "proven here" later needs the same content (patchlane.registry.content)
        "content": entry_content(entry),
        # Why an error happened, in the failing rank's own words (redacted when the case ran).
        "stderr_tail": result.stderr_tail,
        "started": started,
        "finished": finished,
        "seconds": round(result.seconds, 3),
        "provenance": {
            "source": source,
            "runtime": run,
            "record": rank0.get("record"),
            "environment": rank0.get("environment", environment_overlay()),
            "patchlane": __version__,
            # which build of patchlane ran: the commit and whether its tree was clean
            "build": build(),
            "registry_digest": header.get("registry_digest"),
            "patch_set": header.get("patch_set"),
            "git": header.get("git"),
            "applies_to": entry.applies_to_shown,
            **(result.rank_start or {"rank_start": "fresh"}),
        },
        "comparison_key": comparison_key(result.lane, run),
        "audit": rank0.get("audit"),
        # Without the overlay: the overlay's probe asked of the real target, never acted on.
        "probe": rank0.get("probe"),
        "ranks": [
            {
                "rank": r.get("rank"),
                "outcome": r.get("outcome"),
                "stage": r.get("stage") or None,
                "message": r.get("message", ""),
                "exit_code": r.get("exit_code"),
                "timings": r.get("timings", {}),
                "peak_memory": r.get("peak_memory", {}),
                "log": r.get("log"),
                "stderr_tail": r.get("stderr_tail"),
            }
            for r in result.ranks
        ],
    }


@cache
def schema() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(_SCHEMA_FILE.read_text(encoding="utf-8"))
    return data


class SchemaValidatorMissing(PatchlaneError, ImportError):
    """:func:`validate` needs ``jsonschema``, which is not installed here."""

    exit_code = ExitCode.USAGE


def validate(receipt: dict[str, Any]) -> list[str]:
    """Problems with a receipt (empty when valid); raises :class:`SchemaValidatorMissing`
    where ``jsonschema`` is not installed."""
    try:
        import jsonschema
    except ImportError as exc:
        raise SchemaValidatorMissing(
            f"validating a receipt against {_SCHEMA_FILE.name} needs jsonschema, which this "
            f"environment lacks ({exc}); install it with `pip install 'jsonschema>=4'` (it is "
            "in patchlane's dev extra: `pip install -e '.[dev]'`)") from exc
    validator = jsonschema.Draft202012Validator(schema())
    return [f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}"
            for e in validator.iter_errors(receipt)]
