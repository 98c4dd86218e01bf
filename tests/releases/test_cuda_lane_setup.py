"""What reproducers do on the cuda lane that the CPU lane never needs, pinned on a CPU.

A real GPU ran ``mcore_strict_load_idle_rerun_shard`` into "cuda rng state model-parallel-rng
is not added": building a ``GPTModel`` on the GPU forks megatron's CUDA RNG tracker, which a job
seeds with ``model_parallel_cuda_manual_seed`` (``initialize_megatron`` does). Here the real
megatron function is swapped for a recorder: this checks the reproducer's own setup, and is no
evidence that anything works on a GPU.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from patchlane.loading import load_file

from .conftest import ROOT, requires_megatron

pytestmark = [pytest.mark.upstream, requires_megatron]


def _reproducer(entry_id: str) -> Any:
    return load_file(entry_id, "reproducer", ROOT / "reproducers" / f"{entry_id}.py")


@pytest.mark.parametrize(("lane", "seeded"), [("cuda", [1234]), ("cpu", [])])
def test_strict_load_seeds_the_cuda_rng_tracker_on_the_cuda_lane(
        monkeypatch: pytest.MonkeyPatch, lane: str, seeded: list[int]) -> None:
    from megatron.core import tensor_parallel

    calls: list[int] = []
    monkeypatch.setattr(tensor_parallel, "model_parallel_cuda_manual_seed", calls.append)
    module = _reproducer("mcore_strict_load_idle_rerun_shard")
    module._seed(SimpleNamespace(lane=lane), 1234)
    assert calls == seeded


def test_strict_load_seeds_before_each_model(tmp_path: Path) -> None:
    source = (ROOT / "reproducers" / "mcore_strict_load_idle_rerun_shard.py").read_text()
    body = source[source.index("def _run("):]
    # every model is built right after its job's seed, as each job's initialisation does
    assert body.count("_seed(ctx, ") == body.count("= _model(ctx)") == 2
    for seed_at in (body.index("_seed(ctx, 1234)"), body.index("_seed(ctx, 99)")):
        assert body.index("_model(ctx)", seed_at) - seed_at < 80
