"""Issue 13 part 4: the DSA overlays proven in the layer users run, not only on the functions.

A real DSA attention layer, built from megatron-core's own module spec on CPU
(``tests/releases/dsa_layer_step.py`` says what stands in for CUDA-only pieces, and why), runs
one training step eagerly and the same step under ``patchlane.testing.capture.capture_check``,
in a child interpreter (forked from the suite's warm python, ``warm_python.py``: torch is
imported before, megatron-core afresh from the release) that does ``import patchlane`` before
megatron-core:

- with the overlays: no capture violation, and each DSA overlay the release needs was hit;
- with every DSA entry disabled (``PATCHLANE_DISABLE``): the violations upstream has, named
  (so this test can fail: it did on 0.19.2 until mcore_dsa_naive_loss_bwd_capture_gate);
- the eager step's output and gradients agree both ways (the streamed scores sum heads in
  another order: close, not bitwise).

Releases: the installed one on each lane (0.16.1 on Python 3.11, 0.19.2 on 3.12) and, on 3.12,
0.17.1 and 0.19.0 from the release cache.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from ..conftest import free_port
from .conftest import ROOT, megatron_version, release_dir, release_env
from .warm_python import WarmPython

pytestmark = [pytest.mark.upstream, pytest.mark.slow]

STEP = Path(__file__).with_name("dsa_layer_step.py")
DSA_ENTRIES = ("mcore_dsa_streamed_index_scores", "mcore_dsa_streamed_index_scores_fn",
               "mcore_dsa_indexer_loss_graph_safe", "mcore_dsa_cp_validation_capture_gate",
               "mcore_dsa_cp_positions_capture_gate", "mcore_dsa_naive_loss_bwd_capture_gate")
# what each release's step needs, hit in the layer: (overlays hit, upstream's violations by frame)
EXPECT = {
    "0.16": ({"mcore_dsa_streamed_index_scores", "mcore_dsa_indexer_loss_graph_safe"},
             {"in backward"}),
    "0.17": ({"mcore_dsa_streamed_index_scores_fn", "mcore_dsa_indexer_loss_graph_safe"},
             {"in backward"}),
    "0.19": ({"mcore_dsa_streamed_index_scores_fn", "mcore_dsa_indexer_loss_graph_safe",
              "mcore_dsa_naive_loss_bwd_capture_gate"},
             {"in backward", "in bwd_fused_indexer_loss_naive"}),
}


def _releases() -> list[Any]:
    installed = megatron_version()
    if installed is None:
        return [pytest.param(None, marks=pytest.mark.skip(reason="megatron-core not installed"))]
    found = [installed]
    if sys.version_info >= (3, 12):  # megatron-core >= 0.17 ships cp312 wheels only
        found += [v for v in ("0.17.1", "0.19.0")
                  if v != installed and release_dir("megatron-core", v).is_dir()]
    return found


def _step(python: WarmPython, version: str, tmp: Path, disable: str, port: int
          ) -> tuple[dict[str, Any], Any]:
    import torch

    env = (dict(os.environ) if version == megatron_version()
           else release_env("megatron-core", version))
    env["PATCHLANE_DISABLE"] = disable
    env["PATCHLANE_TEST_PORT"] = str(port)
    env.pop("PATCHLANE_ONLY", None)
    result, tensors = tmp / f"{disable or 'with'}.json", tmp / f"{disable or 'with'}.pt"
    done = python.run([str(STEP), str(result), str(tensors)], env=env, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(result.read_text()), torch.load(tensors)


@pytest.mark.parametrize("version", _releases())
def test_dsa_layer_step_is_capture_legal_with_the_overlays(version: str, tmp_path: Path,
                                                           warm_python: WarmPython) -> None:
    port = free_port()
    needed, upstream_frames = EXPECT[".".join(version.split(".")[:2])
                                     if not version.startswith("0.18") else "0.17"]
    with_result, with_tensors = _step(warm_python, version, tmp_path, "", port)
    assert with_result["core_attention"] == "DSAttention"
    assert with_result["violations"] == [], with_result
    for entry_id in needed:
        entry = with_result["entries"][entry_id]
        assert entry["outcome"] == "applied" and entry["hits"] > 0, (entry_id, entry)

    without_result, without_tensors = _step(warm_python, version, tmp_path, ",".join(DSA_ENTRIES),
                                                     port)
    frames = {"in " + v["frame"].rsplit(" in ", 1)[-1] for v in without_result["violations"]}
    assert {v["op"] for v in without_result["violations"]} == {"aten.lift_fresh.default"}
    assert frames == upstream_frames, without_result["violations"]
    assert all(e["hits"] == 0 for e in without_result["entries"].values())

    def close(a: Any, b: Any) -> bool:  # normwise: bf16 layer outputs, fp32 reductions
        return float((a.float() - b.float()).abs().max()) <= 1e-2 * float(b.float().abs().max())

    assert close(with_tensors["out"], without_tensors["out"])
    assert with_tensors["grads"].keys() == without_tensors["grads"].keys()
    for name, grad in with_tensors["grads"].items():
        assert close(grad, without_tensors["grads"][name]), name
