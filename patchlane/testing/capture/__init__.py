"""Would this region be legal inside a CUDA graph capture?

::

    from patchlane.testing.capture import capture_check

    with capture_check(lane="cpu") as report:     # "cpu" | "cuda" | None (cuda when available)
        loss = model(batch).sum()
        loss.backward()
    assert report.ok, report.format()

    result = check_step(step, lane=ctx.lane, reset=zero_grads)   # a step, eager vs checked
    assert result.report.ok and not result.mismatches()

Each :class:`CaptureViolation` names the op, the rule it breaks (``host-sync``,
``data-dependent-shape``, ``host-data``, ``device-to-host``, ``host-to-device``) and the first
frame outside torch, this package and the standard library (the user or upstream line that
issued it, also inside an ``autograd.Function.backward`` run by ``loss.backward()``).

Lanes: ``cpu`` captures nothing; two torch modes apply the rules to every call and aten op,
treating every tensor as a device tensor except host data made in the region. ``cuda`` runs the
region under a real ``torch.cuda.graph`` capture with the same modes on top to name the op,
then replays the graph once: after the region, its tensors hold its result on both lanes.

The package, one concept per module, in reading order::

    check        capture_check(), CaptureCheck, check_call(), check_step(), StepCheck,
                 is_capturing(): the entry points, wiring the rest together
    rules        the five rules: what is illegal and why, the op sets, the message words
    calls        Python-level rules (.tolist(), .cpu(), .to(...), printing, F.one_hot)
    ops          aten-level rules (.item(), nonzero, masks, torch.tensor, copies)
    placement    which tensors count as device tensors (the cpu lane's emulation)
    modes        the torch-function and dispatch modes that run the rules
    recorder     verdicts and CUDA capture errors into violations
    violations   CaptureViolation, CaptureReport, CaptureError
    frames       which source line a violation is blamed on
    cuda         the cuda lane's real capture, its replay, and what its errors mean

Importing this package does not import torch; a check does, when it is made.
"""

from __future__ import annotations

from .check import CaptureCheck, StepCheck, capture_check, check_call, check_step, is_capturing
from .rules import RULES, Rule
from .violations import CaptureError, CaptureReport, CaptureViolation

__all__ = [
    "RULES",
    "CaptureCheck",
    "CaptureError",
    "CaptureReport",
    "CaptureViolation",
    "Rule",
    "StepCheck",
    "capture_check",
    "check_call",
    "check_step",
    "is_capturing",
]
