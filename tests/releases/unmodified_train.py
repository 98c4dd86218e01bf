"""A Megatron-style training script that never imports patchlane (tests/releases/test_launch.py
starts it through `patchlane run -- torchrun ...`). One rank per process, gloo on CPU, the
rendezvous from torchrun's environment. It writes what it saw to OUT/rank<r>.json.

    --step state-dict   the rerun state machine's state_dict, as a checkpoint save asks it
    --step checkpoint   a steady then a fault dist-checkpoint save through one cached save
                        plan, then the load (megatron.core.dist_checkpointing; Megatron-LM
                        #4378: without the fix the load misses rerun_state_machine_state)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--step", choices=("state-dict", "checkpoint"), default="state-dict")
    args = parser.parse_args()

    import torch.distributed as dist

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    print(f"rank {rank}: training started", flush=True)

    from megatron.core import rerun_state_machine as rsm

    rsm.initialize_rerun_state_machine(mode=rsm.RerunMode.VALIDATE_RESULTS)
    machine = rsm.get_rerun_state_machine()
    result: dict[str, Any] = {"rank": rank, "world": world}
    if args.step == "state-dict":
        steady = machine.state_dict(None, "torch_dist")
        result["steady_state_dict"] = None if steady is None else sorted(steady)
    else:
        result["loaded"] = _checkpoint(args.out, machine, rsm, rank, world)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"rank{rank}.json").write_text(json.dumps(result))
    dist.barrier()
    dist.destroy_process_group()
    return 0


def _checkpoint(out: Path, machine: Any, rsm: Any, rank: int, world: int) -> dict[str, Any]:
    import torch
    import torch.distributed as dist
    from megatron.core import dist_checkpointing
    from megatron.core.dist_checkpointing.mapping import ShardedTensor
    from megatron.core.dist_checkpointing.strategies.torch import TorchDistSaveShardedStrategy

    if not torch.cuda.is_available():
        # The save path waits on and reports through CUDA even for CPU tensors; a CPU smoke
        # run answers those two calls itself (as any CPU-only Megatron test must).
        torch.cuda.synchronize = lambda *a, **k: None
        torch.cuda.current_device = lambda: "cpu"
    weights = torch.arange(4.0) + 4 * rank

    def state(template: bool = False) -> dict[str, Any]:
        return {"weights": ShardedTensor.from_rank_offsets(
                    "weights", torch.zeros_like(weights) if template else weights,
                    (0, rank, world)),
                "rerun_state_machine": machine.state_dict(None, "torch_dist", force=template)}

    strategy = TorchDistSaveShardedStrategy("torch_dist", 1, cached_metadata=True)
    steady, fault = out / "ckpt" / "iter_0000010", out / "ckpt" / "iter_0000011"
    if rank == 0:
        steady.mkdir(parents=True)
        fault.mkdir(parents=True)
    dist.barrier()
    dist_checkpointing.save(state(), str(steady), sharded_strategy=strategy)
    machine.state = rsm.RerunState.WILL_RERUN_FROM_CHECKPOINT
    machine.current_iteration = 11
    machine.suspicious_node = f"node-{rank}"
    dist_checkpointing.save(state(), str(fault), sharded_strategy=strategy)
    try:
        loaded = dist_checkpointing.load(state(template=True), str(fault))
    except BaseException as exc:  # torch's CheckpointException is a BaseException
        missing = sorted({line.strip() for line in str(exc).splitlines() if "Missing key" in line})
        return {"error": f"{type(exc).__name__}", "missing": missing}
    rerun = loaded["rerun_state_machine"]
    return {"state": str(rerun["state"]), "iteration": rerun["current_iteration"],
            "suspicious_node": rerun["sharded"]["suspicious_node"]}


if __name__ == "__main__":
    sys.exit(main())
