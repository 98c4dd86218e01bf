"""``junit.xml``: one test case per row, for CI systems that show JUnit, each as its verdict's
record says (:data:`patchlane.runs.verdicts.MEANING`: failures of the verdict's own type,
saying what to do; errors; skipped rows; passes). The whole document passes through
:func:`~patchlane.runs.index.printable`: ElementTree escapes markup but writes control
characters (an ANSI colour in a reason) as they are, which no XML parser accepts."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

from ...runs.index import SHARD_GAP_ACTION, RunIndex, printable
from ...runs.verdicts import ACTION, MEANING

__all__ = ["junit"]


def case_seconds(run_dir: Path, receipts: Mapping[str, str]) -> float:
    """A row's time: the seconds its cases' receipts recorded, together (0 when none)."""
    total = 0.0
    for relative in receipts.values():
        try:
            total += float(json.loads((run_dir / relative).read_text(encoding="utf-8"))
                           .get("seconds") or 0)
        except (OSError, ValueError, TypeError, AttributeError):
            continue  # a receipt that cannot be read adds nothing (the row says why)
    return total


def junit(index: RunIndex, run_dir: Path | None = None) -> str:
    """The JUnit document: a ``<testsuites>`` root (what CI systems expect) holding one
    ``<testsuite>`` with the stack as properties, each case's ``time`` from its receipts."""
    rows = index.rows
    def counted(status: str) -> str:
        return str(sum(1 for r in rows if MEANING[r.verdict].junit == status))

    seconds = [case_seconds(run_dir, row.receipts) if run_dir is not None else 0.0
               for row in rows]
    total = f"{sum(seconds):.3f}"
    root = ET.Element("testsuites", name="patchlane", tests=str(len(rows)),
                      failures=counted("failure"), errors=counted("error"),
                      skipped=counted("skipped"), time=total)
    suite = ET.SubElement(root, "testsuite", name="patchlane-sweep", tests=str(len(rows)),
                          failures=counted("failure"), errors=counted("error"),
                          skipped=counted("skipped"), timestamp=index.created, time=total)
    properties = ET.SubElement(suite, "properties")
    stack: dict[str, Any] = {"run_id": index.run_id, "registry_digest": index.registry_digest,
                             "patch_set": index.patch_set}
    for key, value in sorted((index.comparison_class or {}).items()):
        # the class the run compares within: lane, host class, torch, the distributions
        if isinstance(value, Mapping):
            stack.update({f"{key}.{k}": v for k, v in sorted(value.items())})
        else:
            stack[key] = value
    for name, value in stack.items():
        if isinstance(value, (list, tuple)):
            value = ",".join(map(str, value))
        if value:
            ET.SubElement(properties, "property", name=name, value=str(value))
    for row, spent in zip(rows, seconds, strict=True):
        case = ET.SubElement(suite, "testcase", classname=f"patchlane.{row.entry_id}",
                             name=f"{row.lane}-ws{row.world_size}", time=f"{spent:.3f}")
        registry = index.entry_info(row.entry_id).get("registry")
        if row.installed or registry:
            props = ET.SubElement(case, "properties")
            if row.installed:
                ET.SubElement(props, "property", name="installed", value=row.installed)
            if registry:  # whose entry: the catalog's or a team's registry file
                ET.SubElement(props, "property", name="registry", value=str(registry))
        verdict, reason = row.verdict, row.reason
        status = MEANING[verdict].junit
        if status == "failure":
            # Of the verdict's own type, saying what to do: a still-affected row is loud but
            # not an error of the lane.
            ET.SubElement(case, "failure", type=verdict.value,
                          message=f"{verdict.value}: {ACTION[verdict]}"[:200]).text = reason
        elif status == "error":
            ET.SubElement(case, "error", message=reason[:200]).text = reason
            if row.stderr_tail:
                ET.SubElement(case, "system-err").text = row.stderr_tail
        elif status == "skipped":
            ET.SubElement(case, "skipped", message=reason[:200])
        origin = row.origin or {}
        # A merged run's row says which shard (host, run directory) it came from.
        came = (f"\nfrom: shard {origin.get('shard')} ({origin.get('state')}) on "
                f"{origin.get('host') or '?'}, run directory {origin.get('run_dir') or '-'}"
                if row.origin is not None else "")
        asks = SHARD_GAP_ACTION if row.shard_gap else ACTION[verdict]
        ET.SubElement(case, "system-out").text = (f"verdict: {verdict.value}\n{reason}\n"
                                                  f"asks: {asks}{came}")
    text: str = ET.tostring(root, encoding="unicode", xml_declaration=True)
    return printable(text) + "\n"
