"""``report.html``: the nightly page, one static file a maintainer reads in ten seconds.

Top to bottom: the counts; what changed since the previous run of the same comparison class;
the provenance header (host, Python, torch / CUDA / GPU, target versions, patch set); the rows
that ask for something (errors with the failing rank's log tail, broken overlays, retirement
candidates and gates to extend), each with its reason, what to do, gate, upstream links and
links to its receipts and rank logs; every row; the verdict grid; the history across runs;
what each verdict asks.

Self-contained on purpose: CSS inline in the page, no script, nothing fetched (fonts, images),
and every link to the run's own files relative to the run directory and only to files that
exist, so the page works opened from a file path, from an unpacked CI artifact, or served.
Everything a run supplies (reasons, log tails, entry text, versions, URLs) passes through
:func:`html.escape`: reasons quote arbitrary exception messages; and the whole page through
:func:`~patchlane.runs.index.printable`, which no control character survives.

The page reads only the index (:class:`~patchlane.runs.index.RunIndex`, built by
:mod:`patchlane.sweep.reports.build`) and the history runs it is given: it can be rebuilt
from a run directory alone.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any
from urllib.parse import quote, urlsplit

from ...runs.index import IndexRow, RunIndex, by_severity, printable
from ...runs.verdicts import ASKS, MEANING, SEVERITY, Verdict, action, sections
from ..recorded import RecordedRun

__all__ = ["COLOURS", "HistoryRun", "page"]

COLOURS = {v: m.colour for v, m in MEANING.items()}

_CSS = (
    "body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:1.5em 2em;"
    "color:#1b1b1b;background:#fff}"
    "h1{font-size:1.5em;margin:0 0 .2em}"
    "h2{font-size:1.15em;margin:1.5em 0 .5em;border-bottom:1px solid #ddd;padding-bottom:.2em}"
    "h3{font-size:1em;margin:0 0 .35em}"
    "table{border-collapse:collapse;margin:.3em 0}"
    "td,th{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}"
    "th{background:#f3f3f3}"
    "pre{background:#f4f4f4;border:1px solid #e2e2e2;padding:6px 8px;margin:.4em 0;"
    "white-space:pre-wrap;overflow-wrap:anywhere;font-size:12px}"
    "code{font-size:12px;overflow-wrap:anywhere}"
    "a{color:#0b57d0}"
    ".chip{display:inline-block;color:#fff;padding:0 6px;border-radius:3px;font-weight:600;"
    "white-space:nowrap}"
    ".muted{color:#666}.small{font-size:12px}"
    ".reason{white-space:pre-wrap;overflow-wrap:anywhere}"
    ".box{border:1px solid #ddd;border-radius:4px;padding:8px 12px;margin:.4em 0}"
    ".changes{background:#fffbe6;border-color:#ecd58a}"
    ".quiet{background:#f3f8f3;border-color:#cfe3cf}"
    ".card{border-left:6px solid #999;background:#fafafa;padding:8px 12px;margin:.6em 0}"
    ".card p{margin:.25em 0}"
    ".prov{display:grid;grid-template-columns:max-content 1fr;gap:2px 16px;margin:0}"
    ".prov dt{color:#555}.prov dd{margin:0}"
    ".rows td.reason{min-width:16em;max-width:36em}"
    ".hist td,.hist th{font-size:12px;padding:2px 6px}"
    ".hist td.changed{box-shadow:inset 0 0 0 3px #111}"
    ".other{background:#fff3e0}"
    ".ok{color:#2e7d32;font-weight:600}"
    ".gate,.ev a,.nowrap{white-space:nowrap}.rows{width:100%}.rows a{overflow-wrap:anywhere}"
    ".wide{overflow-x:auto}"
)


@dataclass
class HistoryRun:
    """An earlier run shown in the history: its index, the relative link to its page (None
    when it has none), and how its comparison class differs from this run's (empty: same)."""

    index: RunIndex
    href: str | None = None
    differs: list[str] = field(default_factory=list)


# -- small pieces ------------------------------------------------------------------------------

def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _chip(v: Verdict, text: str | None = None) -> str:
    return (f'<span class="chip" style="background:{COLOURS[v]}">'
            f"{_e(v.value if text is None else text)}</span>")


