"""retire.py without the CLI: weighing tracking and sweep evidence with the enums (the sweep's
Verdict, the decision's Outcome, the tracking UpstreamState), and the atomic registry rewrite.
The CLI round trip (retire, delete, the exact bytes) is in test_retire_doctor.py."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from patchlane.common.errors import RegistryError
from patchlane.common.exit_codes import ExitCode
from patchlane.deciding.audit import Outcome
from patchlane.registry import Entry, Status, load_registries
from patchlane.runs.verdicts import Verdict
from patchlane.upstream import TrackReport, UpstreamState
from patchlane.upstream.retire import (
    RetireError,
    RetirementReview,
    SweepRow,
    delete_entry,
    evaluate,
    read_sweep_rows,
    retire_entry,
)

from .fake_upstream import REPO
from .sweep_runs import edit_json, sweep_run

ENTRY = "mcore_rerun_sentinel"


@pytest.fixture
def sourced(entry: Entry) -> Entry:
    """The conftest entry with a reproducer, so the sweep evidence counts."""
    return dataclasses.replace(entry, reproducer=REPO / "reproducers" / f"{ENTRY}.py")


def report(state: UpstreamState = UpstreamState.RELEASED, *, released_in: str | None = "0.18.0",
           names: bool = True) -> TrackReport:
    return TrackReport(entry_id=ENTRY, issue=None, pr=None, released_in=released_in,
                       latest_release="0.19.2", state=state, reason="why",
                       gate_names_release=names)


def run_dir(root: Path, *rows: tuple[str, str, str | None], name: str = "run-1") -> Path:
    """A run directory as `patchlane sweep` writes it: (verdict, installed, probe outcome)."""
    return sweep_run(root, ENTRY, *rows, name=name)


def test_sweep_rows_are_read_as_enums(sourced: Entry, tmp_path: Path) -> None:
    run = run_dir(tmp_path, ("upstream-fixed", "0.18.0", "upstream-fixed"),
                  ("guarding", "0.16.1", None))
    rows = read_sweep_rows(sourced, run)
    created = json.loads((run / "index.json").read_text())["created"]
    assert created and rows == [
        SweepRow("run-1", "cpu", 1, Verdict.UPSTREAM_FIXED, "0.18.0", Outcome.UPSTREAM_FIXED,
                 created=created),
        SweepRow("run-1", "cpu", 2, Verdict.GUARDING, "0.16.1", None, created=created),
    ]
    # JSON (`patchlane upstream --json`) carries the values, as before the enums.
    assert json.loads(json.dumps(rows[0].as_dict())) == {
        "run": "run-1", "lane": "cpu", "world_size": 1, "verdict": "upstream-fixed",
        "installed": "0.18.0", "probe": "upstream-fixed", "stale": [], "created": created}


def test_a_run_of_another_version_of_the_reproducer_does_not_retire(sourced: Entry,
                                                                    tmp_path: Path) -> None:
    run = run_dir(tmp_path, ("upstream-fixed", "0.18.0", "upstream-fixed"))
    stale = dataclasses.replace(sourced, reproducer=tmp_path / "rewritten.py")
    (tmp_path / "rewritten.py").write_text("def run(ctx):\n    assert True\n")
    evidence = evaluate(stale, report(), [run])
    assert not evidence.ready
    assert any(m.startswith("sweep: the runs showing upstream-fixed are stale: the entry "
                            "changed since them (run-1 (reproducer))") for m in evidence.missing)


def test_a_newer_run_of_the_same_release_revokes_an_older_upstream_fixed(
        sourced: Entry, tmp_path: Path) -> None:
    """The newest run of today's reproducer on a release decides, as for "proven here": the
    bug back on 0.18.0 in a later run (the same lane and world size) leaves the older pass
    nothing to retire on, whatever order the runs are given in. A newer pass wins back."""
    older = run_dir(tmp_path, ("upstream-fixed", "0.18.0", "upstream-fixed"), name="run-1")
    newer = run_dir(tmp_path, ("guarding", "0.18.0", None), name="run-2")
    edit_json(older / "index.json", lambda d: d.update(created="2026-11-20T00:00:00+00:00"))
    edit_json(newer / "index.json", lambda d: d.update(created="2026-11-21T00:00:00+00:00"))
    for given in ([older, newer], [newer, older]):
        evidence = evaluate(sourced, report(), given)
        assert not evidence.ready
        assert ("sweep: a newer run of the same release no longer shows upstream-fixed "
                "(upstream-fixed on 0.18.0 [cpu ws=1] in run run-1, revoked by guarding on "
                "0.18.0 [cpu ws=1] in run run-2); the newest run of each release decides"
                ) in evidence.missing, evidence.missing
    newest = run_dir(tmp_path, ("upstream-fixed", "0.18.0", "upstream-fixed"), name="run-3")
    edit_json(newest / "index.json", lambda d: d.update(created="2026-11-22T00:00:00+00:00"))
    assert evaluate(sourced, report(), [older, newer, newest]).ready
    # a newer run that judged nothing there (skipped) revokes nothing
    skipped = run_dir(tmp_path, ("skipped", "0.18.0", None), name="run-5")
    edit_json(skipped / "index.json", lambda d: d.update(created="2026-11-24T00:00:00+00:00"))
    assert evaluate(sourced, report(), [older, skipped]).ready
    # another world size or release is its own class: run-2's row does not revoke it
    other = run_dir(tmp_path, ("guarding", "0.18.1", None), name="run-4")
    edit_json(other / "index.json", lambda d: d.update(created="2026-11-23T00:00:00+00:00"))
    assert evaluate(sourced, report(), [older, other]).ready


def test_a_probe_rewritten_since_the_run_does_not_retire(sourced: Entry, tmp_path: Path) -> None:
    """retire_when.probe: the run's probe said upstream-fixed, then the overlay (which holds
    the probe) changed: today's probe never said so."""
    overlay = tmp_path / "patches" / f"{ENTRY}.py"  # the overlay the run's receipts record
    overlay.parent.mkdir()
    shutil.copy(REPO / "patches" / f"{ENTRY}.py", overlay)
    with_overlay = dataclasses.replace(sourced, overlay=overlay)
    run = run_dir(tmp_path, ("upstream-fixed", "0.18.0", "upstream-fixed"))
    assert evaluate(with_overlay, report(), [run]).ready
    overlay.write_text(overlay.read_text().replace("def probe(", "def _old_probe(") +
                       "\n\ndef probe(module):\n    return False\n")
    evidence = evaluate(with_overlay, report(), [run])
    assert evidence.missing == [
        "probe: the runs where the probe reported upstream-fixed asked another overlay file "
        "(run-1: the overlay, whose probe it is, changed since); sweep again to ask today's "
        "probe"], evidence.missing


