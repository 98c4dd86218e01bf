"""The rerun-state sentinel overlay against real megatron-core releases (Megatron-LM #4378).

The reproducer must FAIL on the real unpatched release and PASS with the overlay, per world
size, on every release the gate admits: on the CPU lane the release matrix runs it (every set
where the entry guards, 0.14.0 to 0.16.1 on Python 3.11, 0.16.1 and 0.17.1 on 3.12) and checks
each case with ``case_checks``; the CUDA lane runs here, with a GPU.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import pytest

import patchlane
from patchlane import startup
from patchlane.deciding.decider import load_overlay
from patchlane.registry import Entry
from patchlane.sweep.reproduce import Mode, run_case

from .case_checks import check_cases
from .conftest import megatron_version, release_for, requires_megatron

ENTRY_ID = "mcore_rerun_sentinel"

pytestmark = [pytest.mark.upstream, requires_megatron]


def entry() -> Entry:
    return startup.current().registry.get(ENTRY_ID)


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.parametrize("world_size", [1, 2])
def test_cuda_lane(world_size: int, tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or torch.cuda.device_count() < world_size:
        pytest.skip(f"needs {world_size} CUDA device(s)")
    # the installed release when the gate admits it, else the newest gated release of this
    # interpreter's matrix (the 3.12 venv's 0.19.2 is past the gate: upstream fixed it there)
    version, env = release_for(ENTRY_ID)
    without = run_case(entry(), Mode.WITHOUT, lane="cuda", world_size=world_size,
                       workdir=tmp_path, env=env)
    with_ = run_case(entry(), Mode.WITH, lane="cuda", world_size=world_size, workdir=tmp_path,
                     env=env)
    check_cases(ENTRY_ID, without, with_, version)


# -- the overlay's compatibility points, in-process on the installed release --------------

@pytest.fixture(scope="module")
def rsm() -> Any:
    """The real module, patched by the process-wide lane, with a 1-rank gloo group."""
    import torch.distributed as dist

    version, env = release_for(ENTRY_ID)
    if env is not None:
        pytest.skip(f"in-process checks need the installed megatron-core inside the gate; this "
                    f"interpreter's venv has {megatron_version()} (the release matrix and "
                    f"tests/releases/test_source_tree.py run the reproducer on {version} in "
                    "subprocesses)")
    module = importlib.import_module("megatron.core.rerun_state_machine")
    decision = next(e for e in patchlane.report()["entries"] if e["id"] == ENTRY_ID)
    assert decision["applied"], decision
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        dist.init_process_group("gloo", init_method=Path(tmp, "store").as_uri(), rank=0,
                                world_size=1)
        try:
            yield module
        finally:
            dist.destroy_process_group()


def original_state_dict(rsm: Any) -> Any:
    return vars(rsm.RerunStateMachine)["state_dict"].__wrapped__


def test_steady_state_emits_the_same_sharded_key_as_a_fault(rsm: Any) -> None:
    machine = rsm.RerunStateMachine(mode=rsm.RerunMode.VALIDATE_RESULTS)
    steady = machine.state_dict(None, "torch_dist")
    assert steady is not None, "steady state returned None: the bug is back"
    assert steady["state"] == rsm.RerunState.NOT_RUNNING_YET
    machine.state = rsm.RerunState.WILL_RERUN_FROM_CHECKPOINT
    fault = machine.state_dict(None, "torch_dist")
    for field in ("key", "global_shape", "global_offset", "replica_id"):
        assert getattr(steady["sharded"], field) == getattr(fault["sharded"], field), field
    assert set(steady["sharded"].data) == set(fault["sharded"].data)
    assert steady["sharded"].data["suspicious_node"] is None
    # a sentinel is ignored on load, exactly like an old checkpoint's steady state
    assert not machine.validate_state_dict(steady)


def test_steady_state_does_not_inspect_the_data_iterator(rsm: Any) -> None:
    machine = rsm.RerunStateMachine(mode=rsm.RerunMode.VALIDATE_RESULTS)
    plain_iterator = iter([1, 2, 3])  # not a RerunDataIterator: upstream asserts in a fault
    assert machine.state_dict(plain_iterator, "torch_dist")["sharded"] is not None
    machine.state = rsm.RerunState.WILL_RERUN_FROM_CHECKPOINT
    with pytest.raises(AssertionError, match="RerunDataIterator"):
        machine.state_dict(plain_iterator, "torch_dist")


@pytest.mark.parametrize(("mode", "fmt"), [("DISABLED", "torch_dist"),
                                           ("VALIDATE_RESULTS", "torch"),
                                           ("VALIDATE_RESULTS", "fsdp_dtensor")])
def test_disabled_mode_and_other_formats_still_return_none(rsm: Any, mode: str,
                                                           fmt: str) -> None:
    machine = rsm.RerunStateMachine(mode=getattr(rsm.RerunMode, mode))
    assert machine.state_dict(None, fmt) is None


@pytest.mark.parametrize("state", ["NOT_RUNNING_YET", "WILL_RERUN_FROM_CHECKPOINT"])
def test_force_and_fault_paths_are_upstream_unchanged(rsm: Any, state: str) -> None:
    machine = rsm.RerunStateMachine(mode=rsm.RerunMode.VALIDATE_RESULTS)
    machine.state = getattr(rsm.RerunState, state)
    patched = machine.state_dict(None, "torch_dist", force=True)
    upstream = original_state_dict(rsm)(machine, None, "torch_dist", force=True)
    assert patched.keys() == upstream.keys()
    assert patched["sharded"].data == upstream["sharded"].data
    assert patched["sharded"].key == upstream["sharded"].key


def test_probe_says_the_installed_release_is_affected(rsm: Any) -> None:
    overlay = load_overlay(entry())
    patchlane.revert(ENTRY_ID)  # the probe judges upstream as shipped, never our overlay
    try:
        assert rsm.RerunStateMachine(mode=rsm.RerunMode.VALIDATE_RESULTS).state_dict(
            None, "torch_dist") is None
        assert overlay.probe(rsm) is False
    finally:
        patchlane.apply()
    assert next(e for e in patchlane.report()["entries"] if e["id"] == ENTRY_ID)["applied"]
