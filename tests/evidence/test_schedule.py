"""Longest-first scheduling (patchlane.sweep.schedule): the order a sweep starts its cases
in, from the durations earlier receipts recorded; what the manifest says about it; resume.

The sweep tests here run the real planner and the real pool (run_sweep) with the case runner
replaced by a stub that records the order cases start in and reports a chosen duration: the
order is the mechanics under test, not the reproducers. No test times anything."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from patchlane.common.errors import ControlsError
from patchlane.deciding.controls import ToolSettings
from patchlane.registry import Entry, Registry, load_registries
from patchlane.runs.manifest import CaseState, RunDir, case_id
from patchlane.runs.verdicts import Verdict
from patchlane.sweep import engine as sweep_module
from patchlane.sweep.engine import Shard, SweepEvent, new_run, run_sweep, verdicts
from patchlane.sweep.provenance import host_class_here
from patchlane.sweep.reproduce import CaseResult, Lane, Mode, RunOutcome
from patchlane.sweep.schedule import (
    HISTORY_RUNS,
    dispatch_order,
    plan_schedule,
    prior_durations,
    recent_runs,
)

from ..conftest import OVERLAY_SOURCE, FakeTarget

RELEASE = {"plfake": "1.2.0", "torch": "2.13.0+cpu"}
OTHER = {"plfake": "1.1.0", "torch": "2.13.0+cpu"}


def cid(name: str, mode: str = "without") -> str:
    return case_id(name, "cpu", 1, Mode(mode))


HOST = "cpu-2c-24g"
"""The host class the hand-written receipts were recorded on."""


def receipt(case: str, seconds: Any, *, outcome: str = "fail", stage: str | None = None,
            release: dict[str, str] | None = None, host: str = HOST) -> dict[str, Any]:
    return {"schema_version": 1, "case_id": case, "seconds": seconds, "outcome": outcome,
            "stage": stage, "comparison_key": {"lane": "cpu", "host_class": host,
                                               "distributions": release or RELEASE}}


def write_run(root: Path, name: str, age: int, receipts: dict[str, Any]) -> Path:
    """A run directory ``age`` hours old with these receipts (a dict is written as JSON,
    str/bytes as they are)."""
    run = root / name
    (run / "receipts").mkdir(parents=True)
    (run / "manifest.json").write_text("{}")
    for case, body in receipts.items():
        path = run / "receipts" / f"{case}.json"
        if isinstance(body, bytes):
            path.write_bytes(body)
        elif isinstance(body, str):
            path.write_text(body)
        else:
            path.write_text(json.dumps(body))
    stamp = 1_900_000_000 - age * 3600
    os.utime(run / "manifest.json", (stamp, stamp))
    return run


def order_of(block: dict[str, Any]) -> list[str]:
    return [item["case"] for item in block["order"]]


# -- the order, from earlier receipts ---------------------------------------------------------

def test_longest_first_unknown_first_ties_in_plan_order(tmp_path: Path) -> None:
    plan = ["a", "b", "c", "d", "e", "f"]
    write_run(tmp_path, "run1", 1, {
        cid("a"): receipt(cid("a"), 1.0),
        cid("b"): receipt(cid("b"), 5.0),
        # c: never ran before
        cid("d"): receipt(cid("d"), 5.0),         # ties with b: plan order decides
        cid("e"): "{\"case_id\": \"half",          # a partial receipt: skipped, not fatal
        cid("f"): receipt(cid("f"), 30.0),
    })
    block = plan_schedule([(cid(n), RELEASE) for n in plan], history=tmp_path)
    assert order_of(block) == [cid("c"), cid("e"), cid("f"), cid("b"), cid("d"), cid("a")]
    by_case = {item["case"]: item for item in block["order"]}
    assert by_case[cid("f")] == {"case": cid("f"), "estimate_s": 30.0, "from": "run1",
                                 "match": "same-release", "host_class": HOST}
    assert by_case[cid("c")] == {"case": cid("c"), "estimate_s": None, "from": None,
                                 "match": None, "host_class": None}
    assert (block["policy"], block["unknown"], block["source_runs"], block["history_root"]) \
        == ("longest-first", "first", ["run1"], str(tmp_path))
    # deterministic: the same history gives the same order, whatever order the input had
    again = plan_schedule([(cid(n), RELEASE) for n in plan], history=tmp_path)
    assert again == block


def test_the_registry_policy_keeps_plan_order_and_still_records_estimates(
        tmp_path: Path) -> None:
    write_run(tmp_path, "run1", 1, {cid("b"): receipt(cid("b"), 9.0)})
    block = plan_schedule([(cid("a"), RELEASE), (cid("b"), RELEASE)], history=tmp_path,
                          policy="registry")
    assert order_of(block) == [cid("a"), cid("b")] and block["policy"] == "registry"
    assert block["order"][1]["estimate_s"] == 9.0
    with pytest.raises(ValueError, match="schedule policy 'fastest'"):
        plan_schedule([], history=None, policy="fastest")


@pytest.mark.parametrize("body", [
    b"\xff\xfe not utf-8",
    "[1, 2, 3]",
    "[" * 100_000 + "]" * 100_000,                                  # absurdly nested
    json.dumps(receipt(cid("x"), 9.0)),                            # another case's receipt
    json.dumps(receipt(cid("a"), True)),
    json.dumps(receipt(cid("a"), -1.0)),
    json.dumps(receipt(cid("a"), "9")),
    json.dumps(receipt(cid("a"), None)),
    json.dumps({**receipt(cid("a"), 9.0), "seconds": float("nan")}),  # NaN: not finite
    json.dumps(receipt(cid("a"), 9.0, outcome="error", stage="import")),  # stopped early
    json.dumps(receipt(cid("a"), 9.0, outcome="maybe")),
    "",
], ids=["binary", "list", "nested", "other-case", "bool", "negative", "string", "null", "nan",
        "early-error", "bad-outcome", "empty"])
def test_an_unusable_receipt_is_skipped_never_fatal(tmp_path: Path, body: Any) -> None:
    write_run(tmp_path, "new", 1, {cid("a"): body})
    write_run(tmp_path, "old", 2, {cid("a"): receipt(cid("a"), 4.0)})
    found, consulted = prior_durations(recent_runs(tmp_path), {cid("a"): RELEASE})
    # the newest run's receipt is passed over, the older run's one is used
    assert found[cid("a")] == {"estimate_s": 4.0, "from": "old", "match": "same-release",
                               "host_class": HOST}
    assert consulted == ["new", "old"]


def test_oversized_unreadable_and_odd_receipts_are_skipped(tmp_path: Path) -> None:
    from patchlane.sweep import schedule

    run = write_run(tmp_path, "run1", 1, {cid("big"): " " * (schedule._MAX_RECEIPT_BYTES + 1)})
    (run / "receipts" / f"{cid('dir')}.json").mkdir()  # a directory where a file should be
    (tmp_path / "a-file").write_text("not a run")       # entries of the root that are no runs
    (tmp_path / "no-manifest" / "receipts").mkdir(parents=True)
    found, _ = prior_durations(recent_runs(tmp_path), {cid("big"): RELEASE,
                                                       cid("dir"): RELEASE})
    assert found == {}
    assert [p.name for p in recent_runs(tmp_path)] == ["run1"]
    # a root that does not exist (a first sweep) or is a file: no history, no error
    assert recent_runs(tmp_path / "missing") == [] and recent_runs(tmp_path / "a-file") == []


def test_a_timeout_counts_as_at_least_that_long(tmp_path: Path) -> None:
    write_run(tmp_path, "run1", 1, {
        cid("a"): receipt(cid("a"), 600.0, outcome="error", stage="timeout"),
        cid("b"): receipt(cid("b"), 20.0, outcome="pass")})
    block = plan_schedule([(cid("b"), RELEASE), (cid("a"), RELEASE)], history=tmp_path)
    assert order_of(block) == [cid("a"), cid("b")]


def test_the_same_release_wins_over_a_newer_other_release(tmp_path: Path) -> None:
    write_run(tmp_path, "newest", 1, {cid("a"): receipt(cid("a"), 50.0, release=OTHER),
                                      cid("b"): receipt(cid("b"), 7.0, release=OTHER)})
    write_run(tmp_path, "older", 2, {cid("a"): receipt(cid("a"), 3.0)})
    found, consulted = prior_durations(recent_runs(tmp_path),
                                       {cid("a"): RELEASE, cid("b"): RELEASE})
    assert found[cid("a")] == {"estimate_s": 3.0, "from": "older", "match": "same-release",
                               "host_class": HOST}
    # no same-release receipt anywhere: the other release's duration still beats none
    assert found[cid("b")] == {"estimate_s": 7.0, "from": "newest", "match": "other-release",
                               "host_class": HOST}
    assert consulted == ["newest", "older"]


def test_only_the_newest_runs_are_read_and_the_current_one_never(tmp_path: Path) -> None:
    for age in range(HISTORY_RUNS + 3):
        write_run(tmp_path, f"run{age:02d}", age + 1, {})
    write_run(tmp_path, "ancient", 100, {cid("a"): receipt(cid("a"), 9.0)})
    current = write_run(tmp_path, "current", 0, {cid("b"): receipt(cid("b"), 9.0)})
    runs = recent_runs(tmp_path, exclude=current)
    assert [p.name for p in runs] == [f"run{age:02d}" for age in range(HISTORY_RUNS)]
    block = plan_schedule([(cid("a"), RELEASE), (cid("b"), RELEASE)], history=tmp_path,
                          exclude=current)
    assert [item["estimate_s"] for item in block["order"]] == [None, None]
    assert len(block["source_runs"]) == HISTORY_RUNS


def test_reading_stops_once_every_case_has_a_same_release_estimate(tmp_path: Path) -> None:
    write_run(tmp_path, "new", 1, {cid("a"): receipt(cid("a"), 2.0)})
    write_run(tmp_path, "old", 2, {cid("a"): "{never read"})
    _, consulted = prior_durations(recent_runs(tmp_path), {cid("a"): RELEASE})
    assert consulted == ["new"]


def test_dispatch_order_follows_the_manifest(tmp_path: Path) -> None:
    manifest = {"schedule": {"order": [{"case": "c"}, {"case": "a"}, {"case": "b"}]}}
    assert dispatch_order(manifest, ["a", "b", "c"]) == ["c", "a", "b"]
    # a case the schedule does not list starts first (nothing is known of it)
    assert dispatch_order(manifest, ["a", "z", "c"]) == ["z", "c", "a"]
    # a manifest from before schedules existed, or a mangled one: manifest order
    for old in ({}, {"schedule": None}, {"schedule": {"order": "x"}},
                {"schedule": {"order": [None, 3, {"case": 5}]}}):
        assert dispatch_order(old, ["b", "a"]) == ["b", "a"]


def test_the_policy_comes_from_patchlane_schedule() -> None:
    assert ToolSettings.from_env({}).schedule == "longest-first"
    assert ToolSettings.from_env({"PATCHLANE_SCHEDULE": " Registry "}).schedule == "registry"
    with pytest.raises(ControlsError, match="PATCHLANE_SCHEDULE='fastest'"):
        ToolSettings.from_env({"PATCHLANE_SCHEDULE": "fastest"})


# -- through the real planner and pool --------------------------------------------------------

def registry_of(fake: FakeTarget, names: Sequence[str]) -> Registry:
    entries = []
    for name in names:
        entry_id = f"{fake.entry_id}_{name}"
        (fake.root / "patches" / f"{entry_id}.py").write_text(OVERLAY_SOURCE)
        (fake.root / "reproducers" / f"{entry_id}.py").write_text(
            "LANES = ('cpu',)\nWORLD_SIZES = (1,)\n\ndef run(ctx):\n"
            f"    import {fake.module} as t\n"
            "    assert t.Greeter().greet('a') == 'patched hello a', 'bug shows'\n")
        entries.append(fake.entry(id=entry_id, overlay=f"patches/{entry_id}.py",
                                  reproducer=f"reproducers/{entry_id}.py"))
    fake.registry.write_text(yaml.safe_dump({"schema": 1, "entries": entries},
                                            sort_keys=False))
    return load_registries([fake.registry])


# -- the host class: a runs root shared by several machines ------------------------------------

H200 = "gpu-8xNVIDIA-H200"


def test_durations_recorded_on_this_host_class_come_first(tmp_path: Path) -> None:
    # The newest run is an H200 box's (a is slow there, b fast); an older one is this CPU
    # runner's, where it is the other way round. Mixing them would start a first here.
    write_run(tmp_path, "h200", 1, {cid("a"): receipt(cid("a"), 600.0, host=H200),
                                    cid("b"): receipt(cid("b"), 20.0, host=H200)})
    write_run(tmp_path, "cpu", 2, {cid("a"): receipt(cid("a"), 5.0),
                                   cid("b"): receipt(cid("b"), 50.0, release=OTHER)})
    block = plan_schedule([(cid("a"), RELEASE), (cid("b"), RELEASE)], history=tmp_path,
                          host_class=HOST)
    assert order_of(block) == [cid("b"), cid("a")]
    by_case = {item["case"]: item for item in block["order"]}
    assert by_case[cid("a")] == {"case": cid("a"), "estimate_s": 5.0, "from": "cpu",
                                 "match": "same-release", "host_class": HOST}
    # this class's other release beats another class's same release
    assert by_case[cid("b")] == {"case": cid("b"), "estimate_s": 50.0, "from": "cpu",
                                 "match": "other-release", "host_class": HOST}
    assert block["host_class"] == HOST and block["source_runs"] == ["h200", "cpu"]
    # seen from the H200 box, the same root gives the H200 durations
    h200 = plan_schedule([(cid("a"), RELEASE), (cid("b"), RELEASE)], history=tmp_path,
                         host_class=H200)
    assert order_of(h200) == [cid("a"), cid("b")]
    assert {item["from"] for item in h200["order"]} == {"h200"}


def test_another_host_class_is_used_only_when_this_one_has_none(tmp_path: Path) -> None:
    write_run(tmp_path, "new", 1, {cid("a"): receipt(cid("a"), 8.0, host=H200,
                                                     release=OTHER)})
    write_run(tmp_path, "old", 2, {cid("a"): receipt(cid("a"), 3.0, host=H200),
                                   cid("b"): {**receipt(cid("b"), 4.0), "comparison_key": None}})
    found, consulted = prior_durations(recent_runs(tmp_path),
                                       {cid("a"): RELEASE, cid("b"): RELEASE}, "cpu-16c-64g")
    # none of this class: the other class's same release, then its newest, beat no estimate
    assert found[cid("a")] == {"estimate_s": 3.0, "from": "old", "match": "same-release",
                               "host_class": H200}
    # a receipt that names no host class is another class's, never this one's
    assert found[cid("b")] == {"estimate_s": 4.0, "from": "old", "match": "other-release",
                               "host_class": None}
    assert consulted == ["new", "old"]
    # a class that cannot be told (None) weighs every class alike, as before
    found, _ = prior_durations(recent_runs(tmp_path), {cid("a"): RELEASE}, None)
    assert found[cid("a")]["from"] == "old"


def test_a_first_sweep_asks_nothing_about_the_host(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from patchlane.sweep import provenance

    monkeypatch.setattr(provenance, "host_class_here",
                        lambda: pytest.fail("nvidia-smi asked with no history to weigh"))
    block = plan_schedule([(cid("a"), RELEASE)], history=tmp_path / "none-yet")
    assert block["host_class"] is None and order_of(block) == [cid("a")]


def test_this_machines_host_class_is_the_one_its_ranks_record() -> None:
    # The sweep tells the class without importing torch; a case's rank imports torch and
    # records it (provenance.runtime). Both in fresh interpreters, on whatever this machine is.
    import subprocess
    import sys

    def ask(code: str) -> str:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             timeout=300, check=True)
        return out.stdout.strip()

    sweep_side = ask("import sys; from patchlane.sweep.provenance import host_class_here; "
                     "print(host_class_here()); assert 'torch' not in sys.modules")
    rank_side = ask("import torch; from patchlane.sweep import provenance as p; "
                    "print(p.host_class(p._torch_info()))")
    assert sweep_side == rank_side


@pytest.mark.parametrize(("mask", "names"), [
    (None, ["NVIDIA H200", "NVIDIA H100"]),
    ("1", ["NVIDIA H100"]),
    ("GPU-bb, 0", ["NVIDIA H100", "NVIDIA H200"]),  # by UUID prefix, in the mask's order
    ("0,7,1", ["NVIDIA H200"]),                     # CUDA stops at the first unknown one
    ("", []), ("-1", []),
])
def test_cuda_visible_devices_limits_the_gpus_counted(mask: str | None,
                                                      names: list[str]) -> None:
    from patchlane.sweep.provenance import _visible

    gpus = [["0", "GPU-aa11", "NVIDIA H200"], ["1", "GPU-bb22", "NVIDIA H100"]]
    assert [name for _, _, name in _visible(gpus, mask)] == names


Stub = Callable[..., CaseResult]


def stub_runner(seconds: dict[str, float], started: list[str]) -> Stub:
    """A case runner that records the order cases start in and reports ``seconds[suffix]``
    (plus 0.5 with the overlay) as the case's duration, without sleeping."""
    def run_case(entry: Entry, mode: Mode, *, lane: Lane, world_size: int,
                 **_: Any) -> CaseResult:
        started.append(case_id(entry.id, lane, world_size, mode))
        took = seconds[entry.id.rsplit("_", 1)[-1]] + (0.5 if mode is Mode.WITH else 0.0)
        outcome = RunOutcome.FAIL if mode is Mode.WITHOUT else RunOutcome.PASS
        return CaseResult(entry.id, mode, lane, world_size, outcome, "stub", seconds=took)
    return run_case


