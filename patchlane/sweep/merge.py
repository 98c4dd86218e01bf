"""One night, one page: the shards of one sweep (``--shard I/N``) merged into one run directory.

A sharded sweep writes one run directory per shard. Each shard's manifest records the whole
plan it is a slice of (``plan``: the digest, the shard count and every row of every shard, see
:func:`patchlane.sweep.engine.plan_record`) and the night it belongs to (``group``, from
``patchlane sweep --group NAME``). :func:`merge` reads the shards of one plan and writes one
``index.json``, ``summary.md``, ``junit.xml`` and ``report.html`` over every row the plan has:

* each row from the shard that owns it, with where it came from (``origin``: shard, host, run
  directory) and its evidence links made relative to the merged directory;
* a row whose shard never delivered is an ``error`` row saying ``shard i/N missing``; a shard
  that did not finish (stopped, killed, still running, its records unreadable) is
  ``errored``, its finished rows kept and the rest ``error`` rows saying why: never a silent
  gap, and the exit status is the sweep's (``32 | bits``, bit 2 for an error);
* the shards' list in the index (``shards``), one entry per shard of the plan, with its
  state (``delivered``, ``errored``, ``missing``; a second run directory of the same shard,
  a requeued task, is ``superseded`` by the better one: finished first, then newest).

Shards of different plans (another registry, patch set, lanes, ``--only``, shard count),
interpreters (``python``: the same releases are not installed for both) or groups are refused
with the first difference named. The shards' files are only read: their receipts, manifests
and reports stay as the sweeps left them. Merging again (a late shard, a re-run) rewrites only
the merged directory, with the same result for the same shards. The merged directory is a run
under its runs root like any other, so the next night's comparison and history find it; the
shard run directories it lists are counted once, as it
(:mod:`patchlane.runs.found`).
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import os
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..common.errors import RunDirError
from ..common.files import read_regular, resolved
from ..runs.found import SCAN_RUNS, run_class
from ..runs.index import MAX_INDEX_BYTES, IndexRow, RunIndex, row_key
from ..runs.manifest import CaseState, RunDir
from ..runs.verdicts import Verdict
from .engine import UNFINISHED, Shard, verdicts
from .reports import publish
from .reports.build import index_data

__all__ = ["GROUP", "MergeResult", "ShardRun", "find_group", "merge", "read_shard"]

GROUP = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
"""What a group name may be: it becomes part of the merged directory's name."""

DELIVERED, ERRORED, MISSING, SUPERSEDED = "delivered", "errored", "missing", "superseded"
_FIX = "fix: merge the shards of one sweep only (`patchlane merge --group NAME` finds them)"


@dataclass
class ShardRun:
    """One shard's run directory as the merge reads it."""

    path: Path
    manifest: Mapping[str, Any]
    shard: Shard
    plan: Mapping[str, Any]
    state: str
    why: str | None
    index: RunIndex | None
    """Its rows (its ``index.json``, or rebuilt from its manifest and receipts when the sweep
    wrote none); None when neither could be read."""

    @property
    def run_id(self) -> str:
        return str(self.manifest.get("run_id") or self.path.name)

    @property
    def group(self) -> str | None:
        value = self.manifest.get("group")
        return str(value) if value is not None else None

    @property
    def host(self) -> str | None:
        value = self.manifest.get("host")
        return str(value) if value else None


def read_shard(path: Path) -> ShardRun:
    """``path`` as a shard of a sweep: RunDirError (naming the file) when it is no run
    directory or its manifest records no plan; a shard that did not finish is ``errored``
    with the reason, its finished rows kept."""
    file = path / "manifest.json"
    if not file.is_file():
        what = "the folder does not exist" if not path.exists() else "no manifest.json there"
        raise RunDirError(f"{path}: not a sweep's run directory ({what}); expected a run "
                          "directory `patchlane sweep` wrote; fix: give the shards' run "
                          "directories, or --group NAME to find them under the runs root")
    run = RunDir.open(path)  # a manifest that is no JSON object: RunDirError, naming the file
    try:
        return _read_shard(path, file, run)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise RunDirError(f"{file}: damaged ({type(exc).__name__}: {exc}); expected the "
                          "manifest a sweep writes; fix: sweep that shard again, or leave it "
                          "out of the merge") from None