def _local(path: str, text: str) -> str:
    """A link to a file of this run directory (``path`` is relative to it)."""
    return f'<a href="{_e(quote(path))}">{_e(text)}</a>'


def _external(url: str | None, text: str | None = None) -> str:
    """An upstream link; anything but http(s) is shown as text, never made a link."""
    if not url:
        return ""
    if urlsplit(url).scheme not in ("http", "https"):
        return _e(url)
    return f'<a href="{_e(url)}">{_e(text or url)}</a>'


def _github_label(url: str) -> str:
    parts = [p for p in urlsplit(url).path.split("/") if p]
    if urlsplit(url).hostname in ("github.com", "www.github.com") and len(parts) >= 4 \
            and parts[3].isdigit():
        return f"{parts[0]}/{parts[1]}#{parts[3]}"
    return url


def _action(v: Verdict, entry_id: str, run_dir: str | None, text: str | None = None) -> str:
    """What ``v`` asks with this row's id and run directory filled in, the command in
    ``<code>``."""
    pieces = (text if text is not None else action(v, entry_id, run_dir)).split("`")
    return "".join(f"<code>{_e(p)}</code>" if i % 2 else _e(p) for i, p in enumerate(pieces))


def _anchor(row: IndexRow) -> str:
    return f"error-{row.entry_id}-{row.lane}-ws{row.world_size}"


def _row_id(row: IndexRow) -> str:
    return f"row-{row.entry_id}-{row.lane}-ws{row.world_size}"


def _cell(v: Verdict, title: str, href: str | None = None) -> str:
    label = _e(v.value)
    if href is not None:
        label = f'<a href="#{_e(href)}" style="color:#fff">{label}</a>'
    return (f'<td style="background:{COLOURS[v]};color:#fff" '
            f'title="{_e(title)}">{label}</td>')


# -- sections ----------------------------------------------------------------------------------

def _header(index: RunIndex) -> str:
    chips = " ".join(_chip(v, f"{v.value} {index.count(v)}") for v in SEVERITY
                     if index.count(v)) or '<span class="muted">nothing ran</span>'
    if index.merged:
        shards = [s for s in index.shards or () if s.get("state") != "superseded"]
        short = [s for s in shards if s.get("state") != "delivered"]
        where = (f'<a href="#shards">merged from {len(shards)} shard(s)</a>'
                 + (f", <b>{len(short)} not delivered</b>" if short else ""))
    else:
        where = f"shard {_e(index.shard or '1/1')}"
    group = f" · group {_e(index.group)}" if index.group else ""
    return (f"<h1>patchlane sweep {_e(index.run_id)}</h1>"
            f'<p>{chips} <span class="muted">· {len(index.rows)} row(s) · created '
            f"{_e(index.created)} · updated {_e(index.updated)} · {where}{group}</span></p>")


SHARD_COLOURS = {"delivered": COLOURS[Verdict.GUARDING], "errored": COLOURS[Verdict.ERROR],
                 "missing": COLOURS[Verdict.BROKEN], "superseded": COLOURS[Verdict.SKIPPED]}


def _shards(index: RunIndex) -> str:
    """A merged run's shards: each one's state, host and run directory, so a gap in the rows
    is never silent (``patchlane merge``)."""
    if not index.merged:
        return ""
    body = []
    for s in index.shards or ():
        state = str(s.get("state"))
        colour = SHARD_COLOURS.get(state, COLOURS[Verdict.SKIPPED])
        run = s.get("run_id")
        link = (_local(str(s["report"]), str(run)) if s.get("report") and run
                else _e(run) if run else '<span class="muted">none</span>')
        body.append(
            f'<tr id="shard-{_e(str(s.get("shard")).replace("/", "of"))}">'
            f"<td class=\"nowrap\">{_e(s.get('shard'))}</td>"
            f'<td><span class="chip" style="background:{colour}">{_e(state)}</span></td>'
            f"<td>{_e(s.get('host') or '-')}</td><td>{link}</td>"
            f"<td>{_e(s.get('rows'))}</td><td class=\"small\">{_e(s.get('created') or '-')}"
            f"<br>{_e(s.get('updated') or '-')}</td>"
            f'<td class="reason small">{_e(s.get("why") or "")}</td></tr>')
    head = "".join(f"<th>{h}</th>" for h in ("shard", "state", "host", "run", "rows planned",
                                             "created / updated", "why"))
    return (f'<section id="shards"><h2>Shards</h2><p class="muted small">This page merges the '
            f"shards of one sweep (plan <code>{_e(index.plan_digest)}</code>); each row below "
            "names the shard it came from.</p>"
            f'<div class="wide"><table>{"<tr>" + head + "</tr>"}{"".join(body)}</table></div>'
            "</section>")


