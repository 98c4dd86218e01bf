"""Overlay: DSA indexer scores streamed over heads, forward and backward (megatron-core 0.17-0.19).

From 0.17 the indexer scores are the module-level ``dsa._compute_index_scores(q, weights, k)``
(0.19 adds ``use_relu=True``; GLM5 turns it off). Like 0.16's method it evaluates
``einsum('sbhd,tbd->sbht')`` in fp32, a ``[sq, b, h, sk]`` tensor plus a ReLU copy and a
weighted copy, only to sum the heads: 256 MiB at h=64, sq=sk=1024 for a 4 MiB result, and
"Tried to allocate 238.17 GiB" at long context (modelscope/mcore-bridge#36). Under autograd it
is worse: relu and mul keep ``[sq, b, h, sk]`` tensors alive until backward.

The head sum is all callers need, so this overlay accumulates head blocks (``BLOCK_ELEMENTS``
fp32 elements at a time, at least one head) into one ``[sq, b, sk]`` buffer and returns upstream's
``[b, sq, sk]`` transpose view of it (same dtype, shape and strides). When an input requires
grad the same loop runs inside an ``autograd.Function`` that saves only q, weights and k and
recomputes each head block in backward, so the backward is bounded the same way; the
gradients are upstream's (ReLU's subgradient 0 at 0 included) in the inputs' dtypes. Sums run
in another order: results agree to fp32 rounding (1e-5 relative), not bitwise. The callers
``fused_qk_topk_naive`` and ``bwd_fused_indexer_loss_naive`` look the function up in the
module at call time, so they stream too; ``bwd_fused_indexer_loss_naive`` still builds its own
``[sq, b, h, sk]`` scores for the indexer-loss gradient (not covered here). Upstream still
materialises on main (no PR): recorded as ``forwarded: no``.
"""

from __future__ import annotations

import functools
from typing import Any

import patchlane
from patchlane.loading import entry_id

ENTRY_ID = entry_id(__name__)  # the lane loads this file under its entry id
BLOCK_ELEMENTS = 1 << 20
"""fp32 elements of one head block's ``[sq, b, heads, sk]`` scores (4 MiB); at least one head."""


def _heads_per_block(q: Any, k: Any, block_elements: int) -> int:
    sq, b, heads, _ = q.shape
    return max(1, min(heads, block_elements // max(1, sq * b * k.shape[0])))


def _forward(q: Any, weights: Any, k: Any, use_relu: bool, block_elements: int) -> Any:
    """``[b, sq, sk]``: ``relu(q @ k^T) * weights`` summed over heads, one head block at a time."""
    import torch

    sq, b, heads, _ = q.shape
    block = _heads_per_block(q, k, block_elements)
    # upstream multiplies fp32 scores by `weights` as given: fp32 unless weights are wider
    dtype = torch.promote_types(torch.float32, weights.dtype)
    k32 = k.float()
    out = torch.zeros(sq, b, k.shape[0], dtype=dtype, device=q.device)
    for start in range(0, heads, block):
        stop = min(heads, start + block)
        scores = torch.einsum("sbhd,tbd->sbht", q[:, :, start:stop].float(), k32)
        if use_relu:
            scores.relu_()
        scores = scores.to(dtype).mul_(weights[:, :, start:stop, None])
        out += scores.sum(dim=2)
        del scores
    return out.transpose(0, 1)


@functools.cache
def _function() -> Any:
    """The autograd.Function, built on first use (torch is imported by the target by then)."""
    import torch

    class StreamedIndexScores(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, q: Any, weights: Any, k: Any, use_relu: bool,
                    block_elements: int) -> Any:
            ctx.save_for_backward(q, weights, k)
            ctx.use_relu, ctx.block_elements = use_relu, block_elements
            return _forward(q, weights, k, use_relu, block_elements)

        @staticmethod
        def backward(ctx: Any, grad_out: Any) -> Any:
            q, weights, k = ctx.saved_tensors
            need_q, need_w, need_k = ctx.needs_input_grad[:3]
            grad_q = torch.empty_like(q) if need_q else None
            grad_w = torch.empty_like(weights) if need_w else None
            grad_k = torch.zeros(k.shape, dtype=torch.float32, device=k.device) if need_k else None
            g = grad_out.transpose(0, 1).float()  # [sq, b, sk], a view when already fp32
            k32 = k.float()
            heads = q.shape[2]
            block = _heads_per_block(q, k, ctx.block_elements)
            for start in range(0, heads, block):
                stop = min(heads, start + block)
                q32 = q[:, :, start:stop].float()
                scores = torch.einsum("sbhd,tbd->sbht", q32, k32)
                positive = scores > 0 if ctx.use_relu else None
                if grad_w is not None:
                    if positive is not None:
                        scores.relu_()
                    grad_w[:, :, start:stop] = torch.einsum("sbt,sbht->sbh", g, scores)
                del scores
                if grad_q is None and grad_k is None:
                    continue
                # d(scores): the head-sum's gradient times each head's weight (then ReLU's)
                grad_s = g.unsqueeze(2) * weights[:, :, start:stop, None].float()
                if positive is not None:
                    grad_s.mul_(positive)
                del positive
                if grad_q is not None:
                    grad_q[:, :, start:stop] = torch.einsum("sbht,tbd->sbhd", grad_s, k32)
                if grad_k is not None:
                    grad_k += torch.einsum("sbht,sbhd->tbd", grad_s, q32)
                del grad_s
            if grad_k is not None:
                grad_k = grad_k.to(k.dtype)
            return grad_q, grad_w, grad_k, None, None

    return StreamedIndexScores


def streamed_index_scores(q: Any, weights: Any, k: Any, use_relu: bool = True,
                          block_elements: int = BLOCK_ELEMENTS) -> Any:
    """Upstream's ``_compute_index_scores`` without the ``[sq, b, h, sk]`` intermediate."""
    import torch

    if torch.is_grad_enabled() and (q.requires_grad or weights.requires_grad
                                    or k.requires_grad):
        patchlane.hit_path(ENTRY_ID, "streamed-autograd")
        return _function().apply(q, weights, k, use_relu, block_elements)
    patchlane.hit_path(ENTRY_ID, "streamed")
    return _forward(q, weights, k, use_relu, block_elements)


def overlay(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    # 0.17/0.18: (q, weights, k), always ReLU; 0.19: (q, weights, k, use_relu=True)
    return streamed_index_scores(*args, **kwargs)
