"""``kind: packaging_pin``: the installed release must satisfy ``pin`` and, with ``source``, have
been installed from that URL (its ``direct_url.json``); checked when its module is imported."""

from __future__ import annotations

import json
from collections.abc import Mapping
from importlib import metadata
from typing import TYPE_CHECKING, Any, NamedTuple

from ...installed.gates import check_gate
from ..fields import expect_type, policy, specifier, when_condition
from ..records import LedgerResult, Policy, When
from .protocol import NewOption
from .version_floor import write_requirement

if TYPE_CHECKING:
    from packaging.specifiers import SpecifierSet

    from ..fields import Fields
    from ..records import Entry, Target
    from .protocol import Drafting

__all__ = ["OPTIONS", "PackagingPin", "decide", "judge", "parse", "write"]


class PackagingPin(NamedTuple):
    """The distribution must satisfy ``pin`` and, with ``source``, have been installed from
    that URL (its ``direct_url.json``)."""

    pin: SpecifierSet
    policy: Policy
    source: str | None = None
    when: When | None = None

    @property
    def requirement(self) -> SpecifierSet:
        return self.pin


OPTIONS: tuple[NewOption, ...] = (
    NewOption("pin", "--pin", "SPEC", "packaging_pin: e.g. '<2.3'"),)


def parse(fields: Fields, data: Mapping[str, Any], target: Target) -> PackagingPin:
    source = None
    if data.get("source") is not None:
        source = expect_type(fields, data["source"], str, "source",
                             "the URL the distribution must be installed from "
                             "(compared with its direct_url.json)")
    return PackagingPin(specifier(fields, data["pin"], "pin"), policy(fields, data, Policy.WARN),
                        source, when_condition(fields, data.get("when"), target))


def _direct_url(dist: str) -> str | None:
    try:
        text = metadata.distribution(dist).read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        return None
    if not text:
        return None
    try:
        return str(json.loads(text).get("url"))
    except (json.JSONDecodeError, AttributeError):
        return "<unreadable direct_url.json>"


def decide(entry: Entry) -> LedgerResult:
    spec = entry.spec
    assert isinstance(spec, PackagingPin), entry.id
    dist, pin, kind = entry.target.distribution, spec.pin, entry.kind.value
    gate = check_gate(dist, pin)
    expected = f"{dist}{pin}"
    if gate.found is None:
        return LedgerResult(entry.id, kind, True, spec.policy,
                            f"{dist} not installed: pin not applicable", None, expected)
    if not gate.open:
        return LedgerResult(entry.id, kind, False, spec.policy,
                            f"{entry.id}: {dist} {gate.found} does not match the pin {expected} "
                            f"({entry.summary}; {entry.upstream_link}). Fix: pip install "
                            f"'{expected}'", gate.found, expected)
    source = spec.source
    if source is not None:
        url = _direct_url(dist)
        if url != source:
            return LedgerResult(entry.id, kind, False, spec.policy,
                                f"{entry.id}: {dist} {gate.found} was installed from "
                                f"{url or 'an index (no direct_url.json)'}, the pin requires "
                                f"{source}. Fix: pip install '{source}'", url, source)
    return LedgerResult(entry.id, kind, True, spec.policy,
                        f"{dist} {gate.found} matches {expected}", gate.found, expected)


def judge(entry: Entry, config: Any) -> LedgerResult | None:
    return None


def write(draft: Drafting) -> None:
    write_requirement(draft, "pin", "warn")
