"""The cuda lane's mechanics on a CPU: a stand-in for ``torch.cuda`` whose graph, like a real
one, runs nothing while capturing and everything at ``replay()``.

A stand-in tests the check's own mechanics only (the order of capture, replay and comparison),
never that an overlay works: the real capture is the ``gpu`` tests' and the cuda sweep's. The
bug this pins: a capture check that compared the captured step's gradients with the eager
step's before replaying the graph (a real H100 sweep called two correct overlays ``broken``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from patchlane.testing.capture import capture_check, check_step  # noqa: E402
from patchlane.testing.capture.cuda import RealCapture  # noqa: E402


class FakeCuda:
    """Records calls; ``launch`` defers work while a graph captures, as a real capture does."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.graph: FakeGraph | None = None

    def launch(self, work: Callable[[], None]) -> None:
        if self.graph is not None:
            self.graph.work.append(work)
            self.calls.append("captured")
        else:
            work()
            self.calls.append("ran")


class FakeGraph:
    def __init__(self, cuda: FakeCuda) -> None:
        self.cuda = cuda
        self.work: list[Callable[[], None]] = []

    def replay(self) -> None:
        self.cuda.calls.append("replay")
        for work in self.work:
            work()


class FakeStream:
    def wait_stream(self, other: Any) -> None:
        pass


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeCuda:
    cuda = FakeCuda()

    @contextmanager
    def graph(g: FakeGraph, stream: Any = None) -> Iterator[None]:
        cuda.calls.append("capture_begin")
        cuda.graph = g
        try:
            yield
        finally:
            cuda.graph = None
            cuda.calls.append("capture_end")

    @contextmanager
    def stream(s: Any) -> Iterator[None]:
        yield

    def synchronize() -> None:
        cuda.calls.append("synchronize")

    for name, value in {
        "is_available": lambda: True,
        "is_current_stream_capturing": lambda: cuda.graph is not None,
        "get_sync_debug_mode": lambda: 0,
        "set_sync_debug_mode": lambda mode: None,
        "Stream": FakeStream,
        "current_stream": FakeStream,
        "stream": stream,
        "CUDAGraph": lambda: FakeGraph(cuda),
        "graph": graph,
        "synchronize": synchronize,
    }.items():
        monkeypatch.setattr(torch.cuda, name, value, raising=False)
    return cuda


def _step(fake: FakeCuda, out: Any) -> Callable[[], Any]:
    def step() -> Any:
        fake.launch(lambda: out.add_(7.0))  # a kernel: deferred while capturing
        return out

    return step


def test_the_checked_step_is_compared_after_its_replay(fake: FakeCuda) -> None:
    out = torch.zeros(3)
    result = check_step(_step(fake, out), lane="cuda", reset=out.zero_)
    assert result.report.ok and result.report.replayed
    assert result.mismatches() == []
    assert torch.equal(result.checked, torch.full((3,), 7.0))
    assert fake.calls[fake.calls.index("capture_begin"):] == [
        "capture_begin", "captured", "capture_end", "replay", "synchronize"]


def test_a_check_that_never_replays_is_caught(fake: FakeCuda,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    # what the first H100 sweep ran: the capture kept, nothing replayed, then compared
    monkeypatch.setattr(RealCapture, "replay", lambda self: None)
    out = torch.zeros(3)
    result = check_step(_step(fake, out), lane="cuda", reset=out.zero_)
    assert result.mismatches() == ["result"]


def test_a_with_region_holds_its_result_after_the_with(fake: FakeCuda) -> None:
    out = torch.zeros(2)
    with capture_check(lane="cuda") as report:
        fake.launch(lambda: out.fill_(3.0))
        assert float(out.sum()) == 0.0  # nothing ran yet: the capture only recorded it
    assert report.replayed and torch.equal(out, torch.full((2,), 3.0))
    assert report.as_dict()["replayed"] is True
    assert report.graph is not None  # kept alive with the report: its pool holds `out`'s data


def test_a_refused_capture_is_not_replayed(fake: FakeCuda) -> None:
    out = torch.zeros(2)
    with capture_check(lane="cuda") as report:
        fake.launch(lambda: out.fill_(3.0))
        raise RuntimeError("operation not permitted when stream is capturing")
    assert not report.ok and not report.completed and not report.replayed
    assert "replay" not in fake.calls and float(out.sum()) == 0.0


def test_a_step_whose_capture_is_refused_reports_it(fake: FakeCuda) -> None:
    # the first version of check_step raised UnboundLocalError here on a real H100: CUDA
    # refused the unpatched upstream step, the region ended before step() returned
    out = torch.zeros(2)

    def step() -> Any:
        fake.launch(lambda: out.fill_(3.0))
        raise RuntimeError("operation not permitted when stream is capturing")

    result = check_step(lambda: out if not fake.graph else step(), lane="cuda")
    assert not result.report.ok and not result.report.replayed
    assert result.checked is None and result.mismatches() == ["result"]


def test_the_cpu_lane_runs_the_step_twice_eagerly() -> None:
    out = torch.zeros(3)

    def step() -> Any:
        out.add_(2.0)
        return [out, {"twice": out * 2}]

    result = check_step(step, lane="cpu", reset=out.zero_)
    assert result.report.ok and not result.report.replayed
    assert result.mismatches() == []
    out.zero_()
    drift = check_step(step, lane="cpu")  # no reset: the second run starts from 2
    assert drift.mismatches() == ["[0]", "[1]['twice']"]


def test_a_tolerance_compares_to_the_largest_value_else_bitwise() -> None:
    from patchlane.testing.capture.check import StepCheck
    from patchlane.testing.capture.violations import CaptureReport

    eager = [torch.tensor([100.0, 1.0]), torch.tensor([1.0])]
    result = StepCheck(CaptureReport(lane="cuda"), eager,
                       [torch.tensor([100.0, 1.0005]), torch.tensor([1.0])])
    assert result.mismatches() == ["[0]"]
    assert result.mismatches(rtol=1e-5) == [] and result.mismatches(rtol=1e-6) == ["[0]"]
