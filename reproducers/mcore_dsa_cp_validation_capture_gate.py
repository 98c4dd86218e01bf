"""Reproducer: DSA's non-packed CP length validation must be legal inside a CUDA graph capture
(megatron-core 0.19.x), and still validate eagerly.

World sizes 1 and 2 (gloo on CPU, NCCL on CUDA), each rank holding its CP shard of the
sequence (``sq`` queries, ``sq * cp_size`` gathered keys): the validator is warmed up eagerly,
then run inside ``patchlane.testing.capture.capture_check``; upstream's ``torch.tensor`` /
all-gather / ``torch.all`` / ``.item()`` are violations there. Eagerly, both of upstream's
checks must still reject bad input: a key length that matches no layout (host arithmetic), and,
at world size 2, ranks holding different query lengths (the all-gather leg).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from patchlane.reproducer import ReproContext

LANES = ("cpu", "cuda")
WORLD_SIZES = (1, 2)

SQ = 8


def run(ctx: ReproContext) -> None:
    import torch
    from megatron.core.transformer.experimental_attention_variant import dsa

    from patchlane.testing.capture import capture_check

    with ctx.process_group() as world:
        group, device = world, torch.device(ctx.device)
        skv = SQ * ctx.world_size
        dsa._validate_nonpacked_cp_uniform_length(SQ, skv, ctx.world_size, group, device)
        with capture_check(lane=ctx.lane) as report:
            dsa._validate_nonpacked_cp_uniform_length(SQ, skv, ctx.world_size, group, device)
        assert report.ok, "not capture-legal: " + "; ".join(
            f"{v.op} ({v.rule}) at {v.frame}" for v in report.violations)
        try:
            dsa._validate_nonpacked_cp_uniform_length(SQ, skv + 1, ctx.world_size, group,
                                                      device)
        except RuntimeError:
            pass
        else:
            raise AssertionError("a length mismatch was not rejected eagerly")
        if ctx.world_size > 1:
            # rank 1 holds one query more: only the all-gather of lengths can see it
            sq = SQ + (ctx.rank == 1)
            try:
                dsa._validate_nonpacked_cp_uniform_length(sq, sq * ctx.world_size,
                                                          ctx.world_size, group, device)
            except RuntimeError as exc:
                assert "per-rank lengths" in str(exc), exc
            else:
                raise AssertionError("ranks with different query lengths were not rejected "
                                     "eagerly (the all-gather check did not run)")
