"""Reproducer: DSA indexer scores (0.17+) must not cost memory proportional to the heads, in
forward nor in backward.

``dsa._compute_index_scores(q, weights, k)`` (megatron-core 0.17, 0.18; 0.19 adds
``use_relu=True``) on a real release, at sq=sk=1024, b=1, h=16, d=64, bf16: the result is
``[b, sq, sk]`` fp32 (4 MiB). Forward: the peak allocated while computing it must stay within
4x that; upstream materialises ``[sq, b, h, sk]`` fp32 (64 MiB) and a ReLU copy (128 MiB).
Forward+backward with q, weights and k requiring grad (how the indexer runs in training): the
peak over ``out = f(q, w, k); out.backward(g)`` must stay within 6x; upstream's autograd keeps
the ReLU output and the weighted product for backward (about 200 MiB). The output must equal
upstream's (1e-5 relative to its largest value), with upstream's dtype, shape and strides; the
gradients of q, weights and k upstream's within one bf16 rounding step, in the same dtypes and
layouts.

ReLU's kink: where a score is within fp32 rounding of 0, the order of its sum decides whether
that score counts in the gradient, and any implementation summing in another order (a GPU
kernel, another cuBLAS algorithm) may decide the other way there; upstream's own choice is no
more right. Each gradient element may differ, besides rounding, by the sum of its terms whose
score lies within fp32 summation error of 0 (from an fp64 recomputation): exactly what the kink
allows, nothing elsewhere. The grad of weights needs none (the score is 0 there).

Peak memory: the PyTorch profiler's raw memory records on CPU, ``max_memory_allocated`` on
CUDA (``patchlane.testing.memprofile``), of a warm call: one-time library allocations (cuBLAS's
workspace on the first product) stay out.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from patchlane.reproducer import ReproContext

LANES = ("cpu", "cuda")
WORLD_SIZES = (1,)

SQ = SK = 1024
BATCH, HEADS, DIM = 1, 16, 64
BOUND_FORWARD = 4  # x the output's own size
BOUND_BACKWARD = 6
BF16_STEP = 2.0**-7  # relative spacing of bf16 values: one rounding step


def _layout(t: Any) -> tuple[tuple[int, int], ...]:
    """Sizes and strides, leaving out size-1 dimensions (their stride is never used)."""
    return tuple((n, s) for n, s in zip(t.shape, t.stride(), strict=True) if n != 1)


def _assert_same(got: Any, want: Any, what: str, rtol: float, slack: Any = None) -> None:
    """``slack``: what ReLU's kink lets each element differ by, besides rounding."""
    import torch

    assert got.dtype == want.dtype and got.shape == want.shape, (what, got.dtype, got.shape,
                                                                 want.dtype, want.shape)
    assert _layout(got) == _layout(want), (what, got.stride(), want.stride())
    diff = (got.float() - want.float()).abs()
    scale = want.float().abs()
    # relative to each value, plus 1e-5 of the largest: sums over heads cancel
    allowed = rtol * scale + 1e-5 * scale.max()
    if slack is not None:
        allowed = allowed + slack
    ok = diff <= allowed
    assert bool(torch.all(ok)), (
        f"{what}: max difference {float(diff.max()):.3g}, {int((~ok).sum())} elements "
        "outside one rounding step")


def _kink_slack(q: Any, w: Any, k: Any, grad: Any) -> tuple[Any, Any]:
    """(for grad q ``[sq, b, h, d]``, for grad k ``[sk, b, d]``): the sum of the terms whose
    score is within fp32 summation error of 0 (``|s| <= 2 d u sum|q_i k_i|``, from fp64), the
    most two correct implementations can differ by at ReLU's kink."""
    import torch

    q64, k64 = q.double(), k.double()
    exact = torch.einsum("sbhd,tbd->sbht", q64, k64)
    bound = torch.einsum("sbhd,tbd->sbht", q64.abs(), k64.abs()) * (2 * q.shape[-1] * 2.0**-24)
    # |d loss / d s| of each near-zero score: |g| |w|
    terms = (exact.abs() <= bound) * grad.double().abs().transpose(0, 1).unsqueeze(2) \
        * w.double().abs().unsqueeze(-1)
    slack_q = torch.einsum("sbht,tbd->sbhd", terms, k64.abs())
    slack_k = torch.einsum("sbht,sbhd->tbd", terms, q64.abs())
    return slack_q.float(), slack_k.float()


def run(ctx: ReproContext) -> None:
    import torch
    from megatron.core.transformer.experimental_attention_variant import dsa

    from patchlane.testing.memprofile import peak_bytes

    g = torch.Generator().manual_seed(0)
    q = torch.randn(SQ, BATCH, HEADS, DIM, generator=g).bfloat16().to(ctx.device)
    k = torch.randn(SK, BATCH, DIM, generator=g).bfloat16().to(ctx.device)
    w = torch.randn(SQ, BATCH, HEADS, generator=g).bfloat16().to(ctx.device)
    grad = torch.randn(BATCH, SQ, SK, generator=g).to(ctx.device)
    upstream = inspect.unwrap(vars(dsa)["_compute_index_scores"])

    def forward() -> Any:
        return dsa._compute_index_scores(q, w, k)

    def forward_backward(fn: Any = dsa._compute_index_scores) -> Any:
        leaves = [t.detach().clone().requires_grad_(True) for t in (q, w, k)]
        out = fn(*leaves)
        out.backward(grad)
        return out.detach(), [t.grad for t in leaves]

    peak, scores = peak_bytes(forward, ctx.device)
    peak_bwd, (scores_bwd, grads) = peak_bytes(forward_backward, ctx.device)
    want, want_grads = forward_backward(upstream)

    _assert_same(scores, want, "scores", 1e-5)
    _assert_same(scores_bwd, want, "scores (with grad)", 1e-5)
    slack_q, slack_k = _kink_slack(q, w, k, grad)
    for name, got, ref, slack in zip(("grad q", "grad weights", "grad k"), grads, want_grads,
                                     (slack_q, None, slack_k), strict=True):
        _assert_same(got, ref, name, BF16_STEP, slack)
    output = scores.numel() * scores.element_size()
    problems = []
    if peak > BOUND_FORWARD * output:
        problems.append(f"forward peaked at {peak / 2**20:.0f} MiB (bound {BOUND_FORWARD}x)")
    if peak_bwd > BOUND_BACKWARD * output:
        problems.append(f"forward+backward peaked at {peak_bwd / 2**20:.0f} MiB (bound "
                        f"{BOUND_BACKWARD}x)")
    assert not problems, (
        f"_compute_index_scores for a {output / 2**20:.0f} MiB result: {'; '.join(problems)}: "
        "[sq, b, h, sk] fp32 scores were materialised")
