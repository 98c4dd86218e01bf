"""Peak memory of a callable, as a reproducer or benchmark measures it.

CPU: the PyTorch profiler's memory accounting. Every allocation is charged to the op that made
it (``self_cpu_memory_usage`` > 0) and every free shows up as a ``[memory]`` event (< 0); the
running sum in time order peaks at the region's high-water mark above where it started.
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
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        result = fn()
    deltas = sorted((e.time_range.start, e.self_cpu_memory_usage) for e in prof.events()
                    if e.self_cpu_memory_usage)
    current = peak = 0
    for _, delta in deltas:
        current += delta
        peak = max(peak, current)
    return peak, result
