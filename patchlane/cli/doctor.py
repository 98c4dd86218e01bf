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
from typing import Any

import patchlane

from ..audit import Outcome
from ..evidence.record import verify_distribution
from ..exit_codes import ExitCode
from ..gates import resolve_version
from ..ledger import evaluate
from ..registry import Kind
from ..releases.release_match import nearest_release
from ..reporting import EntryReport
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
    problems: list[str] = []
    warnings: list[str] = []

    distributions = sorted({e.target.distribution for e in entries if e.target.distribution})
    records = []
    for dist in distributions:
        result = verify_distribution(dist)
        records.append(result)
        if result.error == "not installed":
            continue
        if result.error:
            warnings.append(f"{dist}: {result.error}")
        for name in result.modified:
            problems.append(f"{dist} {result.version}: {name} differs from its RECORD hash "
                            "(edited after install)")
        for name in result.missing:
            problems.append(f"{dist} {result.version}: {name} listed in RECORD is missing")
        for line in result.unreadable:
            problems.append(f"{dist} {result.version}: {line}")

    ledger = [r for r in (evaluate(e, current.controls) for e in entries) if r is not None]
    for violation in ledger:
        if not violation.ok:
            (problems if violation.blocking else warnings).append(violation.message)

    for entry in entries:
        if entry.kind is Kind.SOURCE_PATCH and entry.target.module and resolve_version(
                entry.target.distribution, None, entry.target.version_from)[0] is not None:
            try:
                importlib.import_module(entry.target.module)
            except patchlane.PatchlaneError as exc:  # strict mode refusing: report, go on
                problems.append(str(exc))
            except ImportError as exc:  # installed release without that module: not a fault
                warnings.append(f"{entry.id}: {entry.target.module} not importable on the "
                                f"installed release ({exc})")
    matches = []
    for dist in distributions:
        match = nearest_release(entries, dist)
        if match.nearest is None:
            continue
        matches.append(match)
        for entry_id in match.differ:
            # refused as drift already when it is a gated target; here it is named against the
            # release the rest of the tree matches, which is what a maintainer reviews
            warnings.append(f"{dist} ({match.source}, declares {match.declared}): {entry_id}'s "
                            f"target differs from upstream {match.nearest}")
    report = patchlane.report()
    for item in report["entries"]:
        decision = item["decision"]
        if decision is None:
            continue
        outcome = decision["outcome"]
        if outcome in _BAD and item["kind"] == "source_patch":
            problems.append(f"{item['id']}: {outcome}: {decision['reason']}")
        elif outcome == "skipped: gate":
            warnings.append(f"{item['id']}: {outcome}: {decision['reason']}")

    from .activate import lane_lines, lane_state

    lane = lane_state()
    for activation in lane["activations"]:  # type: ignore[attr-defined]
        if not activation["current"]:
            warnings.append(f"{activation['path']} was written by another patchlane version; "
                            "fix: `patchlane activate --pth` rewrites it")
    failed = bool(problems) or (strict and bool(warnings))
    if as_json:
        print(json.dumps({"ok": not failed, "problems": problems, "warnings": warnings,
                          "records": [r.as_dict() for r in records],
                          "ledger": [r.as_dict() for r in ledger],
                          "releases": [m.as_dict() for m in matches],
                          "decisions": report["entries"], "lane": lane}, indent=2,
                         default=str), file=out)
        return EXIT_PROBLEMS if failed else 0
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
                [[i["id"], i["kind"], *_outcome_and_reason(i)] for i in report["entries"]],
                width=90))
    print()
    for line in lane_lines(lane):
        print(line)
    for label, lines in (("PROBLEM", problems), ("warning", warnings)):
        for line in lines:
            print(f"{label}: {line}")
    print("\ndoctor: " + ("FAILED" if failed else "ok")
          + f" ({len(problems)} problem(s), {len(warnings)} warning(s))")
    return EXIT_PROBLEMS if failed else 0
