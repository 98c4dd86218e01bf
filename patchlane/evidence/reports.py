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

from .manifest import RunDir, atomic_write_json
from .sweep import Verdict, VerdictRow

__all__ = ["Change", "compare", "load_index", "write_reports"]

INDEX_SCHEMA = 1
_ORDER = [Verdict.BROKEN, Verdict.ERROR, Verdict.UPSTREAM_FIXED, Verdict.GUARDING,
          Verdict.SKIPPED]
_COLOURS = {"guarding": "#2e7d32", "upstream-fixed": "#1565c0", "broken": "#c62828",
            "error": "#ef6c00", "skipped": "#757575"}


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
    _write_text(run.path / "summary.md", markdown(index))
    _write_text(run.path / "junit.xml", junit(index))
    runs = [load_index(p) for p in history if (p / "index.json").is_file()]
    _write_text(run.path / "report.html", page(index, runs))
    return index


def _write_text(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def _sorted(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    order = {v.value: i for i, v in enumerate(_ORDER)}
    return sorted(rows, key=lambda r: (order[r["verdict"]], r["entry_id"], r["lane"],
                                       r["world_size"]))


def markdown(index: dict[str, Any]) -> str:
    counts = index["counts"]
    lines = [f"# patchlane sweep {index['run_id']}", ""]
    lines.append(" · ".join(f"**{v.value}**: {counts[v.value]}" for v in _ORDER
                            if v.value in counts) or "nothing ran")
    if counts.get("upstream-fixed"):
        lines += ["", "> **Upstream fixed** "
                  f"{counts['upstream-fixed']} case(s): retirement candidates, see below."]
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
    return "\n".join(lines) + "\n"


def junit(index: dict[str, Any]) -> str:
    rows = index["rows"]
    counts = Counter(r["verdict"] for r in rows)
    suite = ET.Element("testsuite", name="patchlane-sweep", tests=str(len(rows)),
                       failures=str(counts["broken"]), errors=str(counts["error"]),
                       skipped=str(counts["skipped"]), timestamp=index["created"])
    for row in rows:
        case = ET.SubElement(suite, "testcase", classname=f"patchlane.{row['entry_id']}",
                             name=f"{row['lane']}-ws{row['world_size']}")
        verdict, reason = row["verdict"], str(row["reason"])
        if verdict == "broken":
            ET.SubElement(case, "failure", message=reason[:200]).text = reason
        elif verdict == "error":
            ET.SubElement(case, "error", message=reason[:200]).text = reason
            if row.get("stderr_tail"):
                ET.SubElement(case, "system-err").text = _printable(str(row["stderr_tail"]))
        elif verdict == "skipped":
            ET.SubElement(case, "skipped", message=reason[:200])
        ET.SubElement(case, "system-out").text = f"verdict: {verdict}\n{reason}"
    text: str = ET.tostring(suite, encoding="unicode", xml_declaration=True)
    return text + "\n"


def _printable(text: str) -> str:
    # Tails are already free of control characters; this guards receipts written before that.
    return "".join(c if c in "\t\n" or c >= " " else "\ufffd" for c in text)


def _cell(verdict: str, title: str, href: str | None = None) -> str:
    label = html.escape(verdict)
    if href is not None:
        label = f'<a href="#{html.escape(href)}" style="color:#fff">{label}</a>'
    return (f'<td style="background:{_COLOURS.get(verdict, "#999")};color:#fff" '
            f'title="{html.escape(title)}">{label}</td>')


def _anchor(row: dict[str, Any]) -> str:
    return f"error-{row['entry_id']}-{row['lane']}-ws{row['world_size']}"


def _errors(rows: Iterable[dict[str, Any]]) -> str:
    """Every error row with its reason and the failing rank's last lines, in plain sight: a
    tooltip is not where anyone looks for why a sweep went red."""
    parts = []
    for row in _sorted(r for r in rows if r["verdict"] == "error"):
        key = _row_key(row)
        tail = row.get("stderr_tail")
        parts.append(f'<h3 id="{html.escape(_anchor(row))}">{html.escape(key)}</h3>'
                     f"<p>{html.escape(str(row['reason']))}</p>"
                     + (f"<pre>{html.escape(_printable(str(tail)))}</pre>" if tail else ""))
    return f"<h2>Errors</h2>{''.join(parts)}" if parts else ""


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
                href = _anchor(row) if row["verdict"] == "error" else None
                cells.append(_cell(row["verdict"], row["reason"], href))
        body.append(f"<tr><th>{html.escape(entry)}</th>{''.join(cells)}</tr>")
    hist = ""
    runs = sorted([*history, index], key=lambda i: i["created"])
    if len(runs) > 1:
        rows_h = []
        for entry in entries:
            cells = []
            for run in runs:
                verdicts = [r["verdict"] for r in run["rows"] if r["entry_id"] == entry]
                worst = next((v.value for v in _ORDER if v.value in verdicts), "")
                cells.append(_cell(worst, run["run_id"]) if worst else "<td></td>")
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
        f"{_errors(index['rows'])}{hist}"
        "</body></html>\n"
    )
