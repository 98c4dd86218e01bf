"""Triton kernels for DSA's indexer scores: ``relu(q @ k^T) * weights`` summed over heads, with
the per-head scores kept in registers, forward and backward.

Imported on the first call that can use them (a CUDA tensor with Triton importable, or a test
under ``TRITON_INTERPRET=1``), never by ``import patchlane`` nor by the overlays at import.

Arithmetic. Upstream computes ``einsum('sbhd,tbd->sbht', q.float(), k.float())`` in fp32: with
bf16 (or fp16) inputs every product is exact in fp32, so ``tl.dot`` on the bf16 operands with
an fp32 accumulator computes the same sums in another order. fp32 inputs use
``input_precision="ieee"`` (no TF32). In backward the score gradient ``ds`` is fp32 and the
second operand (k or q) is the inputs' dtype: for bf16, ``ds`` is split into a bf16 high part
(its fp32 bits truncated: exact, and never rounded up past bf16's largest finite value) and a
bf16 low part (the remainder), two tensor-core products and about 16 significant bits instead
of one product on a rounded ``ds`` (8 bits). fp16 has neither fp32's range nor its small
numbers, so an fp16 split would overflow above 65504 and lose bits to subnormals: fp16 (and
fp32) inputs multiply ``ds`` in fp32. Gradients are accumulated and written in fp32, then
rounded to the inputs' dtypes by torch, as upstream's ``.to(q.dtype)`` rounds them.

NaN and inf. ReLU is ``where(s <= 0, 0, s)``, never ``maximum(s, 0)``: a GPU's ``maximum``
returns the number when the other operand is NaN, which would turn a NaN score into 0 where
upstream's ``torch.relu`` keeps it; in backward the gradient passes where the score is not
``<= 0``, a NaN included, as torch's ReLU backward does. An infinite ``ds`` keeps its high
part and a zero low part, so the product is upstream's ``inf * k`` (not ``inf - inf``).

Shapes: q ``[sq, b, h, d]``, weights ``[sq, b, h]``, k ``[sk, b, d]`` (any strides), grad
``[b, sq, sk]`` (any strides); the scores are written to a ``[sq, b, sk]`` fp32 buffer, whose
``[b, sq, sk]`` transpose view is what upstream returns.

Offsets are 64-bit: ``row * row_stride`` of a ``[b, sq, sk]`` gradient passes 2**31 elements
at ``b * sq * sk > 2**31`` (sq = sk = 64k at b = 1, the long contexts this kernel is for), and
a 32-bit offset would wrap there and read elsewhere. Key columns past ``sk`` (a last block
that ``sk`` does not fill) load as 0 and score ``inf * 0 = NaN`` beside an infinite q; their
gradient is 0, but ``0 * NaN`` is NaN, so backward zeroes them before any sum (upstream has no
such columns: its gradient stays inf, never NaN).

Grids: forward, one program per (query block, key block, batch), looping over heads. Backward,
``dq``/``dw`` one program per (query block, head, batch) looping over key blocks, heads fastest
so the programs of one query block read the same gradient rows from L2; ``dk`` one program per
(key block, head group, batch) looping over the group's heads and all query blocks, each group
writing its own fp32 partial sum (summed after: deterministic, no atomics).
"""

from __future__ import annotations

from typing import Any

import triton
import triton.language as tl

__all__ = ["backward", "forward"]


@triton.jit
def _dot(a, b, F32: tl.constexpr):
    """``a @ b`` with an fp32 accumulator: on the operands as they are (tensor cores), or with
    ``F32`` on fp32 copies in IEEE precision (fp32 inputs; Triton's CPU interpreter, whose
    bf16 ``tl.dot`` multiplies the raw bits)."""
    if F32:
        return tl.dot(a.to(tl.float32), b.to(tl.float32), input_precision="ieee")
    return tl.dot(a, b)


