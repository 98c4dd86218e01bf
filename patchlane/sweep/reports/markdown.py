"""``summary.md``: the run in markdown, reasons whole (code spans in the table, wrapped blocks
for the rows that ask for something). Markdown becomes HTML wherever it is shown, so the whole
document passes through :func:`~patchlane.runs.index.printable` as the page does."""

from __future__ import annotations

import re
import textwrap
from typing import Any
from urllib.parse import quote

from ...runs.index import IndexRow, RunIndex, by_severity, printable
from ...runs.verdicts import ACTION, SEVERITY, Verdict, sections

__all__ = ["markdown"]


def _code(text: object) -> str:
    """``text`` as a markdown code span inside a table cell: shown literally (no emphasis from
    ``__init__``, no HTML from ``<module>``), whole, on one line; pipes escaped for the table."""
    flat = " ⏎ ".join(str(text).splitlines()) or " "
    fence = "`" * (max((len(m) for m in re.findall(r"`+", flat)), default=0) + 1)
    pad = " " if flat.startswith("`") or flat.endswith("`") else ""
    return f"{fence}{pad}{flat.replace('|', chr(92) + '|')}{pad}{fence}"


def _block(text: object, width: int | None = 100) -> list[str]:
    """``text`` whole in a fenced block; with ``width``, long lines wrapped there (words are
    never cut, so a long path or hash stays one piece)."""
    lines = str(text).splitlines() or [""]
    if width is not None:
        lines = [part for line in lines
                 for part in (textwrap.wrap(line, width, break_long_words=False,
                                            break_on_hyphens=False, subsequent_indent="  ")
                              or [""])]
    runs = [len(m) for line in lines for m in re.findall(r"`{3,}", line)]
    fence = "`" * max(3, max(runs, default=0) + 1)
    return [f"{fence}text", *lines, fence]


def _md_link(path: str, text: str) -> str:
    return f"[{text}]({quote(path)})"


def _md_provenance(index: RunIndex) -> str:
    p = index.provenance

    def join(value: Any) -> str:
        return ", ".join(value) if isinstance(value, list) else str(value)

    parts = []
    if p.get("host_class"):
        parts.append(f"host {join(p['host_class'])}")
    if p.get("python"):
        parts.append(f"Python {join(p['python'])}")
    if p.get("torch"):
        cuda = f"CUDA {join(p['cuda'])}" if p.get("cuda") else "no CUDA"
        parts.append(f"torch {join(p['torch'])} ({cuda})")
    elif (p.get("distributions") or {}).get("torch"):
        parts.append(f"torch {join(p['distributions']['torch'])} (installed; not imported)")
    if p.get("gpus"):
        parts.append(f"GPU {join(p['gpus'])}")
    parts += [f"{name} {join(v)}" for name, v in (p.get("distributions") or {}).items()
              if name != "torch"]
    if p.get("patch_set"):
        parts.append(f"patch set `{p['patch_set']}`")
    return " · ".join(parts)


