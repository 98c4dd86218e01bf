"""Overlay for mcore_moe_ffn_mixed_dense:
megatron.core.transformer.transformer_config:TransformerConfig.__post_init__.

Up to 0.17, ``__post_init__`` asserts ``moe_ffn_hidden_size is None`` whenever
``num_moe_experts`` is None. A mixed dense/MoE model (``moe_layer_freq`` a list with a 0, or an
int above 1) builds its dense layers' config with the model's MoE settings and no experts, so
that config cannot be built (MoE upcycling needs it). Upstream's fix (NVIDIA/Megatron-LM#3647,
in 0.18.0): for a mixed layout, warn and drop ``moe_ffn_hidden_size``; otherwise refuse as
before. This overlay does the first half before upstream's validation runs, so upstream's own
assertion still refuses the rest; subclasses that call ``super().__post_init__()`` get it too.
"""

from __future__ import annotations

import warnings
from types import ModuleType
from typing import Any

from patchlane.loading import entry_id

ENTRY_ID = entry_id(__name__)  # the decider loads this file under its entry id


def _mixed(freq: Any) -> bool:
    """Whether ``moe_layer_freq`` leaves some layers dense (upstream's own test)."""
    return (isinstance(freq, list) and 0 in freq) or (
        isinstance(freq, int) and not isinstance(freq, bool) and freq > 1)


def overlay(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if (instance is not None and getattr(instance, "num_moe_experts", None) is None
            and getattr(instance, "moe_ffn_hidden_size", None) is not None
            and _mixed(getattr(instance, "moe_layer_freq", None))):
        warnings.warn(
            "moe_ffn_hidden_size is set but num_moe_experts is None: expected for the dense "
            "layers of a mixed dense/MoE model (moe_layer_freq keeps some layers dense); "
            "moe_ffn_hidden_size is ignored for this layer", stacklevel=3)
        instance.moe_ffn_hidden_size = None
    return wrapped(*args, **kwargs)


def probe(module: ModuleType) -> bool:
    """True once upstream accepts the mixed layout itself: its fixed ``__post_init__`` names
    the test it adds (``is_mixed_model``, a local of the function), read from the code object,
    never by calling it."""
    config = getattr(module, "TransformerConfig", None)
    post_init = getattr(config, "__post_init__", None)
    code = getattr(getattr(post_init, "__wrapped__", post_init), "__code__", None)
    return code is not None and "is_mixed_model" in code.co_varnames