@triton.jit
def _dot_split(x, b, F32: tl.constexpr, SPLIT: tl.constexpr):
    """``x @ b`` for fp32 ``x`` and ``b`` in the inputs' dtype: with ``SPLIT`` (bf16) as two
    products of ``x``'s bf16 high and low parts, about 16 significant bits of ``x`` instead
    of 8; else on fp32 operands."""
    if SPLIT:
        # The high part is x with its low 16 bits cleared: exactly a bf16, rounded toward
        # zero, so a finite x near fp32's largest never becomes inf (round-to-nearest would,
        # and inf - x is then NaN). An infinite x is its own high part, with a zero low part.
        hi = (x.to(tl.int32, bitcast=True) & -65536).to(tl.float32, bitcast=True)
        lo = tl.where(hi == x, 0.0, x - hi)
        return _dot(hi.to(b.dtype), b, F32) + _dot(lo.to(b.dtype), b, F32)
    return tl.dot(x, b.to(tl.float32), input_precision="ieee")


@triton.jit
def _scores_fwd(q_ptr, w_ptr, k_ptr, out_ptr,
                sq, sk, heads, d,
                q_s, q_b, q_h, q_d,
                w_s, w_b, w_h,
                k_s, k_b, k_d,
                o_s, o_b, o_t,
                RELU: tl.constexpr, F32: tl.constexpr,
                BM: tl.constexpr, BN: tl.constexpr, BD: tl.constexpr):
    pid_m = tl.program_id(0).to(tl.int64)
    pid_n = tl.program_id(1).to(tl.int64)
    bb = tl.program_id(2).to(tl.int64)
    rows = pid_m * BM + tl.arange(0, BM)
    cols = pid_n * BN + tl.arange(0, BN)
    dims = tl.arange(0, BD)
    row_ok = rows < sq
    col_ok = cols < sk
    dim_ok = dims < d
    k_ptrs = k_ptr + cols[None, :] * k_s + bb * k_b + dims[:, None] * k_d
    k_mask = col_ok[None, :] & dim_ok[:, None]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    q_base = q_ptr + rows[:, None] * q_s + bb * q_b + dims[None, :] * q_d
    w_base = w_ptr + rows * w_s + bb * w_b
    for h in range(0, heads):
        q_tile = tl.load(q_base + h * q_h, mask=row_ok[:, None] & dim_ok[None, :], other=0.0)
        # k^T reloaded per head (from L1/L2): kept live across the loop it would hold
        # [BN, d] in registers and spill the accumulators
        kt = tl.load(k_ptrs, mask=k_mask, other=0.0)
        s = _dot(q_tile, kt, F32)
        if RELU:
            s = tl.where(s <= 0.0, 0.0, s)  # keeps a NaN (a GPU's maximum drops it)
        w = tl.load(w_base + h * w_h, mask=row_ok, other=0.0).to(tl.float32)
        acc += s * w[:, None]
    tl.store(out_ptr + rows[:, None] * o_s + bb * o_b + cols[None, :] * o_t, acc,
             mask=row_ok[:, None] & col_ok[None, :])


