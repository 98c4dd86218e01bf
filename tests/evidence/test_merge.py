"""`patchlane merge`: the shards of one sweep into one run directory and one page. The shards
here are run directories written by the sweep's own writers (RunDir, write_reports) with
made-up verdicts: the merge's mechanics (plans, missing and errored shards, idempotence, the
next night's comparison), never evidence about a patch. The real sweep of real reproducers,
merged and opened in Chromium, is tests/releases/test_merge_night.py."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from patchlane.cli import main as cli_main
from patchlane.common.errors import RunDirError
from patchlane.common.exit_codes import ExitCode
from patchlane.runs.found import discover
from patchlane.runs.index import RunIndex
from patchlane.runs.manifest import RunDir, case_id
from patchlane.runs.verdicts import Verdict
from patchlane.sweep.engine import UNFINISHED, VerdictRow
from patchlane.sweep.merge import merge
from patchlane.sweep.reports import write_reports
from patchlane.sweep.reproduce import Mode

from ..conftest import FakeTarget

G, B = Verdict.GUARDING, Verdict.BROKEN
ENTRIES = ("e_a", "e_b", "e_c", "e_d")
NIGHT1 = "2026-01-01T02:00:00+00:00"
NIGHT2 = "2026-01-02T02:00:00+00:00"


def plan(count: int, digest: str = "sha256:plan-a") -> dict[str, Any]:
    return {"schema": 1, "digest": digest, "count": count,
            "rows": [[e, "cpu", 1] for e in ENTRIES]}


def key() -> dict[str, Any]:
    return {"lane": "cpu", "host_class": "cpu-2c-24g", "torch": "2.13.0",
            "distributions": {"megatron-core": "0.16.1", "torch": "2.13.0"}}


def shard(root: Path, i: int, n: int, *, created: str = NIGHT1, group: str | None = "night1",
          verdicts: dict[str, Verdict] | None = None, name: str | None = None,
          reports: bool = True, **header: Any) -> Path:
    """Shard ``i/n`` of the plan :func:`plan` as a sweep leaves it: a manifest recording the
    plan and group, one receipt and rank log per row it owns, and its reports."""
    name = name or f"{created[:10]}-host{i}-shard{i}of{n}"
    fields = {"run_id": name, "host": f"host{i}", "shard": f"{i}/{n}", "lanes": ["cpu"],
              "registry_digest": "sha256:reg", "patch_set": "sha256:patches", "plan": plan(n),
              **({"group": group} if group else {}), **header}
    run = RunDir.create(root / name, fields)
    run.manifest["created"] = created
    run.save()
    rows = []
    for position, entry in enumerate(ENTRIES):
        if position % n != i - 1:
            continue
        cid = case_id(entry, "cpu", 1, Mode.WITHOUT)
        log = run.case_dir(cid) / "attempt1" / "rank0.log"
        log.parent.mkdir(parents=True)
        log.write_text(f"{entry} rank 0 on host{i}\n")
        receipt = {"case_id": cid, "outcome": "fail", "comparison_key": key(),
                   "ranks": [{"rank": 0, "outcome": "fail", "log": str(log)}],
                   "provenance": {"runtime": {"host_class": "cpu-2c-24g",
                                              "python": "3.11.7",
                                              "distributions": {"megatron-core": "0.16.1"}}}}
        run.write_receipt(cid, receipt)
        verdict = (verdicts or {}).get(entry, G)
        rows.append(VerdictRow(entry, "cpu", 1, verdict, f"{entry} is {verdict.value}",
                               "0.16.1", receipts={"without": f"receipts/{cid}.json"},
                               comparison_key=key(), read={"without": receipt}))
    if reports:
        write_reports(run, rows)
    return run.path


def files(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under ``root`` with its bytes and modification time."""
    return {str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file()}


def cli(*args: object) -> int:
    return cli_main.main(["merge", *(str(a) for a in args)])


