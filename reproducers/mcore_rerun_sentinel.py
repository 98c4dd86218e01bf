"""Reproducer: a fault save through a cached save plan must load (Megatron-LM #4378 / PR #4448).

One ``TorchDistSaveShardedStrategy(cached_metadata=True)`` saves a steady-state checkpoint and
then a fault checkpoint (the rerun state machine wants to re-run the step). Loading the fault
checkpoint must give back every rank's fault state. On affected releases the cached plan from
the steady save has no ``rerun_state_machine_state`` entry, the fault payload is dropped, and the
load fails with ``Missing key in checkpoint state_dict: rerun_state_machine_state/shard_...``.

Lanes: ``cpu`` (gloo) and ``cuda`` (NCCL, one GPU per rank), the same code path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from patchlane.reproducer import ReproContext

LANES = ("cpu", "cuda")
WORLD_SIZES = (1, 2)

MISSING_KEY = "rerun_state_machine_state"


def _fault_fields(rank: int) -> dict[str, Any]:
    return {
        "rerun_requested": True,
        "checkpoint_requested": True,
        "suspicious_node": f"node-{rank}",
        "suspicious_device": rank,
        "large_value_counts": {"loss": 3 + rank},
    }


def run(ctx: ReproContext) -> None:
    with ctx.process_group():
        _run(ctx)


def _run(ctx: ReproContext) -> None:
    import torch
    import torch.distributed as dist
    from megatron.core import dist_checkpointing
    from megatron.core import rerun_state_machine as rsm
    from megatron.core.dist_checkpointing.mapping import ShardedTensor
    from megatron.core.dist_checkpointing.strategies.torch import TorchDistSaveShardedStrategy

    from patchlane.testing.cpu import cpu_stand_ins

    try:
        rsm.destroy_rerun_state_machine()
        rsm.initialize_rerun_state_machine(mode=rsm.RerunMode.VALIDATE_RESULTS)
        machine = rsm.get_rerun_state_machine()
        weights = torch.arange(4.0, device=ctx.device) + 4 * ctx.rank

        def state(template: bool = False) -> dict[str, Any]:
            tensor = torch.zeros_like(weights) if template else weights
            return {
                "weights": ShardedTensor.from_rank_offsets(
                    "weights", tensor, (0, ctx.rank, ctx.world_size)),
                "rerun_state_machine": machine.state_dict(None, "torch_dist", force=template),
            }

        # One strategy object for both saves: the plan cached by the first save is reused.
        strategy = TorchDistSaveShardedStrategy("torch_dist", 1, cached_metadata=True)
        steady_dir, fault_dir = ctx.workdir / "iter_0000010", ctx.workdir / "iter_0000011"
        # Two save-path calls assume CUDA even for CPU tensors (see patchlane/testing/cpu.py).
        with cpu_stand_ins():
            if ctx.rank == 0:
                steady_dir.mkdir()
                fault_dir.mkdir()
            dist.barrier()
            dist_checkpointing.save(state(), str(steady_dir), sharded_strategy=strategy)

            machine.state = rsm.RerunState.WILL_RERUN_FROM_CHECKPOINT
            machine.current_iteration = 11
            for name, value in _fault_fields(ctx.rank).items():
                setattr(machine, name, value)
            dist_checkpointing.save(state(), str(fault_dir), sharded_strategy=strategy)

            template = state(template=True)
            try:
                loaded = dist_checkpointing.load(template, str(fault_dir))
            except BaseException as exc:  # torch's CheckpointException is a BaseException
                missing = sorted({line.strip() for line in str(exc).splitlines()
                                  if "Missing key" in line and MISSING_KEY in line})
                if missing:
                    raise AssertionError("fault checkpoint lost the rerun state (issue #4378): "
                                         + "; ".join(missing)) from exc
                raise

        rerun = loaded["rerun_state_machine"]
        assert rerun["state"] == rsm.RerunState.WILL_RERUN_FROM_CHECKPOINT, rerun["state"]
        assert rerun["current_iteration"] == 11, rerun["current_iteration"]
        for name, value in _fault_fields(ctx.rank).items():
            got = rerun["sharded"][name]
            assert got == value, f"rank {ctx.rank}: {name} loaded as {got!r}, saved {value!r}"
        assert torch.equal(loaded["weights"].cpu(), weights.cpu()), "weights did not round-trip"
        # The loaded fault state must be accepted and restored by a fresh machine.
        fresh = rsm.RerunStateMachine(mode=rsm.RerunMode.VALIDATE_RESULTS)
        assert fresh.validate_state_dict(rerun), "loaded fault state rejected"
        fresh.load_state_dict(rerun)
        assert fresh.suspicious_node == f"node-{ctx.rank}", fresh.suspicious_node
    finally:
        rsm.destroy_rerun_state_machine()