def test_ready_with_released_upstream_fixed_sweep_and_probe(sourced: Entry,
                                                            tmp_path: Path) -> None:
    run = run_dir(tmp_path, ("upstream-fixed", "0.18.0", "upstream-fixed"))
    evidence = evaluate(sourced, report(), [run])
    assert evidence.ready and evidence.missing == []
    assert evidence.released_in == "0.18.0"
    as_dict = json.loads(json.dumps(evidence.as_dict()))
    assert as_dict["upstream"]["state"] == "released" and as_dict["ready"] is True
    assert as_dict["sweep"][0]["verdict"] == "upstream-fixed"


@pytest.mark.parametrize(
    ("tracked", "says"),
    [
        (None, "upstream tracking (run without --skip-upstream)"),
        (report(UpstreamState.OPEN, released_in=None), "upstream: open: why"),
        (report(UpstreamState.MERGED_UNRELEASED, released_in=None),
         "upstream: merged-unreleased: why"),
        (report(names=False), "upstream released the fix in 0.18.0, which retire_when.release "
                              ">=0.18.0 does not name"),
    ],
    ids=["untracked", "open", "merged-unreleased", "gate-misses-release"],
)
def test_upstream_evidence_by_state(sourced: Entry, tmp_path: Path,
                                    tracked: TrackReport | None, says: str) -> None:
    run = run_dir(tmp_path, ("upstream-fixed", "0.18.0", "upstream-fixed"))
    evidence = evaluate(sourced, tracked, [run])
    assert evidence.missing == [says]