def _read_shard(path: Path, file: Path, run: RunDir) -> ShardRun:
    m = run.manifest
    plan = m.get("plan")
    if not _is_plan(plan):
        raise RunDirError(f"{file}: plan is {_found(plan)}, expected the record of the whole "
                          "plan a sweep writes (digest, count, rows); the sweep predates "
                          "merging, or the file was edited; fix: sweep the night again with "
                          "this patchlane")
    assert isinstance(plan, dict)
    try:
        shard = Shard.parse(str(m.get("shard") or "1/1"))
    except ValueError as exc:
        raise RunDirError(f"{file}: shard: {exc}") from None
    if shard.count != plan["count"]:
        raise RunDirError(f"{file}: shard is {shard}, but plan.count is {plan['count']}; "
                          "expected the same count (the file was edited); fix: sweep again")
    why: list[str] = []
    running = _held(path / ".lock")
    if running:
        why.append("still running (a sweep holds its lock); merge again when it ends")
    stopped = m.get("interrupted")
    unfinished = sum(not CaseState(c["state"]).finished for _, c in run.cases())
    if isinstance(stopped, dict):
        why.append(f"stopped by {stopped.get('by')} at {stopped.get('at')}, "
                   f"{stopped.get('unfinished')} case(s) unfinished; finish it with "
                   f"`patchlane sweep --resume {path}`, then merge again")
    elif unfinished and not running:
        why.append(f"{unfinished} case(s) did not finish (the sweep was killed); finish it "
                   f"with `patchlane sweep --resume {path}`, then merge again")
    index: RunIndex | None = None
    try:
        index = RunIndex.load(path)
        if index.run_id != m.get("run_id"):
            raise ValueError(f"its run_id is {index.run_id!r}, the manifest's "
                             f"{m.get('run_id')!r}")
    except FileNotFoundError:
        index = None
        if not running:
            why.append("it wrote no index.json (the sweep stopped before its reports)")
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        index = None
        why.append(f"its index.json cannot be used ({type(exc).__name__}: {exc})"[:300])
    if index is None:
        # What finished is still evidence: the rows rebuilt from the manifest and the
        # receipts, read only (nothing is written into the shard's directory).
        try:
            index = index_data(run, verdicts(run))
        except (OSError, ValueError, KeyError, TypeError, AttributeError,
                RecursionError) as exc:
            why.append(f"its records cannot be read ({type(exc).__name__}: {exc})"[:300])
    return ShardRun(path, m, shard, plan, ERRORED if why else DELIVERED,
                    "; ".join(why) or None, index)


def _is_plan(plan: Any) -> bool:
    return (isinstance(plan, dict) and isinstance(plan.get("digest"), str)
            and isinstance(plan.get("count"), int) and plan["count"] >= 1
            and isinstance(plan.get("rows"), list)
            and all(isinstance(r, list) and len(r) == 3 and isinstance(r[0], str)
                    and isinstance(r[1], str) and isinstance(r[2], int)
                    for r in plan["rows"]))


def _found(value: Any) -> str:
    if value is None:
        return "absent"
    return f"a JSON {type(value).__name__} without digest, count and rows"


def _held(lock: Path) -> bool:
    """Whether a sweep holds ``lock`` (``RunDir.lock``: an OS lock that dies with its
    process). Asked with a shared lock on a read-only descriptor: the probe neither creates,
    truncates nor removes the shard's lock file, as acquiring it through filelock would."""
    try:
        import fcntl
    except ImportError:  # not a POSIX system: nothing to ask
        return False
    try:
        fd = os.open(lock, os.O_RDONLY)
    except OSError:  # no lock file: no sweep ever held it
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # closing releases the probe's own lock
    return False