def _origin(row: IndexRow) -> str:
    origin = row.origin or {}
    text = _e(origin.get("shard") or "?")
    if origin.get("host"):
        text += f'<br><span class="muted small">{_e(origin["host"])}</span>'
    if origin.get("state") and origin.get("state") != "delivered":
        text += f'<br><b class="small">{_e(origin["state"])}</b>'
    return text


def _changes(index: RunIndex) -> str:
    cmp = index.compare
    lineage = index.lineage or {}
    root = lineage.get("runs_root")
    if not cmp:
        text = ("No earlier run of this comparison class"
                + (f" under <code>{_e(root)}</code>" if root else "")
                + ": nothing to compare with yet.")
        other = lineage.get("nearest_other")
        if other:
            text += (f" The latest earlier run there, {_e(other['run_id'])}, is of another "
                     f"class ({_e('; '.join(other['differs']))}).")
        return (f'<section id="changes"><h2>Changes since the previous run</h2>'
                f'<p class="box quiet">{text}</p></section>')
    prev = _e(cmp["previous_run"])
    if cmp.get("previous_report"):
        prev = _local(cmp["previous_report"], cmp["previous_run"])
    how = ("named with --compare" if cmp.get("how") == "compare"
           else "the latest earlier run of the same comparison class"
           + (f" under <code>{_e(root)}</code>" if root else ""))
    now = {r.key: r for r in index.rows}
    items = []
    for c in cmp.get("changes") or []:
        key, change = str(c["key"]), c["change"]
        label = f'<a href="#{_e(_row_id(now[key]))}">{_e(key)}</a>' if key in now else _e(key)
        reason = (f'<br><span class="reason small">{_e(now[key].reason)}</span>'
                  if key in now else "")
        if change == "verdict-changed":
            items.append(f"<li><b>{label}</b>: {_chip(Verdict.parse(c['was']))} → "
                         f"{_chip(Verdict.parse(c['now']))}{reason}</li>")
        elif change == "new":
            items.append(f"<li><b>{label}</b>: new, {_chip(Verdict.parse(c['now']))}"
                         f"{reason}</li>")
        elif change == "gone":
            items.append(f"<li><b>{label}</b>: no longer in the sweep (was "
                         f"{_chip(Verdict.parse(c['was']))})</li>")
        else:  # class-changed: said as such, never as a regression
            differs = "; ".join(f"{k}: {v[0]} -> {v[1]}" for k, v in c["differs"].items())
            items.append(f"<li><b>{label}</b>: comparison class changed ({_e(differs)}): "
                         f"{_chip(Verdict.parse(c['was']))} → {_chip(Verdict.parse(c['now']))}"
                         " is not a regression</li>")
    if items:
        body = f'<ul class="box changes">{"".join(items)}</ul>'
    else:
        body = (f'<p class="box quiet">No verdict changes: {_e(cmp.get("rows_compared", 0))} '
                "row(s) compared, all as before.</p>")
    return (f'<section id="changes"><h2>Changes since {prev}</h2>'
            f'<p class="muted small">{how}; created {_e(cmp.get("previous_created") or "?")}'
            f"</p>{body}</section>")


def _values(value: Any) -> str:
    if value is None or value == [] or value == {}:
        return '<span class="muted">unknown</span>'
    if isinstance(value, list):
        return ", ".join(_e(v) for v in value)
    return _e(value)


