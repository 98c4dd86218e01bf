"""Tools for overlay and reproducer authors; ``import patchlane`` never imports them, and none
imports torch until it is used.

``capture``
    :func:`~patchlane.testing.capture.capture_check`: would a region be legal inside a CUDA
    graph capture? A real capture on CUDA, the rules emulated with torch modes on the CPU.
``memprofile``
    :func:`~patchlane.testing.memprofile.peak_bytes`: the peak memory one call allocates.
``cpu``
    :func:`~patchlane.testing.cpu.cpu_stand_ins`: CPU stand-ins for the CUDA-only calls in
    megatron-core's checkpoint save path, so reproducers can save on the CPU lane.
"""
