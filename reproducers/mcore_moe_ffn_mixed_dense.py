"""Reproducer for mcore_moe_ffn_mixed_dense: megatron-core's TransformerConfig refuses
``moe_ffn_hidden_size`` whenever ``num_moe_experts`` is None, even where ``moe_layer_freq``
keeps some layers dense. MoE upcycling builds the dense layers' config that way (the model's
MoE settings, no experts on that layer), and it cannot be built: "moe_ffn_hidden_size must be
None when num_experts is not set". Upstream (NVIDIA/Megatron-LM#3647, in 0.18.0) accepts it for
a mixed layout, warns, and drops ``moe_ffn_hidden_size``. (Whether a layout with no dense layer
and no experts is refused differs by release, the oldest refuse nothing: not this bug.)
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from patchlane.reproducer import ReproContext

LANES = ("cpu",)  # configuration only: nothing runs on a device
WORLD_SIZES = (1,)

BASE = {"num_layers": 4, "hidden_size": 64, "num_attention_heads": 4, "ffn_hidden_size": 256}


def run(ctx: ReproContext) -> None:
    from megatron.core.transformer.transformer_config import TransformerConfig

    for freq in ([0, 1, 0, 1], 2):  # dense layers among MoE ones: the list and the int form
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                config = TransformerConfig(**BASE, moe_ffn_hidden_size=128, moe_layer_freq=freq)
        except AssertionError as exc:  # upstream's own assertion: the bug's symptom
            raise AssertionError(
                f"a mixed dense/MoE layout (moe_layer_freq={freq!r}) with moe_ffn_hidden_size "
                f"and no experts is refused: {exc}") from None
        # what becomes of moe_ffn_hidden_size is the release's business (dropped from 0.18,
        # set to ffn_hidden_size before 0.13, which never refused): the config must build
        assert config.num_moe_experts is None, f"experts appeared: {config.num_moe_experts}"
