"""CPU stand-ins for the CUDA calls megatron-core's checkpoint save path makes even for CPU tensors.

``megatron.core.dist_checkpointing.save`` with CPU tensors and a gloo process group would run
on a machine without CUDA, except for two calls that assume a GPU whatever the tensors are. Each
raises there ("Torch not compiled with CUDA enabled" / no CUDA device), so reproducers and
examples that save a checkpoint on the CPU lane wrap the save in :func:`cpu_stand_ins`, which
swaps in:

:func:`synchronize`, for ``torch.cuda.synchronize()``
    called by the async writer's preload (``FileSystemWriterAsync.preload_tensors``, in
    ``dist_checkpointing/strategies/filesystem_async.py``) to wait for the non-blocking
    device-to-host copies it just issued. CPU tensors have no copy in flight, so doing nothing
    is exact.
:func:`current_device`, for ``torch.cuda.current_device()``
    called by async finalize (``save_state_dict_async_finalize``, in
    ``dist_checkpointing/strategies/state_dict_saver.py``) as the device of the one-element
    tensor it broadcasts so that every rank learns whether a write failed. The stand-in answers
    ``"cpu"``: the flag is made on the CPU, where gloo broadcasts it.

Both are installed only while CUDA is unavailable (with CUDA the real calls run), only inside
the ``with`` block, and always restored on exit. Nothing here touches what a reproducer tests:
what is saved and loaded is upstream's own code, only how the writer waits and where one status
flag lives differ.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

__all__ = ["cpu_stand_ins", "current_device", "synchronize"]


def synchronize(*args: Any, **kwargs: Any) -> None:
    """Stands in for ``torch.cuda.synchronize``: nothing to wait for with CPU tensors."""


def current_device() -> str:
    """Stands in for ``torch.cuda.current_device``: ``"cpu"``, a valid ``device=`` argument."""
    return "cpu"


@contextlib.contextmanager
def cpu_stand_ins() -> Iterator[None]:
    """Install :func:`synchronize` and :func:`current_device` in ``torch.cuda`` for the block
    when CUDA is unavailable (otherwise change nothing); restore the originals on exit."""
    import torch

    if torch.cuda.is_available():
        yield
        return
    saved = torch.cuda.synchronize, torch.cuda.current_device
    torch.cuda.synchronize = synchronize
    torch.cuda.current_device = current_device  # type: ignore[assignment]
    try:
        yield
    finally:
        torch.cuda.synchronize, torch.cuda.current_device = saved
