"""CPU stand-ins for the CUDA calls megatron-core makes even for CPU tensors (checkpoint saving,
activation checkpointing, the CUDA RNG tracker).

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

:func:`get_rng_state`, for ``torch.cuda.get_rng_state()`` and ``torch.cuda.random.get_rng_state()``
    called by ``megatron.training.checkpointing.save_checkpoint`` to collect RNG states even
    when ``--no-save-rng`` then leaves them out, and by activation checkpointing
    (``tensor_parallel.checkpoint``) and the CUDA RNG tracker (``add``, ``fork``) on every
    release from 0.9 (the first name to 0.11, the second from 0.12): the CPU generator's state
    stands in. A checkpointed step then computes exactly what the plain one does, dropout
    included. Not covered: a random op on CPU tensors inside ``tracker.fork()`` draws from the
    CPU generator, which megatron itself refuses ("CPU RNG state changed within GPU RNG
    context"): keep tensor-parallel dropout at 0 in a CPU reproducer.

All are installed only while CUDA is unavailable (with CUDA the real calls run), only inside
the ``with`` block, and always restored on exit. Nothing here touches what a reproducer tests:
what is saved and loaded is upstream's own code, only how the writer waits and where one status
flag lives differ.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

__all__ = ["cpu_stand_ins", "cuda_requests_on_cpu", "current_device", "get_rng_state",
           "synchronize"]


def synchronize(*args: Any, **kwargs: Any) -> None:
    """Stands in for ``torch.cuda.synchronize``: nothing to wait for with CPU tensors."""


def current_device() -> str:
    """Stands in for ``torch.cuda.current_device``: ``"cpu"``, a valid ``device=`` argument."""
    return "cpu"


def get_rng_state(*args: Any, **kwargs: Any) -> Any:
    """Stands in for ``torch.cuda.get_rng_state``: the CPU generator's state. megatron's
    ``save_checkpoint`` collects the RNG states even with ``--no-save-rng`` (and then does not
    save them); with no CUDA device the real call raises before anything is saved."""
    import torch

    return torch.get_rng_state()


@contextlib.contextmanager
def cuda_requests_on_cpu() -> Iterator[None]:
    """Inside the block (only while CUDA is unavailable), a torch call asking for a CUDA
    tensor gets a CPU one: ``device="cuda"`` / ``"cuda:N"`` become ``"cpu"`` and
    ``Tensor.cuda()`` returns the tensor. megatron.training's load path makes its one-element
    bookkeeping tensors on the GPU (``read_metadata`` all-reduces the iteration read from the
    tracker file on ``device='cuda'``); on the CPU lane they live on the CPU, where gloo
    reduces them. What is computed is unchanged: only where those tensors live."""
    import torch
    from torch.overrides import TorchFunctionMode

    if torch.cuda.is_available():
        yield
        return

    class _OnCPU(TorchFunctionMode):
        def __torch_function__(self, func: Any, types: Any, args: Any = (),
                               kwargs: Any = None) -> Any:
            kwargs = dict(kwargs or {})
            device = kwargs.get("device")
            if device is not None and str(device).startswith("cuda"):
                kwargs["device"] = "cpu"
            if func is torch.Tensor.cuda:
                return args[0]
            return func(*args, **kwargs)

    with _OnCPU():
        yield


@contextlib.contextmanager
def cpu_stand_ins() -> Iterator[None]:
    """Install :func:`synchronize` and :func:`current_device` in ``torch.cuda`` for the block
    when CUDA is unavailable (otherwise change nothing); restore the originals on exit."""
    import torch

    if torch.cuda.is_available():
        yield
        return
    import torch.cuda.random

    # Both names of the RNG getter: megatron-core up to 0.11 calls torch.cuda.get_rng_state()
    # in its activation checkpointing and RNG tracker; from 0.12 its _get_cuda_rng_state calls
    # torch.cuda.random.get_rng_state(device=...), a binding of its own. The setters need no
    # stand-in: megatron's _set_cuda_rng_state (and torch.cuda.manual_seed) go through
    # torch.cuda._lazy_call, which queues the call until CUDA initialises: never, on the CPU.
    saved = (torch.cuda.synchronize, torch.cuda.current_device, torch.cuda.get_rng_state,
             torch.cuda.random.get_rng_state)
    torch.cuda.synchronize = synchronize
    torch.cuda.current_device = current_device  # type: ignore[assignment]
    torch.cuda.get_rng_state = get_rng_state
    torch.cuda.random.get_rng_state = get_rng_state
    try:
        yield
    finally:
        (torch.cuda.synchronize, torch.cuda.current_device, torch.cuda.get_rng_state,
         torch.cuda.random.get_rng_state) = saved