def _provenance(index: RunIndex) -> str:
    p = index.provenance
    dists = p.get("distributions") or {}
    targets = ", ".join(f"{_e(name)} {_values(versions)}" for name, versions in dists.items()
                        if name != "torch") or '<span class="muted">none imported</span>'
    git = p.get("git") or {}
    git_text = (f"<code>{_e(git.get('commit'))}</code>" + (" (dirty)" if git.get("dirty")
                                                          else "")) if git else _values(None)
    cuda = p.get("cuda")
    rows = [
        ("host class", _values(p.get("host_class"))),
        ("Python", _values(p.get("python"))),
        ("platform", _values(p.get("platform"))),
        ("torch", _values(p.get("torch")) if p.get("torch") else
         (f"{_values(dists['torch'])} (installed; no case imported it)" if dists.get("torch")
          else _values(None))),
        ("CUDA", _values(cuda) if cuda else "none (a CPU build, or torch not imported)"),
        ("GPU", _values(p.get("gpus")) if p.get("gpus") else "none"),
        ("driver", _values(p.get("driver")) if p.get("driver") else "-"),
        ("targets", targets),
        ("patch set", f"<code>{_e(p.get('patch_set'))}</code>" if p.get("patch_set")
         else _values(None)),
        ("registry", f"<code>{_e(p.get('registry_digest'))}</code>"
         if p.get("registry_digest") else _values(None)),
        ("patchlane", _values(p.get("patchlane"))),
        ("git", git_text),
        ("lanes", _values(p.get("lanes"))),
        ("seen by", _e(p.get("source") or "unknown")),
    ]
    items = "".join(f"<dt>{_e(k)}</dt><dd>{v}</dd>" for k, v in rows)
    return f'<section id="provenance"><h2>Provenance</h2><dl class="prov">{items}</dl></section>'


def _upstream(info: Mapping[str, Any], *, compact: bool = False) -> str:
    """The entry's upstream links with their tracked state; ``compact`` (the table of every
    row) leaves out where the state comes from, which the cards above say."""
    tracked = info.get("tracked") or {}
    parts = []
    if info.get("issue"):
        state = tracked.get("issue") or {}
        label = state.get("state")
        if label == "closed" and state.get("state_reason"):
            label = f"closed ({state['state_reason']})"
        parts.append(f"issue {_external(info['issue'], _github_label(info['issue']))}"
                     + (f" <b>{_e(label)}</b>" if label else ""))
    if info.get("pr"):
        state = tracked.get("pr") or {}
        from_git = tracked.get("source") == "git"
        if state.get("merged"):
            label = "merged " + str(state.get("merged_at") or "")[:10]
            if tracked.get("released_in"):
                label += f", released in {tracked['released_in']}"
        elif state and from_git:
            label = "not landed"  # git cannot tell an open PR from one closed unmerged
        elif state.get("state") == "closed":
            label = "closed unmerged"
        else:
            label = state.get("state")
        if label and state.get("milestone"):
            label += f", milestone {state['milestone']}"
        parts.append(f"PR {_external(info['pr'], _github_label(info['pr']))}"
                     + (f" <b>{_e(label)}</b>" if label else ""))
    forwarded = info.get("forwarded")
    if forwarded == "no":
        parts.append("not forwarded" + (f" (draft <code>{_e(info['draft'])}</code>)"
                                        if info.get("draft") else ""))
    elif forwarded and forwarded != "not-needed" and forwarded not in (info.get("issue"),
                                                                       info.get("pr")):
        parts.append(f"forwarded {_external(forwarded, _github_label(forwarded))}")
    if info.get("applied_upstream"):
        parts.append(f"applied upstream in {_e(info['applied_upstream'])}")
    if not parts:
        return '<span class="muted">no upstream link</span>'
    when = _e(str(tracked.get("fetched_at") or "")[:10])
    if compact:
        if when:
            via = " (git)" if tracked.get("source") == "git" else ""
            parts.append(f'<span class="muted">as of {when}{via}</span>')
        return "<br>".join(parts)
    if when and tracked.get("source") == "git":
        parts.append(f'<span class="muted small">state as of {when} from the git mirror '
                     f'<code>{_e(tracked.get("mirror"))}</code> '
                     "(<code>patchlane upstream --git</code>)</span>")
    elif when:
        parts.append(f'<span class="muted small">state as of {when} from GitHub '
                     "(patchlane upstream cache)</span>")
    elif info.get("issue") or info.get("pr"):
        parts.append('<span class="muted small">state not tracked on this machine '
                     "(<code>patchlane upstream</code>)</span>")
    return " · ".join(parts)


