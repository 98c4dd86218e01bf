"""`patchlane usage`'s mechanics (patchlane/training/usage.py, patchlane/cli/usage.py) on
hand-written per-process reports: what counts as a job and a rank, what is flagged and what
is not, and reports that cannot be used. What a real job writes and how it adds up is
tests/releases/test_usage.py (a real 2-rank torchrun job)."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from patchlane.training.usage import aggregate, collect, read_report

ROOT = Path(__file__).resolve().parents[2]
T0 = 1_800_000_000.0
_pids = itertools.count(1000)

GATE_REASON = "megatron-core 0.19.2 is outside <0.18.0,>=0.14.0"


def entry(entry_id: str, outcome: str | None = "applied", hits: int = 0, *,
          kind: str = "source_patch", status: str = "active", installed: str | None = "0.16.1",
          reason: str = "", dist: str = "megatron-core", source: str = "metadata",
          paths: dict[str, int] | None = None) -> dict[str, Any]:
    decision = None if outcome is None else {
        "entry_id": entry_id, "outcome": outcome, "reason": reason, "distribution": dist,
        "installed": installed, "applies_to": ">=0.14.0,<0.18.0", "fingerprint_expected": [],
        "fingerprint_found": None, "at": "2026-11-22T00:00:00+00:00",
        "version_source": source}
    return {"id": entry_id, "kind": kind, "status": status, "target": "m:f",
            "decision": decision, "applied": outcome == "applied", "hits": hits,
            "paths": paths or {}}


def write(folder: Path, entries: list[dict[str, Any]], *, job: str | None = "run:a",
          rank: str | None = "0", host: str = "node1", pid: int | None = None,
          ppid: int = 1, at: float = T0, argv: list[str] | None = None,
          stack: dict[str, Any] | None = None) -> tuple[Path, int]:
    """A report as `patchlane run --reports` writes it (launch/activate.py)."""
    pid = next(_pids) if pid is None else pid
    process: dict[str, Any] = {
        "host": host, "pid": pid, "ppid": ppid, "argv": argv or ["train.py"], "rank": rank,
        "local_rank": rank, "world_size": "2", "at": at,
        "stack": stack if stack is not None else {"python": "3.11.7", "torch": "2.13.0+cpu",
                                                  "implementation": "cpython", "cuda": None}}
    if job is not None:
        process["job"] = job
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"rank{rank}-{host}-{pid}.json"
    path.write_text(json.dumps({"patchlane": "0.1.0", "strict": False, "registries": [],
                                "registry_digest": "sha256:x", "startup_error": None,
                                "unknown_control_ids": [], "entries": entries, "history": [],
                                "summary": "", "process": process}))
    return path, pid


def usage_of(*roots: Path) -> Any:
    reports, bad = collect(list(roots))
    return aggregate(reports, bad)


# -- jobs, ranks, hits, times, stacks ----------------------------------------------------------

def test_two_jobs_add_up_per_entry(tmp_path: Path) -> None:
    # job a: torchrun's agent and two ranks; rank 0's data-loader worker (it inherits RANK)
    _, agent = write(tmp_path / "a", [entry("sentinel", "pending")], rank=None,
                     argv=["/venv/lib/python3.11/site-packages/torch/distributed/run.py"])
    _, r0 = write(tmp_path / "a", [entry("sentinel", hits=3)], rank="0", ppid=agent, at=T0)
    write(tmp_path / "a", [entry("sentinel", hits=2)], rank="1", ppid=agent, at=T0 + 5)
    write(tmp_path / "a", [entry("sentinel", "pending")], rank="0", ppid=r0, at=T0 + 1)
    write(tmp_path / "a", [entry("sentinel", hits=4)], rank="0", ppid=r0, at=T0 + 2)
    # job b, a day later, on 3.12 and another release: one plain process, never hit
    write(tmp_path / "b", [entry("sentinel", installed="0.17.1")], job="run:b", rank=None,
          at=T0 + 86400, stack={"python": "3.12.3", "torch": "2.13.0"})
    usage = usage_of(tmp_path)
    assert (usage.reports, usage.jobs, usage.ranks, usage.launchers) == \
        (6, ["run:a", "run:b"], 3, 1)
    (e,) = usage.entries
    assert (e.hits, len(e.jobs), len(e.jobs_applied), len(e.jobs_hit)) == (9, 2, 2, 1)
    assert (len(e.ranks), len(e.ranks_applied), len(e.ranks_hit)) == (3, 3, 2)
    assert (e.state, e.flagged) == ("hit", False)  # hit in one job is hit
    out = e.as_dict()
    assert (out["first_seen"], out["last_seen"], out["last_hit"]) == (
        "2027-01-15T08:00:00+00:00", "2027-01-16T08:00:00+00:00", "2027-01-15T08:00:05+00:00")
    assert out["outcomes"] == {"applied": 3}  # rank 0's pending worker does not speak for it
    assert out["stacks"] == [
        {"python": "3.11.7", "torch": "2.13.0+cpu", "release": "megatron-core 0.16.1",
         "ranks": 2, "ranks_applied": 2, "hits": 9},
        {"python": "3.12.3", "torch": "2.13.0", "release": "megatron-core 0.17.1",
         "ranks": 1, "ranks_applied": 1, "hits": 0}]
    assert e.note() == "hit 9 times on 2 of the 3 ranks it was applied on (2 jobs, 3 ranks)"


def test_a_launcher_is_no_rank_even_by_another_name(tmp_path: Path) -> None:
    # `torchrun` the console script, and a launcher known only as the parent of ranks
    _, agent = write(tmp_path, [entry("e", "pending")], rank=None, argv=["/venv/bin/torchrun"])
    write(tmp_path, [entry("e", hits=1)], rank="0", ppid=agent)
    _, other = write(tmp_path, [entry("e", "pending")], rank=None, job="run:b",
                     argv=["my_launcher.py"])
    write(tmp_path, [entry("e", hits=1)], rank="0", ppid=other, job="run:b")
    usage = usage_of(tmp_path)
    assert (usage.ranks, usage.launchers) == (2, 2)
    assert usage.entries[0].rank_outcomes() == {"applied": 2}


def test_rankless_processes_and_their_children_are_one_rank(tmp_path: Path) -> None:
    _, main = write(tmp_path, [entry("e", hits=1)], rank=None, host="n1")
    _, child = write(tmp_path, [entry("e", "pending")], rank=None, host="n1", ppid=main)
    write(tmp_path, [entry("e", hits=2)], rank=None, host="n1", ppid=child)  # grandchild
    write(tmp_path, [entry("e", hits=1)], rank=None, host="n2", ppid=main)  # same pid, elsewhere
    usage = usage_of(tmp_path)
    assert usage.ranks == 2 and usage.entries[0].hits == 4


def test_the_same_rank_in_two_jobs_is_two_ranks_and_a_job_spans_nodes(tmp_path: Path) -> None:
    # PATCHLANE_RUN_JOB (or a Slurm step) names one job across nodes; ranks are global there
    write(tmp_path, [entry("e", hits=1)], job="job:pretrain-7", rank="0", host="n1")
    write(tmp_path, [entry("e", hits=1)], job="job:pretrain-7", rank="1", host="n2")
    write(tmp_path, [entry("e", hits=1)], job="job:pretrain-8", rank="0", host="n1")
    usage = usage_of(tmp_path)
    assert (usage.jobs, usage.ranks) == (["job:pretrain-7", "job:pretrain-8"], 3)


# -- what is flagged, and what is not ----------------------------------------------------------

def test_applied_never_hit_is_flagged_never_applied_is_not(tmp_path: Path) -> None:
    for rank in ("0", "1"):
        write(tmp_path, [
            entry("dead"),
            entry("gated", "skipped: gate", installed="0.19.2", reason=GATE_REASON),
            entry("never_imported", "pending", installed=None),
            entry("disabled", "skipped: disabled", reason="PATCHLANE_DISABLE names it"),
            entry("fixed", "upstream-fixed", reason="the probe says upstream behaves"),
            entry("old", "retired", status="retired"),
            entry("floor", "ledger: ok", kind="version_floor"),
            entry("drifted", "refused: drift", reason="source changed"),
        ], rank=rank)
    usage = usage_of(tmp_path)
    state = {e.id: (e.state, e.flagged) for e in usage.entries}
    assert state == {
        "dead": ("dead", True), "gated": ("not applied", False),
        "never_imported": ("not applied", False), "disabled": ("not applied", False),
        "fixed": ("not applied", False), "old": ("retired", False),
        "floor": ("not counted", False), "drifted": ("not applied", False)}
    notes = {e.id: e.note() for e in usage.entries}
    assert notes["dead"] == ("dead or misapplied: applied on 2 of 2 ranks in 1 job, never hit "
                             "(a retirement or review candidate: is the patched code path "
                             "still taken?)")
    assert notes["gated"] == f"never applied, not flagged: gated out on 2 ranks ({GATE_REASON})"
    assert notes["never_imported"] == ("never applied, not flagged: its module was never "
                                       "imported on 2 ranks")
    assert "upstream-fixed on 2 ranks (the probe says upstream behaves)" in notes["fixed"]
    assert "refused: drift on 2 ranks (source changed)" in notes["drifted"]
    assert notes["floor"].startswith("a version_floor entry has no overlay to hit; ledger: ok")
    assert [e.id for e in usage.flagged] == ["dead"]


def test_applied_where_admitted_and_gated_elsewhere_is_still_dead(tmp_path: Path) -> None:
    write(tmp_path, [entry("e")], rank="0")
    write(tmp_path, [entry("e", "skipped: gate", installed="0.19.2", reason=GATE_REASON)],
          rank="0", job="run:b")
    (e,) = usage_of(tmp_path).entries
    assert (e.state, len(e.ranks_applied), len(e.ranks)) == ("dead", 1, 2)
    assert e.rank_outcomes() == {"applied": 1, "skipped: gate": 1}


def test_the_newest_report_says_what_the_entry_is_now(tmp_path: Path) -> None:
    write(tmp_path, [entry("e")], at=T0)
    write(tmp_path, [entry("e", "retired", status="retired")], at=T0 + 10, job="run:b")
    (e,) = usage_of(tmp_path).entries
    assert (e.status, e.flagged) == ("retired", False)


def test_reports_from_before_jobs_and_stacks_still_count(tmp_path: Path) -> None:
    for job in ("a", "b"):
        path, _ = write(tmp_path / job, [entry("e", hits=1)], job=None, stack={})
        data = json.loads(path.read_text())
        del data["process"]["stack"]
        path.write_text(json.dumps(data))
    usage = usage_of(tmp_path)
    assert usage.jobs == [f"folder:{tmp_path / 'a'}", f"folder:{tmp_path / 'b'}"]
    assert usage.entries[0].as_dict()["stacks"][0]["python"] is None


# -- bad input ----------------------------------------------------------------------------------

BAD: list[tuple[str, Any, str]] = [
    ("cut.json", '{"patchlane": "0.1.0", "entr', "not JSON (Unterminated string"),
    ("binary.json", b"\xff\xfe{}", "not UTF-8 text (invalid start byte at byte 0)"),
    ("list.json", "[1, 2]", "the report: found [1, 2], expected a JSON object"),
    ("status.json", json.dumps({"entries": []}),
     "no `process`: not a per-process report of `patchlane run --reports`"),
    ("hits.json", "HITS", "entries[1].hits: found 'many', expected a whole number >= 0"),
    ("negative.json", "NEG", "entries[0].hits: found -2, expected a whole number >= 0"),
    ("boolhits.json", "BOOL", "entries[0].hits: found True, expected a whole number >= 0"),
    ("noat.json", "NOAT", "process.at: found None, expected seconds since the epoch"),
    # far in the future: once the good reports' dates were printed, this one crashed them all
    ("future.json", "FUTURE", "process.at: found 1e+18, expected seconds since the epoch (a "
                              "date before the year 10000)"),
    ("nested.json", "[" * 100_000 + "]" * 100_000, "nested too deeply"),
]


def _bad_body(marker: Any, good: dict[str, Any]) -> Any:
    if marker == "HITS":
        good["entries"].append(entry("e2", hits="many"))  # type: ignore[arg-type]
    elif marker == "NEG":
        good["entries"][0]["hits"] = -2
    elif marker == "BOOL":
        good["entries"][0]["hits"] = True
    elif marker == "NOAT":
        good["process"]["at"] = None
    elif marker == "FUTURE":
        good["process"]["at"] = 1e18
    else:
        return marker
    return json.dumps(good)


def test_reports_that_cannot_be_used_are_listed_and_the_rest_still_count(
        tmp_path: Path) -> None:
    good_path, _ = write(tmp_path / "job", [entry("e", hits=1)])
    template = json.loads(good_path.read_text())
    for name, marker, _ in BAD:
        body = _bad_body(marker, json.loads(json.dumps(template)))
        target = tmp_path / "job" / name
        target.write_bytes(body) if isinstance(body, bytes) else target.write_text(body)
    (tmp_path / "job" / ".rank0.json.x1.tmp").write_text("{half")  # a write in progress
    (tmp_path / "job" / "notes.txt").write_text("not a report")    # not JSON by name
    os.mkfifo(tmp_path / "job" / "fifo.json")                      # would block a read
    reports, bad = collect([tmp_path, tmp_path / "job", good_path])  # each file once
    assert [r.path for r in reports] == [good_path]
    reasons = {b.path.name: b.reason for b in bad}
    assert reasons.pop("fifo.json") == "not a regular file"
    assert sorted(reasons) == sorted(name for name, _, _ in BAD)
    for name, _, says in BAD:
        assert says in reasons[name], (name, reasons[name])
        assert "\n" not in reasons[name]
    assert aggregate(reports, bad).entries[0].hits == 1


def test_an_oversized_or_unreadable_report_is_listed(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from patchlane.training import usage

    big, _ = write(tmp_path, [entry("e", reason="x" * 5000)])
    monkeypatch.setattr(usage, "MAX_REPORT_BYTES", 4096)
    with pytest.raises(ValueError, match="larger than 4096 bytes: not a per-process report"):
        read_report(big)
    if os.geteuid() != 0:  # root reads anything
        locked, _ = write(tmp_path / "locked", [entry("e")])
        locked.chmod(0)
        _, bad = collect([tmp_path / "locked"])
        assert [(b.path, b.reason) for b in bad] == [(locked, "cannot read: Permission denied")]


def test_a_report_link_that_loops_is_listed_not_a_crash(tmp_path: Path) -> None:
    # one self-referencing *.json link in a reports folder: exit 70, a traceback
    write(tmp_path, [entry("e")])
    (tmp_path / "loop.json").symlink_to("loop.json")
    reports, bad = collect([tmp_path])
    assert len(reports) == 1
    assert [b.path.name for b in bad] == ["loop.json"]
    assert bad[0].reason.startswith("cannot read: ")


# -- the command ------------------------------------------------------------------------------

def cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PATCHLANE_")}
    return subprocess.run([sys.executable, "-m", "patchlane.cli.main", "usage", *args],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)


@pytest.mark.slow
def test_the_command_exits_17_on_a_dead_entry_and_0_without(tmp_path: Path) -> None:
    write(tmp_path / "dead", [entry("sentinel"), entry("liger", hits=2, dist="liger-kernel",
                                                        installed="0.8.1")])
    (tmp_path / "dead" / "junk.json").write_text("{")
    out = cli(str(tmp_path / "dead"))
    assert out.returncode == 17, out.stdout + out.stderr
    assert f"patchlane usage: left out {tmp_path / 'dead' / 'junk.json'}: not JSON" in out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "1 report(s): 1 job(s), 1 rank(s); 1 file(s) left out (above)"
    row = next(ln for ln in lines if ln.startswith("sentinel "))
    assert row.endswith("(a retirement or review candidate: is the patched code path still "
                        "taken?)")  # the note is whole
    stack = next(ln for ln in lines if ln.startswith("liger ") and "liger-kernel 0.8.1" in ln)
    assert stack.split() == ["liger", "3.11.7", "2.13.0+cpu", "liger-kernel", "0.8.1", "1",
                             "1", "2"]
    assert any(ln.startswith("DEAD OR MISAPPLIED (exit 17): sentinel:") for ln in lines)
    as_json = json.loads(cli(str(tmp_path / "dead"), "--json").stdout)
    assert as_json["flagged"] == ["sentinel"]
    assert as_json["unreadable"] == [{"path": str(tmp_path / "dead" / "junk.json"),
                                      "reason": as_json["unreadable"][0]["reason"]}]

    write(tmp_path / "alive", [entry("liger", hits=2), entry("gated", "skipped: gate")])
    out = cli(str(tmp_path / "alive"))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "DEAD OR MISAPPLIED" not in out.stdout


@pytest.mark.slow
def test_the_command_refuses_a_missing_folder_and_one_without_reports(tmp_path: Path) -> None:
    out = cli(str(tmp_path / "nope"))
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip() == (
        f"patchlane: error: patchlane usage: REPORTS_DIR {tmp_path / 'nope'}: no such file or "
        "folder; expected the folder given to `patchlane run --reports DIR`; fix: check the "
        "path")
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "a.json").write_text("[]")
    out = cli(str(tmp_path / "empty"))
    assert out.returncode == 2, out.stderr
    assert "left out" in out.stderr and "a JSON object" in out.stderr
    assert f"no per-process report in {tmp_path / 'empty'} (1 file(s) could not be used, " \
        "listed above)" in out.stderr
    assert "Traceback" not in out.stderr


def test_entries_of_a_team_registry_beside_the_catalog_say_whose_they_are(
        tmp_path: Path) -> None:
    catalog = "/venv/lib/python3.12/site-packages/patchlane/_bundle/registry.yaml"
    team = str(tmp_path / "team.yaml")
    write(tmp_path, [{**entry("mcore_x", hits=1), "registry": catalog},
                     {**entry("team_fix", hits=2), "registry": team}])
    usage = usage_of(tmp_path)
    assert {e.id: e.as_dict()["registry"] for e in usage.entries} == {
        "mcore_x": catalog, "team_fix": team}
    out = subprocess.run([sys.executable, "-m", "patchlane.cli.main", "usage", str(tmp_path)],
                         capture_output=True, text=True, cwd=ROOT, timeout=120,
                         env={**os.environ, "PATCHLANE_FULL_WIDTH": "1"})
    assert out.returncode == 0, out.stderr
    first = out.stdout.split("\n\n")[1]  # the entries' table (the stacks' follows)
    rows = {ln.split()[0]: ln.split()[1] for ln in first.splitlines()
            if ln.startswith(("mcore_x ", "team_fix "))}
    assert rows["mcore_x"] == "catalog" and team.endswith(rows["team_fix"].lstrip("…")), \
        out.stdout
    assert rows["team_fix"].endswith("/team.yaml")
    assert "REGISTRY" in out.stdout.splitlines()[2], out.stdout
