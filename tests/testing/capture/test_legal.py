"""What a capture allows stays unflagged on the cpu lane: factories, arithmetic, static-shape
indexing, a small model's forward and backward, gloo collectives.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from patchlane.testing.capture import capture_check  # noqa: E402

F = torch.nn.functional


SCALE = torch.tensor(0.5)
LEGAL: dict[str, Callable[[Any, Any], Any]] = {
    "empty": lambda x, m: torch.empty(3),
    "zeros": lambda x, m: torch.zeros(3, dtype=torch.long),
    "ones": lambda x, m: torch.ones(2, 2),
    "full": lambda x, m: torch.full((3,), 2.0),
    "like": lambda x, m: (torch.empty_like(x), torch.zeros_like(x), torch.ones_like(x),
                          torch.full_like(x, 7.0), torch.rand_like(x)),
    "fill": lambda x, m: (x.clone().fill_(1.0), x.clone().zero_()),
    "arith": lambda x, m: (x * 2.0 + 1) / 3 - x.exp().log1p() ** 2,
    "topk-sort": lambda x, m: (x.topk(2), x.sort(), x.argmax(), x.cumsum(0)),
    "scatter": lambda x, m: torch.zeros(4).scatter_(0, torch.arange(4), x),
    "scatter_add": lambda x, m: torch.zeros(4).scatter_add_(0, torch.zeros(4, dtype=torch.long),
                                                            x),
    "index_select-gather": lambda x, m: (x.index_select(0, torch.arange(2)),
                                         x.gather(0, torch.arange(4)),
                                         x[torch.arange(2)]),
    "softmax-logsumexp": lambda x, m: (torch.softmax(x, 0), torch.logsumexp(x, 0),
                                       F.log_softmax(x, 0)),
    "matmul-einsum": lambda x, m: (x @ x, torch.einsum("i,j->ij", x, x),
                                   torch.randn(2, 3).matmul(torch.randn(3, 2))),
    "where3": lambda x, m: (torch.where(m, x, 0.0), torch.where(m, x, torch.zeros_like(x))),
    "masked_fill": lambda x, m: (x.masked_fill(m, 0.0), x.masked_fill(m, SCALE)),
    "clone-copy_": lambda x, m: (x.clone(), torch.empty(4).copy_(x), x.to(torch.float64),
                                 x.to(x), x.double(), x.detach()),
    "to-own-device": lambda x, m: (x.to(x.device), x.to(device=x.device, dtype=torch.float16)),
    "ones_like-times-scale": lambda x, m: torch.ones_like(x) * SCALE,
    "index-put-int": lambda x, m: x.clone().index_put_((torch.arange(2),), torch.ones(2)),
    "nonzero_static": lambda x, m: torch.nonzero_static(x, size=4),
    "repeat_interleave-static": lambda x, m: torch.repeat_interleave(
        x, torch.ones(4, dtype=torch.long), output_size=4),
    "one_hot-num_classes": lambda x, m: F.one_hot(torch.arange(3), 4),
    "shape-math": lambda x, m: x.view(2, 2).t().reshape(-1)[1:3] if x.shape[0] == 4 else None,
    "cat-stack-split": lambda x, m: (torch.cat([x, x]), torch.stack([x, x]), x.split([1, 3])),
}


@pytest.mark.parametrize("name", sorted(LEGAL))
def test_legal_ops_are_not_flagged(x: Any, mask: Any, name: str) -> None:
    with capture_check(lane="cpu") as report:
        LEGAL[name](x, mask)
    assert report.ok, report.format()


def test_forward_and_backward_of_a_small_model_are_legal() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Embedding(10, 8), torch.nn.LayerNorm(8),
                                torch.nn.Linear(8, 8), torch.nn.GELU(), torch.nn.Linear(8, 5))
    ids, target = torch.arange(4), torch.tensor([0, 1, 4, -100])
    with capture_check(lane="cpu") as report:
        loss = F.cross_entropy(model(ids), target, ignore_index=-100)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    assert report.ok, report.format()
    assert model[2].weight.grad is not None


@pytest.mark.filterwarnings("ignore:.*all_gather_into_tensor.*:FutureWarning")
def test_gloo_collectives_are_legal(tmp_path: Path) -> None:
    dist = pytest.importorskip("torch.distributed")
    if not dist.is_available() or dist.is_initialized():
        pytest.skip("torch.distributed unavailable or already initialised here")
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'rendezvous'}", rank=0,
                            world_size=1)
    try:
        t = torch.arange(4, dtype=torch.float32)
        out = torch.empty(4)
        with capture_check(lane="cpu") as report:
            dist.all_reduce(t)
            dist.all_gather_into_tensor(out, t)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
        assert report.ok, report.format()
        assert torch.equal(out, torch.arange(4, dtype=torch.float32))
    finally:
        dist.destroy_process_group()
