"""``junit.xml``: one test case per row, for CI systems that show JUnit. Broken and
still-affected rows are failures (the latter of its own type, saying what to do), errors are
errors, skipped rows are skipped. The whole document passes through
:func:`~patchlane.runs.index.printable`: ElementTree escapes markup but writes control
characters (an ANSI colour in a reason) as they are, which no XML parser accepts."""

from __future__ import annotations

from xml.etree import ElementTree as ET

from ...runs.index import SHARD_GAP_ACTION, RunIndex, printable
from ...runs.verdicts import ACTION, Verdict

__all__ = ["junit"]


def junit(index: RunIndex) -> str:
    rows = index.rows
    suite = ET.Element("testsuite", name="patchlane-sweep", tests=str(len(rows)),
                       failures=str(index.count(Verdict.BROKEN)
                                    + index.count(Verdict.STILL_AFFECTED)),
                       errors=str(index.count(Verdict.ERROR)),
                       skipped=str(index.count(Verdict.SKIPPED)), timestamp=index.created)
    for row in rows:
        case = ET.SubElement(suite, "testcase", classname=f"patchlane.{row.entry_id}",
                             name=f"{row.lane}-ws{row.world_size}")
        verdict, reason = row.verdict, row.reason
        if verdict is Verdict.BROKEN:
            ET.SubElement(case, "failure", message=reason[:200]).text = reason
        elif verdict is Verdict.STILL_AFFECTED:
            # Loud but not an error of the lane: a failure of its own type, saying what to do.
            ET.SubElement(case, "failure", type="still-affected",
                          message=f"still affected: {ACTION[verdict]}"[:200]).text = reason
        elif verdict is Verdict.ERROR:
            ET.SubElement(case, "error", message=reason[:200]).text = reason
            if row.stderr_tail:
                ET.SubElement(case, "system-err").text = row.stderr_tail
        elif verdict is Verdict.SKIPPED:
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
