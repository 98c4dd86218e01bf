"""patchlane.testing.memprofile.peak_bytes: the high-water mark of one call, above its start.

CPU tensors of known sizes: what a call allocates moves the measured peak by that many bytes
(give or take a few scalars), what it frees first does not add up, and what was allocated before
the call does not count. The ``gpu`` test measures with the CUDA allocator and skips without
CUDA.
"""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")

from patchlane.testing.memprofile import peak_bytes  # noqa: E402

MiB = 1 << 20
SLACK = 4096  # a few 0-d results and scalar wrappers, never a tensor's worth


def block(nbytes: int, fill: int = 1) -> Any:
    return torch.full((nbytes,), fill, dtype=torch.uint8)


def assert_about(measured: int, expected: int) -> None:
    assert expected <= measured <= expected + SLACK, (measured, expected)


@pytest.mark.parametrize("nbytes", [1 * MiB, 4 * MiB, 16 * MiB])
def test_a_tensor_made_in_the_call_moves_the_peak_by_its_size(nbytes: int) -> None:
    peak, result = peak_bytes(lambda: block(nbytes))
    assert_about(peak, nbytes)
    assert result.numel() == nbytes


def test_the_result_is_what_the_call_returned() -> None:
    marker = object()
    assert peak_bytes(lambda: marker) == (0, marker)


def test_float_tensors_count_their_bytes_not_their_elements() -> None:
    peak, result = peak_bytes(lambda: torch.zeros(1024, 1024, dtype=torch.float64))
    assert_about(peak, 8 * MiB)
    assert result.element_size() == 8


def test_tensors_alive_together_add_up() -> None:
    def both() -> Any:
        a, b = block(4 * MiB), block(4 * MiB)
        # not a.sum(): summing uint8 makes an int64 copy inside the op (32 MiB), which counts
        return int(a[-1]) * a.numel() + int(b[-1]) * b.numel()

    peak, total = peak_bytes(both)
    assert_about(peak, 8 * MiB)
    assert int(total) == 8 * MiB


def test_frees_inside_a_user_range_count_when_they_happen() -> None:
    # an autograd.Function's forward is such a range: its frees were once charged at its start
    def in_a_range() -> Any:
        with torch.autograd.profiler.record_function("range"):
            for _ in range(3):
                a = block(4 * MiB)
                del a
            return block(1 * MiB)

    peak, _ = peak_bytes(in_a_range)
    assert_about(peak, 4 * MiB)


def test_temporaries_inside_one_op_count() -> None:
    held = block(1 * MiB)
    peak, total = peak_bytes(lambda: held.sum())  # uint8 sums through an int64 copy
    assert 8 * MiB <= peak <= 8 * MiB + SLACK, peak
    assert int(total) == 1 * MiB


def test_a_tensor_freed_before_the_next_is_made_does_not_add_up() -> None:
    def one_after_the_other() -> None:
        a = block(4 * MiB)
        del a
        b = block(4 * MiB)
        del b

    peak, _ = peak_bytes(one_after_the_other)
    assert_about(peak, 4 * MiB)


def test_the_peak_is_the_high_water_mark_not_what_is_left_at_the_end() -> None:
    def temporary_then_small() -> Any:
        big = block(16 * MiB)
        small = big[: MiB].clone()
        del big
        return small

    peak, small = peak_bytes(temporary_then_small)
    assert_about(peak, 17 * MiB)  # both alive at the clone
    assert small.numel() == MiB


def test_memory_held_before_the_call_does_not_count() -> None:
    held = block(32 * MiB)
    peak, _ = peak_bytes(lambda: held.add_(1))  # in place: nothing new but a scalar
    assert peak <= SLACK, peak
    peak, _ = peak_bytes(lambda: held * 2)  # a new tensor of the same size: counts once
    assert_about(peak, 32 * MiB)


def test_a_materialising_implementation_measures_higher_than_a_streaming_one() -> None:
    """The comparison the DSA reproducer and benchmark make: the same sum, one way holding an
    [n, n] intermediate, the other a row at a time."""
    n = 512
    x = torch.randn(n, dtype=torch.float32, generator=torch.Generator().manual_seed(0))

    def materialised() -> Any:
        return (x[:, None] * x[None, :]).sum(0)

    def streamed() -> Any:
        out = torch.zeros(n)
        for i in range(n):
            out += x[i] * x
        return out

    big, want = peak_bytes(materialised)
    small, got = peak_bytes(streamed)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-4)  # two summation orders
    assert big >= n * n * 4
    assert small < n * n * 4 // 16, (small, big)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_peak_counts_the_tensor_made_in_the_call() -> None:
    held = torch.empty(8 * MiB, dtype=torch.uint8, device="cuda")
    peak, result = peak_bytes(lambda: torch.ones(4 * MiB, dtype=torch.uint8, device="cuda"),
                              device="cuda")
    assert 4 * MiB <= peak < 8 * MiB, peak  # the held tensor is below the starting point
    assert result.device.type == "cuda" and held.numel() == 8 * MiB


def test_the_region_is_warm_a_first_call_cost_stays_out() -> None:
    # a stand-in for a library's one-time workspace (cuBLAS's on a GPU): the first call keeps
    # 8 MiB alive for the process, later calls allocate only their result
    kept: list[Any] = []

    def call() -> Any:
        if not kept:
            kept.append(block(8 * MiB))
        return block(1 * MiB)

    peak, _ = peak_bytes(call)
    assert_about(peak, 1 * MiB)
    kept.clear()
    cold, _ = peak_bytes(call, warmup=0)
    assert_about(cold, 9 * MiB)