def sweep_once(registry: Registry, path: Path, history: Path | None,
               monkeypatch: pytest.MonkeyPatch, seconds: dict[str, float], *,
               jobs: int = 1, only: list[str] | None = None,
               schedule: str = "longest-first") -> tuple[RunDir, list[str], list[str]]:
    started: list[str] = []
    monkeypatch.setattr(sweep_module, "run_case", stub_runner(seconds, started))
    run = new_run(registry, path, lanes=["cpu"], only=only, shard=Shard(1, 1),
                  header={"run_id": path.name}, history=history, schedule=schedule)
    events: list[str] = []

    def on_event(event: SweepEvent) -> None:
        if event.state is CaseState.RUNNING:
            events.append(event.case_id)

    run_sweep(registry, run, jobs=jobs, on_event=on_event)
    return run, started, events


def test_a_second_sweep_starts_the_longest_cases_first(
        fake_target: FakeTarget, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Registry order lists the short entries first; the first run learns the durations.
    names = ["q", "r", "s", "t"]
    seconds = {"q": 1.0, "r": 2.0, "s": 3.0, "t": 4.0}
    registry = registry_of(fake_target, names)
    ids = {n: f"{fake_target.entry_id}_{n}" for n in names}
    plan_order = [cid(ids[n], m) for n in names for m in ("without", "with")]
    runs = tmp_path / "runs"
    first, started, _ = sweep_once(registry, runs / "a", runs, monkeypatch, seconds)
    assert started == plan_order  # nothing known yet: plan order (unknown first, ties stable)
    assert first.manifest["schedule"]["source_runs"] == []

    second, started, events = sweep_once(registry, runs / "b", runs, monkeypatch, seconds)
    longest = [cid(ids[n], m) for n in reversed(names) for m in ("with", "without")]
    # This is what would fail if the sweep went back to registry order.
    assert started == events == longest != plan_order
    schedule = RunDir.open(second.path).manifest["schedule"]
    assert schedule["policy"] == "longest-first" and schedule["source_runs"] == ["a"]
    assert order_of(schedule) == longest
    first_item = schedule["order"][0]
    assert first_item == {"case": cid(ids["t"], "with"), "estimate_s": 4.5, "from": "a",
                          "match": "same-release", "host_class": host_class_here()}
    # the class the estimates were weighed for is this machine's, as its receipts say
    assert schedule["host_class"] == host_class_here() is not None
    # the receipts the estimates came from are the first run's own
    receipt = json.loads((first.path / "receipts" / f"{cid(ids['t'], 'with')}.json").read_text())
    assert receipt["seconds"] == 4.5
    # the verdicts do not depend on the order
    assert {r.verdict for r in verdicts(RunDir.open(second.path))} == {Verdict.GUARDING}


def test_with_parallel_jobs_the_pool_gets_the_schedule_order(
        fake_target: FakeTarget, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    names = ["q", "r", "s"]
    seconds = {"q": 1.0, "r": 9.0, "s": 3.0}
    registry = registry_of(fake_target, names)
    runs = tmp_path / "runs"
    sweep_once(registry, runs / "a", runs, monkeypatch, seconds, jobs=2)
    submitted: list[str] = []
    real = sweep_module.dispatch_order

    def spy(manifest: dict[str, Any], queued: Sequence[str]) -> list[str]:
        submitted.extend(real(manifest, queued))
        return submitted

    monkeypatch.setattr(sweep_module, "dispatch_order", spy)
    second, _, _ = sweep_once(registry, runs / "b", runs, monkeypatch, seconds, jobs=2)
    assert submitted == order_of(second.manifest["schedule"])
    assert [c.split("--")[0].rsplit("_", 1)[-1] for c in submitted] == \
        ["r", "r", "s", "s", "q", "q"]


def test_new_entries_start_first_and_corrupt_history_is_passed_over(
        fake_target: FakeTarget, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    names = ["q", "r", "s"]
    seconds = {"q": 5.0, "r": 1.0, "s": 2.0}
    registry = registry_of(fake_target, names)
    ids = {n: f"{fake_target.entry_id}_{n}" for n in names}
    runs = tmp_path / "runs"
    # the first run never saw s (a new entry since)
    sweep_once(registry, runs / "a", runs, monkeypatch, seconds, only=[ids["q"], ids["r"]])
    # a newer run whose receipt of q-with is cut off, and one whose manifest is garbage
    newer = write_run(runs, "b", -1, {cid(ids["q"], "with"): "{\"case_id\""})
    (newer / "manifest.json").write_text("{half")
    os.utime(newer / "manifest.json", (2_000_000_000, 2_000_000_000))
    run, started, _ = sweep_once(registry, runs / "c", runs, monkeypatch, seconds)
    assert started == [cid(ids["s"], "without"), cid(ids["s"], "with"),
                       cid(ids["q"], "with"), cid(ids["q"], "without"),
                       cid(ids["r"], "with"), cid(ids["r"], "without")]
    by_case = {item["case"]: item for item in run.manifest["schedule"]["order"]}
    assert by_case[cid(ids["q"], "with")]["from"] == "a"  # past b's partial receipt
    assert run.manifest["schedule"]["source_runs"] == ["b", "a"]


def test_the_registry_policy_runs_in_plan_order(
        fake_target: FakeTarget, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    names = ["q", "r"]
    seconds = {"q": 1.0, "r": 9.0}
    registry = registry_of(fake_target, names)
    runs = tmp_path / "runs"
    sweep_once(registry, runs / "a", runs, monkeypatch, seconds)
    run, started, _ = sweep_once(registry, runs / "b", runs, monkeypatch, seconds,
                                 schedule="registry")
    assert started == [c for c, _ in run.cases()]  # plan (registry) order
    assert run.manifest["schedule"]["policy"] == "registry"


def test_a_resumed_run_keeps_its_planned_order(
        fake_target: FakeTarget, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    names = ["q", "r", "s"]
    seconds = {"q": 1.0, "r": 2.0, "s": 3.0}
    registry = registry_of(fake_target, names)
    ids = {n: f"{fake_target.entry_id}_{n}" for n in names}
    runs = tmp_path / "runs"
    sweep_once(registry, runs / "a", runs, monkeypatch, seconds)
    run = new_run(registry, runs / "b", lanes=["cpu"], only=None, shard=Shard(1, 1),
                  header={"run_id": "b"}, history=runs)
    planned = order_of(run.manifest["schedule"])
    # killed while its second case ran: the first finished (receipt and all), two started
    started: list[str] = []
    monkeypatch.setattr(sweep_module, "run_case", stub_runner(seconds, started))
    first = planned[0]
    run.begin(first)
    run.settle(first, {"case_id": first, "outcome": "pass", "seconds": 3.5, "stage": None,
                       "message": "stub"})
    run.transition(planned[1], CaseState.RUNNING)
    # later, a newer run appears beside it: the resumed run does not re-plan from it
    write_run(runs, "z", -5, {c: receipt(c, 100.0 * i) for i, c in enumerate(planned)})
    resumed = RunDir.open(run.path)
    resumed.requeue_unfinished()
    run_sweep(registry, resumed, jobs=1)
    assert started == planned[1:]
    assert RunDir.open(run.path).manifest["schedule"]["order"] == \
        run.manifest["schedule"]["order"]
    assert planned[0] == cid(ids["s"], "with")


def test_a_manifest_from_before_schedules_resumes_in_manifest_order(
        fake_target: FakeTarget, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    names = ["q", "r"]
    seconds = {"q": 1.0, "r": 9.0}
    registry = registry_of(fake_target, names)
    runs = tmp_path / "runs"
    sweep_once(registry, runs / "a", runs, monkeypatch, seconds)
    run = new_run(registry, runs / "b", lanes=["cpu"], only=None, shard=Shard(1, 1),
                  header={"run_id": "b"}, history=runs)
    del run.manifest["schedule"]  # as an older patchlane wrote it
    run.save()
    started: list[str] = []
    monkeypatch.setattr(sweep_module, "run_case", stub_runner(seconds, started))
    resumed = RunDir.open(run.path)
    resumed.requeue_unfinished()
    run_sweep(registry, resumed, jobs=1)
    assert started == [c for c, _ in resumed.cases()]
    assert {r.verdict for r in verdicts(RunDir.open(run.path))} == {Verdict.GUARDING}


@pytest.mark.slow
def test_the_command_line_reads_the_runs_beside_the_new_one(fake_target: FakeTarget,
                                                           tmp_path: Path) -> None:
    import subprocess
    import sys

    from patchlane.installed.gates import resolve_version

    names = ["q", "r"]
    registry_of(fake_target, names)
    ids = {n: f"{fake_target.entry_id}_{n}" for n in names}
    release = {fake_target.distribution: fake_target.version,
               "torch": resolve_version("torch")[0]}
    runs = tmp_path / "runs"
    # an earlier run (written by hand) says r's cases are the long ones
    write_run(runs, "earlier", 1, {
        cid(ids["q"], "without"): receipt(cid(ids["q"], "without"), 1.0, release=release),
        cid(ids["q"], "with"): receipt(cid(ids["q"], "with"), 2.0, release=release),
        cid(ids["r"], "without"): receipt(cid(ids["r"], "without"), 40.0, release=release),
        cid(ids["r"], "with"): receipt(cid(ids["r"], "with"), 30.0, release=release)})
    env = {k: v for k, v in os.environ.items() if not k.startswith("PATCHLANE_")}
    env.update(PYTHONPATH=str(fake_target.root), PATCHLANE_DEFAULT_REGISTRY="0",
               PATCHLANE_REGISTRY=str(fake_target.registry))
    out = subprocess.run([sys.executable, "-m", "patchlane.cli.main", "sweep", "--run-dir",
                          str(runs / "now"), "--jobs", "1", "--quiet"], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    manifest = RunDir.open(runs / "now").manifest
    schedule = manifest["schedule"]
    assert (schedule["history_root"], schedule["source_runs"]) == (str(runs), ["earlier"])
    assert order_of(schedule) == [cid(ids["r"], "without"), cid(ids["r"], "with"),
                                  cid(ids["q"], "with"), cid(ids["q"], "without")]
    assert {item["match"] for item in schedule["order"]} == {"same-release"}
    started = [manifest["cases"][c]["started"] for c in order_of(schedule)]
    assert started == sorted(started)  # one job: they started in that order