def markdown(index: RunIndex) -> str:
    lines = [f"# patchlane sweep {index.run_id}", ""]
    lines.append(" · ".join(f"**{v.value}**: {index.count(v)}" for v in SEVERITY
                            if index.count(v)) or "nothing ran")
    prov = _md_provenance(index)
    if prov:
        lines += ["", prov]
    cmp = index.compare
    if cmp:
        how = "" if cmp.get("how") == "compare" else " (the latest earlier run of the same " \
            "comparison class)"
        lines += ["", f"## Changes since {cmp['previous_run']}{how}", ""]
        for c in cmp.get("changes") or []:
            if c["change"] == "class-changed":
                lines.append(f"- {c['key']}: comparison class changed ({c['differs']}); "
                             f"{c['was']} -> {c['now']} is not a regression")
            elif c["change"] == "new":
                lines.append(f"- {c['key']}: new ({c['now']})")
            elif c["change"] == "gone":
                lines.append(f"- {c['key']}: no longer in the sweep (was {c['was']})")
            else:
                lines.append(f"- {c['key']}: **{c['was']} -> {c['now']}**")
        if not cmp.get("changes"):
            lines.append(f"No verdict changes ({cmp.get('rows_compared', 0)} row(s) compared).")
    elif index.lineage:
        lines += ["", "No earlier run of this comparison class under "
                  f"`{index.lineage['runs_root']}`: nothing to compare with yet."]
    if index.merged:  # after the changes, as on the page
        lines += _md_shards(index)
    still = index.count(Verdict.STILL_AFFECTED)
    if still:
        lines += ["", f"> **Still affected** {still} case(s): the bug outlives the gate on the "
                  "installed release. " + ACTION[Verdict.STILL_AFFECTED] + "."]
    fixed = index.count(Verdict.UPSTREAM_FIXED)
    if fixed:
        lines += ["", f"> **Upstream fixed** {fixed} case(s): retirement candidates, see below."]
    shard_head, shard_rule = ("shard | ", "---|") if index.merged else ("", "")
    lines += ["", f"| entry | lane | ws | {shard_head}installed | gate | verdict | reason | asks |",
              f"|---|---|---|{shard_rule}---|---|---|---|---|"]
    for row in by_severity(index.rows):
        gate = index.gate(row)
        shard = f"{(row.origin or {}).get('shard', '?')} | " if index.merged else ""
        lines.append(f"| {row.entry_id} | {row.lane} | {row.world_size} | {shard}"
                     f"{row.installed or '-'} | {_code(gate) if gate else '-'} | "
                     f"**{row.verdict.value}** | {_code(row.reason)} | "
                     f"{row.asks()} |")
    # The rows that ask for something, whole, in the page's sections and order.
    for _, title, wanted in sections():
        chosen = [r for r in by_severity(index.rows) if r.verdict in wanted]
        if chosen:
            lines += ["", f"## {title}"]
            for r in chosen:
                lines += _md_details(r, index)
    shown = [v for v in SEVERITY if index.count(v)]
    if shown:
        lines += ["", "## What each verdict asks", ""]
        lines += [f"- **{v.value}**: {ACTION[v]}" for v in shown]
    return printable("\n".join(lines)) + "\n"


def _from(row: IndexRow) -> str:
    """Where a merged run's row came from: its shard, host and run directory."""
    o = row.origin or {}
    text = f"shard {o.get('shard', '?')} ({o.get('state', '?')})"
    if o.get("host"):
        text += f" on {o['host']}"
    if o.get("run_dir"):
        text += f", run directory `{o['run_dir']}`"
    return text


def _md_shards(index: RunIndex) -> list[str]:
    lines = ["", "## Shards", "", f"Merged from the shards of one sweep (plan "
             f"`{index.plan_digest}`{', group ' + str(index.group) if index.group else ''}).",
             "", "| shard | state | host | run directory | rows planned | why |",
             "|---|---|---|---|---|---|"]
    for s in index.shards or ():
        run = f"`{s['run_dir']}`" if s.get("run_dir") else "-"
        lines.append(f"| {s.get('shard')} | **{s.get('state')}** | {s.get('host') or '-'} | "
                     f"{run} | {s.get('rows')} | {_code(s['why']) if s.get('why') else ''} |")
    return lines


def _md_details(row: IndexRow, index: RunIndex) -> list[str]:
    """One row that asks for something: its whole reason (wrapped, never cut), what to do, its
    evidence links and, for a failure, the failing rank's last log lines."""
    v = row.verdict
    lines = ["", f"### {row.key}: {v.value} on {row.installed or 'unknown'}", ""]
    lines += _block(row.reason)
    lines += ["", f"Asks: {row.action(index.evidence_dir(row))}."]
    if row.origin:
        lines += ["", f"From: {_from(row)}."]
    refs = [_md_link(path, f"receipt ({m})") for m, path in row.receipt_links()]
    refs += [_md_link(x["path"], f"rank {x['rank']} log ({mode})")
             for mode, x in row.log_links() if x.get("path")]
    if refs:
        lines += ["", "Evidence: " + " · ".join(refs)]
    failing = row.failing
    tail = row.tail
    if tail and v is Verdict.ERROR:
        lines += ["", f"Last lines of rank {failing.get('rank', '?')}'s log "
                  f"({failing.get('mode', '?')} overlay):", ""]
        lines += _block(tail, width=None)
    return lines
