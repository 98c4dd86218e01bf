"""Streamed DSA indexer scores on real megatron-core 0.17-0.19 (``dsa._compute_index_scores``,
entry mcore_dsa_streamed_index_scores_fn): outputs and gradients against upstream's (the
reproducer runs both ways in the release matrix, on 0.17.1 to 0.19.2, each case checked by
``case_checks``); and the issue's done-means, per release: with ``import patchlane`` the
largest tensor of the scores at h=64, sq=sk=1024, b=1 is >= 32x smaller, with equal output.

megatron-core >= 0.17 ships cp312 wheels only: on the Python 3.11 lane (0.16.1) all of this
skips; the 0.16 method is tests/releases/test_dsa.py's.
"""

from __future__ import annotations

import inspect
import json
import sys
from typing import Any

import pytest

import patchlane
from patchlane import startup
from patchlane.loading import module_name
from patchlane.releases.matrix import load_matrix

from .conftest import ROOT, megatron_version, release_dir, release_env
from .warm_python import WarmPython

ENTRY = "mcore_dsa_streamed_index_scores_fn"
DSA = "megatron.core.transformer.experimental_attention_variant.dsa"
DONE_MEANS_RELEASES = ("0.17.1", "0.18.2", "0.19.2")

pytestmark = [pytest.mark.upstream, pytest.mark.independent]


def _admits_installed() -> bool:
    spec = startup.current().registry.get(ENTRY).applies_to
    installed = megatron_version()
    return installed is not None and spec is not None and spec.contains(installed,
                                                                         prereleases=True)


needs_installed = pytest.mark.skipif(not _admits_installed(),
                                     reason="the installed megatron-core is outside >=0.17 "
                                            "(the Python 3.11 lane has 0.16.1)")


def _runs_here(version: str) -> bool:
    return any(f"megatron-core=={version}" in s.install and s.runs_here()
               for s in load_matrix(ROOT / "matrix.yaml"))


@pytest.fixture
def dsa() -> Any:
    import importlib

    module = importlib.import_module(DSA)
    decisions = {e["id"]: e for e in patchlane.report()["entries"]}
    assert decisions[ENTRY]["applied"], decisions[ENTRY]
    return module


def _layout(t: Any) -> tuple[tuple[int, int], ...]:
    return tuple((n, s) for n, s in zip(t.shape, t.stride(), strict=True) if n != 1)


def _run(fn: Any, q: Any, w: Any, k: Any, grad: Any, **kwargs: Any) -> tuple[Any, list[Any]]:
    leaves = [t.detach().clone().requires_grad_(True) for t in (q, w, k)]
    out = fn(*leaves, **kwargs)
    out.backward(grad)
    return out.detach(), [t.grad for t in leaves]


@needs_installed
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("use_relu", [True, False])
@pytest.mark.parametrize(("heads", "batch", "seq", "block"), [
    (1, 1, 7, 1 << 20), (5, 2, 33, 100), (16, 1, 300, 1 << 20), (16, 2, 64, 5000)])
def test_outputs_and_gradients_match_upstream(dsa: Any, dtype: str, use_relu: bool, heads: int,
                                              batch: int, seq: int, block: int,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    upstream = inspect.unwrap(vars(dsa)["_compute_index_scores"])
    kwargs = {}
    if "use_relu" in inspect.signature(upstream).parameters:
        kwargs["use_relu"] = use_relu
    elif not use_relu:
        pytest.skip("use_relu arrives in 0.19")
    # several head blocks even at small sizes: the block budget is the overlay's constant
    monkeypatch.setattr(sys.modules[module_name("overlay", ENTRY)], "BLOCK_ELEMENTS", block)
    g = torch.Generator().manual_seed(heads * seq)
    dt = getattr(torch, dtype)
    q = torch.randn(seq, batch, heads, 16, generator=g).to(dt)
    k = torch.randn(seq + 3, batch, 16, generator=g).to(dt)
    w = torch.randn(seq, batch, heads, generator=g).to(dt)
    grad = torch.randn(batch, seq, seq + 3, generator=g)
    hits = patchlane.hits(ENTRY)
    got, got_grads = _run(dsa._compute_index_scores, q, w, k, grad, **kwargs)
    assert patchlane.hits(ENTRY) == hits + 1
    want, want_grads = _run(upstream, q, w, k, grad, **kwargs)
    with torch.no_grad():
        plain = dsa._compute_index_scores(q, w, k, **kwargs)  # the no-autograd path
    # fp32 gradients to 1e-5 of the largest; bf16 ones within one bf16 rounding step
    rtol = 1e-5 if dt is torch.float32 else 2.0**-7
    for name, a, b, tol in [("out", got, want, 1e-5), ("out (no grad)", plain, want, 1e-5),
                            *zip(("q", "weights", "k"), got_grads, want_grads,
                                 (rtol,) * 3, strict=True)]:
        assert a.dtype == b.dtype and a.shape == b.shape, (name, a.dtype, b.dtype)
        assert _layout(a) == _layout(b), (name, a.stride(), b.stride())
        diff, scale = (a.float() - b.float()).abs(), b.float().abs()
        assert bool(torch.all(diff <= tol * scale + 1e-5 * scale.max())), (name, diff.max())
    assert got.stride() == want.stride() == plain.stride()


_DONE_MEANS = r"""
import inspect, json, sys, warnings
from importlib import metadata
warnings.simplefilter("ignore")
import patchlane
import torch
from torch.profiler import ProfilerActivity, profile
from megatron.core.transformer.experimental_attention_variant import dsa

def largest(fn):
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        out = fn()
    sizes = [e.nbytes() for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
    return max(sizes), out

g = torch.Generator().manual_seed(0)
q = torch.randn(1024, 1, 64, 64, generator=g).bfloat16()
k = torch.randn(1024, 1, 64, generator=g).bfloat16()
w = torch.randn(1024, 1, 64, generator=g).bfloat16()
upstream = inspect.unwrap(vars(dsa)["_compute_index_scores"])
ours, got = largest(lambda: dsa._compute_index_scores(q, w, k))
theirs, want = largest(lambda: upstream(q, w, k))
decision = {e["id"]: e for e in patchlane.report()["entries"]}[sys.argv[1]]
print(json.dumps({"ours": ours, "upstream": theirs, "applied": decision["applied"],
                  "version": metadata.version("megatron-core"),
                  "same": [got.dtype == want.dtype, got.shape == want.shape,
                           got.stride() == want.stride()],
                  "err": float((got - want).abs().max() / want.abs().max())}))
"""


@pytest.mark.slow
@pytest.mark.parametrize("version", DONE_MEANS_RELEASES)
def test_done_means_largest_tensor_32x_smaller_with_equal_output(version: str,
                                                                 warm_python: WarmPython) -> None:
    if not _runs_here(version) or not release_dir("megatron-core", version).is_dir():
        pytest.skip(f"megatron-core {version} runs on Python 3.12 only (cp312 wheels)")
    env = release_env("megatron-core", version)
    env = {k: v for k, v in env.items() if not k.startswith("PATCHLANE_")}
    # forked from the suite's warm python (warm_python.py): megatron-core afresh from the release
    out = warm_python.run(["-c", _DONE_MEANS, ENTRY], env=env, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["applied"] and seen["version"] == version, seen
    assert seen["same"] == [True, True, True], seen
    assert seen["err"] <= 1e-5, seen
    # upstream: [sq, b, h, sk] fp32 = 256 MiB; streamed: the 4 MiB result or one 4 MiB block
    assert seen["upstream"] >= 256 * 2**20, seen
    assert seen["ours"] * 32 <= seen["upstream"], seen
