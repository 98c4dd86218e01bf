"""Reports of a run directory: JSON index, markdown summary, JUnit XML and a static HTML page,
plus comparison with an earlier run inside the same comparison class only."""

from __future__ import annotations

import html
import json
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

from ..files import atomic_write, atomic_write_json
from .manifest import RunDir
from .sweep import VerdictRow
from .verdicts import ACTION, SEVERITY, Verdict

__all__ = ["Change", "compare", "load_index", "write_reports"]

INDEX_SCHEMA = 1
_COLOURS = {Verdict.GUARDING: "#2e7d32", Verdict.UPSTREAM_FIXED: "#1565c0",
            Verdict.STILL_AFFECTED: "#6a1b9a", Verdict.BROKEN: "#c62828",
            Verdict.ERROR: "#ef6c00", Verdict.SKIPPED: "#757575"}
# Verdicts that ask a maintainer to act on the registry (not on the lane).
_REVIEW = (Verdict.STILL_AFFECTED, Verdict.UPSTREAM_FIXED)


def _verdict(row: dict[str, Any]) -> Verdict:
    """A row's verdict, read back from an index (this run's or an earlier one's)."""
    return Verdict.parse(row["verdict"], f"index row {_row_key(row)}")


def index_data(run: RunDir, rows: Sequence[VerdictRow]) -> dict[str, Any]:
    m = run.manifest
    return {
        "schema_version": INDEX_SCHEMA,
        "run_id": m["run_id"],
        "created": m["created"],
        "updated": m["updated"],
        "shard": m.get("shard"),
        "lanes": m.get("lanes"),
        "registry_digest": m.get("registry_digest"),
        "patch_set": m.get("patch_set"),
        "git": m.get("git"),
        "counts": dict(Counter(r.verdict.value for r in rows)),
        "rows": [{k: v for k, v in r.as_dict().items() if k != "cases"} for r in rows],
    }


