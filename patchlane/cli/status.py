"""``patchlane status``: every entry and the decision taken for it in this process, and with
``--evidence RUNS_ROOT`` whether each applied entry was proven on this stack."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable
from pathlib import Path

from .. import startup
from ..common.errors import UsageError
from ..common.exit_codes import ExitCode
from ..deciding.audit import Outcome
from ..deciding.decider import Decider
from ..deciding.reporting import build_report
from ..installed.gates import resolve_version
from ..registry import KINDS, DecidedBy, Entry
from .common import decider, import_for_output, registry_label, stdout_for_output, table


def run_status(as_json: bool, import_targets: bool, evidence: tuple[Path, ...] = ()) -> int:
    for root in evidence:
        if not root.is_dir():
            raise UsageError(f"status: --evidence {root}: no such directory; fix: give the "
                             "runs root `patchlane sweep --runs-root` wrote (or one run "
                             "directory)")
    current = decider(refused_ok=True)
    if import_targets:
        decide_now(current, current.registry.entries)
    stdout_for_output()
    # Absolute, as PATCHLANE_EVIDENCE is read: the report names the roots it read
    report = build_report(current, startup.startup_error(),
                          tuple(root.absolute() for root in evidence))
    refused = _refused_exit(current)
    if as_json:
        print(json.dumps(report, indent=2))
        return refused
    read = report["evidence"]
    several = len(current.registry.sources) > 1
    rows = []
    for item in report["entries"]:
        decision = item["decision"]
        if decision is None:
            version, outcome, reason = "-", "-", ""
        else:
            tree = (decision["version_source"] or "metadata") not in ("metadata", "none")
            version = (decision["installed"] or "-") + (" (tree)" if tree else "")
            outcome, reason = decision["outcome"], decision["reason"]
            if outcome == Outcome.APPLIED.value and not item["applied"]:
                # checked afresh: code that replaced the attribute since has taken it off the
                # call path, and "applied" would say more than is true
                outcome = "displaced"
                reason = ("applied, but no longer where the calls go: something replaced the "
                          f"attribute since; {reason}")
        row = [item["id"], item["kind"], item["target"], version, outcome, str(item["hits"])]
        if several:  # whose entry it is: the catalog's or a team's file
            row.insert(1, registry_label(item["registry"]))
        if read is not None:
            row.append(item["evidence"]["answer"] if item["evidence"] else "-")
        rows.append([*row, reason])
    headers = ["ID", *(["REGISTRY"] if several else []), "KIND", "TARGET", "INSTALLED",
               "DECISION", "HITS"]
    print(table([*headers, *(["EVIDENCE"] if read is not None else []), "REASON"], rows))
    print()
    from .._version import __version__

    print(current.brief(f"patchlane {__version__}"))  # every id and reason: --json's summary
    for rejected in report["rejected_registries"]:  # its entries are not in the table: why
        print(f"registry refused, its entries not applied (exit 3): {rejected['error']}")
    from .activate import startup_lines, startup_state

    for line in startup_lines(startup_state()):
        print(line)
    if read is not None:
        print()
        print(f"evidence: {read['runs_read']} run(s) read under {', '.join(read['roots'])}"
              + (f" ({read['not_read']} older not read)" if read["not_read"] else ""))
        for item in report["entries"]:
            if item["evidence"] is not None:
                print(f"  {item['id']}: {item['evidence']['text']}")
        for why in read["unreadable"]:
            print(f"  left out: {why}")
    return refused


def _refused_exit(current: Decider) -> int:
    """The exit code: a registry file was refused (3), while the rest loaded and is shown. The
    startup said which and why, on stderr (ERROR), and the report lists it."""
    return int(ExitCode.REGISTRY_REJECTED) if current.registry.rejected else 0


def decide_now(current: Decider, entries: Iterable[Entry]) -> None:
    """Decide ``entries`` in this process as a job would: each installed source patch's target
    imported (its post-import hook decides and records), each floor or pin whose module nothing
    imported checked eagerly (and marked so) rather than importing e.g. triton just to show it.
    ``status`` and ``show`` both report after this, so they say the same."""

    entries = list(entries)
    for entry in entries:
        installed = resolve_version(entry.target.distribution, None,
                                    entry.target.version_from)[0] is not None
        if (entry.active and KINDS[entry.kind].decided_by is DecidedBy.WRAP and entry.target.module
                and installed):
            # a release without that module: the entry stays pending, and says so. What the
            # import prints, or a logging handler it puts on stdout, goes to stderr: the
            # command's stdout is its output (`status --json` parses).
            with contextlib.suppress(ImportError):
                import_for_output(entry.target.module)
    for entry in entries:
        now = current.audit.get(entry.id)
        if entry.active and entry.when is not None and now is not None \
                and now.outcome is Outcome.PENDING:
            current.decide_ledger(entry, eager=True)
