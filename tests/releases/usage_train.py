"""A tiny CPU training step that never imports patchlane (tests/releases/test_usage.py starts
it through `patchlane run --reports DIR -- torchrun --nproc-per-node 2 ...`): gloo ranks, a
loss through liger-kernel's fused linear cross-entropy (Triton's interpreter on CPU; the
liger_flce_weighted_none overlay is hit), and megatron-core's DSA module imported but never
called (its entries are applied where their gates admit the release, and never hit). Each rank
writes OUT/rank<r>.json with its loss next to plain PyTorch's.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from pathlib import Path

os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported: liger's kernels on CPU


def main() -> int:
    out = Path(sys.argv[1])
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    from liger_kernel.ops.fused_linear_cross_entropy import (
        LigerFusedLinearCrossEntropyFunction,
    )

    importlib.import_module("megatron.core.transformer.experimental_attention_variant.dsa")
    g = torch.Generator().manual_seed(rank)
    x, weight = torch.randn(8, 16, generator=g), torch.randn(32, 16, generator=g) * 0.2
    target = torch.randint(0, 32, (8,), generator=g)
    loss = LigerFusedLinearCrossEntropyFunction.apply(x, weight, target, None, None, -100, 0.0,
                                                      0.0, "mean")
    loss = loss[0] if isinstance(loss, tuple) else loss
    out.mkdir(parents=True, exist_ok=True)
    (out / f"rank{rank}.json").write_text(json.dumps(
        {"liger": float(loss), "torch": float(F.cross_entropy(x @ weight.T, target))}))
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
