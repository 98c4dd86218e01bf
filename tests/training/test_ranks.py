"""Rank agreement on real gloo process groups (2 and 4 CPU ranks) and the run receipt."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from patchlane.training.ranks import compare_patch_sets

pytestmark = pytest.mark.slow

WORKER = r"""
import json, os, sys
import patchlane  # first line of a training script
import torch.distributed as dist

rank, world, store = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
explicit = os.environ.get("EXPLICIT") == "1"
out = {"rank": rank}
try:
    if os.environ.get("MESH") == "1":  # FSDP2 / torchtitan: the group made by the mesh
        from torch.distributed.device_mesh import init_device_mesh
        init_device_mesh("cpu", (world,))
    else:
        dist.init_process_group("gloo", init_method=store, rank=rank, world_size=world)
    out["hash"] = patchlane.verify_ranks() if explicit else "auto"
    out["ok"] = True
except patchlane.PatchlaneError as exc:
    out["ok"] = False
    out["error"] = str(exc)
    out["type"] = type(exc).__name__
print(json.dumps(out))
"""


def launch(tmp_path: Path, world: int, env_per_rank: dict[int, dict[str, str]],
           common: dict[str, str] | None = None) -> list[dict[str, object]]:
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    store = (tmp_path / "store").as_uri()
    procs = []
    for rank in range(world):
        env = {k: v for k, v in os.environ.items() if not k.startswith("PATCHLANE_")}
        env.update(common or {})
        env.update(env_per_rank.get(rank, {}))
        procs.append(subprocess.Popen([sys.executable, str(script), str(rank), str(world),
                                       store], env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True, cwd=tmp_path))
    results = []
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=120)
            assert out.strip(), err
            results.append(json.loads(out.strip().splitlines()[-1]))
    finally:  # a rank that never joins leaves the others in the collective: never left running
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    return results


@pytest.mark.parametrize("world", [2, 4])
def test_matching_ranks_pass_at_init(tmp_path: Path, world: int) -> None:
    results = launch(tmp_path, world, {})
    assert all(r["ok"] for r in results), results


@pytest.mark.parametrize("world", [2, 4])
def test_a_rank_started_with_disable_fails_every_rank(tmp_path: Path, world: int) -> None:
    odd = world - 1
    results = launch(tmp_path, world, {odd: {"PATCHLANE_DISABLE": "mcore_rerun_sentinel"}})
    assert not any(r["ok"] for r in results), results
    for r in results:
        assert r["type"] == "RankMismatchError"
        error = str(r["error"])
        assert f"rank {r['rank']}:" in error
        assert "entry mcore_rerun_sentinel enabled" in error
        assert f"ranks {odd} = false" in error
        assert "ranks " + ",".join(str(i) for i in range(odd)) + " = true" in error


def test_a_rank_whose_settings_cannot_be_read_still_joins_and_every_rank_stops(
        tmp_path: Path) -> None:
    # It left the check out (a collective) while the others joined: the job hung until the
    # process group's timeout, then died of a gloo error. Joined, it names its startup error.
    results = launch(tmp_path, 2, {1: {"PATCHLANE_DEFAULT_REGISTRY": "maybe"}})
    assert not any(r["ok"] for r in results), results
    for r in results:
        assert r["type"] == "RankMismatchError", r
        assert "startup_error: " in str(r["error"]) and "PATCHLANE_DEFAULT_REGISTRY='maybe'" \
            in str(r["error"]), r


def _two_ranks_disagreeing(tmp_path: Path, body: str) -> list[tuple[int, str, str]]:
    """``body`` run as a script on two gloo ranks, rank 1 with one entry disabled: each rank's
    exit code, stdout and stderr."""
    script = tmp_path / "train.py"
    script.write_text("import sys\nimport patchlane\nimport torch.distributed as dist\n"
                      "def init():\n    dist.init_process_group('gloo', init_method=sys.argv[3], "
                      "rank=int(sys.argv[1]), world_size=int(sys.argv[2]))\n" + body)
    store = (tmp_path / "store").as_uri()
    procs = []
    for rank in range(2):
        env = {k: v for k, v in os.environ.items() if not k.startswith("PATCHLANE_")}
        if rank == 1:
            env["PATCHLANE_DISABLE"] = "mcore_rerun_sentinel"
        procs.append(subprocess.Popen([sys.executable, str(script), str(rank), "2", store],
                                      env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True, cwd=tmp_path))
    ended = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        ended.append((proc.returncode, out, err))
    return ended


def test_an_uncaught_mismatch_is_one_line_and_exit_8(tmp_path: Path) -> None:
    # A script under `patchlane run` cannot catch it: one line and the table's exit 8, not a
    # traceback and exit 1
    for code, out, err in _two_ranks_disagreeing(tmp_path, "init()\nprint('trained')\n"):
        assert code == 8, err
        assert "trained" not in out and "Traceback" not in err, err
        (line,) = [x for x in err.splitlines() if "RankMismatchError" in x]
        assert line.startswith("patchlane: RankMismatchError: ") and "exit 8" in line, line


def test_a_mismatch_leaves_no_group_behind(tmp_path: Path) -> None:
    # init_process_group that raised leaves no group, as a failed init does. Left alive to the
    # interpreter's exit, gloo's threads were at times destroyed unjoined: the rank died by
    # SIGABRT ("terminate called without an active exception", -6), not with exit 8
    body = ("try:\n    init()\nexcept patchlane.RankMismatchError:\n"
            "    print('group left:', dist.is_initialized())\n")
    for code, out, err in _two_ranks_disagreeing(tmp_path, body):
        assert code == 0, err
        assert "group left: False" in out, (out, err)


def test_a_group_made_by_init_device_mesh_is_checked_too(tmp_path: Path) -> None:
    # init_device_mesh calls the init_process_group device_mesh took from distributed_c10d:
    # the ranks disagreed and trained on, unchecked
    from ..conftest import free_port

    port = str(free_port())
    results = launch(tmp_path, 2, {
        rank: {"RANK": str(rank), **({"PATCHLANE_DISABLE": "mcore_rerun_sentinel"}
                                     if rank == 1 else {})} for rank in range(2)},
        {"MESH": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port})
    assert not any(r["ok"] for r in results), results
    assert all(r["type"] == "RankMismatchError" for r in results), results


def test_explicit_verify_returns_the_shared_hash(tmp_path: Path) -> None:
    results = launch(tmp_path, 2, {}, {"EXPLICIT": "1"})
    assert results[0]["hash"] == results[1]["hash"]
    assert str(results[0]["hash"]).startswith("sha256:")


def test_the_check_can_be_turned_off(tmp_path: Path) -> None:
    results = launch(tmp_path, 2, {1: {"PATCHLANE_DISABLE": "mcore_rerun_sentinel"}},
                     {"PATCHLANE_VERIFY_RANKS": "0"})
    assert all(r["ok"] for r in results), results


def test_different_releases_and_decisions_are_named() -> None:
    base = {"patchlane": "0.1.0", "registry_digest": "sha256:a", "entries": {
        "x": {"status": "active", "enabled": True, "installed": "0.16.1", "gate_open": True,
              "decision": "applied", "fingerprint": "sha256:f"}}}
    other = json.loads(json.dumps(base))
    other["entries"]["x"]["installed"] = "0.15.3"
    other["entries"]["x"]["fingerprint"] = "sha256:g"
    pending = json.loads(json.dumps(base))
    pending["entries"]["x"]["decision"] = None  # not imported yet on this rank: not a mismatch
    pending["entries"]["x"]["fingerprint"] = None
    assert compare_patch_sets([base, pending]) == []
    problems = compare_patch_sets([base, base, other])
    assert any("installed" in p and "ranks 2" in p for p in problems), problems
    assert any("fingerprint" in p for p in problems), problems


def test_a_rank_whose_overlay_is_off_the_call_path_disagrees() -> None:
    """Every rank decided "applied", but on one something replaced the overlay since: the
    lookup no longer reaches it there, and the ranks are told they differ."""
    base = {"patchlane": "0.1.0", "registry_digest": "sha256:a", "entries": {
        "x": {"status": "active", "enabled": True, "installed": "0.16.1", "gate_open": True,
              "decision": "applied", "fingerprint": "sha256:f", "applied": True}}}
    replaced = json.loads(json.dumps(base))
    replaced["entries"]["x"]["applied"] = False
    problems = compare_patch_sets([base, base, replaced])
    assert problems == ["entry x applied: ranks 0,1 = true; ranks 2 = false"], problems
    pending = json.loads(json.dumps(base))
    pending["entries"]["x"].update(decision=None, fingerprint=None, applied=False)
    assert compare_patch_sets([base, pending]) == []  # not imported there yet