@pytest.mark.parametrize(
    ("rows", "says"),
    [
        ([], "no run directory given: --evidence RUN_DIR"),
        ([("guarding", "0.16.1", "applied")], "['guarding@0.16.1']"),
        ([("upstream-fixed", "0.17.1", "upstream-fixed")], "['upstream-fixed@0.17.1']"),
        ([("upstream-fixed", "0.18.0", "applied")], "probe: no run where the probe reported"),
        ([("upstream-fixed", "0.18.0", None)], "probe: no run where the probe reported"),
        ([("upstream-fixed", "0.18.0", "upstream-fixed"), ("broken", "0.18.0", "applied")],
         "sweep: 1 case(s) broken or in error"),
        ([("upstream-fixed", "0.18.0", "upstream-fixed"), ("error", "0.19.2", None)],
         "sweep: 1 case(s) broken or in error"),
    ],
    ids=["no-run", "guarding", "fixed-outside-gate", "probe-applied", "no-receipt", "broken",
         "error"],
)
def test_sweep_evidence_by_verdict(sourced: Entry, tmp_path: Path,
                                   rows: list[tuple[str, str, str | None]], says: str) -> None:
    runs = [run_dir(tmp_path, *rows)] if rows else []
    evidence = evaluate(sourced, report(), runs)
    assert not evidence.ready
    assert len(evidence.missing) == 1 and says in evidence.missing[0], evidence.missing


def test_probe_not_required_when_retire_when_says_so(sourced: Entry, tmp_path: Path) -> None:
    no_probe = dataclasses.replace(
        sourced, retire_when=sourced.retire_when._replace(probe=False))
    run = run_dir(tmp_path, ("upstream-fixed", "0.18.0", "applied"))
    assert evaluate(no_probe, report(), [run]).ready


@pytest.mark.parametrize(
    ("index", "says"),
    [
        ({"run_id": "r", "rows": [{"entry_id": ENTRY, "lane": "cpu", "world_size": 1,
                                   "verdict": "passed", "installed": "0.18.0"}]},
         "'passed' is not a verdict; expected one of ['guarding', 'upstream-fixed'"),
        ({"run_id": "r", "rows": [{"entry_id": ENTRY, "verdict": "guarding"}]},
         "not a sweep index (KeyError"),
        ({"runs": []}, "not a sweep index (KeyError: 'rows')"),
        ("not json", "not JSON"),
    ],
    ids=["unknown-verdict", "missing-key", "no-rows", "not-json"],
)
def test_a_broken_sweep_index_is_refused_naming_the_file(
        sourced: Entry, tmp_path: Path, index: Any, says: str) -> None:
    run = run_dir(tmp_path, ("upstream-fixed", "0.18.0", "upstream-fixed"))
    (run / "index.json").write_text(index if isinstance(index, str) else json.dumps(index))
    with pytest.raises(RetireError) as info:
        evaluate(sourced, report(), [run])
    assert str(run / "index.json") in str(info.value) and says in str(info.value)
    assert info.value.exit_code is ExitCode.RETIREMENT_REFUSED


def test_an_unknown_probe_outcome_is_refused_naming_the_receipt(sourced: Entry,
                                                                tmp_path: Path) -> None:
    run = run_dir(tmp_path, ("upstream-fixed", "0.18.0", "fixed upstream"))
    with pytest.raises(RetireError, match=r"--with\.json: decision outcome 'fixed upstream' is "
                                          r"not one of \['pending', 'applied'"):
        evaluate(sourced, report(), [run])


# -- the index checked against its receipts ------------------------------------------------------

RECEIPTS = f"receipts/{ENTRY}--cpu--ws1"


