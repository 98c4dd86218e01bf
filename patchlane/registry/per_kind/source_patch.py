"""``kind: source_patch``: an overlay replaces an object of the target release (a function, a
method, a property, a class's members, a value: :mod:`patchlane.targets`) when its module is
imported, gated, probed and fingerprinted (the decider: :mod:`patchlane.deciding.decider`). Its keys
(``overlay``, ``reproducer``, ``fingerprint``, ``depends_on``, ``continued_by``) are read by the
schema with every entry's, so it has no record of its own; no ledger check decides it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ...common.versions import parse_version
from ..fields import MODULE_RE
from .protocol import NewOption

if TYPE_CHECKING:
    from ..fields import Fields
    from ..records import Entry, LedgerResult, Target
    from .protocol import Drafting

__all__ = ["OPTIONS", "decide", "judge", "parse", "write"]

OPTIONS: tuple[NewOption, ...] = ()
"""``--target MODULE:QUALNAME`` and ``--applies-to`` are every kind's options."""

def parse(fields: Fields, data: Mapping[str, Any], target: Target) -> None:
    return None


def decide(entry: Entry) -> LedgerResult | None:
    return None


def judge(entry: Entry, config: Any) -> LedgerResult | None:
    return None


def write(draft: Drafting) -> None:
    eid = draft.entry_id
    module_name, sep, qualname = (draft.target or "").partition(":")
    if not sep or not MODULE_RE.fullmatch(module_name) or not MODULE_RE.fullmatch(qualname):
        raise draft.refuse("--target is not MODULE:QUALNAME", found=draft.target,
                           expected="'package.module:Qual.name', e.g. "
                           "megatron.core.rerun_state_machine:RerunStateMachine.state_dict")
    module = draft.imported(module_name, "--target")
    shape = draft.resolve_target(module, module_name, qualname)
    value = draft.fingerprint(module, module_name, qualname)
    dist = draft.distribution(module_name)
    installed = draft.release(dist, module)
    spec, why = draft.gate(installed)
    draft.applies_to = spec
    parsed = parse_version(installed.version)
    release = parsed.public if parsed is not None else installed.version
    draft.lines += [
        "target:",
        f"  distribution: {draft.scalar(dist)}",
        f"  object: {draft.scalar(draft.target or '')}",
        *([f"  version_from: {draft.scalar(draft.version_from)}  # the gate reads this when "
           "no installed distribution provides the code"] if draft.version_from else []),
        *([f"  shape: {shape}  # what the target is; another shape on a release refuses the "
           "overlay"] if shape else []),
        *draft.comment(why),
        f"applies_to: {json.dumps(spec)}",
        *draft.upstream_lines(),
        *draft.retire_lines([f"  # probe(module) in patches/{eid}.py says when upstream behaves",
                             "  probe: true"]),
        f"overlay: patches/{eid}.py",
        f"reproducer: reproducers/{eid}.py",
        "fingerprint:",
        "  policy: refuse",
        "  sha256:",
        f"    - {json.dumps(value)}  # {release}",
        "  releases:  # imported from the installed release by `patchlane new` (not a run)",
        f"    {json.dumps(release)}: {json.dumps(value)}",
    ]
    draft.files[f"patches/{eid}.py"] = draft.stub("overlay", release=installed, shape=shape)
    draft.files[f"reproducers/{eid}.py"] = draft.stub("reproducer")
