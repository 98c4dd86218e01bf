"""Reports of a run directory: JSON index, markdown summary, JUnit XML and the static HTML
page (:mod:`patchlane.evidence.page`), plus comparison with an earlier run inside the same
comparison class only.

The earlier run is the one ``--compare`` names, else the latest earlier run of the same
comparison class under the runs root (:mod:`patchlane.evidence.runs`); the page's history is
the runs ``--history`` names plus the latest runs of the same class found there. The index
carries what the page shows (provenance gathered from the receipts, each entry's gate and
upstream links, relative links to receipts and rank logs), so every report can be rebuilt from
the run directory alone.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import re
import textwrap
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote
from xml.etree import ElementTree as ET

from ..files import atomic_write, atomic_write_json
from ..registry import Entry, Registry
from . import runs as runs_mod
from .manifest import RunDir
from .page import ASKS, HistoryRun, by_severity, page, verdict
from .runs import row_key
from .sweep import VerdictRow
from .verdicts import ACTION, SEVERITY, Verdict

__all__ = ["Change", "compare", "index_data", "load_index", "markdown", "write_reports"]

INDEX_SCHEMA = 1
# Which receipt holds the failure a verdict is about, in the order the verdict's reason looks.
_FAILING_MODES = {Verdict.ERROR: ("without", "with"), Verdict.BROKEN: ("with",),
                  Verdict.STILL_AFFECTED: ("without",)}
_MODES = ("without", "with")


def _verdict(row: dict[str, Any]) -> Verdict:
    return verdict(row)


def _row_key(row: dict[str, Any]) -> str:
    return row_key(row)


# -- the index ---------------------------------------------------------------------------------

def index_data(run: RunDir, rows: Sequence[VerdictRow], *, registry: Registry | None = None,
               upstream: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """This run's index: rows with their evidence links, the run's provenance, and (given the
    registry, and what is known of upstream) each entry's gate and upstream links."""
    m = run.manifest
    known = {e.id: e for e in registry.entries} if registry is not None else {}
    entries: dict[str, Any] = {}
    receipts: list[dict[str, Any]] = []
    out_rows = []
    for r in rows:
        data = {k: v for k, v in r.as_dict().items() if k != "cases"}
        links, read = _evidence(run, r)
        receipts += read
        data["links"] = links
        entry = known.get(r.entry_id)
        if entry is not None and r.entry_id not in entries:
            entries[r.entry_id] = _entry_info(entry, (upstream or {}).get(r.entry_id))
        gates = {str(x["provenance"].get("applies_to")) for x in read
                 if isinstance(x.get("provenance"), dict) and x["provenance"].get("applies_to")}
        data["applies_to"] = (entries[r.entry_id]["applies_to"] if r.entry_id in entries
                              else ", ".join(sorted(gates)) or None)
        out_rows.append(data)
    index = {
        "schema_version": INDEX_SCHEMA,
        "run_id": m["run_id"],
        "run_dir": str(run.path.absolute()),
        "created": m["created"],
        "updated": m["updated"],
        "shard": m.get("shard"),
        "lanes": m.get("lanes"),
        "registry_digest": m.get("registry_digest"),
        "patch_set": m.get("patch_set"),
        "git": m.get("git"),
        "counts": dict(Counter(r.verdict.value for r in rows)),
        "provenance": _provenance(m, receipts),
        "entries": entries,
        "rows": out_rows,
    }
    index["comparison_class"] = runs_mod.run_class(index)
    return index