@triton.jit
def _scores_bwd_q(q_ptr, w_ptr, k_ptr, g_ptr, dq_ptr, dw_ptr,
                  sq, sk, heads, d,
                  q_s, q_b, q_h, q_d,
                  w_s, w_b, w_h,
                  k_s, k_b, k_d,
                  g_b, g_s, g_t,
                  dq_s, dq_b, dq_h, dq_d,
                  dw_s, dw_b, dw_h,
                  RELU: tl.constexpr, F32: tl.constexpr, SPLIT: tl.constexpr,
                  NEED_Q: tl.constexpr,
                  NEED_W: tl.constexpr,
                  BM: tl.constexpr, BN: tl.constexpr, BD: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    bb = tl.program_id(1).to(tl.int64)
    h = pid % heads  # heads fastest: one query block's programs share its gradient rows in L2
    pid_m = pid // heads
    rows = pid_m * BM + tl.arange(0, BM)
    dims = tl.arange(0, BD)
    row_ok = rows < sq
    dim_ok = dims < d
    q_tile = tl.load(q_ptr + rows[:, None] * q_s + bb * q_b + h * q_h + dims[None, :] * q_d,
                     mask=row_ok[:, None] & dim_ok[None, :], other=0.0)
    w = tl.load(w_ptr + rows * w_s + bb * w_b + h * w_h, mask=row_ok, other=0.0).to(tl.float32)
    dq = tl.zeros((BM, BD), dtype=tl.float32)
    dw = tl.zeros((BM,), dtype=tl.float32)
    for start in range(0, sk, BN):
        cols = start + tl.arange(0, BN).to(tl.int64)
        col_ok = cols < sk
        k_tile = tl.load(k_ptr + cols[:, None] * k_s + bb * k_b + dims[None, :] * k_d,
                         mask=col_ok[:, None] & dim_ok[None, :], other=0.0)
        s = _dot(q_tile, tl.trans(k_tile), F32)
        g = tl.load(g_ptr + bb * g_b + rows[:, None] * g_s + cols[None, :] * g_t,
                    mask=row_ok[:, None] & col_ok[None, :], other=0.0).to(tl.float32)
        if RELU:
            off = s <= 0.0  # a NaN score is not off: its gradient passes, as torch's does
            s = tl.where(off, 0.0, s)
            ds = tl.where(off, 0.0, g * w[:, None])
        else:
            ds = g * w[:, None]
        # columns past sk: a score of inf * 0 (NaN) and a gradient of 0 * inf (NaN), where
        # upstream has no column at all
        s = tl.where(col_ok[None, :], s, 0.0)
        ds = tl.where(col_ok[None, :], ds, 0.0)
        if NEED_W:
            dw += tl.sum(g * s, axis=1)
        if NEED_Q:
            dq += _dot_split(ds, k_tile, F32, SPLIT)
    if NEED_Q:
        tl.store(dq_ptr + rows[:, None] * dq_s + bb * dq_b + h * dq_h + dims[None, :] * dq_d,
                 dq, mask=row_ok[:, None] & dim_ok[None, :])
    if NEED_W:
        tl.store(dw_ptr + rows * dw_s + bb * dw_b + h * dw_h, dw, mask=row_ok)


@triton.jit
def _scores_bwd_k(q_ptr, w_ptr, k_ptr, g_ptr, part_ptr,
                  sq, sk, heads, d, heads_per_group,
                  q_s, q_b, q_h, q_d,
                  w_s, w_b, w_h,
                  k_s, k_b, k_d,
                  g_b, g_s, g_t,
                  p_g, p_t, p_b,
                  RELU: tl.constexpr, F32: tl.constexpr, SPLIT: tl.constexpr,
                  BM: tl.constexpr, BN: tl.constexpr, BD: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    bb = tl.program_id(1).to(tl.int64)
    groups = tl.cdiv(heads, heads_per_group)
    group = pid % groups  # groups fastest: one key block's programs share its gradient columns
    pid_n = pid // groups
    cols = pid_n * BN + tl.arange(0, BN)
    dims = tl.arange(0, BD)
    col_ok = cols < sk
    dim_ok = dims < d
    k_tile = tl.load(k_ptr + cols[:, None] * k_s + bb * k_b + dims[None, :] * k_d,
                     mask=col_ok[:, None] & dim_ok[None, :], other=0.0)
    kt = tl.trans(k_tile)
    dk = tl.zeros((BN, BD), dtype=tl.float32)
    first = group * heads_per_group
    last = tl.minimum(heads, first + heads_per_group)
    for h in range(first, last):
        for start in range(0, sq, BM):
            rows = start + tl.arange(0, BM).to(tl.int64)
            row_ok = rows < sq
            q_tile = tl.load(q_ptr + rows[:, None] * q_s + bb * q_b + h * q_h
                             + dims[None, :] * q_d,
                             mask=row_ok[:, None] & dim_ok[None, :], other=0.0)
            s = _dot(q_tile, kt, F32)
            g = tl.load(g_ptr + bb * g_b + rows[:, None] * g_s + cols[None, :] * g_t,
                        mask=row_ok[:, None] & col_ok[None, :], other=0.0).to(tl.float32)
            w = tl.load(w_ptr + rows * w_s + bb * w_b + h * w_h, mask=row_ok,
                        other=0.0).to(tl.float32)
            ds = g * w[:, None]
            if RELU:
                ds = tl.where(s <= 0.0, 0.0, ds)
            dk += _dot_split(tl.trans(ds), q_tile, F32, SPLIT)
    tl.store(part_ptr + group * p_g + cols[:, None] * p_t + bb * p_b + dims[None, :], dk,
             mask=col_ok[:, None] & dim_ok[None, :])


def _block_d(d: int) -> int:
    return max(16, int(triton.next_power_of_2(d)))


def _modes(q: Any) -> dict[str, bool]:
    """``F32``: fp32 dot operands (fp32 inputs, or CPU tensors: Triton's interpreter);
    ``SPLIT``: the backward's fp32 score gradient as two bf16 parts (bf16 inputs only)."""
    import torch

    low = q.dtype != torch.float32
    return {"F32": not low or q.device.type != "cuda", "SPLIT": q.dtype == torch.bfloat16}


def forward(q: Any, weights: Any, k: Any, use_relu: bool, config: Any) -> Any:
    """``[sq, b, sk]`` fp32 scores (the caller returns the ``[b, sq, sk]`` transpose view)."""
    import torch

    sq, b, heads, d = q.shape
    sk = k.shape[0]
    out = torch.empty(sq, b, sk, dtype=torch.float32, device=q.device)
    grid = (triton.cdiv(sq, config.fwd_m), triton.cdiv(sk, config.fwd_n), b)
    _scores_fwd[grid](q, weights, k, out, sq, sk, heads, d,
                      *q.stride(), *weights.stride(), *k.stride(), *out.stride(),
                      RELU=use_relu, F32=_modes(q)["F32"], BM=config.fwd_m, BN=config.fwd_n,
                      BD=_block_d(d), **config.fwd_launch)
    return out


def backward(q: Any, weights: Any, k: Any, grad: Any, use_relu: bool,
             needs: tuple[bool, bool, bool], config: Any) -> tuple[Any, Any, Any]:
    """(grad q, grad weights, grad k) in the inputs' dtypes (None where not needed) for
    ``grad`` ``[b, sq, sk]`` with respect to the scores."""
    import torch

    need_q, need_w, need_k = needs
    sq, b, heads, d = q.shape
    sk = k.shape[0]
    modes = _modes(q)
    bd = _block_d(d)
    grad_q = grad_w = grad_k = None
    if need_q or need_w:
        # fp32 buffers, rounded to the inputs' dtypes by torch (round-to-nearest-even, as
        # upstream's `.to(q.dtype)`); the kernel writes every element of what it is asked for,
        # and a one-element dummy stands in for what it is not.
        f32 = {"dtype": torch.float32, "device": q.device}
        grad_q = torch.empty(q.shape, **f32) if need_q else torch.empty(1, 1, 1, 1, **f32)
        grad_w = torch.empty(weights.shape, **f32) if need_w else torch.empty(1, 1, 1, **f32)
        grid = (triton.cdiv(sq, config.bwd_q_m) * heads, b)
        _scores_bwd_q[grid](q, weights, k, grad, grad_q, grad_w, sq, sk, heads, d,
                            *q.stride(), *weights.stride(), *k.stride(), *grad.stride(),
                            *grad_q.stride(), *grad_w.stride(),
                            RELU=use_relu, **modes, NEED_Q=need_q, NEED_W=need_w,
                            BM=config.bwd_q_m, BN=config.bwd_q_n, BD=bd,
                            **config.bwd_q_launch)
        grad_q = grad_q.to(q.dtype) if need_q else None
        grad_w = grad_w.to(weights.dtype) if need_w else None
    if need_k:
        blocks = triton.cdiv(sk, config.bwd_k_n) * b
        groups = max(1, min(heads, triton.cdiv(config.bwd_k_programs, blocks)))
        per_group = triton.cdiv(heads, groups)
        groups = triton.cdiv(heads, per_group)
        part = torch.empty(groups, sk, b, bd, dtype=torch.float32, device=q.device)
        grid = (triton.cdiv(sk, config.bwd_k_n) * groups, b)
        _scores_bwd_k[grid](q, weights, k, grad, part, sq, sk, heads, d, per_group,
                            *q.stride(), *weights.stride(), *k.stride(), *grad.stride(),
                            part.stride(0), part.stride(1), part.stride(2),
                            RELU=use_relu, **modes,
                            BM=config.bwd_k_m, BN=config.bwd_k_n, BD=bd,
                            **config.bwd_k_launch)
        summed = part[0] if groups == 1 else part.sum(dim=0)
        grad_k = summed[..., :d].to(k.dtype).contiguous()
    return grad_q, grad_w, grad_k
