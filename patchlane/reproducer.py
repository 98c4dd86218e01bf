"""The reproducer author's API: what ``run(ctx)`` is given, where it runs, and how it can end.

A reproducer (``reproducers/<id>.py``) imports only this module of patchlane (and the helpers of
:mod:`patchlane.testing`)::

    from patchlane.reproducer import ReproContext

    LANES = ("cpu", "cuda")
    WORLD_SIZES = (1, 2)

    def run(ctx: ReproContext) -> None:
        with ctx.process_group():
            ...
            assert got == expected, "the symptom first, then the detail"

The sweep that runs it (:mod:`patchlane.sweep.reproduce`) and every reader of a run
directory (:mod:`patchlane.runs`) share these words: a :data:`Lane` (``cpu`` or ``cuda``), a
:class:`Mode` (with or without the overlay) and a :class:`RunOutcome` (pass, fail, error).
``patchlane.sweep.reproduce`` still exports the same names, for reproducers written before
this module existed.
"""

from __future__ import annotations

import contextlib
import enum
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

from .common.exit_codes import ExitCode

__all__ = ["LANES", "Lane", "Mode", "ReproContext", "RunOutcome", "parse_lane"]

Lane = Literal["cpu", "cuda"]
"""Where a case runs: ``cpu`` (gloo, any machine) or ``cuda`` (NCCL, one GPU per rank)."""
LANES: tuple[Lane, ...] = get_args(Lane)


def parse_lane(value: object, where: str = "lane") -> Lane:
    """``value`` (from a manifest, a reproducer's ``LANES``, a command line) as a :data:`Lane`;
    ValueError naming ``where`` and the known lanes."""
    for lane in LANES:
        if value == lane:
            return lane
    raise ValueError(f"{where}: {value!r} is not a lane; expected one of {list(LANES)}")


class Mode(str, enum.Enum):
    WITH = "with"
    WITHOUT = "without"


class RunOutcome(str, enum.Enum):
    PASS = "pass"
    FAIL = "fail"
    ERROR = "error"

    @property
    def exit_code(self) -> ExitCode:
        """The exit status of a rank, and of ``patchlane reproduce``, with this outcome: an
        error is the harness failing to run the reproducer (7), never a usage error."""
        return {RunOutcome.PASS: ExitCode.OK, RunOutcome.FAIL: ExitCode.REPRODUCER_FAILED,
                RunOutcome.ERROR: ExitCode.REPRODUCER_ERROR}[self]


@dataclass(frozen=True)
class ReproContext:
    entry_id: str
    mode: Mode
    lane: Lane
    rank: int
    world_size: int
    workdir: Path
    """A directory shared by every rank of this case."""
    init_method: str
    """A ``file://`` rendezvous for ``torch.distributed.init_process_group``."""

    @property
    def device(self) -> str:
        return f"cuda:{self.rank}" if self.lane == "cuda" else "cpu"

    @property
    def backend(self) -> str:
        return "nccl" if self.lane == "cuda" else "gloo"

    @contextlib.contextmanager
    def process_group(self) -> Iterator[Any]:
        """This case's process group (gloo on cpu, NCCL with one GPU per rank on cuda), torn
        down on exit; yields the default group."""
        import torch
        import torch.distributed as dist

        if self.lane == "cuda":
            torch.cuda.set_device(self.rank)
        dist.init_process_group(self.backend, init_method=self.init_method, rank=self.rank,
                                world_size=self.world_size)
        try:
            yield dist.group.WORLD
        finally:
            dist.destroy_process_group()
