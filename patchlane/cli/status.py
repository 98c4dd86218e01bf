"""``patchlane status``: every entry and the decision taken for it in this process."""

from __future__ import annotations

import contextlib
import importlib
import json

import patchlane

from ..gates import check_gate
from ..registry import Kind
from ._common import lane, table


def run_status(as_json: bool, import_targets: bool) -> int:
    current = lane()
    if import_targets:
        for entry in current.registry.entries:
            installed = check_gate(entry.target.distribution, None).found is not None
            if (entry.active and entry.kind is Kind.SOURCE_PATCH and entry.target.module
                    and installed):
                # The post-import hook decides (and records) as the module loads.
                # a release without that module: the entry stays pending, and says so
                with contextlib.suppress(ImportError):
                    importlib.import_module(entry.target.module)
    report = patchlane.report()
    if as_json:
        print(json.dumps(report, indent=2))
        return 0
    rows = []
    for item in report["entries"]:
        decision = item["decision"] or {}
        rows.append([
            item["id"], item["kind"], item["target"],
            decision.get("installed") or "-", decision.get("outcome", "-"),
            str(item["hits"]), decision.get("reason", ""),
        ])
    print(table(["ID", "KIND", "TARGET", "INSTALLED", "DECISION", "HITS", "REASON"], rows))
    print()
    print(report["summary"])
    return 0
