"""``junit.xml``: one test case per row, for CI systems that show JUnit, each as its verdict's
record says (:data:`patchlane.runs.verdicts.MEANING`: failures of the verdict's own type,
saying what to do; errors; skipped rows; passes). The whole document passes through
:func:`~patchlane.runs.index.printable`: ElementTree escapes markup but writes control
characters (an ANSI colour in a reason) as they are, which no XML parser accepts."""

from __future__ import annotations

from xml.etree import ElementTree as ET

from ...runs.index import SHARD_GAP_ACTION, RunIndex, printable
from ...runs.verdicts import ACTION, MEANING

__all__ = ["junit"]


def junit(index: RunIndex) -> str:
    rows = index.rows
    def counted(status: str) -> str:
        return str(sum(1 for r in rows if MEANING[r.verdict].junit == status))

    suite = ET.Element("testsuite", name="patchlane-sweep", tests=str(len(rows)),
                       failures=counted("failure"), errors=counted("error"),
                       skipped=counted("skipped"), timestamp=index.created)
    for row in rows:
        case = ET.SubElement(suite, "testcase", classname=f"patchlane.{row.entry_id}",
                             name=f"{row.lane}-ws{row.world_size}")
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
    text: str = ET.tostring(suite, encoding="unicode", xml_declaration=True)
    return printable(text) + "\n"
