"""DSA overlays on real megatron-core, in process: gradient identity of the graph-safe backward
(0.16-0.19: on whichever release this interpreter installs), and the 0.16 streamed scores
against upstream. Both reproducers run both ways in the release matrix, on every set where
their entry guards, each case checked for its failure by ``case_checks``."""

from __future__ import annotations

import inspect
from types import SimpleNamespace
from typing import Any

import pytest

import patchlane
from patchlane import startup

from .conftest import megatron_version

GRAPH_SAFE = "mcore_dsa_indexer_loss_graph_safe"
STREAMED = "mcore_dsa_streamed_index_scores"
DSA = "megatron.core.transformer.experimental_attention_variant.dsa"

pytestmark = [pytest.mark.upstream, pytest.mark.independent]


def _admits(entry_id: str) -> bool:
    spec = startup.current().registry.get(entry_id).applies_to
    installed = megatron_version()
    return installed is not None and spec is not None and spec.contains(installed,
                                                                         prereleases=True)


needs_streamed = pytest.mark.skipif(not _admits(STREAMED),
                                    reason="the 0.16 streamed overlay targets 0.16.x")
needs_graph_safe = pytest.mark.skipif(not _admits(GRAPH_SAFE),
                                      reason="the installed megatron-core is outside the "
                                             "graph-safe gate")


@pytest.fixture
def dsa() -> Any:
    import importlib

    module = importlib.import_module(DSA)
    decisions = {e["id"]: e for e in patchlane.report()["entries"]}
    assert all(decisions[i]["applied"] for i in (GRAPH_SAFE, STREAMED) if _admits(i))
    return module


@needs_graph_safe
def test_graph_safe_backward_gives_bitwise_identical_gradients(dsa: Any) -> None:
    import torch

    g = torch.Generator().manual_seed(1)
    activation = torch.randn(8, 3, generator=g).requires_grad_(True)
    loss_input = torch.randn(4, generator=g).requires_grad_(True)

    def grads() -> list[Any]:
        activation.grad = loss_input.grad = None
        dsa.DSAIndexerLossAutoScaler.main_loss_backward_scale = None
        out = dsa.DSAIndexerLossAutoScaler.apply(activation * 2.0, loss_input.pow(2).mean())
        (out * torch.arange(3.0)).sum().backward()
        return [activation.grad.clone(), loss_input.grad.clone()]

    ours = grads()
    assert dsa.DSAIndexerLossAutoScaler.main_loss_backward_scale is None  # no class mutation
    patchlane.revert(GRAPH_SAFE)
    try:
        upstream = grads()
        assert dsa.DSAIndexerLossAutoScaler.main_loss_backward_scale is not None  # upstream's
    finally:
        dsa.DSAIndexerLossAutoScaler.main_loss_backward_scale = None
        patchlane.apply()
    for a, b in zip(ours, upstream, strict=True):
        assert torch.equal(a, b)
    # with a loss scale set, upstream's own backward runs (and scales)
    scaled_before = patchlane.hits(GRAPH_SAFE, "scaled")
    dsa.DSAIndexerLossAutoScaler.set_loss_scale(torch.tensor(0.5))
    try:
        activation.grad = loss_input.grad = None
        out = dsa.DSAIndexerLossAutoScaler.apply(activation * 2.0, loss_input.pow(2).mean())
        out.sum().backward()
        assert patchlane.hits(GRAPH_SAFE, "scaled") == scaled_before + 1
        assert torch.allclose(loss_input.grad, 0.5 * loss_input.detach() / 2)
    finally:
        dsa.DSAIndexerLossAutoScaler.main_loss_backward_scale = None


@needs_streamed
@pytest.mark.parametrize(("heads", "batch", "seq"), [(1, 1, 7), (5, 2, 33), (16, 1, 300)])
def test_streamed_scores_match_upstream(dsa: Any, heads: int, batch: int, seq: int) -> None:
    import torch

    g = torch.Generator().manual_seed(heads)
    q = torch.randn(seq, batch, heads, 16, generator=g).bfloat16()
    k = torch.randn(seq + 3, batch, 16, generator=g).bfloat16()
    w = torch.randn(seq, batch, heads, generator=g).bfloat16()
    upstream = inspect.unwrap(vars(dsa.DSAIndexer)["_compute_index_scores"])
    want = upstream(None, q, w, k)
    got = dsa.DSAIndexer._compute_index_scores(SimpleNamespace(), q, w, k)
    assert got.shape == want.shape == (batch, seq, seq + 3)
    assert got.dtype == want.dtype and got.stride() == want.stride()
    assert torch.allclose(got, want, rtol=1e-5, atol=1e-5)


@needs_streamed
@pytest.mark.parametrize(("heads", "batch", "seq"), [(5, 2, 33), (16, 1, 300)])
def test_streamed_scores_backward_matches_upstream(dsa: Any, heads: int, batch: int,
                                                   seq: int) -> None:
    """In training the indexer's projections require grad: the overlay's backward (an
    autograd.Function recomputing each head block) gives upstream's gradients (fp32: 1e-5 of
    the largest), where the first version's in-place loop failed in backward."""
    import torch

    g = torch.Generator().manual_seed(heads)
    inputs = [torch.randn(seq, batch, heads, 16, generator=g),
              torch.randn(seq, batch, heads, generator=g),
              torch.randn(seq + 3, batch, 16, generator=g)]
    grad = torch.randn(batch, seq, seq + 3, generator=g)
    upstream = inspect.unwrap(vars(dsa.DSAIndexer)["_compute_index_scores"])

    def grads(fn: Any) -> list[Any]:
        q, w, k = (t.clone().requires_grad_(True) for t in inputs)
        fn(q, w, k).backward(grad)
        return [q.grad, w.grad, k.grad]

    got = grads(lambda q, w, k: dsa.DSAIndexer._compute_index_scores(SimpleNamespace(), q, w, k))
    want = grads(lambda q, w, k: upstream(None, q, w, k))
    for a, b in zip(got, want, strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert float((a - b).abs().max()) <= 1e-5 * float(b.abs().max())
