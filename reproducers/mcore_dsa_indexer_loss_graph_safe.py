"""Reproducer: one DSA training step (sparse attention, indexer KL loss, its auto-scaler, and the
backward through all of it) must be legal inside a CUDA graph capture.

Real megatron-core 0.16-0.19 functions: ``unfused_dsa_fn``, ``compute_dsa_indexer_loss``,
``DSAIndexerLossAutoScaler``. ``patchlane.testing.capture.check_step`` runs the step eagerly
(capture needs a warm-up), resets the gradients and the auto-scaler's class state to what a
fresh process has, runs it again checked, and gives both runs' gradients; on the ``cuda`` lane
the checked step is a real capture, replayed before its gradients are read. That is the case
the entry guards: nothing in 0.16-0.18 sets a loss scale, and from 0.19.0 only Megatron's
pipeline schedules do (every forward step, PRs #4070 and #5244), so a step run directly, as a
training loop of its own runs it, reaches the lazy branch. The capture is a real
``torch.cuda.graph`` capture on the ``cuda`` lane, the same rules emulated with a dispatch mode
on ``cpu``. Upstream creates ``torch.tensor(1.0)`` inside ``DSAIndexerLossAutoScaler.backward``
there: host data entering the graph, and the check names that backward.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from patchlane.reproducer import ReproContext

LANES = ("cpu", "cuda")
WORLD_SIZES = (1,)

SQ = SK = 16
BATCH, HEADS, DIM, TOPK = 2, 4, 8, 4


def run(ctx: ReproContext) -> None:
    import torch
    from megatron.core.transformer.experimental_attention_variant import dsa

    from patchlane.testing.capture import check_step

    with ctx.process_group() as world:
        pg = SimpleNamespace(tp=world)  # what compute_dsa_indexer_loss reads
        g = torch.Generator().manual_seed(0)

        def tensor(*shape: int) -> Any:
            return torch.randn(*shape, generator=g).to(ctx.device).requires_grad_(True)

        query, key, value = (tensor(SQ, BATCH, HEADS, DIM), tensor(SK, BATCH, HEADS, DIM),
                             tensor(SK, BATCH, HEADS, DIM))
        index_scores = tensor(BATCH, SQ, SK)
        # as DSAIndexer does: causal mask before top-k, so every row keeps a visible key
        causal = torch.triu(torch.full((SQ, SK), float("-inf"), device=ctx.device), diagonal=1)

        leaves = (query, key, value, index_scores)

        def step() -> list[Any]:
            topk = torch.topk(index_scores.detach() + causal, TOPK, dim=-1).indices
            out = dsa.unfused_dsa_fn(query, key, value, topk, DIM ** -0.5)
            # A non-leaf copy, as in a model: 0.19 masks the scores in place
            # (`index_scores += index_score_mask`), which a leaf that requires grad refuses.
            loss = dsa.compute_dsa_indexer_loss(index_scores.clone(), topk, query.detach(),
                                                key.detach(), DIM ** -0.5, 0.1, False, pg)
            out = dsa.DSAIndexerLossAutoScaler.apply(out, loss)
            out.sum().backward()
            return [t.grad for t in leaves]

        def fresh_step() -> None:
            for t in leaves:
                t.grad = None
            dsa.DSAIndexerLossAutoScaler.main_loss_backward_scale = None  # a fresh process's

        result = check_step(step, lane=ctx.lane, reset=fresh_step)
        report = result.report
        assert report.ok, "not capture-legal: " + "; ".join(
            f"{v.op} ({v.rule}) at {v.frame}" for v in report.violations)
        assert all(torch.isfinite(g).all() for g in result.eager), \
            "the step itself is ill-posed (NaN gradients)"
        # Bitwise on the cpu lane. On CUDA the gradients of key and value come from the sparse
        # gather's backward, whose kernel accumulates with atomics in an order that differs
        # from run to run (eager against eager too; seen on an H100 with 0.19.2): compared
        # there to fp32 rounding, 1e-5 of each gradient's largest value.
        changed = result.mismatches(rtol=0.0 if ctx.lane == "cpu" else 1e-5)
        assert not changed, f"gradients changed between eager and checked step: {changed}"
        assert dsa.DSAIndexerLossAutoScaler.main_loss_backward_scale is None or \
            ctx.mode.value == "without", "the backward mutated class state"
