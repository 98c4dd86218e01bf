"""Reproducer: DSA's naive indexer-loss backward (megatron-core 0.19.x, the default
``dsa_kernel_backend="none"`` path) must be legal inside a CUDA graph capture, with gradients
bitwise equal to the eager ones.

Real upstream: ``FusedDSAIndexerLoss`` (forward ``fwd_fused_indexer_loss_naive``, backward
``bwd_fused_indexer_loss_naive``) on dense, causal, non-packed inputs, as ``DSAttention`` calls
it in training. ``patchlane.testing.capture.check_step`` runs one step eagerly (the warm-up a
capture needs), then the same step checked: a real ``torch.cuda.graph`` capture on the cuda
lane, replayed before its gradients are read; the same rules emulated with a dispatch mode on
cpu. Upstream builds the valid-row count
with ``torch.tensor(float(b * sq))`` in the backward, host data the check names.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from patchlane.reproducer import ReproContext

LANES = ("cpu", "cuda")
WORLD_SIZES = (1,)

SQ = SK = 16
BATCH, HEADS, INDEX_HEADS, DIM, TOPK = 2, 4, 3, 8, 4


def run(ctx: ReproContext) -> None:
    import torch
    from megatron.core.transformer.experimental_attention_variant import dsa

    from patchlane.testing.capture import check_step

    with ctx.process_group() as world:
        pg = SimpleNamespace(tp=world)  # what the naive loss reads (tp.size())
        g = torch.Generator().manual_seed(0)

        def tensor(*shape: int, grad: bool) -> Any:
            t = torch.randn(*shape, generator=g).bfloat16().to(ctx.device)
            return t.requires_grad_(grad)

        q = tensor(SQ, BATCH, INDEX_HEADS, DIM, grad=True)  # indexer queries
        weights = tensor(SQ, BATCH, INDEX_HEADS, grad=True)
        k = tensor(SK, BATCH, DIM, grad=True)  # indexer keys
        query = tensor(SQ, BATCH, HEADS, DIM, grad=False)  # attention's, detached in DSA
        key = tensor(SK, BATCH, HEADS, DIM, grad=False)

        def step() -> list[Any]:
            for t in (q, weights, k):
                t.grad = None
            _, loss = dsa.FusedDSAIndexerLoss.apply(
                q, weights, k, query, key, DIM ** -0.5, TOPK, 0.1, None, False, pg)
            loss.backward()
            return [t.grad.clone() for t in (q, weights, k)]

        result = check_step(step, lane=ctx.lane)  # step() clears the gradients itself
        report = result.report
        assert report.ok, "naive indexer-loss step not capture-legal: " + "; ".join(
            f"{v.op} ({v.rule}) at {v.frame}" for v in report.violations)
        changed = [f"grad {('q', 'weights', 'k')[int(name[1])]}"
                   for name in result.mismatches()]
        assert not changed, f"{', '.join(changed)} differs from the eager step's"