def find_group(root: Path, group: str, *, limit: int = SCAN_RUNS) -> list[Path]:
    """The run directories directly under ``root`` whose manifest records ``group``, among the
    newest ``limit`` (by the manifest's modification time: a night's shards are the newest
    runs there, and a runs root of years of nights costs one ``stat`` per run and a bounded
    number of manifests read). A manifest that is not a regular file, not JSON or too large
    is not a shard's."""
    candidates = []
    try:
        items = list(os.scandir(root))
    except OSError:
        return []
    for item in items:
        try:
            mtime = (Path(item.path) / "manifest.json").stat().st_mtime
        except OSError:
            continue
        candidates.append((-mtime, item.name, Path(item.path)))
    out = []
    for _, _, path in sorted(candidates)[:max(0, limit)]:
        try:
            raw = read_regular(path / "manifest.json", MAX_INDEX_BYTES)
            manifest = json.loads(raw) if len(raw) <= MAX_INDEX_BYTES else None
        except (OSError, ValueError, RecursionError):
            continue
        if isinstance(manifest, dict) and manifest.get("group") == group:
            out.append(path)
    return sorted(out)


def _check_one_plan(shards: Sequence[ShardRun]) -> None:
    """Every shard of one sweep: the first difference named, with both files."""
    first = shards[0]
    checks: tuple[tuple[str, Any], ...] = (
        ("group", lambda s: s.group),
        ("registry_digest", lambda s: s.manifest.get("registry_digest")),
        ("patch_set", lambda s: s.manifest.get("patch_set")),
        ("lanes", lambda s: s.manifest.get("lanes")),
        ("python", lambda s: s.manifest.get("python")),
        ("plan.count (the N of --shard I/N)", lambda s: s.plan["count"]),
        ("plan.digest (the rows planned: --only, the reproducers' world sizes)",
         lambda s: s.plan["digest"]),
    )
    for other in shards[1:]:
        for label, get in checks:
            if get(other) != get(first):
                raise RunDirError(
                    f"cannot merge {other.path} with {first.path}: "
                    f"{other.path / 'manifest.json'} has {label} {get(other)!r}, "
                    f"{first.path / 'manifest.json'} has {get(first)!r}; expected the shards "
                    f"of one sweep (one group, registry, patch set, lanes, interpreter and "
                    f"plan); {_FIX}")


def _choose(shards: Sequence[ShardRun]) -> tuple[dict[int, ShardRun], list[ShardRun]]:
    """One run directory per shard: a finished one before one that did not finish, then the
    newest (a requeued task's second attempt); the others are superseded, and listed."""
    by_index: dict[int, list[ShardRun]] = {}
    for s in shards:
        by_index.setdefault(s.shard.number, []).append(s)
    chosen, superseded = {}, []
    for i, runs in sorted(by_index.items()):
        if len(runs) > 1 and runs[0].group is None:
            raise RunDirError(
                f"{runs[0].path} and {runs[1].path} are both shard {runs[0].shard} and record "
                "no group, so nothing tells which night each belongs to; expected one run "
                "directory per shard; fix: merge one night's shards only, and give each "
                "night's shards `patchlane sweep --group NAME`")
        ranked = sorted(runs, key=lambda s: (s.state == DELIVERED,
                                             str(s.manifest.get("updated") or ""), s.run_id))
        chosen[i] = ranked[-1]
        superseded += ranked[:-1]
    return chosen, superseded


@dataclass
class MergeResult:
    index: RunIndex
    out: Path
    shards: list[ShardRun] = field(default_factory=list)