def test_two_shards_make_one_index_page_summary_and_junit(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    one, two = shard(root, 1, 2), shard(root, 2, 2, verdicts={"e_d": B})
    result = merge([two, one])
    out, index = result.out, result.index
    assert out == root / "20260101T020000Z-merged-night1"
    # Every planned row, in plan order, each from the shard that owns it.
    assert [(r.entry_id, r.origin["shard"], r.origin["host"]) for r in index.rows] == [
        ("e_a", "1/2", "host1"), ("e_b", "2/2", "host2"), ("e_c", "1/2", "host1"),
        ("e_d", "2/2", "host2")]
    assert [r.verdict for r in index.rows] == [G, G, G, B]
    assert index.rows[1].origin["run_dir"] == f"../{two.name}"
    # Evidence links point into the shards' directories, from the merged one.
    for row in index.rows:
        (mode, receipt), = row.receipt_links()
        assert (out / receipt).is_file() and (out / row.receipts[mode]).is_file()
        assert all((out / rank["path"]).is_file() for _, rank in row.log_links())
    assert [(s["shard"], s["state"], s["run_id"]) for s in index.shards or ()] == [
        ("1/2", "delivered", one.name), ("2/2", "delivered", two.name)]
    assert index.group == "night1" and index.plan_digest == "sha256:plan-a"
    assert index.shard is None and index.comparison_class["shard"] == "1/1"
    # retire reads a shard's manifest and receipts: the page's command names the shard.
    assert index.evidence_dir(index.rows[3]) == two.resolve()
    page = (out / "report.html").read_text()
    assert 'id="shards"' in page and "merged from 2 shard(s)" in page
    assert f"patchlane retire e_d --evidence {two.resolve()}" not in page  # broken: no retire
    summary = (out / "summary.md").read_text()
    assert "## Shards" in summary and "| e_d | cpu | 1 | 2/2 |" in summary
    suite = ET.parse(out / "junit.xml").getroot()
    assert suite.get("tests") == "4" and suite.get("failures") == "1"
    assert "from: shard 2/2 (delivered) on host2" in ET.tostring(suite, encoding="unicode")
    assert RunIndex.load(out).as_dict() == index.as_dict()  # read back as written
    assert cli(one, two) == ExitCode.SWEEP_BROKEN  # the sweep's exit bits, over every row


def test_a_missing_shard_is_error_rows_and_the_exit_status(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    root = tmp_path / "runs"
    one, three = shard(root, 1, 3), shard(root, 3, 3)
    assert cli(one, three) == ExitCode.SWEEP_ERROR
    printed = capsys.readouterr().out
    assert "shard 2/3: missing" in printed
    out = root / "20260101T020000Z-merged-night1"
    index = RunIndex.load(out)
    missing = [r for r in index.rows if r.origin and r.origin["state"] == "missing"]
    assert [(r.entry_id, r.verdict) for r in missing] == [("e_b", Verdict.ERROR)]
    assert missing[0].reason.startswith("shard 2/3 missing: no run directory of this sweep "
                                        "(group night1) delivered it")
    assert [s["state"] for s in index.shards or ()] == ["delivered", "missing", "delivered"]
    assert "shard 2/3 missing" in (out / "junit.xml").read_text()
    page = (out / "report.html").read_text()
    assert ">missing</span>" in page
    # It asks for the shard, not for a fix of the lane or the reproducer.
    assert "<td><b>deliver the shard</b></td>" in page
    assert "fix the lane or the reproducer" not in page.split('id="legend"')[0]
    assert "| **error** | `shard 2/3 missing" in (out / "summary.md").read_text()
    assert "Asks: deliver the shard: finish it with" in (out / "summary.md").read_text()


def test_a_stopped_shard_keeps_what_finished_and_says_why(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    one = shard(root, 1, 2)
    two = shard(root, 2, 2, reports=False)
    run = RunDir.open(two)
    run.manifest["interrupted"] = {"by": "SIGTERM", "at": NIGHT1, "unfinished": 1}
    run.save()
    rows = [VerdictRow("e_b", "cpu", 1, G, "fine", "0.16.1", comparison_key=key()),
            VerdictRow("e_d", "cpu", 1, Verdict.ERROR, UNFINISHED)]
    write_reports(run, rows)
    index = merge([one, two]).index
    by = {r.entry_id: r for r in index.rows}
    assert by["e_b"].verdict is G and by["e_b"].origin["state"] == "errored"
    assert by["e_d"].verdict is Verdict.ERROR
    assert by["e_d"].reason.startswith("shard 2/2 errored (stopped by SIGTERM at ")
    assert by["e_d"].reason.endswith(UNFINISHED)
    assert index.shards is not None and index.shards[1]["state"] == "errored"
    assert f"patchlane sweep --resume {two}" in str(index.shards[1]["why"])


def test_a_shard_that_wrote_no_report_or_still_runs_is_errored(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    one = shard(root, 1, 2)
    two = shard(root, 2, 2, reports=False)  # killed before its reports
    index = merge([one, two]).index
    assert [r.verdict for r in index.rows] == [G, Verdict.ERROR, G, Verdict.ERROR]
    assert index.rows[1].reason == ("shard 2/2 errored: it wrote no index.json (the sweep "
                                    "stopped before its reports)")
    with RunDir.lock(two):  # a sweep still running there
        index = merge([one, two]).index
    assert index.rows[1].reason.startswith("shard 2/2 errored: still running (a sweep holds "
                                           "its lock)")
    assert cli(one, two) == ExitCode.SWEEP_ERROR


@pytest.mark.parametrize(("change", "label"), [
    ({"group": "night2"}, "group"),
    ({"registry_digest": "sha256:other"}, "registry_digest"),
    ({"patch_set": "sha256:other"}, "patch_set"),
    ({"lanes": ["cpu", "cuda"]}, "lanes"),
    ({"python": "3.12"}, "python"),
    ({"plan": plan(2, digest="sha256:plan-b")}, "plan.digest"),
])
def test_shards_of_different_plans_are_refused(tmp_path: Path, change: dict[str, Any],
                                               label: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "runs"
    one = shard(root, 1, 2)
    two = shard(root, 2, 2, **change)
    assert cli(one, two) == ExitCode.USAGE
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert f"cannot merge {two} with {one}: {two / 'manifest.json'} has {label}" in err
    assert "expected the shards of one sweep" in err and "fix: " in err
    assert not (root / "20260101T020000Z-merged-night1").exists()  # nothing written


def test_another_shard_count_or_an_old_manifest_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    one = shard(root, 1, 2)
    other = shard(root, 2, 3, name="other-shard2of3")
    with pytest.raises(RunDirError, match=r"has plan.count \(the N of --shard I/N\) 3, .* 2"):
        merge([one, other])
    old = shard(root, 2, 2, name="old-shard2of2")
    run = RunDir.open(old)
    del run.manifest["plan"]
    run.save()
    with pytest.raises(RunDirError, match=r"old-shard2of2/manifest.json: plan is absent, "
                                          r"expected the record of the whole plan"):
        merge([one, old])
    with pytest.raises(RunDirError, match="not a sweep's run directory"):
        merge([one, root / "typo"])


@pytest.mark.parametrize("damage", [b"[]", b"\xff\xfe not text", "plan-count-text"])
def test_a_damaged_shard_manifest_is_one_line_naming_it(
        tmp_path: Path, damage: object, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "runs"
    one, two = shard(root, 1, 2), shard(root, 2, 2)
    file = two / "manifest.json"
    if isinstance(damage, bytes):
        file.write_bytes(damage)
    else:
        manifest = json.loads(file.read_text())
        manifest["plan"]["count"] = "two"
        file.write_text(json.dumps(manifest))
    assert cli(one, two) == ExitCode.USAGE  # was a traceback, exit 70
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert str(file) in err


def test_a_requeued_shard_supersedes_its_stopped_attempt(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    one = shard(root, 1, 2)
    first_try = shard(root, 2, 2, name="try1-shard2of2", reports=False)
    second_try = shard(root, 2, 2, name="try2-shard2of2")
    index = merge([one, first_try, second_try]).index
    assert [r.verdict for r in index.rows] == [G] * 4
    assert {r.origin["run_id"] for r in index.rows if r.origin["shard"] == "2/2"} == {
        second_try.name}
    states = {s["run_id"]: s["state"] for s in index.shards or ()}
    assert states[first_try.name] == "superseded" and states[second_try.name] == "delivered"


def test_two_runs_of_one_shard_without_a_group_are_refused(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    one = shard(root, 1, 2, group=None)
    monday = shard(root, 2, 2, group=None, name="mon-shard2of2")
    tuesday = shard(root, 2, 2, group=None, created=NIGHT2, name="tue-shard2of2")
    with pytest.raises(RunDirError, match="both shard 2/2 and record no group"):
        merge([one, monday, tuesday])
    out = merge([one, monday]).out  # one run each: fine, named without a group
    assert out.name == "20260101T020000Z-merged"


def test_merging_again_is_idempotent_and_never_touches_a_shard(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    one, two = shard(root, 1, 2), shard(root, 2, 2)
    before = {p.name: files(p) for p in (one, two)}
    out = merge([one, two]).out
    written = {name: data for name, (data, _) in files(out).items()}
    assert cli("--group", "night1", "--runs-root", root) == ExitCode.OK  # found by group
    assert {name: data for name, (data, _) in files(out).items()} == written
    assert sorted(p.name for p in root.iterdir()) == sorted([one.name, two.name, out.name])
    assert {p.name: files(p) for p in (one, two)} == before  # bytes and mtimes


def test_out_must_be_its_own_directory(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    one, two = shard(root, 1, 2), shard(root, 2, 2)
    with pytest.raises(RunDirError, match="one of the shards' run directories"):
        merge([one, two], out=two)
    sweep_dir = shard(tmp_path / "elsewhere", 1, 1, group=None, name="a-sweep")
    with pytest.raises(RunDirError, match=r"holds a sweep's manifest\.json"):
        merge([one, two], out=sweep_dir)
    other = merge([shard(root, 1, 2, group="night9", name="n9")], out=tmp_path / "night9").out
    with pytest.raises(RunDirError, match="holds the merge of plan sha256:plan-a group "
                                          "'night9'"):
        merge([one, two], out=other)
    (tmp_path / "stuff").mkdir()
    (tmp_path / "stuff" / "notes.txt").write_text("mine")
    with pytest.raises(RunDirError, match=r"not empty and no merge's index\.json there"):
        merge([one, two], out=tmp_path / "stuff")


def test_the_next_night_compares_with_the_merged_night(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    first = merge([shard(root, 1, 2), shard(root, 2, 2)])
    tonight = [shard(root, 1, 2, created=NIGHT2, group="night2"),
               shard(root, 2, 2, created=NIGHT2, group="night2", verdicts={"e_b": B})]
    # Tonight's shards' own pages: last night's shards are read once, as the merge.
    own = RunIndex.load(tonight[1])
    assert own.lineage is not None and own.lineage["merged_shards"] == 2
    assert "2026-01-01-host" not in json.dumps(own.lineage)
    index = merge(tonight, group="night2").index
    compare = index.compare or {}
    assert compare["previous_run"] == first.out.name and compare["how"] == "same-class"
    assert compare["changes"] == [{"key": "e_b[cpu-ws1]", "change": "verdict-changed",
                                   "was": "guarding", "now": "broken"}]
    assert compare["previous_report"] == f"../{first.out.name}/report.html"
    # Last night's shards are not earlier runs of their own: one night, one earlier run.
    lineage = index.lineage or {}
    assert (lineage["earlier"], lineage["same_class"], lineage["other_class"]) == (1, 1, 0)
    assert lineage["merged_shards"] == 4  # last night's two and tonight's own two
    found = discover(root)
    assert [r.path.name for r in found.runs] == [first.out.name, index.run_id]
    assert len(found.merged) == 4
    page = (root / index.run_id / "report.html").read_text()
    assert "Changes since" in page and f"{first.out.name}</a>" in page


def test_sweep_records_the_whole_plan_and_the_group(tmp_path: Path) -> None:
    from patchlane.registry import load_registries
    from patchlane.sweep.engine import Shard, new_run, plan_record

    registry = load_registries([Path(__file__).resolve().parents[2] / "registry.yaml"])
    only = {"liger_flce_weighted_none", "mcore_rerun_sentinel"}
    owned: list[list[Any]] = []
    digests = set()
    for i in (1, 2):
        run = new_run(registry, tmp_path / f"s{i}", lanes=["cpu"], only=only, shard=Shard(i, 2),
                      header={"run_id": f"s{i}", "group": "n1"})
        recorded = run.manifest["plan"]
        digests.add(recorded["digest"])
        assert recorded["count"] == 2 and run.manifest["group"] == "n1"
        owned += [[r["entry_id"], r["lane"], r["world_size"]] for r in run.manifest["rows"]]
    assert len(digests) == 1
    assert sorted(owned) == sorted(recorded["rows"]) and len(recorded["rows"]) == 3
    fewer = plan_record(registry, ["cpu"], {"mcore_rerun_sentinel"}, Shard(1, 2))
    assert fewer["digest"] not in digests


def test_a_bad_group_name_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        cli_main.main(["sweep", "--shard", "1/2", "--group", "../etc"])
    assert stop.value.code == ExitCode.USAGE
    assert "--group '../etc': expected 1 to 64 letters" in capsys.readouterr().err
    assert cli() == ExitCode.USAGE
    assert "give the shards' run directories, or --group NAME" in capsys.readouterr().err


def test_the_index_keeps_its_old_shape_for_a_sweep(tmp_path: Path) -> None:
    data = json.loads((shard(tmp_path, 1, 1, group=None) / "index.json").read_text())
    assert not {"group", "shards", "plan_digest"} & set(data)
    assert all("origin" not in row for row in data["rows"])


@pytest.mark.slow
def test_a_killed_shard_is_read_from_its_manifest_then_resumed_and_merged_again(
        fake_target: FakeTarget, tmp_path: Path) -> None:
    """The sweep's own mechanics on a fake target: shard 2 was killed before any case ran (no
    index.json, its cases queued). The merge rebuilds its rows from its manifest, read only;
    once the shard is resumed, merging again delivers it."""
    from patchlane.registry import load_registries
    from patchlane.sweep.engine import Shard, new_run, run_sweep

    from .test_sweep_faults import GUARDING, env_for, multi_registry

    registry = load_registries([multi_registry(fake_target, {"a": GUARDING, "b": GUARDING})])
    root = tmp_path / "runs"
    runs = [new_run(registry, root / f"s{i}", lanes=["cpu"], only=None, shard=Shard(i, 2),
                    header={"run_id": f"s{i}", "group": "n1", "host": f"node{i}"})
            for i in (1, 2)]
    write_reports(runs[0], run_sweep(registry, runs[0], env=env_for(fake_target)))
    killed = files(runs[1].path)
    result = merge([r.path for r in runs])
    first, second = result.index.rows
    assert first.verdict is G and first.origin == {
        "shard": "1/2", "state": "delivered", "run_id": "s1", "run_dir": "../s1",
        "host": "node1"}
    assert second.verdict is Verdict.ERROR and second.origin["state"] == "errored"
    assert second.reason == ("shard 2/2 errored (2 case(s) did not finish (the sweep was "
                             "killed); finish it with `patchlane sweep --resume "
                             f"{runs[1].path}`, then merge again; it wrote no index.json (the "
                             f"sweep stopped before its reports)): {UNFINISHED}")
    assert files(runs[1].path) == killed  # read, never written
    runs[1].requeue_unfinished()
    write_reports(runs[1], run_sweep(registry, runs[1], env=env_for(fake_target)))
    again = merge([r.path for r in runs])
    assert again.out == result.out
    assert [r.verdict for r in again.index.rows] == [G, G]
    assert [s["state"] for s in again.index.shards or ()] == ["delivered", "delivered"]


def test_retire_is_sent_to_the_shards_of_a_merged_run(tmp_path: Path) -> None:
    from patchlane.runs.verify import checked_rows

    root = tmp_path / "runs"
    one, two = shard(root, 1, 2), shard(root, 2, 2)
    out = merge([one, two]).out
    with pytest.raises(RunDirError, match=rf"a merged run .* fix: pass --evidence "
                                          rf"{two.resolve()}$"):
        checked_rows(out, "e_b", RunDirError)


def test_group_finds_its_own_shards_only(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    import os

    from patchlane.sweep.merge import find_group

    root = tmp_path / "runs"
    one, two = shard(root, 1, 2), shard(root, 2, 2)
    shard(root, 1, 2, created=NIGHT2, group="night2")  # another night, same plan
    (root / "fifo").mkdir()
    os.mkfifo(root / "fifo" / "manifest.json")  # would block a plain open()
    (root / "junk").mkdir()
    (root / "junk" / "manifest.json").write_text("{not json")
    os.utime(root / "junk" / "manifest.json", (2e9, 2e9))  # the newest run there
    assert find_group(root, "night1") == [one, two]
    assert find_group(root, "night1", limit=1) == []  # only the newest run is read
    assert cli("--group", "night7", "--runs-root", root) == ExitCode.USAGE
    assert "no run directory of group 'night7' under" in capsys.readouterr().err


def test_a_merge_waiting_on_another_says_so(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """Two merges of one night at once: the second says it waits (it said nothing at all)."""
    import threading

    from filelock import FileLock

    root = tmp_path / "runs"
    one, two = shard(root, 1, 2), shard(root, 2, 2)
    out = merge([one, two]).out
    capsys.readouterr()
    held = FileLock(str(out / ".lock"))
    held.acquire()
    done = threading.Event()
    worker = threading.Thread(target=lambda: (merge([one, two]), done.set()))
    worker.start()
    try:
        for _ in range(100):
            if "waiting for it to finish" in capsys.readouterr().err:
                break
            threading.Event().wait(0.05)
        else:
            raise AssertionError("the waiting merge said nothing")
        assert not done.is_set()
    finally:
        held.release()
    worker.join(timeout=60)
    assert done.is_set()