def load_index(run_dir: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((run_dir / "index.json").read_text(encoding="utf-8"))
    return data


def _evidence(run: RunDir, row: VerdictRow) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A row's links (receipts, each rank's log, the failing rank with its log tail), all
    relative to the run directory and only to files that exist there, and the receipts read."""
    receipts: dict[str, str] = {}
    logs: dict[str, list[dict[str, Any]]] = {}
    by_mode: dict[str, dict[str, Any]] = {}
    for mode, rel in sorted(row.receipts.items()):
        path = run.path / rel
        if not _inside(run.path, path) or not path.is_file():
            continue
        receipts[mode] = Path(rel).as_posix()
        try:
            receipt = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(receipt, dict):
            continue
        by_mode[mode] = receipt
        cid = str(receipt.get("case_id") or "")
        attempts = ((run.manifest.get("cases") or {}).get(cid) or {}).get("attempts")
        logs[mode] = [{"rank": rank.get("rank"), "outcome": rank.get("outcome"),
                       "path": _log_link(run, cid, attempts, rank)}
                      for rank in receipt.get("ranks") or [] if isinstance(rank, dict)]
    links: dict[str, Any] = {"receipts": receipts, "logs": logs,
                             "failing": _failing(row.verdict, by_mode, logs)}
    return links, list(by_mode.values())


def _failing(v: Verdict, by_mode: Mapping[str, dict[str, Any]],
             logs: Mapping[str, list[dict[str, Any]]]) -> dict[str, Any] | None:
    """The rank whose failure the verdict is about (as in the sweep: the first rank in error,
    else the first that failed), with the tail of its log."""
    want = "error" if v is Verdict.ERROR else "fail"
    for mode in _FAILING_MODES.get(v, ()):
        receipt = by_mode.get(mode)
        if receipt is None or receipt.get("outcome") != want:
            continue
        ranks = [r for r in receipt.get("ranks") or [] if isinstance(r, dict)]
        rank = next((r for r in ranks if r.get("outcome") == "error"),
                    next((r for r in ranks if r.get("outcome") == "fail"), None))
        if rank is None:
            return {"mode": mode, "rank": None, "log": None,
                    "tail": receipt.get("stderr_tail")}
        log = next((x["path"] for x in logs.get(mode, []) if x["rank"] == rank.get("rank")),
                   None)
        return {"mode": mode, "rank": rank.get("rank"), "log": log,
                "tail": rank.get("stderr_tail") or receipt.get("stderr_tail")}
    return None


def _log_link(run: RunDir, cid: str, attempts: Any, rank: Mapping[str, Any]) -> str | None:
    """A rank log relative to the run directory: where its receipt says it is (an absolute
    path when the sweep ran), else where the run directory keeps it
    (``cases/<case>/attempt<N>/rank<R>.log``); None when neither file exists (a run directory
    copied without its logs), so the page never links to nothing."""
    candidates = []
    log = rank.get("log")
    if isinstance(log, str) and log:
        with contextlib.suppress(ValueError, OSError):  # a log outside the run directory
            candidates.append(Path(log).resolve().relative_to(run.path.resolve()))
    if cid and isinstance(attempts, int) and isinstance(rank.get("rank"), int):
        candidates.append(Path("cases", cid, f"attempt{attempts}", f"rank{rank['rank']}.log"))
    for rel in candidates:
        if _inside(run.path, run.path / rel) and (run.path / rel).is_file():
            return rel.as_posix()
    return None


def _inside(root: Path, path: Path) -> bool:
    try:
        return path.resolve().is_relative_to(root.resolve())
    except OSError:
        return False


def _entry_info(entry: Entry, tracked: Any) -> dict[str, Any]:
    up = entry.upstream
    draft = None
    if up.draft is not None:
        draft = Path(os.path.relpath(up.draft, entry.source.parent)).as_posix()
    return {
        "summary": entry.summary,
        "status": entry.status.value,
        "distribution": entry.target.distribution,
        "target": entry.target.object_path,
        "applies_to": str(entry.applies_to) if entry.applies_to is not None else None,
        "retire_when": (str(entry.retire_when.release)
                        if entry.retire_when.release is not None else None),
        "issue": up.issue,
        "pr": up.pr,
        "forwarded": up.forwarded,
        "applied_upstream": up.applied_upstream,
        "draft": draft,
        "tracked": tracked if isinstance(tracked, dict) else None,
    }


def _provenance(manifest: Mapping[str, Any], receipts: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """What ran, for the page's header: each value as the distinct values the receipts (the
    ranks' own view) report; the sweep's own view where no case ran."""
    seen: dict[str, set[str]] = {}
    dists: dict[str, set[str]] = {}
    count = 0

    def add(key: str, value: Any) -> None:
        if value not in (None, "", [], {}):
            seen.setdefault(key, set()).add(str(value))

    for receipt in receipts:
        prov = receipt.get("provenance")
        if not isinstance(prov, dict):
            continue
        count += 1
        rt: dict[str, Any] = prov["runtime"] if isinstance(prov.get("runtime"), dict) else {}
        add("host_class", rt.get("host_class"))
        add("python", " ".join(str(x) for x in (rt.get("python"), rt.get("implementation"))
                               if x))
        add("platform", rt.get("platform"))
        torch: dict[str, Any] = rt["torch"] if isinstance(rt.get("torch"), dict) else {}
        add("torch", torch.get("version"))
        add("cuda", torch.get("cuda"))
        add("driver", torch.get("driver"))
        gpus = [g for g in torch.get("gpus") or [] if isinstance(g, dict)]
        if gpus:
            names = Counter(f"{g.get('name')} (sm {g.get('capability')}, "
                            f"{g.get('memory_gib')} GiB)" for g in gpus)
            add("gpus", ", ".join(f"{n}x {name}" for name, n in sorted(names.items())))
        sources: dict[str, Any] = (rt["version_sources"]
                                   if isinstance(rt.get("version_sources"), dict) else {})
        for name, version in (rt.get("distributions") or {}).items():
            if version is not None:
                tree = " (tree)" if str(sources.get(name, "")).startswith("source tree") else ""
                dists.setdefault(str(name), set()).add(f"{version}{tree}")
        add("patch_set", prov.get("patch_set"))
        add("registry_digest", prov.get("registry_digest"))
        add("patchlane", prov.get("patchlane"))
    out: dict[str, Any] = {k: sorted(v) for k, v in seen.items()}
    out["distributions"] = {k: sorted(v) for k, v in sorted(dists.items())}
    if count:
        out["source"] = f"the ranks themselves ({count} receipt(s))"
    else:  # no case ran: the sweep's interpreter is the one its ranks would have used
        out["python"] = [f"{platform.python_version()} {platform.python_implementation()}"]
        out["platform"] = [platform.platform()]
        out["source"] = "the sweep process (no case ran)"
    # The manifest's header is what the sweep planned with: it wins for the patch set.
    for key in ("patch_set", "registry_digest", "patchlane"):
        if manifest.get(key):
            out[key] = manifest[key]
        elif out.get(key):
            out[key] = ", ".join(out[key])
    out["git"] = manifest.get("git")
    out["lanes"] = manifest.get("lanes")
    out["cuda_devices"] = manifest.get("cuda_devices")
    return out


# -- comparison --------------------------------------------------------------------------------

class Change(dict[str, Any]):
    """One row's difference from the previous run: a verdict change, a class change, a new row
    or one gone."""


def compare(previous: dict[str, Any], current: dict[str, Any]) -> list[Change]:
    """Verdict changes between two runs, only where the comparison class (lane, hardware class,
    upstream versions) is the same; where it differs the change is reported as a class change,
    never as a regression."""
    before = {_row_key(r): r for r in previous["rows"]}
    changes: list[Change] = []
    for row in current["rows"]:
        key = _row_key(row)
        old = before.pop(key, None)
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
    # A row the previous run had and this one lacks (an entry removed, a lane gone) is said,
    # not silently dropped.
    changes += [Change(key=key, kind="gone", was=old["verdict"]) for key, old in before.items()]
    return changes


# -- writers -----------------------------------------------------------------------------------

def write_reports(run: RunDir, rows: Sequence[VerdictRow], *,
                  previous: dict[str, Any] | None = None,
                  history: Iterable[Path] = (),
                  runs_root: Path | None = None,
                  registry: Registry | None = None,
                  upstream: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Write index.json, summary.md, junit.xml and report.html into ``run``.

    ``previous``: the index to compare with (``--compare``); by default the latest earlier run
    of the same comparison class under ``runs_root`` (default: the directory holding the run).
    ``history``: run directories the page's history shows whatever their class (``--history``),
    besides the latest runs of the same class under ``runs_root``. ``registry`` and
    ``upstream`` (:func:`patchlane.upstream.known.known_states`) give each entry's gate and
    upstream links with their tracked state."""
    index = index_data(run, rows, registry=registry, upstream=upstream)
    root = runs_root if runs_root is not None else run.path.parent
    scan = runs_mod.discover(root, exclude=run.path)
    found = scan.runs
    before = runs_mod.earlier(index, found)
    same = [r for r in before if runs_mod.same_class(index, r.index)]
    other = [r for r in before if not runs_mod.same_class(index, r.index)]
    lineage: dict[str, Any] = {"runs_root": str(root), "earlier": len(before),
                               "same_class": len(same), "other_class": len(other),
                               "history_limit": runs_mod.HISTORY_RUNS,
                               "scan_limit": runs_mod.SCAN_RUNS,
                               "unreadable": scan.unreadable, "not_read": scan.not_read,
                               "nearest_other": None}
    if other:
        lineage["nearest_other"] = {"run_id": other[-1].index["run_id"],
                                    "differs": runs_mod.class_differences(index, other[-1].index)
                                    or ["no row in common"]}
    index["lineage"] = lineage

    def href(path: Path) -> str | None:
        page_file = path / "report.html"
        if not page_file.is_file():
            return None
        return Path(os.path.relpath(page_file.resolve(), run.path.resolve())).as_posix()

    chosen = (previous, "compare", None) if previous is not None else \
        ((same[-1].index, "same-class", same[-1].path) if same else (None, None, None))
    if chosen[0] is not None:
        prev, how, prev_path = chosen
        if prev_path is None:  # named by --compare: link it when it is one of the runs here
            prev_path = next((r.path for r in found if r.index["run_id"] == prev["run_id"]),
                             None)
        shared = {_row_key(r) for r in prev["rows"]} & {_row_key(r) for r in index["rows"]}
        index["compare"] = {"previous_run": prev["run_id"], "how": how,
                            "previous_created": prev.get("created"),
                            "previous_report": href(prev_path) if prev_path else None,
                            "rows_compared": len(shared),
                            "changes": compare(prev, index)}
    atomic_write_json(run.path / "index.json", index)
    atomic_write(run.path / "summary.md", markdown(index))
    atomic_write(run.path / "junit.xml", junit(index))
    shown: dict[Path, HistoryRun] = {}
    for path in history:  # named runs: shown whatever their class; a bad index is an error
        if (path / "index.json").is_file():
            data = load_index(path)
            for row in data["rows"]:
                _verdict(row)
            shown[path.resolve()] = HistoryRun(data, href(path),
                                               runs_mod.class_differences(index, data))
    for r in same[-runs_mod.HISTORY_RUNS:]:
        shown.setdefault(r.path.resolve(), HistoryRun(r.index, href(r.path), []))
    atomic_write(run.path / "report.html", page(index, list(shown.values())))
    return index