def _evidence(row: IndexRow) -> str:
    """Links to the row's receipts and rank logs (the failing rank's marked)."""
    failing = row.failing
    receipts = row.receipt_links()
    parts = []
    if receipts:
        parts.append("receipts: " + " ".join(_local(path, m) for m, path in receipts))
    names = []
    for mode, rank in row.log_links():
        text = f"{mode} r{rank.get('rank')}"
        link = (_local(rank["path"], text) if rank.get("path")
                else f'<span class="muted">{_e(text)} (not kept)</span>')
        if failing.get("mode") == mode and failing.get("rank") == rank.get("rank"):
            link = f"<b>{link} (failing)</b>"
        names.append(link)
    if names:
        parts.append("logs: " + " ".join(names))
    return "<br>".join(parts) or '<span class="muted">no case ran</span>'


def _gate(row: IndexRow, index: RunIndex) -> str:
    gate = index.gate(row)
    return (f'<code class="gate">{_e(gate)}</code>' if gate
            else '<span class="muted">unknown</span>')


def _tail(row: IndexRow) -> str:
    failing = row.failing
    tail = row.tail
    if not tail:
        return ""
    whose = (f"rank {failing.get('rank')}'s log ({failing.get('mode')} overlay)"
             if failing else "the failing rank's log")
    if failing.get("log"):
        whose = _local(failing["log"], whose)
    return f"<p>Last lines of {whose}:</p><pre>{_e(tail)}</pre>"


def _card(row: IndexRow, index: RunIndex) -> str:
    v = row.verdict
    info = index.entry_info(row.entry_id)
    anchor = _anchor(row) if v is Verdict.ERROR else f"attention-{_row_id(row)}"
    summary = (f'<p class="muted small">{_e(info["summary"])}</p>' if info.get("summary")
               else "")
    return (
        f'<div class="card" style="border-left-color:{COLOURS[v]}" id="{_e(anchor)}">'
        f"<h3>{_e(row.key)} {_chip(v)} <span class=\"muted\">on "
        f"{_e(row.installed or 'unknown')}</span></h3>{summary}"
        f'<p><b>why:</b> <span class="reason">{_e(row.reason)}</span></p>'
        f"<p><b>asks:</b> {_action(v, row.entry_id, None, row.action(index.evidence_dir(row)))}"
        "</p>"
        + (f'<p class="small"><b>from:</b> shard {_origin(row).replace("<br>", " · ")}</p>'
           if row.origin else "") +
        f"<p><b>gate:</b> {_gate(row, index)} · <b>upstream:</b> {_upstream(info)}</p>"
        f'<p class="small"><b>evidence:</b> {_evidence(row).replace("<br>", " · ")}</p>'
        f"{_tail(row) if v is Verdict.ERROR else ''}</div>"
    )


def _attention(index: RunIndex) -> str:
    rows = by_severity(index.rows)
    out: list[str] = []
    for slug, title, wanted in sections():
        cards = [_card(r, index) for r in rows if r.verdict in wanted]
        if cards:
            out.append(f'<section id="{slug}"><h2>{_e(title)}</h2>{"".join(cards)}</section>')
    if not out:
        text = ", ".join(f"{index.count(v)} {v.value}" for v in SEVERITY if index.count(v))
        return (f'<section id="attention"><h2>Needs you</h2><p class="ok">Nothing needs you'
                f"{': ' + _e(text) if text else ''}.</p></section>")
    return "".join(out)


