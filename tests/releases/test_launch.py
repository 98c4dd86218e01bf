"""Issue 15 part 1: `patchlane run -- torchrun ...` activates patchlane on every rank of an
unmodified script (tests/releases/unmodified_train.py never imports patchlane), on real
megatron-core: the rerun sentinel's overlay applies and is hit on both ranks, a checkpoint save
through it loads (and without it does not: the test can fail), and a rank started with another
PATCHLANE_DISABLE stops the job with RankMismatchError before training starts.

torchrun is ``python -m torch.distributed.run`` of this interpreter; each rank's
``patchlane.report()`` comes from ``patchlane run --reports DIR`` (written at exit). On Python
3.12 the installed 0.19.2 is past the sentinel's gate: 0.17.1 comes first on PYTHONPATH.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ..conftest import free_port
from .conftest import release_for, requires_megatron

pytestmark = [pytest.mark.upstream, pytest.mark.slow, requires_megatron]

SCRIPT = Path(__file__).with_name("unmodified_train.py")
ENTRY = "mcore_rerun_sentinel"


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    _, release = release_for(ENTRY)
    env = {k: v for k, v in (release or os.environ).items() if not k.startswith("PATCHLANE_")}
    env["PYTHONWARNINGS"] = "ignore"
    env.update(extra or {})
    return env


def _launch(tmp: Path, torchrun: list[str], script: list[str], env: dict[str, str],
            reports: Path) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "patchlane.cli.main", "run", "--reports", str(reports), "--",
           sys.executable, "-m", "torch.distributed.run", *torchrun, str(SCRIPT), *script]
    return subprocess.Popen(cmd, env=env, cwd=tmp, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _finish(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=400)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    return proc.returncode, out, err


def _rank_reports(reports: Path) -> dict[int, dict[str, Any]]:
    """Each rank's own report: the processes torchrun's agent started (their children, e.g.
    the checkpoint writer's workers, inherit RANK and report too)."""
    loaded = [json.loads(p.read_text()) for p in reports.glob("*.json")]
    agents = {r["process"]["pid"] for r in loaded if r["process"]["rank"] is None
              and "torch/distributed/run.py" in r["process"]["argv"][0]}
    return {int(r["process"]["rank"]): r for r in loaded
            if r["process"]["rank"] is not None and r["process"]["ppid"] in agents}


def _entry(report: dict[str, Any]) -> dict[str, Any]:
    return next(e for e in report["entries"] if e["id"] == ENTRY)


def test_the_script_never_imports_patchlane() -> None:
    assert "import patchlane" not in SCRIPT.read_text()


@pytest.mark.parametrize("step", ["state-dict", "checkpoint"])
def test_patchlane_run_torchrun_two_ranks(tmp_path: Path, step: str) -> None:
    reports, out = tmp_path / "reports", tmp_path / "out"
    proc = _launch(tmp_path, ["--nproc-per-node", "2", "--master-port", str(free_port())],
                   ["--out", str(out), "--step", step], _env(), reports)
    code, stdout, stderr = _finish(proc)
    assert code == 0, stdout + stderr[-4000:]
    ranks = _rank_reports(reports)
    assert sorted(ranks) == [0, 1], sorted(reports.iterdir())
    for rank, report in ranks.items():
        entry = _entry(report)
        assert entry["decision"]["outcome"] == "applied", (rank, entry["decision"])
        assert entry["hits"] >= 1, (rank, entry)
        assert report["startup_error"] is None
    for rank in (0, 1):  # what a newcomer sees: one line per rank, the entry applied and hit
        line = next((ln for ln in stderr.splitlines()
                     if ln.startswith(f"patchlane run: rank {rank} ")), "")
        assert f"applied: {ENTRY} (hits " in line, stderr[-3000:]
    assert "patchlane run: main" not in stderr  # torchrun's agent stays quiet
    results = {r: json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1)}
    if step == "state-dict":  # the sentinel: a steady state emits the sharded object
        assert all(res["steady_state_dict"] for res in results.values()), results
    else:
        for rank, res in results.items():
            assert res["loaded"].get("suspicious_node") == f"node-{rank}", res
            assert res["loaded"]["iteration"] == 11


def test_without_the_overlay_the_checkpoint_loses_the_fault_state(tmp_path: Path) -> None:
    # The same launch with the entry disabled on every rank: the test above can fail.
    reports, out = tmp_path / "reports", tmp_path / "out"
    proc = _launch(tmp_path, ["--nproc-per-node", "2", "--master-port", str(free_port())],
                   ["--out", str(out), "--step", "checkpoint"],
                   _env({"PATCHLANE_DISABLE": ENTRY}), reports)
    code, stdout, stderr = _finish(proc)
    assert code == 0, stdout + stderr[-4000:]
    for rank in (0, 1):
        loaded = json.loads((out / f"rank{rank}.json").read_text())["loaded"]
        assert any("rerun_state_machine_state" in m for m in loaded.get("missing", [])), loaded
        assert _entry(_rank_reports(reports)[rank])["decision"]["outcome"] == "skipped: disabled"


def test_a_rank_with_another_patch_set_stops_the_job_before_training(tmp_path: Path) -> None:
    # Two "nodes" of one rank each (static rendezvous on this host), as two srun tasks would
    # start them: the second with a different PATCHLANE_DISABLE.
    port, out = free_port(), tmp_path / "out"
    procs = []
    for node, extra in ((0, {}), (1, {"PATCHLANE_DISABLE": ENTRY})):
        torchrun = ["--nnodes", "2", "--nproc-per-node", "1", "--node-rank", str(node),
                    "--master-addr", "127.0.0.1", "--master-port", str(port)]
        procs.append(_launch(tmp_path, torchrun, ["--out", str(out)], _env(extra),
                             tmp_path / f"reports{node}"))
    finished = [_finish(p) for p in procs]
    for node, (code, stdout, stderr) in enumerate(finished):
        assert code != 0, (node, stdout, stderr[-3000:])
        assert "training started" not in stdout, (node, stdout)
        assert "RankMismatchError" in stderr and "different patch sets" in stderr, \
            (node, stderr[-3000:])
        assert ENTRY in stderr
    assert not out.exists()