def _row(data: dict[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = next(r for r in data["rows"] if r["entry_id"] == ENTRY)
    return row


def _verdict(verdict: str) -> Any:
    return lambda data: _row(data).update(verdict=verdict)


def _drop(mode: str) -> Any:
    return lambda data: _row(data)["receipts"].pop(mode)


def _point(mode: str, where: str) -> Any:
    return lambda data: _row(data)["receipts"].update({mode: where})


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        # one field of index.json: the finding this check exists for
        (("index.json", _verdict("upstream-fixed")),
         "index.json: row mcore_rerun_sentinel[cpu-ws1] says upstream-fixed, but its receipts "
         "({run}/" + RECEIPTS + "--without.json, {run}/" + RECEIPTS + "--with.json) say "
         "guarding by the both-ways rule; expected the index to agree with the receipts"),
        (("index.json", lambda d: _row(d).update(verdict="upstream-fixed", installed="0.18.0")),
         "says upstream-fixed, but its receipts"),
        (("index.json", lambda d: _row(d).update(installed="0.18.0")),
         "index.json: row mcore_rerun_sentinel[cpu-ws1] says it ran on '0.18.0', but its "
         "receipt without the overlay"),
        (("index.json", _drop("with")),
         "names None as its receipt with the overlay; {run}/manifest.json recorded "
         "'" + RECEIPTS + "--with.json'"),
        (("index.json", _point("without", "../elsewhere/receipts/x--without.json")),
         "names '../elsewhere/receipts/x--without.json' as its receipt without the overlay"),
        # the receipt itself, edited or gone
        ((RECEIPTS + "--without.json", lambda d: d.update(outcome="pass")),
         RECEIPTS + "--without.json: changed since the sweep wrote it (SHA-256"),
        ((RECEIPTS + "--without.json", None),
         RECEIPTS + "--without.json: missing; row mcore_rerun_sentinel[cpu-ws1] of "),
        # the manifest's plan
        (("manifest.json", lambda d: d["rows"].clear()),
         "index.json: row mcore_rerun_sentinel[cpu-ws1] is not one the sweep planned"),
        (("manifest.json", None), "manifest.json: missing; a run directory's verdicts are "
                                  "checked against the sweep's manifest"),
    ],
    ids=["verdict", "verdict-and-release", "release", "receipt-dropped", "receipt-elsewhere",
         "receipt-edited", "receipt-missing", "row-not-planned", "no-manifest"],
)
def test_an_index_its_receipts_do_not_bear_out_is_refused(
        sourced: Entry, tmp_path: Path, edit: tuple[str, Any], says: str) -> None:
    """A guarding run (the reproducer failed without the overlay) never becomes a retirement
    by editing the run directory: retire derives each verdict again from the receipts."""
    run = run_dir(tmp_path, ("guarding", "0.16.1", "applied"))
    target, change = edit
    if change is None:
        (run / target).unlink()
    else:
        edit_json(run / target, change)
    with pytest.raises(RetireError) as info:
        evaluate(sourced, report(), [run])
    assert says.format(run=run) in str(info.value), str(info.value)
    assert "Fix: pass the run directory as `patchlane sweep` left it" in str(info.value)
    assert info.value.exit_code is ExitCode.RETIREMENT_REFUSED


def test_a_receipt_about_another_case_is_refused(sourced: Entry, tmp_path: Path) -> None:
    """A receipt swapped in from another run (its digest recorded along with it) says so."""
    run = run_dir(tmp_path, ("guarding", "0.16.1", "applied"))
    other = run_dir(tmp_path, ("upstream-fixed", "0.16.1", "upstream-fixed"), name="run-2")
    for mode in ("without", "with"):
        name = f"{RECEIPTS}--{mode}.json"
        (run / name).write_bytes((other / name).read_bytes())
    manifest = json.loads((other / "manifest.json").read_text())
    edit_json(run / "manifest.json", lambda d: [
        d["cases"][cid].update(receipt_sha256=manifest["cases"][cid]["receipt_sha256"])
        for cid in d["cases"] if cid.startswith(ENTRY)])
    with pytest.raises(RetireError, match=r"--without\.json: the receipt of case "
                                          r"mcore_rerun_sentinel--cpu--ws1--without says run_id "
                                          r"'run-2', outcome 'pass'; expected run_id 'run-1', "
                                          r"outcome 'fail'"):
        evaluate(sourced, report(), [run])


def test_a_manifest_without_receipt_digests_is_still_checked_by_verdict(
        sourced: Entry, tmp_path: Path) -> None:
    """A run written before the manifest recorded digests: the verdict is still derived from
    the receipts, and a consistent run still counts."""
    run = run_dir(tmp_path, ("upstream-fixed", "0.18.0", "upstream-fixed"))
    edit_json(run / "manifest.json",
              lambda d: [case.pop("receipt_sha256") for case in d["cases"].values()])
    assert evaluate(sourced, report(), [run]).ready
    edit_json(run / "index.json", _verdict("guarding"))
    with pytest.raises(RetireError, match="says guarding, but its receipts"):
        evaluate(sourced, report(), [run])


# -- the registry rewrite ------------------------------------------------------------------------