def _rows(index: RunIndex) -> str:
    body = []
    # whose entries: said when the run swept entries of several registries (a team's beside
    # the catalog)
    several = len({str(i.get("registry")) for i in index.entries.values()}) > 1
    for row in by_severity(index.rows):
        v = row.verdict
        info = index.entry_info(row.entry_id)
        entry = f"<b>{_e(row.entry_id)}</b>"
        if several and info.get("registry"):
            whose = "catalog" if info.get("catalog") else PurePath(str(info["registry"])).name
            entry += (f' <span class="muted small" title="{_e(info["registry"])}">'
                      f"({_e(whose)})</span>")
        if info.get("summary"):
            entry += f'<br><span class="muted small">{_e(info["summary"])}</span>'
        if info.get("status") and info["status"] != "active":
            entry += f' <span class="muted small">({_e(info["status"])})</span>'
        reason = f'<span class="reason">{_e(row.reason)}</span>'
        if v is Verdict.ERROR:
            reason += f'<br><a class="small" href="#{_e(_anchor(row))}">log tail</a>'
        shard = f'<td class="nowrap">{_origin(row)}</td>' if index.merged else ""
        body.append(
            f'<tr id="{_e(_row_id(row))}"><td>{entry}</td>'
            f"<td class=\"nowrap\">{_e(row.lane)} ws={_e(row.world_size)}</td>{shard}"
            f"<td>{_e(row.installed or '-')}</td><td>{_gate(row, index)}</td>"
            f"<td>{_chip(v)}</td><td class=\"reason\">{reason}</td>"
            f"<td><b>{_e(row.asks())}</b></td>"
            f'<td class="small">{_upstream(info, compact=True)}</td>'
            f'<td class="small ev">{_evidence(row)}</td></tr>')
    names = ("entry", "lane", *(("shard",) if index.merged else ()), "installed", "gate",
             "verdict", "reason", "asks", "upstream", "evidence")
    head = "".join(f"<th>{h}</th>" for h in names)
    return (f'<section id="rows"><h2>Every row</h2><div class="wide"><table class="rows">'
            f"<tr>{head}</tr>{''.join(body)}</table></div></section>")


def _grid(index: RunIndex) -> str:
    columns = sorted({(r.lane, r.world_size) for r in index.rows})
    entries = sorted({r.entry_id for r in index.rows})
    by = {(r.entry_id, r.lane, r.world_size): r for r in index.rows}
    head = "".join(f"<th>{_e(lane)} ws={_e(ws)}</th>" for lane, ws in columns)
    body = []
    for entry in entries:
        cells = []
        for lane, ws in columns:
            row = by.get((entry, lane, ws))
            if row is None:
                cells.append("<td></td>")
            else:
                v = row.verdict
                cells.append(_cell(v, row.reason, _anchor(row) if v is Verdict.ERROR
                                   else None))
        body.append(f"<tr><th>{_e(entry)}</th>{''.join(cells)}</tr>")
    return (f'<section id="grid"><h2>Grid</h2><table><tr><th>entry</th>{head}</tr>'
            f"{''.join(body)}</table></section>")


def _history(index: RunIndex, history: Sequence[HistoryRun]) -> str:
    lineage = index.lineage or {}
    runs = sorted(history, key=lambda h: (h.index.created, h.index.run_id))
    notes = []
    root = lineage.get("runs_root")
    if root:
        notes.append(f"Runs of the same comparison class under <code>{_e(root)}</code> "
                     f"(the latest {_e(lineage.get('history_limit'))}), and any named with "
                     "--history; oldest first, this run last.")
    if lineage.get("other_class"):
        notes.append(f"{_e(lineage['other_class'])} earlier run(s) there are of another "
                     "comparison class and are left out.")
    if lineage.get("merged_shards"):
        notes.append(f"{_e(lineage['merged_shards'])} shard run director(ies) there are read as "
                     "part of the merged run listing them (the merge stands for its shards).")
    if lineage.get("not_read"):
        notes.append(f"{_e(lineage['not_read'])} older run director(ies) there were not read "
                     f"(only the newest {_e(lineage.get('scan_limit') or '')} are).")
    for problem in lineage.get("unreadable") or []:
        notes.append(f"Left out (no readable index): {_e(problem)}")
    note = "".join(f'<p class="muted small">{n}</p>' for n in notes)
    if not runs:
        return (f'<section id="history"><h2>History</h2>{note}<p>No earlier run to show yet: '
                "the history starts with this one.</p></section>")
    keys = [r.key for r in by_severity(index.rows)]
    seen = set(keys)
    for run in runs:
        for r in run.index.rows:
            if r.key not in seen:
                seen.add(r.key)
                keys.append(r.key)
    columns = [*runs, HistoryRun(index, None, [])]
    heads = []
    for run in columns[:-1]:
        label = (_local(run.href, run.index.run_id) if run.href
                 else _e(run.index.run_id))
        extra = (f'<br><span class="small">other class: {_e("; ".join(run.differs))}</span>'
                 if run.differs else "")
        cls = ' class="other"' if run.differs else ""
        heads.append(f"<th{cls}>{label}<br>"
                     f'<span class="muted">{_e(run.index.created[:16])}</span>'
                     f"{extra}</th>")
    heads.append(f"<th>{_e(index.run_id)}<br><span class=\"muted\">this run</span></th>")
    maps = [{r.key: r for r in run.index.rows} for run in columns]
    body = []
    for key in keys:
        cells, before = [], None
        for rows in maps:
            row = rows.get(key)
            if row is None:
                cells.append("<td></td>")
                continue
            v = row.verdict
            changed = before is not None and before is not v
            cells.append(f'<td class="{"changed" if changed else ""}" '
                         f'style="background:{COLOURS[v]};color:#fff" '
                         f'title="{_e(row.reason)}">{_e(v.value)}</td>')
            before = v
        body.append(f"<tr><th>{_e(key)}</th>{''.join(cells)}</tr>")
    return (f'<section id="history"><h2>History</h2>{note}<table class="hist"><tr><th>row</th>'
            f"{''.join(heads)}</tr>{''.join(body)}</table>"
            '<p class="muted small">A framed cell changed verdict since the column before.</p>'
            "</section>")