def _sorted(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return by_severity(rows)


# -- summary.md --------------------------------------------------------------------------------

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


def _md_provenance(index: dict[str, Any]) -> str:
    p = index.get("provenance") or {}

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


def markdown(index: dict[str, Any]) -> str:
    counts = index["counts"]
    lines = [f"# patchlane sweep {index['run_id']}", ""]
    lines.append(" · ".join(f"**{v.value}**: {counts[v.value]}" for v in SEVERITY
                            if v.value in counts) or "nothing ran")
    prov = _md_provenance(index)
    if prov:
        lines += ["", prov]
    cmp = index.get("compare")
    if cmp:
        how = "" if cmp.get("how") == "compare" else " (the latest earlier run of the same " \
            "comparison class)"
        lines += ["", f"## Changes since {cmp['previous_run']}{how}", ""]
        for c in cmp.get("changes") or []:
            if c["kind"] == "class-changed":
                lines.append(f"- {c['key']}: comparison class changed ({c['differs']}); "
                             f"{c['was']} -> {c['now']} is not a regression")
            elif c["kind"] == "new":
                lines.append(f"- {c['key']}: new ({c['now']})")
            elif c["kind"] == "gone":
                lines.append(f"- {c['key']}: no longer in the sweep (was {c['was']})")
            else:
                lines.append(f"- {c['key']}: **{c['was']} -> {c['now']}**")
        if not cmp.get("changes"):
            lines.append(f"No verdict changes ({cmp.get('rows_compared', 0)} row(s) compared).")
    elif index.get("lineage"):
        lines += ["", "No earlier run of this comparison class under "
                  f"`{index['lineage']['runs_root']}`: nothing to compare with yet."]
    still = counts.get(Verdict.STILL_AFFECTED.value)
    if still:
        lines += ["", f"> **Still affected** {still} case(s): the bug outlives the gate on the "
                  "installed release. " + ACTION[Verdict.STILL_AFFECTED] + "."]
    fixed = counts.get(Verdict.UPSTREAM_FIXED.value)
    if fixed:
        lines += ["", f"> **Upstream fixed** {fixed} case(s): retirement candidates, see below."]
    entries = index.get("entries") or {}
    lines += ["", "| entry | lane | ws | installed | gate | verdict | reason | asks |",
              "|---|---|---|---|---|---|---|---|"]
    for row in _sorted(index["rows"]):
        gate = (entries.get(row["entry_id"]) or {}).get("applies_to") or row.get("applies_to")
        lines.append(f"| {row['entry_id']} | {row['lane']} | {row['world_size']} | "
                     f"{row.get('installed') or '-'} | {_code(gate) if gate else '-'} | "
                     f"**{row['verdict']}** | {_code(row['reason'])} | "
                     f"{ASKS[_verdict(row)]} |")
    # The rows that ask for something, whole, in the page's sections and order.
    for title, wanted in (("Errors", {Verdict.ERROR}), ("Broken", {Verdict.BROKEN}),
                          ("For a maintainer", {Verdict.STILL_AFFECTED,
                                                Verdict.UPSTREAM_FIXED})):
        chosen = [r for r in _sorted(index["rows"]) if _verdict(r) in wanted]
        if chosen:
            lines += ["", f"## {title}"]
            for r in chosen:
                lines += _md_details(r, index)
    shown = [v for v in SEVERITY if v.value in counts]
    if shown:
        lines += ["", "## What each verdict asks", ""]
        lines += [f"- **{v.value}**: {ACTION[v]}" for v in shown]
    return "\n".join(lines) + "\n"


def _md_details(row: dict[str, Any], index: dict[str, Any]) -> list[str]:
    """One row that asks for something: its whole reason (wrapped, never cut), what to do, its
    evidence links and, for a failure, the failing rank's last log lines."""
    v = _verdict(row)
    lines = ["", f"### {_row_key(row)}: {v.value} on {row.get('installed') or 'unknown'}", ""]
    lines += _block(row["reason"])
    action = re.sub(r"\bID\b", row["entry_id"], ACTION[v])
    if index.get("run_dir"):
        action = re.sub(r"\bRUN\b", str(index["run_dir"]), action)
    lines += ["", f"Asks: {action}."]
    links = row.get("links") or {}
    receipts, logs = links.get("receipts") or {}, links.get("logs") or {}
    refs = [_md_link(receipts[m], f"receipt ({m})") for m in _MODES if m in receipts]
    for mode in _MODES:
        refs += [_md_link(x["path"], f"rank {x['rank']} log ({mode})")
                 for x in logs.get(mode, []) if x.get("path")]
    if refs:
        lines += ["", "Evidence: " + " · ".join(refs)]
    failing = links.get("failing") or {}
    tail = failing.get("tail") or (row.get("stderr_tail") if v is Verdict.ERROR else None)
    if tail and v is Verdict.ERROR:
        lines += ["", f"Last lines of rank {failing.get('rank', '?')}'s log "
                  f"({failing.get('mode', '?')} overlay):", ""]
        lines += _block(_printable(str(tail)), width=None)
    return lines


def _printable(text: str) -> str:
    # Tails are already free of control characters; this guards receipts written before that.
    return "".join(c if c in "\t\n" or c >= " " else "\ufffd" for c in text)


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


