"""Peak memory of a callable, as a reproducer or benchmark measures it.

CPU: the PyTorch profiler's memory accounting. Every allocation and every free is one raw
``[memory]`` record (signed bytes, with its own timestamp); the running sum of the CPU ones in
time order peaks at the region's high-water mark above where it started. The raw records, not
the ops' ``self_cpu_memory_usage``: that charges every free inside a user-level range (an
``autograd.Function``'s forward, a ``record_function``) to the range at its *start*, before the
allocations it frees, and the high-water mark comes out too low.
CUDA: ``torch.cuda.max_memory_allocated`` after a reset, minus what was allocated before.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["peak_bytes"]


def peak_bytes(fn: Callable[[], Any], device: str = "cpu") -> tuple[int, Any]:
    """Run ``fn`` once; return (peak bytes allocated above the starting point, its result)."""
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()
        before = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        result = fn()
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() - before, result
    from torch.profiler import DeviceType, ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        result = fn()
    deltas = sorted((e.start_ns(), e.nbytes()) for e in prof.profiler.kineto_results.events()
                    if e.name() == "[memory]" and e.device_type() == DeviceType.CPU)
    current = peak = 0
    for _, delta in deltas:
        current += delta
        peak = max(peak, current)
    return peak, result
