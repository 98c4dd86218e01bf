"""The run index built from a run directory: each row with its evidence links (receipts, rank
logs, the failing rank with its log tail, all relative to the run directory and only to files
that exist there), the run's provenance as its ranks saw it, and each entry's gate and upstream
links. Each receipt is read once: the sweep hands over what it read when it gave the verdicts.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ...registry import Entry, Registry
from ...runs import found as runs_mod
from ...runs.index import INDEX_SCHEMA, IndexRow, RunIndex
from ...runs.manifest import RunDir, worst_rank
from ...runs.verdicts import MEANING, Verdict
from ...startup import is_default_registry
from ..engine import VerdictRow

__all__ = ["index_data"]

def index_data(run: RunDir, rows: Sequence[VerdictRow], *, registry: Registry | None = None,
               upstream: Mapping[str, Any] | None = None) -> RunIndex:
    """This run's index: rows with their evidence links, the run's provenance, and (given the
    registry, and what is known of upstream) each entry's gate and upstream links."""
    m = run.manifest
    known = {e.id: e for e in registry.entries} if registry is not None else {}
    entries: dict[str, Any] = {}
    receipts: list[dict[str, Any]] = []
    out_rows = []
    for r in rows:
        links, read = _evidence(run, r)
        receipts += read
        entry = known.get(r.entry_id)
        if entry is not None and r.entry_id not in entries:
            entries[r.entry_id] = _entry_info(entry, (upstream or {}).get(r.entry_id))
        gates = {str(x["provenance"].get("applies_to")) for x in read
                 if isinstance(x.get("provenance"), dict) and x["provenance"].get("applies_to")}
        out_rows.append(IndexRow(
            entry_id=r.entry_id, lane=r.lane, world_size=r.world_size, verdict=r.verdict,
            reason=r.reason, installed=r.installed, receipts=dict(r.receipts),
            comparison_key=r.comparison_key, stderr_tail=r.stderr_tail, links=links,
            applies_to=(entries[r.entry_id]["applies_to"] if r.entry_id in entries
                        else ", ".join(sorted(gates)) or None)))
    lanes = m.get("lanes")
    index = RunIndex(
        schema_version=INDEX_SCHEMA,
        run_id=m["run_id"],
        run_dir=str(run.path.absolute()),
        created=m["created"],
        updated=m["updated"],
        shard=m.get("shard"),
        lanes=tuple(lanes) if lanes is not None else None,
        registry_digest=m.get("registry_digest"),
        patch_set=m.get("patch_set"),
        git=m.get("git"),
        counts=RunIndex.count_rows(out_rows),
        provenance=_provenance(m, receipts),
        entries=entries,
        rows=tuple(out_rows),
        group=m.get("group"),
    )
    return index.replace(comparison_class=runs_mod.run_class(index))


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
        receipt = row.read.get(mode)
        if receipt is None:  # a row made without the sweep (tests, an older caller)
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
    for mode in MEANING[v].about:
        receipt = by_mode.get(mode)
        if receipt is None or receipt.get("outcome") != want:
            continue
        ranks = [r for r in receipt.get("ranks") or [] if isinstance(r, dict)]
        rank = worst_rank(ranks)
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
        # whose entry: the catalog installed with patchlane, or a registry file of the team's
        "registry": str(entry.source),
        "catalog": is_default_registry(entry.source),
        "distribution": entry.target.distribution,
        "target": entry.target.object_path,
        # A floor's or pin's gate is its requirement (numpy<2.4), with its `when:` scope.
        "applies_to": entry.applies_to_shown or _requirement(entry),  # as the registry says
        "retire_when": (str(entry.retire_when.release)
                        if entry.retire_when.release is not None else None),
        "issue": up.issue,
        "pr": up.pr,
        "forwarded": up.forwarded,
        "applied_upstream": up.applied_upstream,
        "draft": draft,
        "tracked": tracked if isinstance(tracked, dict) else None,
    }


def _requirement(entry: Entry) -> str | None:
    text = entry.requirement_text
    if text is None or entry.when is None or not entry.when.installed:
        return text
    return text + " when " + ", ".join(f"{n}{s}" for n, s in entry.when.installed.items())


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
        # Patch set and registry digest: the manifest's header (below) is the one source; a
        # receipt's copy is for the receipt read alone, months later.
        if not manifest.get("patch_set"):
            add("patch_set", prov.get("patch_set"))
        if not manifest.get("registry_digest"):
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