def merge(paths: Iterable[Path], *, out: Path | None = None, group: str | None = None,
          runs_root: Path | None = None, previous: RunIndex | None = None,
          history: Iterable[Path] = ()) -> MergeResult:
    """Merge the shard run directories ``paths`` into ``out`` (default: beside them,
    ``<start>-merged[-<group>]``) and write its reports (see the module docstring).
    ``group``: every shard must record it. ``runs_root``: where earlier runs are looked for
    (default: the folder holding ``out``); ``previous`` and ``history`` as for a sweep."""
    unique: dict[Path, Path] = {}
    for p in paths:
        unique.setdefault(resolved(p), p)
    if not unique:
        raise RunDirError("nothing to merge: no shard run directory given or found; fix: give "
                          "the shards' run directories, or --group NAME and --runs-root DIR")
    shards = [read_shard(p) for p in unique.values()]
    if group is not None:
        for s in shards:
            if s.group != group:
                raise RunDirError(f"{s.path / 'manifest.json'}: group is {s.group!r}, expected "
                                  f"{group!r} (--group); {_FIX}")
    _check_one_plan(shards)
    chosen, superseded = _choose(shards)
    first = shards[0]
    night = first.group
    if night is not None and not GROUP.fullmatch(night):
        raise RunDirError(f"{first.path / 'manifest.json'}: group is {night!r}, expected 1 to "
                          "64 letters, digits, '.', '_' or '-' (it names the merged directory; "
                          "the file was edited); fix: sweep again with --group NAME")
    start = min(str(s.manifest.get("created") or "") for s in shards)
    if out is None:
        out = (runs_root or first.path.parent) / _merged_name(start, night)
    if resolved(out) in unique or any(resolved(out) in resolved(p).parents
                                       for p in unique):
        raise RunDirError(f"merged directory {out}: it is one of the shards' run directories; "
                          "expected a directory of its own; fix: pick another --out")
    _claim(out, first.plan["digest"], night)
    from filelock import FileLock, Timeout

    # Two merges of the same night at once (two last shards, a cron and a hand) write one
    # after the other; each write is atomic, and the same shards give the same reports.
    lock = FileLock(str(out / ".lock"))
    try:
        lock.acquire(timeout=0)
    except Timeout:  # said once, then waited for: a silent wait reads as a hang
        print(f"merge: {out} is being written by another merge (lock {out / '.lock'}); "
              "waiting for it to finish", file=sys.stderr, flush=True)
        lock.acquire()
    try:
        index = _merged_index(first.plan, chosen, superseded, out, night, start)
        index = publish(index, out, previous=previous, history=history,
                        runs_root=runs_root if runs_root is not None else out.parent,
                        leave_out={s.run_id for s in shards})
    finally:
        lock.release()
    return MergeResult(index, out, shards)


def _merged_name(start: str, group: str | None) -> str:
    """``<the night's start, UTC>-merged[-<group>]``: it sorts with the shards' names, and
    the same shards always name the same directory (merging again is idempotent)."""
    try:
        stamp = _dt.datetime.fromisoformat(start).astimezone(_dt.timezone.utc) \
            .strftime("%Y%m%dT%H%M%SZ")
    except ValueError:
        stamp = "unknown-start"
    return f"{stamp}-merged" + (f"-{group}" if group else "")


def _claim(out: Path, digest: str, group: str | None) -> None:
    """``out`` for this merge: new, empty, or an earlier merge of the same plan and group;
    never a sweep's run directory nor another night's merge."""
    if (out / "manifest.json").exists():
        raise RunDirError(f"merged directory {out}: it holds a sweep's manifest.json; a merge "
                          "writes into a directory of its own; fix: pick another --out")
    if (out / "index.json").exists():
        try:
            earlier = RunIndex.load(out)
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise RunDirError(f"merged directory {out}: its index.json cannot be read ({exc}); "
                              "fix: pick another --out") from None
        if not earlier.merged:
            raise RunDirError(f"merged directory {out}: its index.json is a sweep's, not a "
                              "merge's; fix: pick another --out")
        if (earlier.plan_digest, earlier.group) != (digest, group):
            raise RunDirError(f"merged directory {out}: it holds the merge of plan "
                              f"{earlier.plan_digest} group {earlier.group!r}, this is plan "
                              f"{digest} group {group!r}; "
                              "expected the same night to merge again; fix: pick another --out")
    elif out.is_dir() and any(not p.name.startswith(".") for p in out.iterdir()):
        # Hidden names are a merge's own (.lock, an atomic write's temp file in flight).
        raise RunDirError(f"merged directory {out}: not empty and no merge's index.json there; "
                          "expected a new or empty directory, or an earlier merge of the same "
                          "night; fix: pick another --out")
    out.mkdir(parents=True, exist_ok=True)


