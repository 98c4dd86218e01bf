"""``patchlane doctor``: is this environment what the registry and the wheels say it is?

1. every target distribution's installed files against its wheel RECORD hashes (a locally edited
   site-packages file is reported file by file);
2. the ledger: version floors and packaging pins, checked eagerly (a run checks each only once
   its module is imported), skipping those PATCHLANE_DISABLE/ONLY or ``when.env`` rule out;
3. the patch decisions, with installed targets imported so every hook decides;
4. for each patched distribution, the upstream release its imported code matches best
   (``fingerprint.releases``) and the targets that differ from it: for a source checkout with
   no metadata this names the base it was cut from and its local patch surface.

Exit 0 when clean, 16 when anything is wrong (``--strict``: warnings count too).
"""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass, field
from typing import Any

import patchlane

from ..common.exit_codes import ExitCode
from ..deciding.audit import Outcome
from ..deciding.ledger import evaluate
from ..deciding.reporting import EntryReport
from ..installed.gates import resolve_version
from ..registry import KINDS, DecidedBy, Entry, Kind, LedgerResult
from ..releases.release_match import ReleaseMatch, nearest_release
from ..sweep.record import RecordCheck, verify_distribution
from .common import decider, table

EXIT_PROBLEMS = ExitCode.DOCTOR_PROBLEMS
_BAD = tuple(o.value for o in Outcome if o.is_problem)  # one list: strict mode raises these


def _outcome_and_reason(item: EntryReport) -> tuple[str, str]:
    decision = item["decision"]
    return ("-", "") if decision is None else (decision["outcome"], decision["reason"])


def run_doctor(as_json: bool, strict: bool) -> int:
    if not as_json:
        return _run_doctor(as_json, strict)
    # The targets are imported on the way, and some configure logging onto stdout
    # (megatron.training does): with --json only the JSON may reach stdout.
    import contextlib
    import sys

    real = sys.stdout
    with contextlib.redirect_stdout(sys.stderr):
        return _run_doctor(as_json, strict, out=real)


def _run_doctor(as_json: bool, strict: bool, out: Any = None) -> int:
    current = decider()
    entries = [e for e in current.registry.entries if e.active]
    found = _Found()
    distributions = sorted({e.target.distribution for e in entries if e.target.distribution})
    records = _check_records(distributions, found)
    ledger = [r for r in (evaluate(e, current.left_out(e.id)) for e in entries) if r is not None]
    for violation in ledger:
        if not violation.ok:
            (found.problems if violation.blocking else found.warnings).append(violation.message)
    refusing = _refused_imports(entries, ledger)
    matches: list[ReleaseMatch] = []
    if refusing:
        # Importing the targets would run into the refusal (a floor on torch fails `import
        # torch`), and a package whose import failed part-way cannot be imported again (torch's
        # C extension is half-registered: the next import raises, the exit may crash). The
        # refusal is the problem to fix first; the targets wait for the next doctor.
        found.warnings.append(f"targets not imported: {refusing} refuses its import here, "
                              "and the targets may need it; fix that, then run doctor again")
    else:
        _check_imports(entries, found)
        matches = _check_releases(entries, distributions, found)
    report = patchlane.report()
    _check_decisions(report["entries"], found)
    from .activate import startup_state

    startup = startup_state()
    for activation in startup["activations"]:  # type: ignore[attr-defined]
        if not activation["current"]:
            found.warnings.append(f"{activation['path']} was written by another patchlane "
                                  "version; fix: `patchlane activate --pth` rewrites it")
    failed = bool(found.problems) or (strict and bool(found.warnings))
    if as_json:
        print(json.dumps({"ok": not failed, "problems": found.problems,
                          "warnings": found.warnings,
                          "records": [r.as_dict() for r in records],
                          "ledger": [r.as_dict() for r in ledger],
                          "releases": [m.as_dict() for m in matches],
                          "decisions": report["entries"], "startup": startup},
                         indent=2, default=str), file=out)
    else:
        _print_text(records, matches, report["entries"], startup, found, failed)
    return EXIT_PROBLEMS if failed else 0


