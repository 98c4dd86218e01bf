"""DSA's indexer scores streamed over heads: ``relu(q @ k^T) * weights`` summed over heads,
``[b, sq, sk]``, without upstream's ``[sq, b, h, sk]`` fp32 intermediate, forward and backward.

Shared by ``mcore_dsa_streamed_index_scores`` (megatron-core 0.16, the ``DSAIndexer`` method)
and ``mcore_dsa_streamed_index_scores_fn`` (0.17-0.19, the module function): the same
arithmetic behind two targets. Each tile's scores are recomputed in backward, so the backward
is bounded the same way; sums run in another order than upstream's (fp32 rounding, not
bitwise).
"""

from __future__ import annotations

import functools
from typing import Any

__all__ = ["autograd_function", "forward_scores", "streamed", "tiles"]


def tiles(q: Any, k: Any, block_elements: int) -> list[tuple[slice, slice]]:
    """(query rows, heads) tiles of about ``block_elements`` scores each: whole head blocks
    while one head fits, else one head and as many query rows as fit (at least one)."""
    sq, b, heads, _ = q.shape
    per_row_head = b * k.shape[0]
    n_heads = max(1, min(heads, block_elements // max(1, sq * per_row_head)))
    n_rows = sq if n_heads > 1 else max(1, min(sq, block_elements // max(1, per_row_head)))
    return [(slice(r, min(sq, r + n_rows)), slice(h, min(heads, h + n_heads)))
            for r in range(0, sq, n_rows) for h in range(0, heads, n_heads)]


def forward_scores(q: Any, weights: Any, k: Any, use_relu: bool, block_elements: int) -> Any:
    """``[b, sq, sk]``: ``relu(q @ k^T) * weights`` summed over heads, one tile at a time."""
    import torch

    sq, b, _, _ = q.shape
    sk = k.shape[0]
    # upstream multiplies fp32 scores by `weights` as given: fp32 unless weights are wider
    dtype = torch.promote_types(torch.float32, weights.dtype)
    k32 = k.to(dtype)
    out = torch.zeros(sq, b, sk, dtype=dtype, device=q.device)
    for rows, heads in tiles(q, k, block_elements):
        scores = torch.einsum("sbhd,tbd->sbht", q[rows, :, heads].to(dtype), k32)
        if use_relu:
            scores.relu_()
        n = scores.shape[0] * b
        # the weighted head sum as one batched product added into `out`: no weighted copy
        # of the tile and no [sq, b, sk] temporary (reshape copies the tile only where einsum
        # returned it permuted, b > 1)
        out[rows].view(n, 1, sk).baddbmm_(weights[rows, :, heads].to(dtype).reshape(n, 1, -1),
                                          scores.reshape(n, -1, sk))
        del scores
    return out.transpose(0, 1)


@functools.cache
def autograd_function() -> Any:
    """The autograd.Function, built on first use (torch is imported by the target by then)."""
    import torch

    class StreamedIndexScores(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, q: Any, weights: Any, k: Any, use_relu: bool,
                    block_elements: int) -> Any:
            ctx.save_for_backward(q, weights, k)
            ctx.use_relu, ctx.block_elements = use_relu, block_elements
            return forward_scores(q, weights, k, use_relu, block_elements)

        @staticmethod
        def backward(ctx: Any, grad_out: Any) -> Any:
            q, weights, k = ctx.saved_tensors
            need_q, need_w, need_k = ctx.needs_input_grad[:3]
            grad_q = torch.empty_like(q) if need_q else None
            grad_w = torch.empty_like(weights) if need_w else None
            grad_k = torch.zeros(k.shape, dtype=torch.float32, device=k.device) if need_k else None
            g = grad_out.transpose(0, 1).float()  # [sq, b, sk], a view when already fp32
            k32 = k.float()
            for rows, heads in tiles(q, k, ctx.block_elements):
                q32 = q[rows, :, heads].float()
                g_rows = g[rows]
                scores = torch.einsum("sbhd,tbd->sbht", q32, k32)
                positive = scores > 0 if ctx.use_relu else None
                if grad_w is not None:
                    if positive is not None:
                        scores.relu_()
                    grad_w[rows, :, heads] = torch.einsum("sbt,sbht->sbh", g_rows, scores)
                del scores
                if grad_q is None and grad_k is None:
                    continue
                # d(scores): the head-sum's gradient times each head's weight (then ReLU's)
                grad_s = g_rows.unsqueeze(2) * weights[rows, :, heads, None].float()
                if positive is not None:
                    grad_s.mul_(positive)
                del positive
                if grad_q is not None:
                    grad_q[rows, :, heads] = torch.einsum("sbht,tbd->sbhd", grad_s, k32)
                if grad_k is not None:
                    grad_k += torch.einsum("sbht,sbhd->tbd", grad_s, q32)
                del grad_s
            if grad_k is not None:
                grad_k = grad_k.to(k.dtype)
            return grad_q, grad_w, grad_k, None, None

    return StreamedIndexScores


def streamed(q: Any, weights: Any, k: Any, use_relu: bool, block_elements: int) -> tuple[Any, str]:
    """(the scores, the path taken): ``streamed-autograd`` when an input requires grad under
    grad mode (the loop inside an ``autograd.Function``: an in-place loop under autograd would
    fail in backward), else ``streamed``."""
    import torch

    if torch.is_grad_enabled() and (q.requires_grad or weights.requires_grad
                                    or k.requires_grad):
        return autograd_function().apply(q, weights, k, use_relu, block_elements), \
            "streamed-autograd"
    return forward_scores(q, weights, k, use_relu, block_elements), "streamed"
