"""``kind: version_floor``: the installed release of the target distribution must satisfy
``requires``; checked when its module is imported (``when``), and with ``policy: error`` (the
default) that import raises."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from ...installed.gates import check_gate
from ..fields import MODULE_RE, policy, specifier, when_condition
from ..records import LedgerResult, Policy, When
from .protocol import NewOption

if TYPE_CHECKING:
    from packaging.specifiers import SpecifierSet

    from ..fields import Fields
    from ..records import Entry, Target
    from .protocol import Drafting

__all__ = ["OPTIONS", "VersionFloor", "decide", "judge", "parse", "write"]


class VersionFloor(NamedTuple):
    """The target distribution must satisfy ``requires``."""

    requires: SpecifierSet
    policy: Policy
    when: When | None = None

    @property
    def requirement(self) -> SpecifierSet:
        return self.requires


OPTIONS: tuple[NewOption, ...] = (
    NewOption("requires", "--requires", "SPEC", "version_floor: e.g. '>=2.6.0'"),)


def parse(fields: Fields, data: Mapping[str, Any], target: Target) -> VersionFloor:
    return VersionFloor(specifier(fields, data["requires"], "requires"),
                        policy(fields, data, Policy.ERROR),
                        when_condition(fields, data.get("when"), target))


def decide(entry: Entry) -> LedgerResult:
    floor = entry.spec
    assert isinstance(floor, VersionFloor), entry.id
    dist = entry.target.distribution
    gate = check_gate(dist, floor.requires)
    expected = f"{dist}{floor.requires}"
    kind = entry.kind.value
    if gate.found is None:
        return LedgerResult(entry.id, kind, True, floor.policy,
                            f"{dist} not installed: floor not applicable", None, expected)
    if gate.open:
        return LedgerResult(entry.id, kind, True, floor.policy,
                            f"{dist} {gate.found} meets {expected}", gate.found, expected)
    return LedgerResult(
        entry.id, kind, False, floor.policy,
        f"{entry.id}: {dist} {gate.found} is below the floor {expected} ({entry.summary}; "
        f"{entry.upstream_link}). Fix: install {expected}", gate.found, expected)


def judge(entry: Entry, config: Any) -> LedgerResult | None:
    return None


def write(draft: Drafting) -> None:
    write_requirement(draft, "requires", "error")


def write_requirement(draft: Drafting, key: str, default_policy: str) -> None:
    """The block of a kind that requires a range of an installed distribution (a floor's
    ``requires``, a pin's ``pin``), checked at the import of ``--target`` when given."""
    from ...common.versions import in_range

    module_name = draft.target
    if module_name is not None:
        if not MODULE_RE.fullmatch(module_name):
            raise draft.refuse("--target is not a module name", found=module_name,
                               expected="the module whose import triggers the check, e.g. "
                               "torch")
        draft.find(module_name, "--target")  # found, not imported: its import is the check
    dist = draft.distribution(module_name)
    # A typo here would make a check that never fires: only an installed distribution is
    # accepted, by its metadata (what the ledger reads).
    installed = draft.release(dist, None, metadata_only=True)
    spec = draft.specifier(f"--{key}", str(draft.option(key)))
    if in_range(spec, installed.version) is False:
        draft.notes.append(f"the installed {dist} {installed.version} violates {key} "
                           f"{spec}: this entry fails at its import here (policy "
                           f"{draft.policy or default_policy})")
    draft.lines += ["target:", f"  distribution: {draft.scalar(dist)}"]
    if module_name:
        draft.lines.append(f"  object: {draft.scalar(module_name)}")
    draft.lines.append(f"{key}: {draft.value(str(spec))}")
    if draft.policy or default_policy == "error":
        # a floor's policy is said rather than implied; a pin warns unless told otherwise
        draft.lines.append(f"policy: {draft.policy or default_policy}")
    draft.lines += [*draft.upstream_lines(), *draft.retire_lines()]