def _merged_index(plan: Mapping[str, Any], chosen: Mapping[int, ShardRun],
                  superseded: Sequence[ShardRun], out: Path, group: str | None,
                  start: str) -> RunIndex:
    count = int(plan["count"])
    owed: dict[int, list[str]] = {}
    rows: list[IndexRow] = []
    for position, (entry_id, lane, size) in enumerate(plan["rows"]):
        owner = position % count + 1
        key = row_key(entry_id, lane, size)
        owed.setdefault(owner, []).append(key)
        label = f"shard {owner}/{count}"
        s = chosen.get(owner)
        if s is None:
            where = f" (group {group})" if group else ""
            rows.append(IndexRow(entry_id, lane, size, Verdict.ERROR, f"{label} missing: no run "
                                 f"directory of this sweep{where} delivered it",
                                 origin={"shard": f"{owner}/{count}", "state": MISSING}))
            continue
        got = {r.key: r for r in s.index.rows} if s.index is not None else {}
        row = got.get(key)
        if row is None:
            rows.append(IndexRow(entry_id, lane, size, Verdict.ERROR,
                                 f"{label} errored: {s.why or 'its index has no such row'}",
                                 origin=_origin(s, out)))
            continue
        if s.state == ERRORED and row.reason == UNFINISHED:
            row = dataclasses.replace(row, reason=f"{label} errored ({s.why}): {row.reason}")
        rows.append(_rebased(row, s, out))
    for s in chosen.values():  # a row its shard does not owe is an edited index: refused
        stray = sorted({r.key for r in (s.index.rows if s.index else ())}
                       - set(owed.get(s.shard.number, [])))
        if stray:
            raise RunDirError(f"{s.path / 'index.json'}: rows {stray} are not shard "
                              f"{s.shard}'s in its plan; expected only the rows its manifest's "
                              "plan gives it (the file was edited); fix: sweep that shard again")
    shards = []
    for owner in range(1, count + 1):
        s = chosen.get(owner)
        if s is None:
            shards.append({"shard": f"{owner}/{count}", "state": MISSING,
                           "why": "no run directory of this sweep"
                                  + (f" in group {group}" if group else "") + " was given or "
                                  "found", "rows": len(owed.get(owner, []))})
        else:
            shards.append(_shard_record(s, out, len(owed.get(owner, []))))
    shards += [{**_shard_record(s, out, 0), "state": SUPERSEDED,
                "why": f"another run directory of shard {s.shard} was taken "
                       f"({chosen[s.shard.number].run_id})"} for s in superseded]
    indexes = [s.index for s in chosen.values() if s.index is not None]
    first = next(iter(chosen.values()), None)
    m = first.manifest if first is not None else {}
    entries: dict[str, Mapping[str, Any]] = {}
    for index in indexes:
        for entry_id, info in index.entries.items():
            entries.setdefault(entry_id, info)
    updated = max((str(s.manifest.get("updated") or "") for s in chosen.values()),
                  default=start)
    lanes = m.get("lanes")
    index = RunIndex(
        run_id=out.name, run_dir=str(out.absolute()), created=start, updated=updated,
        shard=None, lanes=tuple(lanes) if isinstance(lanes, list) else None,
        registry_digest=m.get("registry_digest"), patch_set=m.get("patch_set"),
        git=_one_git([i.git for i in indexes]), counts=RunIndex.count_rows(rows),
        provenance=_provenance([i.provenance for i in indexes],
                               sum(len(r.receipts) for i in indexes for r in i.rows)),
        entries=entries,
        rows=tuple(rows), group=group, shards=tuple(shards),
        plan_digest=str(plan["digest"]))
    return index.replace(comparison_class=run_class(index))


