"""Triton kernel for a chunk of cross-entropy rows: each row's log-sum-exp and loss from fp32
logits, and (optionally) ``softmax - onehot`` for its first columns in the inputs' dtype, in
two reads of the logits and no temporary.

Used by ``liger_flce_weighted_none``'s routed path on CUDA, where torch's ``logsumexp``,
``gather``, ``sub_``/``exp_`` and the copy to half precision read and write a chunk of fp32
logits five or six times and hold a second chunk-sized temporary. Imported on the first CUDA
call (or under ``TRITON_INTERPRET=1`` in a test), never by ``import patchlane``.

One program per row: the first pass keeps a running maximum and a rescaled sum of
exponentials per lane (the streaming log-sum-exp), the second writes
``exp((logit - max) - logsum) - [column == target]``. The row's maximum and ``logsum`` (the log
of its shifted sum) are kept apart, as torch's ``log_softmax`` keeps them: their sum rounded to
fp32 would lose ``ulp(max)`` (1.5e-5 at a logit of 150) in every exponent. An ignored row
(target ``ignore_index``) gets loss 0 and its ``softmax - onehot`` as if its target were 0;
backward scales it by 0.

A target outside ``[0, vocab)`` that is not ``ignore_index`` is what torch refuses
("Target N is out of bounds"): on a GPU the kernel stops at a device-side assert (compiled in
for this kernel alone, as torch's own ``nll_loss`` kernels assert), with no host
synchronisation in the step; it never reads outside the row either way (the read is clamped)
and writes NaN for that row's loss and gradient, so a build without asserts still surfaces it.
"""

from __future__ import annotations

from typing import Any

import triton
import triton.language as tl

__all__ = ["rows"]

BLOCK = 2048
"""Columns per step of a row: 8 KiB of fp32 per load, 16 values per thread at 4 warps."""


@triton.jit
def _rows(logits_ptr, l_row, vocab, target_ptr, t_row, ignore_index, shift_ptr, logsum_ptr,
          loss_ptr, g_ptr, g_row, saved,
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
    logsum = tl.log(total)
    target = tl.load(target_ptr + row * t_row)  # any stride: a label column, a broadcast
    valid = target != ignore_index
    in_range = (target >= 0) & (target < vocab)
    tl.device_assert(in_range | ~valid, "cross-entropy target out of bounds [0, vocab)")
    safe = tl.where(valid & in_range, target, 0)
    bad = valid & ~in_range  # only where asserts are compiled out: NaN, never a stray read
    picked = tl.load(base + safe)
    tl.store(shift_ptr + row, row_max)
    tl.store(logsum_ptr + row, logsum)
    loss = tl.where(valid, logsum - (picked - row_max), 0.0)
    tl.store(loss_ptr + row, tl.where(bad, float("nan"), loss))
    if SAVE:
        g_base = g_ptr + row * g_row
        for start in range(0, saved, BLOCK):
            cols = start + lanes
            keep = cols < saved
            x = tl.load(base + cols, mask=keep, other=0.0)
            g = tl.exp((x - row_max) - logsum) - tl.where(cols == safe, 1.0, 0.0)
            g = tl.where(bad, float("nan"), g)
            tl.store(g_base + cols, g.to(g_ptr.dtype.element_ty), mask=keep)


def rows(logits: Any, target: Any, ignore_index: int, shift: Any, logsum: Any, loss: Any,
         grad_logits: Any | None) -> None:
    """Fill ``shift`` (each row's maximum), ``logsum`` (the log of its shifted sum of
    exponentials) and ``loss`` (fp32, one per row of ``logits``, fp32 ``[rows, vocab]`` with
    unit column stride) and, when given, ``grad_logits`` ``[rows, saved]`` with
    ``softmax - onehot`` of each row's first ``saved`` columns."""
    n, vocab = logits.shape
    if n == 0:
        return
    saved = grad_logits.shape[1] if grad_logits is not None else 0
    g = grad_logits if grad_logits is not None and saved else loss  # never written then
    # debug=True compiles this kernel's one device_assert in (Triton drops asserts otherwise);
    # sanitize_overflow=False keeps it from adding integer-overflow asserts to every index.
    # Triton's CPU interpreter takes neither (its callers check targets on the host).
    options = {"debug": True, "sanitize_overflow": False} if logits.is_cuda else {}
    _rows[(n,)](logits, logits.stride(0), vocab, target, target.stride(0), ignore_index, shift,
                logsum, loss, g, g.stride(0) if saved else 0, saved,
                SAVE=saved > 0, BLOCK=BLOCK, num_warps=4, **options)
