"""Overlay: no host data in DSA's naive indexer-loss backward while a CUDA graph is capturing
(megatron-core 0.19.x).

``bwd_fused_indexer_loss_naive`` (0.19.0 ... 0.19.2, and main as of 2026-08) divides the KL
gradient by the number of valid query rows. When no row mask is given (the dense, non-packed
case, i.e. every ordinary DSA training step with the default ``dsa_kernel_backend="none"``) it
builds that count as ``torch.tensor(float(b * sq), device=...)``: fresh host data copied to the
device (``aten.lift_fresh``) inside the backward, illegal in a CUDA graph capture. Found by the
DSA layer test (tests/releases/test_dsa_layer.py), which runs a real
``AbsorbedMLASelfAttention`` + ``DSAttention`` forward and backward under ``capture_check``.

Under capture the overlay passes an all-valid row mask, ``torch.ones((b, sq), dtype=bool)``
(a device fill, no host data), to upstream's own function. Upstream then counts the rows as
``mask.sum()``: the same float32 value ``b * sq`` exactly (an integer count far below 2**24),
and its two other uses of the mask multiply by 1.0 and ``&`` with True, so the gradients are
bitwise upstream's. Eagerly, or with a row mask or per-token loss, upstream runs unchanged.
"""

from __future__ import annotations

import sys
from typing import Any

import patchlane
from patchlane.loading import entry_id

ENTRY_ID = entry_id(__name__)  # the decider loads this file under its entry id
LAYOUT = "megatron.core.transformer.experimental_attention_variant.dsa_layout"


def _arguments(q: Any, weights: Any, k: Any, query: Any, key: Any, topk_indices: Any,
               softmax_scale: Any, loss_coeff: Any, sparse_loss: Any, mask: Any,
               grad_loss: Any, pg_collection: Any, varlen_starts: Any = None,
               varlen_ends: Any = None, key_positions: Any = None,
               query_valid_rows: Any = None, calculate_per_token_loss: bool = False,
               use_relu: bool = True) -> dict[str, Any]:
    # Mirrors bwd_fused_indexer_loss_naive's signature on 0.19.0 and 0.19.2 (the fingerprint
    # refuses any other body): every argument by name, so the call below can pass them so.
    return dict(locals())


def overlay(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    from patchlane.testing.capture import is_capturing

    bound = _arguments(*args, **kwargs)
    if (not is_capturing() or bound["query_valid_rows"] is not None
            or bound["calculate_per_token_loss"]):
        patchlane.hit_path(ENTRY_ID, "upstream")
        return wrapped(*args, **kwargs)
    import torch

    query, _ = sys.modules[LAYOUT].ensure_sbhd(bound["query"], "query")
    sq, b = query.shape[0], query.shape[1]
    bound["query_valid_rows"] = torch.ones((b, sq), dtype=torch.bool, device=query.device)
    patchlane.hit_path(ENTRY_ID, "capturing")
    return wrapped(**bound)
