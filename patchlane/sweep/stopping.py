"""Stopping a long command cleanly on Ctrl-C (SIGINT) or SIGTERM (a scheduler's cancel).

The sweep, ``bisect``, ``radar --sweep`` and ``matrix`` run cases that hold processes (and
GPUs). A signal is recorded where it lands and acted on by the command's main thread, which
stops what runs (each case's ranks killed, a child sweep sent the same signal), records the
interruption, and exits 130 or 143 (:func:`stopped`). The ranks also keep their own deadline
(:data:`patchlane.sweep.reproduce.CASE_DEADLINE`): a command killed outright leaves no case
running past it.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass

from ..common.errors import SweepInterrupted, SweepTerminated

__all__ = ["SIGNAL_POLL_SECONDS", "Caught", "signal_name", "stopped", "stopping_signals"]

SIGNAL_POLL_SECONDS = 0.2
"""How often a command's main thread looks for a signal while its work runs."""


@dataclass
class Caught:
    signum: int | None = None


def signal_name(signum: int) -> str:
    return signal.Signals(signum).name


def stopped(signum: int, what: str, command: str) -> SweepInterrupted:
    """The error a command stopped by ``signum`` exits with (130 for SIGINT, 143 for
    SIGTERM): ``<command> stopped by SIGTERM: <what>``."""
    error = SweepTerminated if signum == signal.SIGTERM else SweepInterrupted
    return error(f"{command} stopped by {signal_name(signum)}: {what}")


@contextlib.contextmanager
def stopping_signals() -> Iterator[Caught]:
    """While a command runs, SIGINT and SIGTERM are recorded instead of acted on where they
    land: the main thread sees the record within :data:`SIGNAL_POLL_SECONDS` and stops in
    order. The handler only assigns an attribute: a handler that set an Event or shut a pool
    down would take locks the interrupted main thread may be holding (a deadlock), and a
    KeyboardInterrupt raised inside ``Executor.__exit__`` waits for every queued case. Only
    the main thread can set handlers (the pytest plugin may run a sweep elsewhere: the
    process's own handling stands there), and a signal the process ignores (SIGINT in a
    script's background job) stays ignored."""
    caught = Caught()
    if threading.current_thread() is not threading.main_thread():
        yield caught
        return

    def record(signum: int, frame: object) -> None:
        if caught.signum is None:  # the first one says why the command stopped
            caught.signum = signum

    previous = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(sig) is not signal.SIG_IGN:
            previous[sig] = signal.signal(sig, record)
    try:
        yield caught
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
