"""A minimal Megatron-style training run on CPU that carries its patches honestly.

    python examples/train_tiny_megatron.py --out runs/example     (or ./scripts/example)

What it shows, in order:
1. ``import patchlane`` first: overlays are applied as megatron-core is imported;
2. ``torch.distributed.init_process_group``: patchlane compares every rank's patch set;
3. a tiny megatron-core MLP (ColumnParallelLinear + RowParallelLinear) trained a few steps
   with the rerun state machine enabled;
4. torch_dist checkpoints through one cached-plan strategy (``--ckpt-assume-constant-structure``,
   the combination Megatron-LM #4378 breaks), each carrying a patchlane run stamp;
5. the stamp read back from the saved checkpoint, and the weights loaded back.

Runs as one rank by default; under ``torchrun --nproc-per-node 2`` it runs two gloo ranks.
"""

import patchlane  # noqa: F401, I001 - first, before anything imports megatron

import argparse
import json
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/example"))
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--save-interval", type=int, default=3)
    args = parser.parse_args()

    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    args.out.mkdir(parents=True, exist_ok=True)
    store = (args.out / ".store").resolve()
    if "MASTER_ADDR" in os.environ:  # under torchrun
        init = "env://"
    else:
        store.unlink(missing_ok=True)
        init = store.as_uri()
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)

    from megatron.core import dist_checkpointing, parallel_state
    from megatron.core import rerun_state_machine as rsm
    from megatron.core.dist_checkpointing.strategies.torch import TorchDistSaveShardedStrategy
    from megatron.core.tensor_parallel import ColumnParallelLinear, RowParallelLinear
    from megatron.core.transformer.mlp import MLP, MLPSubmodules
    from megatron.core.transformer.transformer_config import TransformerConfig

    from patchlane.testing.cpu import cpu_stand_ins
    from patchlane.training.checkpoint import add_run_stamp, read_run_stamp

    parallel_state.initialize_model_parallel(1, 1)
    rsm.initialize_rerun_state_machine(mode=rsm.RerunMode.VALIDATE_RESULTS)
    machine = rsm.get_rerun_state_machine()

    torch.manual_seed(1234)
    config = TransformerConfig(num_layers=1, hidden_size=32, num_attention_heads=4,
                               ffn_hidden_size=64, add_bias_linear=False,
                               use_cpu_initialization=True)
    model = MLP(config, MLPSubmodules(linear_fc1=ColumnParallelLinear,
                                      linear_fc2=RowParallelLinear))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    metadata = {"dp_cp_group": parallel_state.get_data_parallel_group(with_context_parallel=True)}
    strategy = TorchDistSaveShardedStrategy("torch_dist", 1, cached_metadata=True)
    inputs, targets = torch.randn(8, 2, 32), torch.randn(8, 2, 32)

    def state_dict() -> dict[str, object]:
        state: dict[str, object] = dict(model.sharded_state_dict(prefix="model.",
                                                                 metadata=metadata))
        state["rerun_state_machine"] = machine.state_dict(None, "torch_dist")
        return add_run_stamp(state)

    saved = None
    for step in range(1, args.steps + 1):
        output, _ = model(inputs)
        loss = torch.nn.functional.mse_loss(output, targets)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        if rank == 0:
            print(f"step {step}: loss {loss.item():.4f}")
        if step % args.save_interval == 0:
            saved = args.out / f"iter_{step:07d}"
            if rank == 0:
                saved.mkdir(parents=True, exist_ok=True)
            dist.barrier()
            with cpu_stand_ins():
                dist_checkpointing.save(state_dict(), str(saved), sharded_strategy=strategy)
            if rank == 0:
                (args.out / "latest_checkpointed_iteration.txt").write_text(str(step))
            dist.barrier()

    assert saved is not None, "no checkpoint saved: --steps < --save-interval"
    stamp = read_run_stamp(args.out)
    template = dict(model.sharded_state_dict(prefix="model.", metadata=metadata))
    loaded = dist_checkpointing.load(template, str(saved))
    compared = [torch.equal(loaded[k], v.data) for k, v in template.items()
                if hasattr(v, "data") and isinstance(loaded.get(k), torch.Tensor)]
    same = len(compared) == 2 and all(compared)  # fc1 and fc2 weights
    if rank == 0:
        applied = [e["id"] for e in stamp["entries"] if e["outcome"] == "applied"]
        print(f"checkpoint {saved} carries patchlane run stamp {stamp['patch_set']}: "
              f"applied {applied}")
        print(f"weights reloaded identical: {same}")
        print(json.dumps({"stamp": stamp, "weights_identical": same}), file=sys.stderr)
    rsm.destroy_rerun_state_machine()
    dist.destroy_process_group()
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