@dataclass
class _Found:
    """What doctor found: problems fail it, warnings fail it with ``--strict``."""

    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _check_records(distributions: list[str], found: _Found) -> list[RecordCheck]:
    """Each target distribution's files against its wheel RECORD."""
    records = []
    for dist in distributions:
        result = verify_distribution(dist)
        records.append(result)
        if result.error == "not installed":
            continue
        if result.error:
            found.warnings.append(f"{dist}: {result.error}")
        for name in result.modified:
            found.problems.append(f"{dist} {result.version}: {name} differs from its RECORD "
                                  "hash (edited after install)")
        for name in result.missing:
            found.problems.append(f"{dist} {result.version}: {name} listed in RECORD is "
                                  "missing")
        for line in result.unreadable:
            found.problems.append(f"{dist} {result.version}: {line}")
    return records


def _refused_imports(entries: list[Entry], ledger: list[LedgerResult]) -> str | None:
    """The first ledger entry whose violation makes its module's import fail (``policy:
    error`` on an entry that names its import): ``entry (`import module`)``; None when none."""
    by_id = {e.id: e for e in entries}
    for result in ledger:
        entry = by_id.get(result.entry_id)
        if result.blocking and entry is not None and entry.names_its_import and entry.when:
            return f"{entry.id} (`import {entry.when.imported}`)"
    return None


def _check_imports(entries: list[Entry], found: _Found) -> None:
    """Every installed source patch's target imported, so its decision is taken now."""
    for entry in entries:
        if KINDS[entry.kind].decided_by is DecidedBy.WRAP and entry.target.module and \
                resolve_version(entry.target.distribution, None,
                                entry.target.version_from)[0] is not None:
            try:
                importlib.import_module(entry.target.module)
            except patchlane.PatchlaneError as exc:  # strict mode refusing: report, go on
                found.problems.append(str(exc))
            except ImportError as exc:  # installed release without that module: not a fault
                found.warnings.append(f"{entry.id}: {entry.target.module} not importable on "
                                      f"the installed release ({exc})")


def _check_releases(entries: list[Entry], distributions: list[str],
                    found: _Found) -> list[ReleaseMatch]:
    """The upstream release each installed tree is nearest to, and the targets that differ."""
    matches = []
    for dist in distributions:
        match = nearest_release(entries, dist)
        if match.nearest is None:
            continue
        matches.append(match)
        for entry_id in match.differ:
            # refused as drift already when it is a gated target; here it is named against the
            # release the rest of the tree matches, which is what a maintainer reviews
            found.warnings.append(f"{dist} ({match.source}, declares {match.declared}): "
                                  f"{entry_id}'s target differs from upstream {match.nearest}")
    return matches


def _check_decisions(items: list[EntryReport], found: _Found) -> None:
    for item in items:
        decision = item["decision"]
        if decision is None:
            continue
        outcome = decision["outcome"]
        if outcome in _BAD and KINDS[Kind(item["kind"])].with_overlay:
            found.problems.append(f"{item['id']}: {outcome}: {decision['reason']}")
        elif outcome == "skipped: gate":
            found.warnings.append(f"{item['id']}: {outcome}: {decision['reason']}")


def _print_text(records: list[RecordCheck], matches: list[ReleaseMatch],
                items: list[EntryReport], startup: dict[str, object], found: _Found,
                failed: bool) -> None:
    from .activate import startup_lines

    print(table(["DISTRIBUTION", "VERSION", "FILES CHECKED", "RECORD"],
                [[r.distribution, r.version or "-", str(r.checked),
                  "ok" if r.ok else (r.error or f"{len(r.modified)} modified, "
                                                 f"{len(r.missing)} missing"
                                     + (f", {len(r.unreadable)} unreadable"
                                        if r.unreadable else ""))]
                 for r in records]))
    if matches:
        print()
        print(table(["DISTRIBUTION", "DECLARED", "FROM", "NEAREST RELEASE", "MATCH", "DIFFER"],
                    [[m.distribution, m.declared or "-", m.source, m.nearest or "-",
                      f"{len(m.matched)}/{len(m.matched) + len(m.differ) + len(m.unknown)}",
                      ", ".join(m.differ) or "-"] for m in matches], width=70))
    print()
    print(table(["ENTRY", "KIND", "DECISION", "REASON"],
                [[i["id"], i["kind"], *_outcome_and_reason(i)] for i in items], width=90))
    print()
    for line in startup_lines(startup):
        print(line)
    for label, lines in (("PROBLEM", found.problems), ("warning", found.warnings)):
        for line in lines:
            print(f"{label}: {line}")
    print("\ndoctor: " + ("FAILED" if failed else "ok")
          + f" ({len(found.problems)} problem(s), {len(found.warnings)} warning(s))")
