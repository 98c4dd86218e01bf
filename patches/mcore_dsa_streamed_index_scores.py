"""Overlay: DSA indexer scores without the ``[sq, b, h, sk]`` intermediate (megatron-core 0.16).

``DSAIndexer._compute_index_scores`` (megatron-core 0.16.x) evaluates
``einsum('sbhd,tbd->sbht')`` in fp32, i.e. a ``[sq, b, h, sk]`` tensor (plus a ReLU copy and a
weighted copy) before summing the heads: at h=64, sq=sk=32k that alone is hundreds of GiB. The
sum over heads is all the caller needs, so this overlay computes it without the intermediate:
a Triton kernel on CUDA (each head's scores kept in registers; a backward that recomputes
them), torch ops over tiles sized for the device elsewhere. It returns upstream's dtype and
layout (the ``[b, sq, sk]`` transpose view of a ``[sq, b, sk]`` fp32 buffer). The sum runs in
another order, so results agree to fp32 rounding (1e-5 relative), not bitwise. The arithmetic
is mcore_dsa_streamed_index_scores_fn's (0.17+) too: one copy in
``patchlane/overlaylib/dsa_index_scores.py``, each entry still retires alone. Upstream still
materialises on main (no PR): recorded as ``forwarded: no``.
"""

from __future__ import annotations

from typing import Any

import patchlane
from patchlane.loading import entry_id
from patchlane.overlaylib import dsa_index_scores

ENTRY_ID = entry_id(__name__)  # the decider loads this file under its entry id
BLOCK_ELEMENTS: int | None = None
"""None: the Triton kernel where it runs, else the torch path with tiles sized for the device
(``dsa_index_scores.tile_elements``). A number: the torch path with tiles of that many fp32
scores (tests set it to force several tiles)."""


def streamed_index_scores(q: Any, weights: Any, k: Any, use_relu: bool = True,
                          block_elements: int | None = None) -> Any:
    """Upstream's ``_compute_index_scores`` without the ``[sq, b, h, sk]`` intermediate."""
    if block_elements is None:
        block_elements = BLOCK_ELEMENTS  # read per call: tests set it to force several tiles
    scores, path, reason = dsa_index_scores.scores(q, weights, k, use_relu, block_elements)
    patchlane.hit_path(ENTRY_ID, path, reason)
    return scores


def overlay(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if instance is None:  # called through the class with an explicit `self` (never read)
        args = args[1:]
    return streamed_index_scores(*args, **kwargs)  # records its path: kernel or streamed
