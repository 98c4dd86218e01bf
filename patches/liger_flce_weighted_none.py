"""Overlay: per-token weighted losses through liger-kernel's fused linear cross-entropy.

Liger's ``LigerFusedLinearCrossEntropyFunction`` computes the gradients in forward, summing
``grad_weight`` / ``grad_bias`` over tokens there; backward then rescales them by one scalar read
from ``grad_output`` (its first element). That is right for ``mean``/``sum`` and for uniform
per-token weights, and wrong for ``reduction='none'`` followed by non-uniform weights (loss masks,
per-token weights): every gradient comes out scaled by ``w[0]`` (Liger-Kernel #968, #678; fixed
by PR #1298, first released in 0.8.2).

The overlay wraps ``LigerFusedLinearCrossEntropyFunction.apply`` (which the nn.Module loss and
the functional form both call): ``mean`` and ``sum`` keep the fused kernels; ``'none'`` is routed
to :class:`ChunkedLinearCrossEntropy` below, a linear cross-entropy that never holds fp32
logits for all tokens and whose backward scales each token's logit gradient by that token's
upstream gradient. Chunks are sized for the device (a CPU's cache; a share of a GPU's memory,
a few thousand rows), and on a GPU forward keeps ``softmax - onehot`` in the inputs' dtype for
as much of the vocabulary as a budget allows, so forward+backward costs about three
tensor-core products, as plain PyTorch does, at a fraction of its memory. Arguments the routed
path does not implement raise, naming the argument.
"""

from __future__ import annotations

import inspect
from types import ModuleType
from typing import Any

import patchlane
from patchlane.loading import entry_id

ENTRY_ID = entry_id(__name__)  # the decider loads this file under its entry id
CPU_CHUNK_ELEMENTS = 1 << 23
"""Logit elements per chunk on a CPU (fp32: 32 MiB): its caches, not its memory, set the size."""
GPU_CHUNK_FRACTION = 1 / 256
"""fp32 logit elements per chunk on a GPU, as a share of its memory: 320 MiB on an 80 GB card,
650 rows of a 128k vocabulary in forward (10k columns of 8k tokens in backward): a dozen large
products, not hundreds of skinny ones."""
GPU_SAVE_FRACTION = 1 / 16
"""On a GPU, forward keeps ``softmax - onehot`` in the inputs' dtype for backward, for as many
vocabulary columns as fit in this share of the device's memory (5 GiB on an 80 GB card: all
of a 128k vocabulary up to 20k tokens in bf16). Backward then needs two products for those
columns instead of three: on an H100 at 8k x 4096 x 128k, keeping all of it ran in 1.02x plain
PyTorch's time and keeping three quarters in 1.70x (recomputing is the expensive side). The
rest, and everything on a CPU, backward recomputes a chunk at a time: memory stays a chunk,
whatever the number of tokens."""

# argument -> the only value the routed path supports (liger's defaults)
_UNSUPPORTED = {
    "ce_weight": None,
    "lse_square_scale": 0.0,
    "label_smoothing": 0.0,
    "softcap": None,
    "return_z_loss": False,
    "use_token_scaling": False,
    "return_token_accuracy": False,
    "return_predicted_tokens": False,
}


