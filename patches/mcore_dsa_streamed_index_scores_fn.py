"""Overlay: DSA indexer scores without the ``[sq, b, h, sk]`` intermediate, forward and
backward (megatron-core 0.17-0.19).

From 0.17 the indexer scores are the module-level ``dsa._compute_index_scores(q, weights, k)``
(0.19 adds ``use_relu=True``; GLM5 turns it off). It evaluates ``einsum('sbhd,tbd->sbht')`` in
fp32, a ``[sq, b, h, sk]`` tensor plus a ReLU copy and a weighted copy, only to sum the heads:
256 MiB at h=64, sq=sk=1024 for a 4 MiB result, and "Tried to allocate 238.17 GiB" at long
context (modelscope/mcore-bridge#36). Under autograd it is worse: relu and mul keep
``[sq, b, h, sk]`` tensors alive until backward.

The overlay computes the same head sum without it (``patchlane/overlaylib/dsa_index_scores``):
on CUDA a Triton kernel keeps each head's scores in registers, forward and a backward that
recomputes them (on an H100 at h=64, d=128, sq=sk=4096: 0.55 ms against upstream's 15 ms
forward, 4.4 ms against 39 ms forward+backward, at 1/128 and 1/49 of its peak); elsewhere torch
ops over tiles sized for the device. It returns upstream's ``[b, sq, sk]`` transpose view
(same dtype, shape and strides); the gradients are upstream's in the inputs' dtypes. Sums run
in another order: results agree to fp32 rounding (1e-5 relative), not bitwise, and at ReLU's
kink (a score within rounding of 0) either side is as right as upstream's. The callers
``fused_qk_topk_naive`` and ``bwd_fused_indexer_loss_naive`` look the function up in the
module at call time, so they use it too; ``bwd_fused_indexer_loss_naive`` also builds its own
``[sq, b, h, sk]`` scores for the indexer-loss gradient, the same computation as this
function's backward (the kernel could serve it), but reaching it means replacing that whole
function, its own ``[b, np, sq, sk]`` attention scores included: not covered here.

From 0.19.0 megatron-core ships opt-in fused kernels (``dsa_kernel_backend: tilelang |
cudnn``); with either, the indexer does not call this function and the overlay is inert. It
guards the default, ``none``. Upstream still materialises on main (no PR): recorded as
``forwarded: no``.
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
    # 0.17/0.18: (q, weights, k), always ReLU; 0.19: (q, weights, k, use_relu=True)
    return streamed_index_scores(*args, **kwargs)