def load_index(run_dir: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((run_dir / "index.json").read_text(encoding="utf-8"))
    return data


# -- comparison --------------------------------------------------------------------------------

class Change(dict[str, Any]):
    """One row's difference from the previous run: a verdict change, or a class change."""


def compare(previous: dict[str, Any], current: dict[str, Any]) -> list[Change]:
    """Verdict changes between two runs, only where the comparison class (lane, hardware class,
    upstream versions) is the same; where it differs the change is reported as a class change,
    never as a regression."""
    before = {_row_key(r): r for r in previous["rows"]}
    changes: list[Change] = []
    for row in current["rows"]:
        key = _row_key(row)
        old = before.get(key)
        if old is None:
            changes.append(Change(key=key, kind="new", now=row["verdict"]))
            continue
        if old.get("comparison_key") and row.get("comparison_key") and \
                old["comparison_key"] != row["comparison_key"]:
            diff = {k: [old["comparison_key"].get(k), row["comparison_key"].get(k)]
                    for k in row["comparison_key"]
                    if old["comparison_key"].get(k) != row["comparison_key"].get(k)}
            changes.append(Change(key=key, kind="class-changed", was=old["verdict"],
                                  now=row["verdict"], differs=diff))
        elif old["verdict"] != row["verdict"]:
            changes.append(Change(key=key, kind="verdict-changed", was=old["verdict"],
                                  now=row["verdict"]))
    return changes


def _row_key(row: dict[str, Any]) -> str:
    return f"{row['entry_id']}[{row['lane']}-ws{row['world_size']}]"


# -- writers -----------------------------------------------------------------------------------

def write_reports(run: RunDir, rows: Sequence[VerdictRow], *,
                  previous: dict[str, Any] | None = None,
                  history: Iterable[Path] = ()) -> dict[str, Any]:
    index = index_data(run, rows)
    if previous is not None:
        index["compare"] = {"previous_run": previous["run_id"],
                            "changes": compare(previous, index)}
    atomic_write_json(run.path / "index.json", index)
    atomic_write(run.path / "summary.md", markdown(index))
    atomic_write(run.path / "junit.xml", junit(index))
    runs = [load_index(p) for p in history if (p / "index.json").is_file()]
    atomic_write(run.path / "report.html", page(index, runs))
    return index


def _sorted(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda r: (SEVERITY.index(_verdict(r)), r["entry_id"], r["lane"],
                                       r["world_size"]))


def markdown(index: dict[str, Any]) -> str:
    counts = index["counts"]
    lines = [f"# patchlane sweep {index['run_id']}", ""]
    lines.append(" · ".join(f"**{v.value}**: {counts[v.value]}" for v in SEVERITY
                            if v.value in counts) or "nothing ran")
    still = counts.get(Verdict.STILL_AFFECTED.value)
    if still:
        lines += ["", f"> **Still affected** {still} case(s): the bug outlives the gate on the "
                  "installed release. " + ACTION[Verdict.STILL_AFFECTED] + "."]
    fixed = counts.get(Verdict.UPSTREAM_FIXED.value)
    if fixed:
        lines += ["", f"> **Upstream fixed** {fixed} case(s): retirement candidates, see below."]
    lines += ["", "| entry | lane | ws | installed | verdict | reason |",
              "|---|---|---|---|---|---|"]
    for row in _sorted(index["rows"]):
        reason = str(row["reason"]).replace("|", "\\|").replace("\n", " ")[:160]
        lines.append(f"| {row['entry_id']} | {row['lane']} | {row['world_size']} | "
                     f"{row['installed'] or '-'} | **{row['verdict']}** | {reason} |")
    changes = (index.get("compare") or {}).get("changes") or []
    if changes:
        lines += ["", f"## Changes since {index['compare']['previous_run']}", ""]
        for c in changes:
            if c["kind"] == "class-changed":
                lines.append(f"- {c['key']}: comparison class changed ({c['differs']}); "
                             f"{c['was']} -> {c['now']} is not a regression")
            elif c["kind"] == "new":
                lines.append(f"- {c['key']}: new ({c['now']})")
            else:
                lines.append(f"- {c['key']}: **{c['was']} -> {c['now']}**")
    errors = [r for r in _sorted(index["rows"]) if _verdict(r) is Verdict.ERROR]
    if errors:  # the table cuts reasons; why a case errored is said whole
        lines += ["", "## Errors", ""]
        lines += [f"- {_row_key(r)}: {str(r['reason'])[:2000]}" for r in errors]
    shown = [v for v in SEVERITY if v.value in counts]
    if shown:
        lines += ["", "## What each verdict asks", ""]
        lines += [f"- **{v.value}**: {ACTION[v]}" for v in shown]
    return "\n".join(lines) + "\n"


def junit(index: dict[str, Any]) -> str:
    rows = index["rows"]
    counts = Counter(_verdict(r) for r in rows)
    suite = ET.Element("testsuite", name="patchlane-sweep", tests=str(len(rows)),
                       failures=str(counts[Verdict.BROKEN] + counts[Verdict.STILL_AFFECTED]),
                       errors=str(counts[Verdict.ERROR]),
                       skipped=str(counts[Verdict.SKIPPED]), timestamp=index["created"])
    for row in rows:
        case = ET.SubElement(suite, "testcase", classname=f"patchlane.{row['entry_id']}",
                             name=f"{row['lane']}-ws{row['world_size']}")
        verdict, reason = _verdict(row), str(row["reason"])
        if verdict is Verdict.BROKEN:
            ET.SubElement(case, "failure", message=reason[:200]).text = reason
        elif verdict is Verdict.STILL_AFFECTED:
            # Loud but not an error of the lane: a failure of its own type, saying what to do.
            ET.SubElement(case, "failure", type="still-affected",
                          message=f"still affected: {ACTION[verdict]}"[:200]).text = reason
        elif verdict is Verdict.ERROR:
            ET.SubElement(case, "error", message=reason[:200]).text = reason
            if row.get("stderr_tail"):
                ET.SubElement(case, "system-err").text = _printable(str(row["stderr_tail"]))
        elif verdict is Verdict.SKIPPED:
            ET.SubElement(case, "skipped", message=reason[:200])
        ET.SubElement(case, "system-out").text = (f"verdict: {verdict.value}\n{reason}\n"
                                                  f"asks: {ACTION[verdict]}")
    text: str = ET.tostring(suite, encoding="unicode", xml_declaration=True)
    return text + "\n"


def _printable(text: str) -> str:
    # Tails are already free of control characters; this guards receipts written before that.
    return "".join(c if c in "\t\n" or c >= " " else "\ufffd" for c in text)


def _cell(verdict: Verdict, title: str, href: str | None = None) -> str:
    label = html.escape(verdict.value)
    if href is not None:
        label = f'<a href="#{html.escape(href)}" style="color:#fff">{label}</a>'
    return (f'<td style="background:{_COLOURS[verdict]};color:#fff" '
            f'title="{html.escape(title)}">{label}</td>')


def _anchor(row: dict[str, Any]) -> str:
    return f"error-{row['entry_id']}-{row['lane']}-ws{row['world_size']}"


def _errors(rows: Iterable[dict[str, Any]]) -> str:
    """Every error row with its reason and the failing rank's last lines, in plain sight: a
    tooltip is not where anyone looks for why a sweep went red."""
    parts = []
    for row in _sorted(r for r in rows if _verdict(r) is Verdict.ERROR):
        key = _row_key(row)
        tail = row.get("stderr_tail")
        parts.append(f'<h3 id="{html.escape(_anchor(row))}">{html.escape(key)}</h3>'
                     f"<p>{html.escape(str(row['reason']))}</p>"
                     + (f"<pre>{html.escape(_printable(str(tail)))}</pre>" if tail else ""))
    return f"<h2>Errors</h2>{''.join(parts)}" if parts else ""


def _review(rows: Iterable[dict[str, Any]]) -> str:
    """Rows that ask a maintainer to change the registry, each with what to do."""
    items = [f"<li><b>{html.escape(_row_key(r))}</b> on {html.escape(str(r['installed']))}: "
             f"<b>{html.escape(r['verdict'])}</b>: {html.escape(ACTION[_verdict(r)])}"
             f"<br><small>{html.escape(str(r['reason']))}</small></li>"
             for r in _sorted(rows) if _verdict(r) in _REVIEW]
    return f"<h2>For a maintainer</h2><ul>{''.join(items)}</ul>" if items else ""


def _legend(rows: Iterable[dict[str, Any]]) -> str:
    seen = {_verdict(r) for r in rows}
    items = "".join(f"<li>{_swatch(v)} {html.escape(ACTION[v])}</li>" for v in SEVERITY
                    if v in seen)
    return f"<h2>What each verdict asks</h2><ul>{items}</ul>" if items else ""


def _swatch(verdict: Verdict) -> str:
    return (f'<span style="background:{_COLOURS[verdict]};color:#fff;padding:0 6px">'
            f"{html.escape(verdict.value)}</span>")


def page(index: dict[str, Any], history: Sequence[dict[str, Any]] = ()) -> str:
    columns = sorted({(r["lane"], r["world_size"]) for r in index["rows"]})
    entries = sorted({r["entry_id"] for r in index["rows"]})
    by = {(r["entry_id"], r["lane"], r["world_size"]): r for r in index["rows"]}
    head = "".join(f"<th>{html.escape(lane)} ws={ws}</th>" for lane, ws in columns)
    body = []
    for entry in entries:
        cells = []
        for lane, ws in columns:
            row = by.get((entry, lane, ws))
            if row is None:
                cells.append("<td></td>")
            else:
                verdict = _verdict(row)
                href = _anchor(row) if verdict is Verdict.ERROR else None
                cells.append(_cell(verdict, row["reason"], href))
        body.append(f"<tr><th>{html.escape(entry)}</th>{''.join(cells)}</tr>")
    hist = ""
    runs = sorted([*history, index], key=lambda i: i["created"])
    if len(runs) > 1:
        rows_h = []
        for entry in entries:
            cells = []
            for run in runs:
                verdicts = {_verdict(r) for r in run["rows"] if r["entry_id"] == entry}
                worst = next((v for v in SEVERITY if v in verdicts), None)
                cells.append(_cell(worst, run["run_id"]) if worst is not None else "<td></td>")
            rows_h.append(f"<tr><th>{html.escape(entry)}</th>{''.join(cells)}</tr>")
        heads = "".join(f"<th>{html.escape(r['run_id'])}</th>" for r in runs)
        hist = (f"<h2>History</h2><table><tr><th>entry</th>{heads}</tr>{''.join(rows_h)}"
                "</table>")
    counts = ", ".join(f"{k}: {v}" for k, v in sorted(index["counts"].items()))
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>patchlane sweep {html.escape(index['run_id'])}</title>"
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:4px 10px;text-align:left}"
        "pre{background:#f6f6f6;padding:8px;overflow-x:auto;white-space:pre-wrap}"
        "</style></head><body>"
        f"<h1>patchlane sweep {html.escape(index['run_id'])}</h1>"
        f"<p>{html.escape(counts)} · created {html.escape(index['created'])} · shard "
        f"{html.escape(str(index.get('shard')))}</p>"
        f"<table><tr><th>entry</th>{head}</tr>{''.join(body)}</table>"
        f"{_review(index['rows'])}{_errors(index['rows'])}{_legend(index['rows'])}{hist}"
        "</body></html>\n"
    )
