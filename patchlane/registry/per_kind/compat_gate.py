"""``kind: compat_gate``: ``check_function`` in ``check_file`` judges a run's configuration
(Megatron args, a TransformerConfig) when the job asks (``patchlane.check_config``), and a
known-bad combination raises with the upstream link."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from ...common.errors import OverlayError
from ...loading import load_file
from ..fields import MODULE_RE, expect_type, policy, relative_file
from ..records import LedgerResult, Policy
from .protocol import NewOption

if TYPE_CHECKING:
    from ..fields import Fields
    from ..records import Entry, Target
    from .protocol import Drafting

__all__ = ["OPTIONS", "CompatGate", "decide", "judge", "parse", "write"]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
"""What ``patchlane new --check`` accepts: a plain function name for the stub it writes."""


class CompatGate(NamedTuple):
    """``check_function`` in ``check_file`` judges a run's config."""

    check_file: Path
    check_function: str
    policy: Policy


OPTIONS: tuple[NewOption, ...] = (
    NewOption("check", "--check", "FUNCTION", "compat_gate: the check's function name in "
              "checks/ID.py (default: check)"),)


def parse(fields: Fields, data: Mapping[str, Any], target: Target) -> CompatGate:
    text = expect_type(fields, data["check"], str, "check",
                       "'patches/<id>.py:function' that validates a run configuration")
    file, sep, function = text.rpartition(":")
    if not sep or not MODULE_RE.match(function):
        raise fields.fail("invalid check", key="check", found=text,
                          expected="'patches/<id>.py:function'")
    return CompatGate(relative_file(fields, file, "check", str(fields.entry_id)), function,
                      policy(fields, data, Policy.ERROR))


def decide(entry: Entry) -> LedgerResult | None:
    return None  # nothing at an import: the job asks with its configuration (judge)


def _load_check(entry: Entry, gate: CompatGate) -> Callable[[Any], str | None]:
    module = load_file(entry.id, "check", gate.check_file)
    fn = getattr(module, gate.check_function, None)
    if not callable(fn):
        # The registry's `check: FILE:FUNCTION` names code the file does not have: the same
        # fault as an overlay file without `overlay`.
        raise OverlayError(entry.id, f"{gate.check_file} defines no callable "
                                     f"{gate.check_function!r} (found "
                                     f"{type(fn).__name__ if fn is not None else 'nothing'}); "
                                     "fix: define it there, or correct the entry's `check`")
    return fn  # type: ignore[no-any-return]


def judge(entry: Entry, config: Any) -> LedgerResult:
    """The check on ``config``: it returns None when the combination is safe, else a sentence
    describing the problem."""
    spec = entry.spec
    assert isinstance(spec, CompatGate), f"{entry.id} is not a compat gate"
    kind = entry.kind.value
    if entry.target.distribution and entry.applies_to is not None:
        gate = entry.read_gate()
        if not gate.open:
            return LedgerResult(entry.id, kind, True, spec.policy,
                                f"not applicable: {gate.reason}")
    problem = _load_check(entry, spec)(config)
    if problem is None:
        return LedgerResult(entry.id, kind, True, spec.policy, "configuration is safe")
    return LedgerResult(entry.id, kind, False, spec.policy,
                        f"{entry.id}: {problem} ({entry.summary}; {entry.upstream_link})")


def write(draft: Drafting) -> None:
    function = draft.option("check") or "check"
    if not _NAME.fullmatch(function):
        raise draft.refuse("--check is not a function name", found=function,
                           expected="a Python identifier such as check")
    draft.gated(None, None)
    draft.lines.append(f"check: checks/{draft.entry_id}.py:{function}")
    draft.lines.append(f"policy: {draft.policy or 'error'}")
    draft.lines += [*draft.upstream_lines(), *draft.retire_lines()]
    draft.files[f"checks/{draft.entry_id}.py"] = draft.stub("check", function=function)
