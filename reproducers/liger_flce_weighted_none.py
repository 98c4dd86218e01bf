"""Reproducer: per-token weighted losses through liger-kernel's fused linear cross-entropy must
give the gradients plain PyTorch gives (Liger-Kernel #968 / #678, fixed by PR #1298 in 0.8.2).

Loss = sum(w_i * ce_i) with non-uniform w, through every public entry point (the autograd
Function, the functional, the nn.Module), in fp32, with and without a bias, a couple of ignored
tokens: input, weight and bias gradients against ``F.linear`` + ``F.cross_entropy``. On affected
releases every gradient comes out scaled by ``w[0]``. With the overlay, scalar reductions must
still take liger's fused path (checked through patchlane's per-path hit counters).

Lanes: ``cpu`` (liger's Triton kernels under the Triton interpreter) and ``cuda``.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from patchlane.reproducer import ReproContext

LANES = ("cpu", "cuda")
WORLD_SIZES = (1,)
REQUIRES = ("triton",)  # liger's kernels: compiled on a GPU, interpreted on the CPU lane

ID = "liger_flce_weighted_none"
TOKENS, HIDDEN, VOCAB, IGNORE = 16, 32, 64, -100
TOLERANCE = 1e-4


def _inputs(device: str, bias: bool) -> tuple[Any, ...]:
    import torch

    g = torch.Generator().manual_seed(0)
    x = torch.randn(TOKENS, HIDDEN, generator=g) * 0.5
    weight = torch.randn(VOCAB, HIDDEN, generator=g) * 0.2
    b = torch.randn(VOCAB, generator=g) * 0.1 if bias else None
    target = torch.randint(0, VOCAB, (TOKENS,), generator=g)
    target[3] = target[10] = IGNORE
    w = torch.rand(TOKENS, generator=g) * 2.0 + 0.1  # non-uniform per-token weights
    return tuple(t.to(device) if t is not None else None for t in (x, weight, b, target, w))


def _grads(loss_fn: Any, x: Any, weight: Any, b: Any, target: Any, w: Any) -> list[Any]:
    leaves = [t.detach().clone().requires_grad_(True) if t is not None else None
              for t in (x, weight, b)]
    per_token = loss_fn(*leaves, target)
    assert per_token.shape == (TOKENS,), f"'none' returned shape {tuple(per_token.shape)}"
    (w * per_token).sum().backward()
    return [t.grad for t in leaves if t is not None]


def _check(name: str, got: list[Any], want: list[Any]) -> None:
    for label, g, r in zip(("grad_input", "grad_weight", "grad_bias"), got, want, strict=False):
        err = (g.float() - r.float()).abs().max().item()
        assert err < TOLERANCE, (
            f"{name}: {label} off by {err:.3g} with per-token weights (Liger-Kernel #968: "
            "gradients scaled by w[0])")


def run(ctx: ReproContext) -> None:
    if ctx.lane == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported
    import torch.nn.functional as F
    from liger_kernel.ops.fused_linear_cross_entropy import LigerFusedLinearCrossEntropyFunction
    from liger_kernel.transformers.functional import liger_fused_linear_cross_entropy
    from liger_kernel.transformers.fused_linear_cross_entropy import (
        LigerFusedLinearCrossEntropyLoss,
    )

    import patchlane

    def reference(x: Any, weight: Any, b: Any, target: Any) -> Any:
        return F.cross_entropy(F.linear(x, weight, b), target, ignore_index=IGNORE,
                               reduction="none")

    def function(x: Any, weight: Any, b: Any, target: Any) -> Any:
        out = LigerFusedLinearCrossEntropyFunction.apply(x, weight, target, b, None, IGNORE,
                                                         0.0, 0.0, "none")
        return out[0] if isinstance(out, tuple) else out

    def functional(x: Any, weight: Any, b: Any, target: Any) -> Any:
        out = liger_fused_linear_cross_entropy(x, weight, target, b, ignore_index=IGNORE,
                                               reduction="none")
        return getattr(out, "loss", out[0] if isinstance(out, tuple) else out)

    module_loss = LigerFusedLinearCrossEntropyLoss(ignore_index=IGNORE, reduction="none")

    def module(x: Any, weight: Any, b: Any, target: Any) -> Any:
        out = module_loss(weight, x, target, b)
        return getattr(out, "loss", out[0] if isinstance(out, tuple) else out)

    for bias in (False, True):
        x, weight, b, target, w = _inputs(ctx.device, bias)
        want = _grads(reference, x, weight, b, target, w)
        for name, fn in (("Function.apply", function), ("functional", functional),
                         ("nn.Module", module)):
            _check(f"{name} (bias={bias})", _grads(fn, x, weight, b, target, w), want)

    # scalar reductions: still correct, and (with the overlay) still on liger's fused path
    fused_before = patchlane.hits(ID, "fused")
    x, weight, b, target, _ = _inputs(ctx.device, False)
    for reduction in ("mean", "sum"):
        got = _grads_scalar(LigerFusedLinearCrossEntropyLoss(ignore_index=IGNORE,
                                                             reduction=reduction),
                            x, weight, target)
        want = _grads_scalar(lambda w_, x_, t_, r=reduction: F.cross_entropy(
            F.linear(x_, w_), t_, ignore_index=IGNORE, reduction=r), x, weight, target)
        _check(f"reduction={reduction}", got, want)
    if ctx.mode.value == "with" and patchlane.hits(ID) > 0:
        assert patchlane.hits(ID, "fused") - fused_before == 2, "mean/sum left the fused path"
        assert patchlane.hits(ID, "routed") >= 6, "'none' calls were not routed"


def _grads_scalar(loss_fn: Any, x: Any, weight: Any, target: Any) -> list[Any]:
    x, weight = (t.detach().clone().requires_grad_(True) for t in (x, weight))
    out = loss_fn(weight, x, target)
    loss: Any = getattr(out, "loss", out[0] if isinstance(out, tuple) else out)
    loss.backward()
    return [x.grad, weight.grad]
