"""The ``patchlane`` logger: what a training process's logs show of patchlane.

* **No doubled prefix.** Records say what happened (``mcore_x applied: ...``); the logger's
  name says whose they are, in whatever format the process's logging prints names
  (``INFO:patchlane:mcore_x applied: ...`` under ``basicConfig``).
* **Said even where nothing configured logging.** Python's own last resort would print a bare
  message; :class:`Unconfigured` prints ``patchlane: <message>`` on stderr instead, at WARNING
  and above, and only while the records would reach no handler of the process (no root handler,
  or the logger does not propagate, as in a ``patchlane`` command).
* **The rank.** Under a launcher that sets ``RANK`` and a ``WORLD_SIZE`` above 1, each record
  starts with ``rank N:``: one job's ranks write to one log. INFO comes from rank 0 only (the
  ranks agree on one patch set); warnings from every rank; at DEBUG, everything from every rank.
* **Few lines.** At INFO a process logs one startup line, one line per overlay or setting
  applied, and one line once every entry is decided; skips are DEBUG.

Standard library only: part of what `import patchlane` may load.
"""

from __future__ import annotations

import logging
import os
import sys

__all__ = ["Unconfigured", "back_on_stdout", "log", "off_stdout"]

log = logging.getLogger("patchlane")


class Unconfigured(logging.Handler):
    """Prints patchlane's warnings and errors, named, when no handler of the process would."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)

    def emit(self, record: logging.LogRecord) -> None:
        if log.propagate and logging.getLogger().handlers:
            return  # the process's own logging shows it, once
        try:
            sys.stderr.write(f"patchlane: {record.getMessage()}\n")
            sys.stderr.flush()
        except Exception:  # a closed stderr: as logging itself, never raise from a log call
            self.handleError(record)


class _Rank(logging.Filter):
    """``rank N: `` in front of each record under a launcher with several ranks; INFO from
    rank 0 only. The ranks hold one patch set (they check it at ``init_process_group``), so
    rank 0's lines speak for all; warnings and errors come from every rank, and with the
    ``patchlane`` logger at DEBUG every rank says everything."""

    def filter(self, record: logging.LogRecord) -> bool:
        rank = os.environ.get("RANK")
        if rank is None or os.environ.get("WORLD_SIZE", "1") in ("", "1"):
            return True
        if record.levelno < logging.WARNING and rank != "0" \
                and log.getEffectiveLevel() > logging.DEBUG:
            return False
        if not getattr(record, "patchlane_rank", False):
            record.msg = f"rank {rank}: {record.msg}"
            record.patchlane_rank = True
        return True


def off_stdout() -> None:
    """Every logging handler of the process that writes to stdout writes to stderr from now on.

    For the ``patchlane`` command, whose stdout is its output (``status --json`` must parse):
    called before the startup logs its first line, when the command's process already set up
    logging on stdout (a ``sitecustomize`` calling ``basicConfig(stream=sys.stdout)``), and again
    after the command imported the targets (Megatron-LM's training code puts an INFO handler on
    stdout at import). A job's own logging is never touched: ``patchlane run`` execs the job."""
    loggers = [logging.getLogger(), *(logger for logger in logging.root.manager.loggerDict
                                      .values() if isinstance(logger, logging.Logger))]
    for logger in loggers:
        for handler in logger.handlers:
            stream = getattr(handler, "stream", None)
            if isinstance(handler, logging.StreamHandler) and \
                    stream in (sys.stdout, sys.__stdout__):
                handler.setStream(sys.stderr)
                _moved.append((handler, stream))


_moved: list[tuple[logging.StreamHandler, object]] = []  # type: ignore[type-arg]
"""What :func:`off_stdout` moved, and from where: a program that runs a command in its own
process (``patchlane.cli.main.main``) gets its logging back as it was."""


def back_on_stdout() -> None:
    """Every handler :func:`off_stdout` moved writes where it did before, unless it was set
    elsewhere since."""
    while _moved:
        handler, stream = _moved.pop()
        if handler.stream is sys.stderr:
            handler.setStream(stream)


if not any(isinstance(h, Unconfigured) for h in log.handlers):
    log.addHandler(Unconfigured())
if not any(isinstance(f, _Rank) for f in log.filters):
    log.addFilter(_Rank())