def _legend(index: RunIndex) -> str:
    seen = {r.verdict for r in index.rows}
    items = "".join(f"<li>{_chip(v)} {_e(ASKS[v])}: {_action(v, 'ID', None)}</li>"
                    for v in SEVERITY if v in seen)
    return (f'<section id="legend"><h2>What each verdict asks</h2><ul>{items}</ul></section>'
            if items else "")


def _recorded(index: RunIndex, recorded: Sequence[RecordedRun]) -> str:
    """This run's rows beside the cuda rows recorded on a GPU (``gpu-runs/``): one column per
    recorded run, its machine from the receipts, each cell its world-size-1 verdict and the
    release it ran on."""
    entries = sorted({r.entry_id for r in index.rows})
    runs = [run for run in recorded if any(row.entry_id in entries for row in run.rows)]
    if not runs:
        return ""
    mine = {(r.entry_id, r.lane, r.world_size): r for r in index.rows}
    head = "".join(f'<th title="{_e(run.machine)}">{_e(run.folder)}<br>'
                   f'<span class="muted small">{_e(run.run)}</span></th>' for run in runs)
    body = []
    for entry in entries:
        here = " ".join(f"{_chip(r.verdict)} <span class=\"small\">{_e(lane)} ws={_e(ws)}"
                        "</span>" for (e, lane, ws), r in sorted(mine.items()) if e == entry)
        cells = []
        for run in runs:
            row = next((r for r in run.rows if r.entry_id == entry and r.world_size == 1),
                       None)
            cells.append("<td></td>" if row is None else
                         f"<td>{_chip(row.verdict)} <span class=\"small\">"
                         f"{_e(row.installed or '-')}</span></td>")
        body.append(f"<tr><th>{_e(entry)}</th><td>{here}</td>{''.join(cells)}</tr>")
    machines = sorted({run.machine for run in runs})
    return (f'<section id="gpu"><h2>Beside a GPU</h2><p class="small">This run\'s rows beside '
            f"the cuda rows recorded on {_e('; '.join(machines))} (gpu-runs/ in the "
            "repository: past runs kept as evidence, world size 1).</p><div class=\"wide\">"
            f"<table><tr><th>entry</th><th>this run</th>{head}</tr>{''.join(body)}</table>"
            "</div></section>")


def page(index: RunIndex, history: Sequence[HistoryRun | RunIndex] = (),
         recorded: Sequence[RecordedRun] = ()) -> str:
    """The page for ``index`` (this run's index) with ``history`` (earlier runs) and the
    ``recorded`` GPU runs (see :mod:`patchlane.sweep.recorded`)."""
    runs = [h if isinstance(h, HistoryRun) else HistoryRun(h) for h in history]
    version = index.provenance.get("patchlane") or ""
    return printable(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>patchlane sweep {_e(index.run_id)}</title><style>{_CSS}</style></head>"
        f"<body>{_header(index)}{_changes(index)}{_shards(index)}{_provenance(index)}"
        f"{_attention(index)}"
        f"{_rows(index)}{_grid(index)}{_recorded(index, recorded)}{_history(index, runs)}"
        f"{_legend(index)}"
        f'<p class="muted small">patchlane {_e(version)}'
        " · a static page: no script, nothing fetched; links to receipts and logs are relative "
        "to this run directory.</p></body></html>\n"
    )