def test_retire_rewrites_atomically_keeping_the_mode(registry_file: Path) -> None:
    os.chmod(registry_file, 0o640)
    entry = load_registries([registry_file]).get(ENTRY)
    retire_entry(entry, date=dt.date(2026, 11, 22), applied_upstream="megatron-core 0.18.0",
                 evidence=["sweep run-1: upstream-fixed on 0.18.0"])
    assert load_registries([registry_file]).get(ENTRY).status is Status.RETIRED
    assert registry_file.stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in registry_file.parent.iterdir()) == [
        "checks", "drafts", "patches", "registry.yaml",
        "reproducers"]  # no temp file left, and no edit lock file beside it (`git add -A`)


def test_a_crlf_registry_stays_crlf_byte_for_byte(registry_file: Path) -> None:
    crlf = registry_file.read_bytes().replace(b"\n", b"\r\n")
    registry_file.write_bytes(crlf)
    entry = load_registries([registry_file]).get(ENTRY)
    retire_entry(entry, date=dt.date(2026, 11, 22), applied_upstream=None, evidence=["x"])
    after = registry_file.read_bytes()
    assert b"\n" not in after.replace(b"\r\n", b"")  # every line still ends in CRLF
    head = crlf.index(f"  - id: {ENTRY}".encode())
    tail = crlf.index(b"  - id: ", head + 1)
    assert after[:head] == crlf[:head] and after.endswith(crlf[tail:])
    assert b"    status: retired\r\n    retired: 2026-11-22\r\n" in after
    assert load_registries([registry_file]).get(ENTRY).status is Status.RETIRED


@pytest.mark.parametrize("entry_id", ["liger_flce_weighted_none", "dynamo_recompile_limit"],
                         ids=["an-entry-in-the-middle", "the-last-entry"])
def test_a_crlf_registry_without_a_final_line_break_keeps_its_endings(
        registry_file: Path, entry_id: str) -> None:
    """The file's line ending is its first line break's, not its end's: a CRLF file whose last
    line has no line break gets CRLF lines, and still ends without one."""
    crlf = registry_file.read_bytes().replace(b"\n", b"\r\n").rstrip(b"\r\n")
    assert crlf.split(b"\r\n")[-1].strip() == b"status: active"  # the last entry's last line
    registry_file.write_bytes(crlf)
    entry = load_registries([registry_file]).get(entry_id)
    retire_entry(entry, date=dt.date(2026, 11, 22), applied_upstream=None, evidence=["x"])
    after = registry_file.read_bytes()
    assert b"\n" not in after.replace(b"\r\n", b""), "an LF-only line was spliced in"
    assert not after.endswith(b"\n")  # it ended without a line break, and still does
    head = crlf.index(f"  - id: {entry_id}".encode())
    assert after[:head] == crlf[:head]
    assert b"    status: retired\r\n    retired: 2026-11-22" in after
    assert load_registries([registry_file]).get(entry_id).status is Status.RETIRED
    # delete, which shares the helpers: the block goes, every other byte stays
    delete_entry(load_registries([registry_file]).get(entry_id))
    gone = registry_file.read_bytes()
    assert b"\n" not in gone.replace(b"\r\n", b"")
    assert gone[:head - 2] == crlf[:head - 2] and entry_id.encode() not in gone
    assert entry_id not in [e.id for e in load_registries([registry_file]).entries]


def test_retire_refuses_text_the_loader_would_reject_and_leaves_the_file(
        registry_file: Path) -> None:
    entry = load_registries([registry_file]).get(ENTRY)
    before = registry_file.read_bytes()
    (registry_file.parent / "patches" / f"{ENTRY}.py").unlink()  # the loader now rejects it
    with pytest.raises(RegistryError, match="file does not exist"):
        retire_entry(entry, date=dt.date(2026, 11, 22), applied_upstream=None, evidence=["x"])
    assert registry_file.read_bytes() == before
    assert sorted(p.name for p in registry_file.parent.iterdir()) == [
        "checks", "drafts", "patches", "registry.yaml", "reproducers"]


def test_evidence_defaults() -> None:
    evidence = RetirementReview(ENTRY)
    assert evidence.ready and evidence.as_dict() == {
        "entry_id": ENTRY, "ready": True, "missing": [], "released_in": None,
        "upstream": None, "sweep": []}


