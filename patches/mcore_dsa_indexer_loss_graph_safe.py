"""Overlay: a CUDA-graph-capturable backward for DSA's indexer-loss auto-scaler.

``DSAIndexerLossAutoScaler.backward`` (megatron-core 0.16 ... 0.19) lazily creates
``torch.tensor(1.0, device=...)`` and stores it on the class when no loss scale was set, which
nothing in those releases does. Inside a CUDA graph capture that is a host-to-device copy of
fresh host data plus a mutation of Python class state: illegal, and it happens in the first
backward, i.e. exactly when a graph is captured at step 0.

With no scale set the scale is 1, so the indexer-loss gradient is ``ones_like(loss)`` (bitwise
what upstream computes: ``ones * 1.0``); the overlay returns that without touching the host or
the class. Once a scale is set (``set_loss_scale``), upstream's backward runs unchanged.
"""

from __future__ import annotations

import sys
from typing import Any

import patchlane
from patchlane.loading import entry_id

ENTRY_ID = entry_id(__name__)  # the decider loads this file under its entry id
MODULE = "megatron.core.transformer.experimental_attention_variant.dsa"


def overlay(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    import torch

    scaler = sys.modules[MODULE].DSAIndexerLossAutoScaler
    if scaler.main_loss_backward_scale is not None:
        patchlane.hit_path(ENTRY_ID, "scaled")
        return wrapped(*args, **kwargs)
    ctx, grad_output = args[0], args[1] if len(args) > 1 else kwargs["grad_output"]
    (indexer_loss,) = ctx.saved_tensors
    patchlane.hit_path(ENTRY_ID, "unit-scale")
    return grad_output, torch.ones_like(indexer_loss)
