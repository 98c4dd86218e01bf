"""Overlay: per-token weighted losses through liger-kernel's fused linear cross-entropy.

Liger's ``LigerFusedLinearCrossEntropyFunction`` computes the gradients in forward, summing
``grad_weight`` / ``grad_bias`` over tokens there; backward then rescales them by one scalar read
from ``grad_output`` (its first element). That is right for ``mean``/``sum`` and for uniform
per-token weights, and wrong for ``reduction='none'`` followed by non-uniform weights (loss masks,
per-token weights): every gradient comes out scaled by ``w[0]`` (Liger-Kernel #968, #678; fixed
by PR #1298, first released in 0.8.2).

The overlay wraps ``LigerFusedLinearCrossEntropyFunction.apply`` (which the nn.Module loss and
the functional form both call): ``mean`` and ``sum`` keep the fused kernels; ``'none'`` is routed
to :class:`ChunkedLinearCrossEntropy` below, a memory-efficient linear cross-entropy whose
backward multiplies each token's logit gradient by that token's upstream gradient before the
projections. Arguments the routed path does not implement raise, naming the argument.
"""

from __future__ import annotations

import inspect
from types import ModuleType
from typing import Any

import patchlane
from patchlane.loading import entry_id

ENTRY_ID = entry_id(__name__)  # the decider loads this file under its entry id
DEFAULT_CHUNK_ELEMENTS = 1 << 23
"""Logit elements per chunk (fp32: 32 MiB): bounds the routed path's working memory."""

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


def _chunk_rows(vocab: int, chunk_elements: int) -> int:
    return max(1, chunk_elements // max(1, vocab))


def _make_function() -> Any:
    import torch

    class ChunkedLinearCrossEntropy(torch.autograd.Function):
        """Cross-entropy of ``x @ W.T + b`` per token, never holding ``[tokens, vocab]`` logits.

        Forward keeps only the per-token log-sum-exp; backward recomputes each chunk's logits,
        forms ``softmax - onehot`` scaled by *that token's* upstream gradient, and accumulates
        the input, weight and bias gradients in fp32.
        """

        @staticmethod
        def forward(ctx: Any, x: Any, weight: Any, target: Any, bias: Any, ignore_index: int,
                    chunk_elements: int) -> Any:
            tokens = x.shape[0]
            rows = _chunk_rows(weight.shape[0], chunk_elements)
            w32 = weight.float()
            b32 = bias.float() if bias is not None else None
            loss = torch.zeros(tokens, dtype=torch.float32, device=x.device)
            lse = torch.zeros(tokens, dtype=torch.float32, device=x.device)
            valid = target != ignore_index
            safe = torch.where(valid, target, torch.zeros_like(target))
            for start in range(0, tokens, rows):
                stop = min(tokens, start + rows)
                logits = x[start:stop].float() @ w32.T
                if b32 is not None:
                    logits += b32
                chunk_lse = torch.logsumexp(logits, dim=1)
                picked = logits.gather(1, safe[start:stop, None]).squeeze(1)
                lse[start:stop] = chunk_lse
                loss[start:stop] = torch.where(valid[start:stop], chunk_lse - picked, 0.0)
                del logits
            ctx.save_for_backward(x, weight, target, bias, lse)
            ctx.ignore_index = ignore_index
            ctx.rows = rows
            return loss

        @staticmethod
        def backward(ctx: Any, grad_loss: Any) -> Any:
            x, weight, target, bias, lse = ctx.saved_tensors
            valid = target != ctx.ignore_index
            safe = torch.where(valid, target, torch.zeros_like(target))
            scale = torch.where(valid, grad_loss.float(), 0.0)
            w32 = weight.float()
            b32 = bias.float() if bias is not None else None
            need_x, need_w = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
            need_b = bias is not None and ctx.needs_input_grad[3]
            grad_x = torch.zeros(x.shape, dtype=torch.float32, device=x.device) if need_x \
                else None
            grad_w = torch.zeros(w32.shape, dtype=torch.float32, device=x.device) if need_w \
                else None
            grad_b = torch.zeros(w32.shape[0], dtype=torch.float32, device=x.device) \
                if need_b else None
            for start in range(0, x.shape[0], ctx.rows):
                stop = min(x.shape[0], start + ctx.rows)
                x32 = x[start:stop].float()
                logits = x32 @ w32.T
                if b32 is not None:
                    logits += b32
                # softmax - onehot, in place, then each row times its own upstream gradient
                grad_logits = logits.sub_(lse[start:stop, None]).exp_()
                rows = torch.arange(stop - start, device=x.device)
                grad_logits[rows, safe[start:stop]] -= 1.0
                grad_logits.mul_(scale[start:stop, None])
                if grad_x is not None:
                    grad_x[start:stop] = grad_logits @ w32
                if grad_w is not None:
                    grad_w.addmm_(grad_logits.T, x32)
                if grad_b is not None:
                    grad_b += grad_logits.sum(dim=0)
                del grad_logits, logits
            return (
                grad_x.to(x.dtype) if grad_x is not None else None,
                grad_w.to(weight.dtype) if grad_w is not None else None,
                None,
                grad_b.to(bias.dtype) if grad_b is not None else None,
                None,
                None,
            )

    return ChunkedLinearCrossEntropy


_FUNCTION: Any = None


def linear_cross_entropy(x: Any, weight: Any, target: Any, bias: Any = None,
                         ignore_index: int = -100,
                         chunk_elements: int = DEFAULT_CHUNK_ELEMENTS) -> Any:
    """Per-token fp32 cross-entropy losses of ``x @ weight.T + bias`` (0 where ignored)."""
    global _FUNCTION
    if _FUNCTION is None:
        _FUNCTION = _make_function()
    return _FUNCTION.apply(x, weight, target, bias, ignore_index, chunk_elements)


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
        patchlane.hit_path(ENTRY_ID, "fused")
        return wrapped(*args, **kwargs)
    for name, supported in _UNSUPPORTED.items():
        if name in values and values[name] != supported:
            raise ValueError(
                f"patchlane {ENTRY_ID}: reduction='none' with {name}={values[name]!r} is not "
                "supported "
                f"by the routed (correct-gradient) path, which implements {name}={supported!r} "
                "only; use liger-kernel>=0.8.2, or reduction='mean'/'sum'")
    patchlane.hit_path(ENTRY_ID, "routed")
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
