"""Reproducer: DSA's CP query positions must be legal inside a CUDA graph capture when the keys
are not gathered (megatron-core 0.19.x), and equal to upstream's eager answer.

World size 2 (gloo on CPU, NCCL on CUDA; with one rank CP has nothing to exchange), each rank
holding ``sq`` queries and its own ``sq`` keys (``skv == sq``, upstream's fallback layout): the
validator and the positions run eagerly (the warm-up a capture needs), then the positions run
inside ``patchlane.testing.capture.capture_check``, where upstream's all-gather of a fresh
``torch.tensor`` and ``.item()`` are violations. The captured-path answer must equal the eager
one. The gathered layout (``skv == sq * cp_size``) is checked to stay legal and unchanged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from patchlane.reproducer import ReproContext

LANES = ("cpu", "cuda")
WORLD_SIZES = (2,)

SQ = 8


def run(ctx: ReproContext) -> None:
    import torch
    from megatron.core.transformer.experimental_attention_variant import dsa, dsa_layout

    from patchlane.testing.capture import capture_check

    with ctx.process_group() as group:
        device = torch.device(ctx.device)
        for skv in (SQ, SQ * ctx.world_size):  # keys local (fallback), keys gathered
            dsa._validate_nonpacked_cp_uniform_length(SQ, skv, ctx.world_size, group, device)
            eager = dsa_layout.get_cp_positions_from_layout(
                SQ, skv, ctx.world_size, ctx.rank, "allgather", device, cp_group=group)
            with capture_check(lane=ctx.lane) as report:
                captured = dsa_layout.get_cp_positions_from_layout(
                    SQ, skv, ctx.world_size, ctx.rank, "allgather", device, cp_group=group)
            assert report.ok, f"skv={skv}: not capture-legal: " + "; ".join(
                f"{v.op} ({v.rule}) at {v.frame}" for v in report.violations)
            for want, got in zip(eager, captured, strict=True):
                assert torch.equal(want.cpu(), got.cpu()), (skv, want, got)
