"""``patchlane status``: every entry and the decision taken for it in this process."""

from __future__ import annotations

import contextlib
import importlib
import json

import patchlane

from ..audit import Outcome
from ..gates import resolve_version
from ..registry import Kind
from .common import decider, table


def run_status(as_json: bool, import_targets: bool) -> int:
    current = decider()
    if import_targets:
        for entry in current.registry.entries:
            installed = resolve_version(entry.target.distribution, None,
                                        entry.target.version_from)[0] is not None
            if (entry.active and entry.kind is Kind.SOURCE_PATCH and entry.target.module
                    and installed):
                # The post-import hook decides (and records) as the module loads.
                # a release without that module: the entry stays pending, and says so
                with contextlib.suppress(ImportError):
                    importlib.import_module(entry.target.module)
        for entry in current.registry.entries:
            now = current.audit.get(entry.id)
            if entry.active and entry.when is not None and now is not None \
                    and now.outcome is Outcome.PENDING:
                # Floors and pins whose module nothing imported yet: checked eagerly here (and
                # marked so) rather than importing e.g. triton just to show them.
                current.decide_ledger(entry, eager=True)
    report = patchlane.report()
    if as_json:
        print(json.dumps(report, indent=2))
        return 0
    rows = []
    for item in report["entries"]:
        decision = item["decision"]
        if decision is None:
            version, outcome, reason = "-", "-", ""
        else:
            tree = (decision["version_source"] or "metadata") not in ("metadata", "none")
            version = (decision["installed"] or "-") + (" (tree)" if tree else "")
            outcome, reason = decision["outcome"], decision["reason"]
        rows.append([item["id"], item["kind"], item["target"], version, outcome,
                     str(item["hits"]), reason])
    print(table(["ID", "KIND", "TARGET", "INSTALLED", "DECISION", "HITS", "REASON"], rows))
    print()
    print(report["summary"])
    return 0
