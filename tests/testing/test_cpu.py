"""patchlane.testing.cpu: the CPU stand-ins for megatron-core's CUDA-only save-path calls are
installed only without CUDA, only inside the block, and always restored."""

from __future__ import annotations

import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from patchlane.testing.cpu import cpu_stand_ins, current_device, synchronize  # noqa: E402


def real_calls() -> tuple[object, object]:
    return torch.cuda.synchronize, torch.cuda.current_device


def test_without_cuda_the_block_sees_the_stand_ins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    before = real_calls()
    with cpu_stand_ins():
        assert real_calls() == (synchronize, current_device)
        torch.cuda.synchronize()
        torch.cuda.synchronize("cuda:0")
        flag = torch.tensor([1], dtype=torch.int, device=torch.cuda.current_device())
        assert flag.device.type == "cpu"
    assert real_calls() == before


def test_the_originals_come_back_after_an_exception(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    before = real_calls()
    with pytest.raises(KeyError), cpu_stand_ins():
        raise KeyError("boom")
    assert real_calls() == before


def test_with_cuda_nothing_is_replaced(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    before = real_calls()
    with cpu_stand_ins():
        assert real_calls() == before
    assert real_calls() == before


def test_the_stand_ins_themselves() -> None:
    assert synchronize() is None
    assert current_device() == "cpu"


@pytest.mark.parametrize("module", ["patchlane.testing.cpu", "patchlane.testing.memprofile"])
def test_importing_does_not_import_torch(module: str) -> None:
    code = f"import sys, {module}; sys.exit(1 if 'torch' in sys.modules else 0)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=False)
    assert result.returncode == 0, result.stderr