def chunk_elements_for(device: Any) -> int:
    """fp32 logit elements per chunk on ``device``: a CPU's cache, a GPU's budget."""
    if device.type != "cuda":
        return CPU_CHUNK_ELEMENTS
    import torch

    total = torch.cuda.get_device_properties(device).total_memory
    return max(CPU_CHUNK_ELEMENTS, int(total * GPU_CHUNK_FRACTION) // 4)


def save_limit_for(device: Any) -> int:
    """Bytes of ``softmax - onehot`` forward may keep for backward on ``device`` (0: none)."""
    if device.type != "cuda":
        return 0
    import torch

    return int(torch.cuda.get_device_properties(device).total_memory * GPU_SAVE_FRACTION)


def _rows_kernel(x: Any) -> Any:
    """The Triton rows kernel for CUDA tensors when Triton imports, else None (torch ops)."""
    if not x.is_cuda:
        return None
    try:
        from patchlane.overlaylib import cross_entropy_rows_kernel
    except ImportError:
        return None
    return cross_entropy_rows_kernel


_MM_OUT_DTYPE: list[bool] = []  # [supported?] once known: torch.mm(..., out_dtype=) (CUDA)


def _operand_dtype(x: Any) -> Any:
    """The products' operand dtype: the inputs' own on a GPU (tensor cores), fp32 on a CPU
    (exact, as before: a CPU has no fast half-precision products to win)."""
    import torch

    return x.dtype if x.is_cuda else torch.float32


def _mm32(a: Any, b: Any) -> Any:
    """``a @ b`` as fp32: on fp32 operands as is; on half-precision CUDA operands with an fp32
    result where torch offers it (``out_dtype``), else the product in their dtype, widened."""
    import torch

    if a.dtype == torch.float32:
        return a @ b
    if _MM_OUT_DTYPE != [False]:
        try:
            out = torch.mm(a, b, out_dtype=torch.float32)
        except (TypeError, RuntimeError, NotImplementedError):
            _MM_OUT_DTYPE[:] = [False]
        else:
            _MM_OUT_DTYPE[:] = [True]
            return out
    return (a @ b).float()


def _mm_into(out: Any, a: Any, b: Any) -> None:
    """``out[...] = a @ b``, written in place when the dtypes agree (no temporary)."""
    import torch

    if out.dtype == a.dtype:
        torch.mm(a, b, out=out)
    else:
        out.copy_(a @ b)


def _rows_torch(logits: Any, target: Any, valid: Any, safe: Any, shift: Any, logsum: Any,
               loss: Any, grad_logits: Any | None) -> None:
    """The rows kernel's work in torch ops (CPU; no Triton): ``logits`` is overwritten with
    ``logits - max``, as torch's ``log_softmax`` shifts them (the maximum and the log-sum are
    kept apart: see the rows kernel)."""
    import torch

    shift.copy_(logits.amax(dim=1))
    logits.sub_(shift[:, None])
    logsum.copy_(torch.exp(logits).sum(dim=1).log_())
    picked = logits.gather(1, safe[:, None]).squeeze(1)
    loss.copy_(torch.where(valid, logsum - picked, 0.0))
    if grad_logits is not None and grad_logits.shape[1] > 0:
        saved = grad_logits.shape[1]
        part = logits[:, :saved].sub_(logsum[:, None]).exp_()
        hit = safe < saved
        part[torch.arange(logits.shape[0], device=logits.device)[hit], safe[hit]] -= 1.0
        grad_logits.copy_(part)


def _check_targets(target: Any, valid: Any, vocab: int) -> None:
    """Refuse a target outside ``[0, vocab)`` that is not ``ignore_index``, as torch's
    cross-entropy does. On a CPU here, at once (no device to wait for). On a GPU the check
    costs no host synchronisation in the step: the rows kernel stops at a device-side assert,
    as torch's own kernels do (without Triton, torch's ``gather`` asserts the same)."""
    if target.is_cuda:
        return
    bad = valid & ((target < 0) | (target >= vocab))
    if bool(bad.any()):
        raise IndexError(f"Target {int(target[bad][0])} is out of bounds.")


def _make_function() -> Any:
    import torch

    class ChunkedLinearCrossEntropy(torch.autograd.Function):
        """Cross-entropy of ``x @ W.T + b`` per token, never holding fp32 ``[tokens, vocab]``
        logits.

        Forward computes the logits a chunk of tokens at a time (tensor-core products with
        fp32 results on a GPU), then each row's log-sum-exp and loss, and ``softmax - onehot``
        in the inputs' dtype for the first ``saved`` vocabulary columns (a Triton kernel on a
        GPU: two reads of the chunk, no temporary). Backward scales by *each token's* upstream
        gradient: over the kept columns at once, through the cheap side of each product
        (``grad_x = s * (G @ W)``, ``grad_W = G.T @ (s * x)``), and over the rest a chunk of
        the vocabulary at a time, recomputing those logits and scaling them in place.
        """

        @staticmethod
        def forward(ctx: Any, x: Any, weight: Any, target: Any, bias: Any, ignore_index: int,
                    chunk_elements: int, save_limit: int) -> Any:
            tokens, vocab = x.shape[0], weight.shape[0]
            rows = max(1, chunk_elements // max(1, vocab))
            dtype = _operand_dtype(x)
            wt = weight.to(dtype).T
            b32 = bias.float() if bias is not None else None
            loss = torch.empty(tokens, dtype=torch.float32, device=x.device)
            shift = torch.empty(tokens, dtype=torch.float32, device=x.device)
            logsum = torch.empty(tokens, dtype=torch.float32, device=x.device)
            valid = target != ignore_index
            _check_targets(target, valid, vocab)
            safe = torch.where(valid, target, torch.zeros_like(target))
            saved = min(vocab, save_limit // max(1, tokens * wt.element_size()))
            kept = torch.empty(tokens, saved, dtype=dtype, device=x.device)
            kernel = _rows_kernel(x)
            for start in range(0, tokens, rows):
                stop = min(tokens, start + rows)
                logits = _mm32(x[start:stop].to(dtype), wt)
                if b32 is not None:
                    logits += b32
                part = slice(start, stop)
                if kernel is not None:
                    kernel.rows(logits, target[part], ignore_index, shift[part], logsum[part],
                                loss[part], kept[part])
                else:
                    _rows_torch(logits, target[part], valid[part], safe[part], shift[part],
                                logsum[part], loss[part], kept[part])
                del logits
            ctx.save_for_backward(x, weight, target, bias, shift, logsum, kept)
            ctx.ignore_index = ignore_index
            ctx.chunk_elements = chunk_elements
            return loss

        @staticmethod
        def backward(ctx: Any, grad_loss: Any) -> Any:
            x, weight, target, bias, shift, logsum, kept = ctx.saved_tensors
            tokens, vocab = x.shape[0], weight.shape[0]
            valid = target != ctx.ignore_index
            safe = torch.where(valid, target, torch.zeros_like(target))
            scale = torch.where(valid, grad_loss.float(), 0.0)
            need_x, need_w = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
            need_b = bias is not None and ctx.needs_input_grad[3]
            dtype = _operand_dtype(x)
            x_op, w_op = x.to(dtype), weight.to(dtype)
            saved = kept.shape[1]
            # The kept columns are shared with autograd (a second backward reads them again):
            # scaled through the cheap side of each product, d loss_t / d W = G_t^T (s_t x_t)
            # and grad_x = s * (G @ W). Recomputed columns are this call's own: scaled in place.
            # fp16 but for grad_x: s * x overflows fp16 at |x| * s > 65504 (GradScaler's 65536
            # on a summed loss) where torch's own s * G, bounded by s, does not: a chunk of the
            # kept columns is scaled at a time instead, as recomputed ones are (bf16 has fp32's
            # range, and keeps the cheap side).
            half = dtype == torch.float16
            x_scaled = (x.float() * scale[:, None]).to(dtype) \
                if need_w and saved and not half else None
            s_row = scale[None, :].to(dtype) if need_b and saved and not half else None
            grad_x = torch.zeros(x.shape, dtype=torch.float32, device=x.device) \
                if need_x and not (saved == vocab and dtype != torch.float32) else None
            grad_w = torch.empty_like(weight) if need_w else None
            grad_b = torch.empty(vocab, dtype=torch.float32, device=x.device) if need_b \
                else None
            if saved:
                if need_x and grad_x is None:
                    # All kept, half precision: grad_x = s * (G @ W) in the inputs' dtype, one
                    # product rounded then scaled, as PyTorch's own backward rounds its scaled
                    # logit gradient and then its product; no fp32 [tokens, hidden] copies.
                    grad_x = (kept @ w_op).mul_(scale[:, None])
                elif grad_x is not None:
                    grad_x += _mm32(kept, w_op[:saved])
                    grad_x.mul_(scale[:, None])
                if not half:
                    if grad_w is not None:
                        _mm_into(grad_w[:saved], kept.T, x_scaled)
                    if grad_b is not None:
                        grad_b[:saved] = _mm32(s_row, kept)[0]
            cols = max(1, ctx.chunk_elements // max(1, tokens))
            for start in range(0, saved if half and (grad_w is not None or grad_b is not None)
                               else 0, cols):
                stop = min(saved, start + cols)
                scaled = kept[:, start:stop].float().mul_(scale[:, None])
                if grad_b is not None:
                    grad_b[start:stop] = scaled.sum(dim=0)
                if grad_w is not None:
                    _mm_into(grad_w[start:stop], scaled.to(dtype).T, x_op)
                del scaled
            token_index = torch.arange(tokens, device=x.device)
            for start in range(saved, vocab, cols):
                # recompute this vocabulary chunk's softmax - onehot for every token, scaled
                stop = min(vocab, start + cols)
                logits = _mm32(x_op, w_op[start:stop].T)
                if bias is not None:
                    logits += bias[start:stop].float()
                logits.sub_(shift[:, None]).sub_(logsum[:, None]).exp_()
                hit = (safe >= start) & (safe < stop)
                logits[token_index[hit], safe[hit] - start] -= 1.0
                logits.mul_(scale[:, None])
                if grad_b is not None:
                    grad_b[start:stop] = logits.sum(dim=0)
                g = logits.to(dtype)
                del logits
                if grad_x is not None:
                    if g.dtype == torch.float32:
                        grad_x.addmm_(g, w_op[start:stop])
                    else:
                        grad_x += _mm32(g, w_op[start:stop])
                if grad_w is not None:
                    _mm_into(grad_w[start:stop], g.T, x_op)
                del g
            return (
                grad_x.to(x.dtype) if grad_x is not None else None,
                grad_w,
                None,
                grad_b.to(bias.dtype) if grad_b is not None else None,
                None,
                None,
                None,
            )

    return ChunkedLinearCrossEntropy


_FUNCTION: Any = None


def linear_cross_entropy(x: Any, weight: Any, target: Any, bias: Any = None,
                         ignore_index: int = -100, chunk_elements: int | None = None,
                         save_limit: int | None = None) -> Any:
    """Per-token fp32 cross-entropy losses of ``x @ weight.T + bias`` (0 where ignored).

    ``chunk_elements``: logit elements per chunk (default :func:`chunk_elements_for` the
    device); ``save_limit``: bytes of ``softmax - onehot`` forward may keep for backward
    (default :func:`save_limit_for` the device; 0 recomputes all)."""
    global _FUNCTION
    if _FUNCTION is None:
        _FUNCTION = _make_function()
    if chunk_elements is None:
        chunk_elements = chunk_elements_for(x.device)
    if save_limit is None:
        save_limit = save_limit_for(x.device)
    return _FUNCTION.apply(x, weight, target, bias, ignore_index, chunk_elements, save_limit)


def _forward_parameters(cls: Any) -> list[inspect.Parameter]:
    return list(inspect.signature(cls.forward).parameters.values())[1:]  # drop ctx


def _function_class(wrapped: Any, instance: Any) -> Any:
    # torch <= 2.14 defines Function.apply as a Python classmethod, so wrapt passes the class
    # as `instance`. torch 2.15 uses _C._FunctionBase's C classmethod descriptor, which wrapt
    # binds like a plain function (instance None): the class is then the bound method's
    # __self__. Seen on torch 2.15.0 + liger-kernel 0.8.1 (Python 3.12).
    return instance if instance is not None else getattr(wrapped, "__self__", None)


def overlay(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    params = _forward_parameters(_function_class(wrapped, instance))
    values = {p.name: p.default for p in params}
    values.update(zip((p.name for p in params), args, strict=False))
    values.update(kwargs)
    if values.get("reduction") != "none":
        patchlane.hit_path(ENTRY_ID, "fused", f"reduction={values.get('reduction')!r}: one "
                           "scalar rescales the gradients, which liger's fused path gets right")
        return wrapped(*args, **kwargs)
    for name, supported in _UNSUPPORTED.items():
        if name in values and values[name] != supported:
            raise ValueError(
                f"patchlane {ENTRY_ID}: reduction='none' with {name}={values[name]!r} is not "
                "supported "
                f"by the routed (correct-gradient) path, which implements {name}={supported!r} "
                "only; use liger-kernel>=0.8.2, or reduction='mean'/'sum'")
    x = values["_input"]
    rows_by = ("the Triton rows kernel" if _rows_kernel(x) is not None
               else f"torch ops ({x.device.type} tensors)" if not x.is_cuda
               else "torch ops (Triton is not importable)")
    patchlane.hit_path(ENTRY_ID, "routed", "reduction='none': liger scales every token's "
                       f"gradient by the first token's; rows by {rows_by}")
    loss = linear_cross_entropy(values["_input"], values["weight"], values["target"],
                                values.get("bias"), int(values["ignore_index"]))
    # the release's return arity: (loss, z_loss[, token_accuracy[, predicted_tokens]])
    extras = 1 + sum(name in values for name in ("return_token_accuracy",
                                                  "return_predicted_tokens"))
    return (loss, *([None] * extras))


def probe(module: ModuleType) -> bool:
    """True when this release already computes 'none' gradients per token: from 0.8.2 the
    forward helper takes the upstream per-token gradient (``token_grad_output``) and backward
    recomputes with it (PR #1298). A structural check: no kernel is launched at import time;
    the reproducer is what shows the behaviour."""
    helper = getattr(module, "fused_linear_cross_entropy_forward", None)
    if helper is None:
        return False
    return "token_grad_output" in inspect.signature(helper).parameters
