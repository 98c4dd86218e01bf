"""Reproducer: DSA indexer scores must not cost memory proportional to the number of heads.

``DSAIndexer._compute_index_scores`` on real megatron-core 0.16.x (from 0.17 the same
computation is the module-level ``dsa._compute_index_scores(q, weights, k)``, which the
reproducer then calls, so a sweep past the gate says whether the bug is still there), at
sq=sk=1024, b=1, h=16,
d=64: the result is ``[b, sq, sk]`` fp32 (4 MiB); the peak allocated while computing it must
stay within 4x that. Upstream materialises ``[sq, b, h, sk]`` fp32 (64 MiB) and a ReLU copy of
it, so it fails the bound; the streamed overlay passes it. The output must equal upstream's to
fp32 rounding: within 1e-5 of each value plus 1e-5 of the largest (the head sum cancels, so an
element near 0 carries the rounding of its large terms), with upstream's dtype, shape and
strides.

Peak memory: the PyTorch profiler's memory accounting on CPU, ``max_memory_allocated`` on CUDA
(``patchlane.testing.memprofile``), of a warm call: one-time library allocations (cuBLAS's
workspace at the first product) stay out.
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
BOUND = 4  # x the output's own size


def run(ctx: ReproContext) -> None:
    import torch
    from megatron.core.transformer.experimental_attention_variant import dsa

    from patchlane.testing.memprofile import peak_bytes

    g = torch.Generator().manual_seed(0)
    q = torch.randn(SQ, BATCH, HEADS, DIM, generator=g).bfloat16().to(ctx.device)
    k = torch.randn(SK, BATCH, DIM, generator=g).bfloat16().to(ctx.device)
    w = torch.randn(SQ, BATCH, HEADS, generator=g).bfloat16().to(ctx.device)
    method = vars(dsa.DSAIndexer).get("_compute_index_scores")
    if method is not None:  # 0.16: the method never reads `self`; called as forward does
        def compute() -> Any:
            return dsa.DSAIndexer._compute_index_scores(None, q, w, k)

        def upstream() -> Any:
            return inspect.unwrap(method)(None, q, w, k)
    else:  # 0.17 and later: a module-level function, same arguments otherwise
        def compute() -> Any:
            return dsa._compute_index_scores(q, w, k)

        def upstream() -> Any:
            return inspect.unwrap(vars(dsa)["_compute_index_scores"])(q, w, k)

    peak, scores = peak_bytes(compute, ctx.device)
    want = upstream()
    assert scores.dtype == want.dtype and scores.shape == want.shape, (scores.dtype,
                                                                       scores.shape)
    assert scores.stride() == want.stride(), (scores.stride(), want.stride())
    diff = (scores - want).abs()
    assert bool((diff <= 1e-5 * want.abs() + 1e-5 * want.abs().max()).all()), \
        f"scores differ from upstream's by up to {float(diff.max()):.3g}"
    output = scores.numel() * scores.element_size()
    assert peak <= BOUND * output, (
        f"_compute_index_scores peaked at {peak / 2**20:.0f} MiB for a {output / 2**20:.0f} MiB "
        f"result (bound {BOUND}x): [sq, b, h, sk] fp32 scores were materialised")
