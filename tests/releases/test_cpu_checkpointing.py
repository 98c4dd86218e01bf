"""``patchlane.testing.cpu.cpu_stand_ins`` lets a reproducer run megatron-core's activation
checkpointing (``tensor_parallel.checkpoint``, and the CUDA RNG tracker it saves and restores)
on the CPU lane, on every release from 0.9 to 0.19: the RNG getter megatron calls moved from
``torch.cuda.get_rng_state`` (to 0.11) to ``torch.cuda.random.get_rng_state`` inside its own
``_get_cuda_rng_state`` (0.12 on). Each release, in its own process (forked from the suite's
warm python, ``warm_python.py``: megatron-core imported afresh from that release): without the
stand-ins the checkpointed step raises on a machine with no GPU (what a reproducer author
meets), and with them it computes exactly what the same step without checkpointing computes,
dropout included (the recompute replays the forward's RNG state). What the stand-ins cannot
give: a random op on CPU tensors inside ``tracker.fork()`` draws from the CPU generator, which
megatron itself refuses there ("CPU RNG state changed within GPU RNG context"); a CPU
reproducer keeps its tensor-parallel dropout at 0."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .conftest import ROOT, megatron_version, release_dir
from .matrix_sets import CHECKPOINTING_RELEASES
from .warm_python import WarmPython

pytestmark = [pytest.mark.upstream, pytest.mark.slow, pytest.mark.independent]

torch = pytest.importorskip("torch")

STEP = r'''
import sys, warnings
warnings.simplefilter("ignore")
import torch
from megatron.core import tensor_parallel
from patchlane.testing.cpu import cpu_stand_ins

tracker = tensor_parallel.get_cuda_rng_tracker()


def block(x):
    with tracker.fork():  # the tracker's CUDA state saved, switched and restored around it
        x = x * 3.0
    return torch.nn.functional.dropout(x.sin(), p=0.25, training=True)


def step(checkpointed):
    torch.manual_seed(7)
    x = torch.randn(64, 32, requires_grad=True)
    torch.manual_seed(11)
    y = tensor_parallel.checkpoint(block, False, x) if checkpointed else block(x)
    y.sum().backward()
    return y.detach(), x.grad


try:
    tracker.add("model-parallel-rng", 1234)
    step(True)
    print("bare: ran")
except Exception as exc:
    print("bare: raised", type(exc).__name__)
tracker.reset()
with cpu_stand_ins():
    tracker.add("model-parallel-rng", 1234)
    y1, g1 = step(True)
    y0, g0 = step(False)
print("stand-ins:", "equal" if torch.equal(y1, y0) and torch.equal(g1, g0) else "differ")
print("release:", __import__("importlib.metadata").metadata.version("megatron-core"))
'''


@pytest.mark.parametrize("release", CHECKPOINTING_RELEASES)
def test_checkpointing_runs_on_the_cpu_with_the_stand_ins(release: str,
                                                         warm_python: WarmPython) -> None:
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is here: the stand-ins stand aside")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PATCHLANE_")}
    paths = [str(ROOT), *filter(None, [env.get("PYTHONPATH")])]
    if release == "installed":
        release = megatron_version() or pytest.skip("megatron-core is not installed")
    else:
        paths.insert(0, str(release_dir("megatron-core", release)))
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env["PATCHLANE_DEFAULT_REGISTRY"] = "0"  # megatron as shipped
    out = warm_python.run(["-c", STEP], env=env, cwd=Path(ROOT) / "tests")
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    assert f"release: {release}" in lines, out.stdout
    assert "bare: raised" in out.stdout, out.stdout  # the stand-ins are what makes it run
    assert "stand-ins: equal" in lines, out.stdout