def _rel(path: Path, out: Path) -> str:
    return Path(os.path.relpath(resolved(path), resolved(out))).as_posix()


def _origin(s: ShardRun, out: Path) -> dict[str, Any]:
    return {"shard": str(s.shard), "state": s.state, "run_id": s.run_id,
            "run_dir": _rel(s.path, out), "host": s.host}


def _shard_record(s: ShardRun, out: Path, owed: int) -> dict[str, Any]:
    report = s.path / "report.html"
    return {"shard": str(s.shard), "state": s.state, "why": s.why, "run_id": s.run_id,
            "run_dir": _rel(s.path, out), "host": s.host,
            "created": s.manifest.get("created"), "updated": s.manifest.get("updated"),
            "rows": owed,
            "report": _rel(report, out) if report.is_file() else None}


def _rebased(row: IndexRow, s: ShardRun, out: Path) -> IndexRow:
    """``row`` with every path (receipts, rank logs, the failing rank's log) relative to the
    merged directory instead of the shard's, and its origin."""
    def move(rel: Any) -> Any:
        return _rel(s.path / str(rel), out) if isinstance(rel, str) and rel else rel

    links = dict(row.links)
    if isinstance(links.get("receipts"), dict):
        links["receipts"] = {m: move(p) for m, p in links["receipts"].items()}
    if isinstance(links.get("logs"), dict):
        links["logs"] = {m: [{**r, "path": move(r.get("path"))} if isinstance(r, dict) else r
                             for r in ranks] if isinstance(ranks, list) else ranks
                         for m, ranks in links["logs"].items()}
    if isinstance(links.get("failing"), dict):
        links["failing"] = {**links["failing"], "log": move(links["failing"].get("log"))}
    return dataclasses.replace(row, receipts={m: move(p) for m, p in row.receipts.items()},
                               links=links, origin=_origin(s, out))


def _one_git(values: Sequence[Mapping[str, Any] | None]) -> Mapping[str, Any] | None:
    seen = [v for v in values if v]
    if not seen or all(v == seen[0] for v in seen):
        return seen[0] if seen else None
    commits = sorted({str(v.get("commit")) for v in seen})
    return {"commit": ", ".join(commits), "dirty": any(bool(v.get("dirty")) for v in seen)}


def _provenance(values: Sequence[Mapping[str, Any]], receipts: int) -> dict[str, Any]:
    """The shards' provenance as one: each list the union of theirs, each distribution's
    versions the union, a value all shards agree on as it is, else the distinct values."""
    out: dict[str, Any] = {}
    keys = sorted({k for v in values for k in v})
    for key in keys:
        got = [v[key] for v in values if v.get(key) not in (None, "", [], {})]
        if not got:
            out[key] = values[0].get(key) if values else None
        elif key == "git":
            out[key] = _one_git(got)
        elif key == "distributions":
            merged: dict[str, set[str]] = {}
            for d in got:
                for name, versions in d.items():
                    merged.setdefault(str(name), set()).update(
                        str(x) for x in (versions if isinstance(versions, list) else [versions]))
            out[key] = {name: sorted(v) for name, v in sorted(merged.items())}
        elif all(isinstance(v, list) for v in got):
            out[key] = sorted({str(x) for v in got for x in v})
        elif all(v == got[0] for v in got):
            out[key] = got[0]
        else:
            out[key] = sorted({str(v) for v in got})
    if values:
        out["source"] = (f"the ranks themselves ({receipts} receipt(s) from {len(values)} "
                         "shard(s))" if receipts else
                         f"the sweep processes of {len(values)} shard(s) (no case ran)")
    return out
