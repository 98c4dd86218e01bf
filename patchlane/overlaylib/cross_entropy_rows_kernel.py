"""Triton kernel for a chunk of cross-entropy rows: each row's log-sum-exp and loss from fp32
logits, and (optionally) ``softmax - onehot`` for its first columns in the inputs' dtype, in
two reads of the logits and no temporary.

Used by ``liger_flce_weighted_none``'s routed path on CUDA, where torch's ``logsumexp``,
``gather``, ``sub_``/``exp_`` and the copy to half precision read and write a chunk of fp32
logits five or six times and hold a second chunk-sized temporary. Imported on the first CUDA
call (or under ``TRITON_INTERPRET=1`` in a test), never by ``import patchlane``.

One program per row: the first pass keeps a running maximum and a rescaled sum of
exponentials per lane (the streaming log-sum-exp), the second writes
``exp(logit - lse) - [column == target]``. An ignored row (target ``ignore_index``) gets loss 0
and its ``softmax - onehot`` as if its target were 0; backward scales it by 0.
"""

from __future__ import annotations

from typing import Any

import triton
import triton.language as tl

__all__ = ["rows"]

BLOCK = 2048
"""Columns per step of a row: 8 KiB of fp32 per load, 16 values per thread at 4 warps."""


@triton.jit
def _rows(logits_ptr, l_row, vocab, target_ptr, ignore_index, lse_ptr, loss_ptr,
          g_ptr, g_row, saved,
          SAVE: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = logits_ptr + row * l_row
    lanes = tl.arange(0, BLOCK)
    run_max = tl.full((BLOCK,), float("-inf"), tl.float32)
    run_sum = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, vocab, BLOCK):
        cols = start + lanes
        x = tl.load(base + cols, mask=cols < vocab, other=float("-inf"))
        new_max = tl.maximum(run_max, x)
        # lanes still at -inf (past the row's end) keep a sum of 0, never exp(nan)
        safe_max = tl.where(new_max == float("-inf"), 0.0, new_max)
        run_sum = run_sum * tl.exp(run_max - safe_max) + tl.exp(x - safe_max)
        run_max = new_max
    row_max = tl.max(run_max, axis=0)
    total = tl.sum(run_sum * tl.exp(run_max - row_max), axis=0)
    lse = row_max + tl.log(total)
    target = tl.load(target_ptr + row)
    valid = target != ignore_index
    safe = tl.where(valid, target, 0)
    picked = tl.load(base + safe)
    tl.store(lse_ptr + row, lse)
    tl.store(loss_ptr + row, tl.where(valid, lse - picked, 0.0))
    if SAVE:
        g_base = g_ptr + row * g_row
        for start in range(0, saved, BLOCK):
            cols = start + lanes
            keep = cols < saved
            x = tl.load(base + cols, mask=keep, other=0.0)
            g = tl.exp(x - lse) - tl.where(cols == safe, 1.0, 0.0)
            tl.store(g_base + cols, g.to(g_ptr.dtype.element_ty), mask=keep)


def rows(logits: Any, target: Any, ignore_index: int, lse: Any, loss: Any,
         grad_logits: Any | None) -> None:
    """Fill ``lse`` and ``loss`` (fp32, one per row of ``logits``, fp32 ``[rows, vocab]``
    with unit column stride) and, when given, ``grad_logits`` ``[rows, saved]`` with
    ``softmax - onehot`` of each row's first ``saved`` columns."""
    n, vocab = logits.shape
    if n == 0:
        return
    saved = grad_logits.shape[1] if grad_logits is not None else 0
    g = grad_logits if grad_logits is not None and saved else lse  # lse: never written then
    _rows[(n,)](logits, logits.stride(0), vocab, target, ignore_index, lse, loss,
                g, g.stride(0) if saved else 0, saved,
                SAVE=saved > 0, BLOCK=BLOCK, num_warps=4)
