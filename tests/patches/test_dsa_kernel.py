"""The DSA index-score Triton kernels on Triton's CPU interpreter (``TRITON_INTERPRET=1``),
forward and backward, against upstream's own ``_compute_index_scores`` of the installed
megatron-core (0.16's method or 0.17+'s function), and the dispatch between the kernel and the
device-sized torch path.

The interpreter runs the kernels' indexing, masking, grids, head loops, partial sums and the
backward's two-part split; it multiplies on fp32 copies (its own bf16 ``tl.dot`` multiplies raw
bits), so the tensor-core paths themselves are only exercised on a GPU
(``benchmarks/tune_gpu_kernels.py`` and the cuda sweep). Small odd shapes: sq != sk, b > 1,
sizes that are no multiple of the 16-wide blocks, head dims that are not powers of two, ReLU
off.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from patchlane.overlaylib import dsa_index_scores  # noqa: E402

CASES = Path(__file__).with_name("_dsa_kernel_cases.py")
SHAPES = ["20x36x1x3x8", "33x17x2x5x24", "40x40x3x2x16", "17x50x1x4x40"]  # sq, sk, b, h, d


@pytest.fixture(scope="module")
def interpreted() -> dict[str, str]:
    """Every case, run once in a child interpreter under ``TRITON_INTERPRET=1``."""
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONWARNINGS": "ignore"}
    out = subprocess.run([sys.executable, str(CASES)], capture_output=True, text=True,
                         env=env, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    results: dict[str, str] = json.loads(out.stdout.strip().splitlines()[-1])
    return results


def _result(results: dict[str, str], name: str) -> None:
    got = results[name]
    if got.startswith("skip: "):
        pytest.skip(got[6:])
    assert got == "ok", got


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("use_relu", [True, False], ids=["relu", "no-relu"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_forward_and_backward_match_upstream(interpreted: dict[str, str], shape: str,
                                             use_relu: bool, dtype: str) -> None:
    """Output equal to upstream's to 1e-5 relative, with its dtype, shape and strides;
    gradients within one rounding step of the inputs' dtype, plus, with ReLU, what its kink
    allows (see the reproducer)."""
    _result(interpreted, f"upstream-{dtype}-{'relu' if use_relu else 'no-relu'}-{shape}")


def test_only_the_gradients_asked_for_are_computed(interpreted: dict[str, str]) -> None:
    _result(interpreted, "only-asked")


def test_many_head_groups_sum_to_the_same_grad_k(interpreted: dict[str, str]) -> None:
    _result(interpreted, "head-groups")


def _inputs(sq: int, sk: int, b: int, h: int, d: int, dtype: Any, seed: int = 0) -> tuple:
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(sq, b, h, d, generator=g).to(dtype)
    k = torch.randn(sk, b, d, generator=g).to(dtype)
    w = torch.randn(sq, b, h, generator=g).to(dtype)
    grad = torch.randn(b, sq, sk, generator=g)
    return q, w, k, grad




def test_cpu_tensors_take_the_cache_sized_torch_path() -> None:
    q, w, k, _ = _inputs(16, 16, 1, 2, 8, torch.float32)
    reason = dsa_index_scores.kernel_refusal(q, w, k)
    assert reason is not None and "cpu" in reason
    _, path, _ = dsa_index_scores.scores(q, w, k)
    assert path == "streamed"
    assert dsa_index_scores.tile_elements(q.device) == dsa_index_scores.CPU_TILE_ELEMENTS


@pytest.mark.parametrize("value", ["0", "false", "off", "no", " 0", "OFF"])
def test_the_kernel_can_be_switched_off(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    """Every no of the PATCHLANE_* grammar switches it off, not only the exact string 0."""
    q, w, k, _ = _inputs(16, 16, 1, 2, 8, torch.float32)
    monkeypatch.setenv("PATCHLANE_DSA_KERNEL", value)
    reason = dsa_index_scores.kernel_refusal(q, w, k)
    assert reason is not None and "switches the kernel off" in reason, reason


@pytest.mark.parametrize("value", ["", "1", "yes", "on", "true"])
def test_the_kernel_stays_on(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("PATCHLANE_DSA_KERNEL", value)
    assert dsa_index_scores.kernel_on()


@pytest.mark.parametrize("value", ["00", "garbage", "disable"])
def test_an_unreadable_switch_is_refused_naming_the_spellings(monkeypatch: pytest.MonkeyPatch,
                                                              value: str) -> None:
    from patchlane.common.errors import ControlsError

    q, w, k, _ = _inputs(16, 16, 1, 2, 8, torch.float32)
    monkeypatch.setenv("PATCHLANE_DSA_KERNEL", value)
    with pytest.raises(ControlsError, match=r"PATCHLANE_DSA_KERNEL=.*expected one of 1, true"):
        dsa_index_scores.scores(q, w, k)


@pytest.mark.parametrize(("change", "words"), [
    ({"w": torch.float64}, "weights torch.float64"),
    ({"k": torch.float16}, "the kernel takes one of"),
])
def test_refusals_name_what_the_kernel_cannot_take(change: dict[str, Any], words: str) -> None:
    q, w, k, _ = _inputs(16, 16, 1, 2, 8, torch.bfloat16)
    w = w.to(change.get("w", w.dtype))
    k = k.to(change.get("k", k.dtype))
    fake_cuda = torch.device("cuda")

    class OnCuda:  # only the device is read before the dtype checks
        def __init__(self, t: Any) -> None:
            self.t = t

        def __getattr__(self, name: str) -> Any:
            return fake_cuda if name == "device" else getattr(self.t, name)

    reason = dsa_index_scores.kernel_refusal(OnCuda(q), OnCuda(w), OnCuda(k))
    assert reason is not None and words in reason, reason


def test_gpu_tiles_are_a_budget_but_never_above_the_result(monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    class Props:
        total_memory = 80 * 2**30

    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: Props())
    cuda = torch.device("cuda")
    budget = int(80 * 2**30 * dsa_index_scores.GPU_TILE_FRACTION) // 4
    assert dsa_index_scores.tile_elements(cuda) == budget
    assert dsa_index_scores.tile_elements(cuda, 4096 * 4096) == 4096 * 4096
    assert dsa_index_scores.tile_elements(cuda, 10) == dsa_index_scores.CPU_TILE_ELEMENTS