def test_concurrent_retirements_of_different_entries_both_land(registry_file: Path) -> None:
    """Issue 14 item 7: two processes retiring two entries at once; neither is lost."""
    import subprocess
    import sys

    code = ("import datetime, sys\nfrom pathlib import Path\n"
            "from patchlane.registry import load_registries\n"
            "from patchlane.upstream.retire import retire_entry\n"
            "entry = load_registries([Path(sys.argv[1])]).get(sys.argv[2])\n"
            "import time; time.sleep(float(sys.argv[3]))\n"
            "retire_entry(entry, date=datetime.date(2026, 11, 22), applied_upstream=None,\n"
            "             evidence=['x'])\n")
    ids = ["mcore_rerun_sentinel", "liger_flce_weighted_none"]
    env = {**os.environ, "PATCHLANE_DEFAULT_REGISTRY": "0"}
    for _ in range(3):
        shutil.copy(REPO / "registry.yaml", registry_file)
        # both load the registry first, then edit at the same moment
        procs = [subprocess.Popen([sys.executable, "-c", code, str(registry_file), i, "0.5"],
                                  env=env) for i in ids]
        assert [p.wait(timeout=120) for p in procs] == [0, 0]
        registry = load_registries([registry_file])
        assert [registry.get(i).status for i in ids] == [Status.RETIRED, Status.RETIRED]


def test_an_evidence_mapping_with_a_comment_on_its_key_line_takes_the_retirement(
        registry_file: Path) -> None:
    # `evidence:  # what ran` is a mapping like any other (it was refused as "inline")
    text = registry_file.read_text()
    at = text.index("    evidence:\n", text.index(f"- id: {ENTRY}"))
    registry_file.write_text(text[:at] + "    evidence:  # what ran, by whom\n"
                             + text[at + len("    evidence:\n"):])
    entry = load_registries([registry_file]).get(ENTRY)
    retire_entry(entry, date=dt.date(2026, 11, 22), applied_upstream="megatron-core 0.18.0",
                 evidence=["sweep run-1: upstream-fixed on 0.18.0"])
    retired = load_registries([registry_file]).get(ENTRY)
    assert retired.status is Status.RETIRED
    assert retired.evidence["retirement"] == ["sweep run-1: upstream-fixed on 0.18.0"]
    assert "ran_guarding" in retired.evidence
    assert "    evidence:  # what ran, by whom\n" in registry_file.read_text()


def test_an_evidence_list_is_refused_with_the_fix_and_the_file_left(registry_file: Path) -> None:
    text = registry_file.read_text()
    start = text.index("    evidence:\n", text.index(f"- id: {ENTRY}"))
    stop = text.index("    owner:", start)
    registry_file.write_text(text[:start] + "    evidence:\n      - ran on 0.16.1\n"
                             + text[stop:])
    before = registry_file.read_bytes()
    entry = load_registries([registry_file]).get(ENTRY)
    with pytest.raises(RetireError, match=r"`evidence:` is a list.*fix: make it a mapping"):
        retire_entry(entry, date=dt.date(2026, 11, 22), applied_upstream=None,
                     evidence=["sweep run-1: upstream-fixed on 0.18.0"])
    assert registry_file.read_bytes() == before


@pytest.mark.parametrize("written", ["    evidence: ~\n",
                                     "    evidence: {ran: [a],\n      more: b}\n"],
                         ids=["null", "flow-over-two-lines"])
def test_an_inline_evidence_value_is_refused_in_one_line(registry_file: Path,
                                                         written: str) -> None:
    # Only a key with nothing after it but a comment is a block: a flow mapping continued on
    # the next line raised yaml's ParserError, and `~` was written into as a block
    text = registry_file.read_text()
    start = text.index("    evidence:\n", text.index(f"- id: {ENTRY}"))
    stop = text.index("    owner:", start)
    registry_file.write_text(text[:start] + written + text[stop:])
    before = registry_file.read_bytes()
    entry = load_registries([registry_file]).get(ENTRY)
    with pytest.raises(RetireError, match="inline `evidence:` value; make it a mapping first"):
        retire_entry(entry, date=dt.date(2026, 11, 22), applied_upstream=None,
                     evidence=["sweep run-1: upstream-fixed on 0.18.0"])
    assert registry_file.read_bytes() == before
