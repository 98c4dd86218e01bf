"""Which job a process of ``patchlane run`` belongs to, and the stack it ran on: the two things
a per-process report (``--reports DIR``) carries so that ``patchlane usage`` can count jobs,
ranks and stacks across many of them.

Loaded in every process ``patchlane run`` starts (by :mod:`.activate`), so it imports nothing
beyond the standard library's already-loaded modules and never imports torch: the stack is
what the process itself imported, read at exit.
"""

import os
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:  # collections.abc costs more than the lazy start: this loads in every process
    from collections.abc import Mapping

__all__ = ["JOB_ENV", "RUN_ID_ENV", "job_of", "new_run_id", "stack"]

JOB_ENV = "PATCHLANE_RUN_JOB"
"""Set by the user to one value on every node of a job that ``patchlane run`` starts more than
once (one ``torchrun`` per node without Slurm): its reports then count as one job."""

RUN_ID_ENV = "PATCHLANE_RUN_ID"
"""Set by ``patchlane run`` for the command it starts: one value per invocation."""


def new_run_id() -> str:
    """A fresh id for one ``patchlane run`` invocation: its UTC start and 8 random hex digits
    (sortable by time, unique without coordination)."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + os.urandom(4).hex()


def job_of(environ: "Mapping[str, str]") -> str:
    """The job a process belongs to, from its environment, most deliberate first:
    ``PATCHLANE_RUN_JOB`` (the user named it), then the Slurm job step (``srun patchlane run``
    starts one ``patchlane run`` per task; they share the step), then the ``patchlane run``
    invocation. ``unknown`` outside ``patchlane run``."""
    named = environ.get(JOB_ENV, "").strip()
    if named:
        return f"job:{named}"
    slurm, step = environ.get("SLURM_JOB_ID"), environ.get("SLURM_STEP_ID")
    if slurm and step:
        return f"slurm:{slurm}.{step}"
    run = environ.get(RUN_ID_ENV, "").strip()
    return f"run:{run}" if run else "unknown"


def stack() -> dict[str, str | None]:
    """The interpreter and the torch this process ran with (``torch: None`` when it never
    imported torch: a launcher, a tokenizer worker). Target releases are in each entry's
    decision (``installed``)."""
    torch = sys.modules.get("torch")
    version = getattr(torch, "__version__", None)
    cuda = getattr(getattr(torch, "version", None), "cuda", None)
    return {"python": "{}.{}.{}".format(*sys.version_info[:3]),
            "implementation": sys.implementation.name,
            "torch": str(version) if version is not None else None,
            "cuda": str(cuda) if cuda is not None else None}
