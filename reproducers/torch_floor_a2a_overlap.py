"""Reproducer: a MoE configuration with the expert-parallel all-to-all overlap
(``overlap_moe_expert_parallel_comm``) must be accepted by megatron-core's
``TransformerConfig``.

megatron-core (0.14.0 and later) refuses that setting on torch < 2.6.0 with its own assertion,
"A2A Overlap encounters hang issue with torch version < 2.6.0", beside a TODO to remove it once
the hang is fixed. No upstream issue gives the hang's cause, so this reproducer shows what is
known: where the floor's bound comes from, run against real releases. The case without the
entry runs on the bad side of the floor, ``BAD_SIDE`` installed side by side (torch 2.5.1, the
last release below 2.6, with the CUDA libraries it loads at import; nothing here uses a
GPU); the case with it runs on the environment's own torch, which the floor has just
checked. When a megatron-core release drops the assertion, the bad side passes too: that is
the evidence that retires the floor.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from patchlane.reproducer import ReproContext

LANES = ("cpu",)  # a configuration check: the same on every lane
WORLD_SIZES = (1,)
BAD_SIDE = ("torch==2.5.1",)
BAD_SIDE_DEPS = ("torch==2.5.1",)  # its import loads the CUDA libraries it was built with

ASSERTION = "A2A Overlap encounters hang issue"


def run(ctx: ReproContext) -> None:
    import dataclasses
    from importlib.metadata import version

    import torch
    from megatron.core.transformer.transformer_config import TransformerConfig

    fields = {f.name for f in dataclasses.fields(TransformerConfig)}
    if "overlap_moe_expert_parallel_comm" not in fields:
        # before 0.14.0: no overlap setting, so no assertion to front
        raise AttributeError("TransformerConfig has no overlap_moe_expert_parallel_comm")
    try:
        TransformerConfig(
            num_layers=2, hidden_size=64, num_attention_heads=4, add_bias_linear=False,
            bf16=True,  # the overlap wants a bf16 or fp16 model
            num_moe_experts=4, moe_router_topk=2, moe_token_dispatcher_type="alltoall",
            expert_model_parallel_size=2, overlap_moe_expert_parallel_comm=True,
        )
    except AssertionError as exc:
        if ASSERTION not in str(exc):
            raise RuntimeError(f"TransformerConfig refused the configuration for another "
                               f"reason: {exc}") from None
        raise AssertionError(
            f"megatron-core {version('megatron-core')} refuses the EP all-to-all overlap on "
            f"torch {torch.__version__}: {exc}") from None
