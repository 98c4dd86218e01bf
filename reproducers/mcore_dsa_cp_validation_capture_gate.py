"""Reproducer: DSA's non-packed CP length validation must be legal inside a CUDA graph capture
(megatron-core 0.19.x), and still validate eagerly.

World sizes 1 and 2 (gloo on CPU, NCCL on CUDA): the validator is warmed up eagerly, then run
inside ``patchlane.testing.capture.capture_check``; upstream's ``torch.tensor`` / ``torch.all`` /
``.item()`` are violations there. Eagerly, a length mismatch must still raise.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from patchlane.evidence.reproduce import ReproContext

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
