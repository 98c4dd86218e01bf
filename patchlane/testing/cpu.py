"""CPU stand-ins for the two CUDA calls megatron-core's checkpoint save path makes even for CPU
tensors (``torch.cuda.synchronize()`` in the async writer's preload, ``torch.cuda
.current_device()`` for the failure broadcast in async finalize; the local attention buffer asks
for it too). Used only by reproducers and examples, only while CUDA is unavailable, and always
undone on exit. Nothing here touches what a reproducer tests."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

__all__ = ["cpu_stand_ins"]


@contextlib.contextmanager
def cpu_stand_ins() -> Iterator[None]:
    import torch

    if torch.cuda.is_available():
        yield
        return
    saved = torch.cuda.synchronize, torch.cuda.current_device
    torch.cuda.synchronize = lambda *a, **k: None
    torch.cuda.current_device = lambda: "cpu"  # type: ignore[assignment,return-value]
    try:
        yield
    finally:
        torch.cuda.synchronize, torch.cuda.current_device = saved
