"""The kernels fail where upstream fails, and are as accurate as upstream where it succeeds:
every path of the DSA index scores (the Triton kernel on Triton's CPU interpreter, the torch
path, its tiles) and of the FLCE routed path (the rows kernel, torch ops), against upstream
(megatron-core's own ``_compute_index_scores``; torch's ``cross_entropy``) and float64, at odd
shapes, with NaN, inf, values past fp16's and bf16's range, fp16's subnormals, zero sizes,
double backward, fp64 weights and out-of-range targets. The rule and the GPU semantics the
interpreter is given are in ``patchlane/overlaylib/kernel_parity.py``; each case there failed
before the change that made it pass.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("torch")
pytest.importorskip("triton")

CASES = ["-m", "patchlane.overlaylib.kernel_parity"]


NAMES = [  # kept in step with cases() by test_every_case_is_listed
    *[f"dsa-{dt}-{relu}-{shape}" for shape in ("20x36x1x3x8", "33x17x2x5x24", "17x50x1x4x40")
      for dt in ("bfloat16", "float16", "float32") for relu in ("relu", "no-relu")],
    *[f"dsa-nan-{where}-{dt}" for where in ("q", "k", "w", "grad", "q-inf")
      for dt in ("bfloat16", "float32")],
    "dsa-overflow-fp16", "dsa-overflow-bf16", "dsa-small-fp16-1e-05", "dsa-small-fp16-1e-06",
    *[f"dsa-zero-{dim}" for dim in ("sq", "sk", "b", "h", "d")],
    "dsa-double-backward-bfloat16", "dsa-double-backward-float32", "dsa-fp64-weights",
    "dsa-inf-beside-padding-q", "dsa-inf-beside-padding-w", "dsa-fp64-weights-past-fp32",
    "dsa-offsets-past-int32",
    "dsa-fp16-refused-under-autograd", "dsa-paths-say-why",
    "flce-fp32", "flce-fp32-logits-30", "flce-fp32-logits-100", "flce-odd-vocab",
    "flce-nan-logit", "flce-target-column", "flce-target-broadcast",
    "flce-target-out-of-range-11", "flce-target-out-of-range-40",
    "flce-target-out-of-range--5",
]


@pytest.fixture(scope="module")
def results() -> dict[str, str]:
    """Every case, run once in a child interpreter under ``TRITON_INTERPRET=1``."""
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONWARNINGS": "ignore"}
    out = subprocess.run([sys.executable, *CASES], capture_output=True, text=True,
                         env=env, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    found: dict[str, str] = json.loads(out.stdout.strip().splitlines()[-1])
    return found


def test_every_case_is_listed(results: dict[str, str]) -> None:
    assert sorted(results) == sorted(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_case(results: dict[str, str], name: str) -> None:
    got = results[name]
    if got.startswith("skip: "):
        pytest.skip(got[6:])
    assert got == "ok", got
