"""Peak memory of a callable, as a reproducer or benchmark measures it: a warm region.

The call runs once unmeasured first (``warmup=1``), so what a library allocates once per process
stays out of the figure: cuBLAS's workspace (32 MiB per handle and stream on Hopper, taken from
the caching allocator at the first matrix product), cuDNN and Triton's first-call state, the
autotuner's buffers. A memory bug is what every call costs, and a reproducer that measured a
cold call on a GPU called an overlay that allocates nothing of its own "40 MiB for a 4 MiB
result". ``warmup=0`` measures the first call (what that first call itself costs).

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


def peak_bytes(fn: Callable[[], Any], device: str = "cpu", *,
               warmup: int = 1) -> tuple[int, Any]:
    """Run ``fn`` ``warmup`` times, then once measured; return (peak bytes allocated above
    the measured call's starting point, that call's result)."""
    import torch

    for _ in range(warmup):
        fn()
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
