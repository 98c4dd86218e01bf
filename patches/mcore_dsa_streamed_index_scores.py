"""Overlay: DSA indexer scores streamed over heads instead of materialised per head.

``DSAIndexer._compute_index_scores`` (megatron-core 0.16.x) evaluates
``einsum('sbhd,tbd->sbht')`` in fp32, i.e. a ``[sq, b, h, sk]`` tensor (plus a ReLU copy and a
weighted copy) before summing the heads: at h=64, sq=sk=32k that alone is hundreds of GiB. The
sum over heads is all the caller needs, so this overlay computes the scores a tile (heads, or
one head and query rows) at a time within a fixed budget, adds each tile's weighted head sum into
one ``[sq, b, sk]`` fp32 buffer, and returns it in upstream's dtype and layout (the
``[b, sq, sk]`` transpose view of that buffer). The sum runs over heads in another order,
so results agree to fp32 rounding (1e-5 relative), not bitwise. When an input requires grad
(training: the indexer's projections do) the loop runs inside an ``autograd.Function`` that
recomputes each tile in backward; an in-place loop under autograd would fail in backward
("modified by an inplace operation"). The same code as mcore_dsa_streamed_index_scores_fn's
(0.17+), kept in each file so either entry retires alone. Upstream still materialises on main
(no PR): recorded as ``forwarded: no``.
"""

from __future__ import annotations

import functools
from typing import Any

import patchlane
from patchlane.loading import entry_id

ENTRY_ID = entry_id(__name__)  # the lane loads this file under its entry id
BLOCK_ELEMENTS = 1 << 20
"""fp32 elements of one tile's ``[rows, b, heads, sk]`` scores (4 MiB); at least one row of one
head."""


def _tiles(q: Any, k: Any, block_elements: int) -> list[tuple[slice, slice]]:
    """(query rows, heads) tiles of about ``block_elements`` scores each: whole head blocks
    while one head fits, else one head and as many query rows as fit (at least one)."""
    sq, b, heads, _ = q.shape
    per_row_head = b * k.shape[0]
    n_heads = max(1, min(heads, block_elements // max(1, sq * per_row_head)))
    n_rows = sq if n_heads > 1 else max(1, min(sq, block_elements // max(1, per_row_head)))
    return [(slice(r, min(sq, r + n_rows)), slice(h, min(heads, h + n_heads)))
            for r in range(0, sq, n_rows) for h in range(0, heads, n_heads)]


def _forward(q: Any, weights: Any, k: Any, use_relu: bool, block_elements: int) -> Any:
    """``[b, sq, sk]``: ``relu(q @ k^T) * weights`` summed over heads, one tile at a time."""
    import torch

    sq, b, _, _ = q.shape
    sk = k.shape[0]
    # upstream multiplies fp32 scores by `weights` as given: fp32 unless weights are wider
    dtype = torch.promote_types(torch.float32, weights.dtype)
    k32 = k.to(dtype)
    out = torch.zeros(sq, b, sk, dtype=dtype, device=q.device)
    for rows, heads in _tiles(q, k, block_elements):
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
            for rows, heads in _tiles(q, k, ctx.block_elements):
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


def streamed_index_scores(q: Any, weights: Any, k: Any, use_relu: bool = True,
                          block_elements: int | None = None) -> Any:
    """Upstream's ``_compute_index_scores`` without the ``[sq, b, h, sk]`` intermediate."""
    import torch

    if block_elements is None:
        block_elements = BLOCK_ELEMENTS  # read per call: tests set it to force several blocks

    if torch.is_grad_enabled() and (q.requires_grad or weights.requires_grad
                                    or k.requires_grad):
        patchlane.hit_path(ENTRY_ID, "streamed-autograd")
        return _function().apply(q, weights, k, use_relu, block_elements)
    patchlane.hit_path(ENTRY_ID, "streamed")
    return _forward(q, weights, k, use_relu, block_elements)


def overlay(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if instance is None:  # called through the class with an explicit `self` (never read)
        args = args[1:]
    return streamed_index_scores(*args, **kwargs)  # records its path: streamed(-autograd)
