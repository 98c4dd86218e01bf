"""The version gate: installed distribution metadata checked against ``applies_to``.

Versions go through :mod:`packaging` only. Pre-releases are matched deliberately
(``prereleases=True``): a ``0.16.2.dev0`` or ``2.13.0a0+git`` build inside the declared range
is exactly the build a training team runs, and PEP 440 already keeps ``0.18.0rc1`` out of
``<0.18``. Local labels (``+cu128``) are ignored for ordering, as PEP 440 says.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import metadata

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

__all__ = ["GateResult", "check_gate", "installed_version"]


@dataclass(frozen=True)
class GateResult:
    distribution: str
    required: str
    found: str | None
    """The installed version string, or None when the distribution is not installed."""
    open: bool
    reason: str
    comparable: bool = True
    """False when the installed version is not PEP 440 (the gate could not be evaluated)."""


def installed_version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def check_gate(distribution: str, spec: SpecifierSet | None) -> GateResult:
    required = str(spec) if spec is not None else "any"
    found = installed_version(distribution)
    if found is None:
        return GateResult(distribution, required, None, False,
                          f"{distribution} is not installed as a distribution (no metadata); "
                          "a module imported from a source tree has no version to gate on")
    if spec is None:
        return GateResult(distribution, required, found, True, f"{distribution} {found}")
    try:
        version = Version(found)
    except InvalidVersion:
        return GateResult(distribution, required, found, False,
                          f"{distribution} reports version {found!r}, which is not PEP 440",
                          comparable=False)
    if spec.contains(version, prereleases=True):
        return GateResult(distribution, required, found, True,
                          f"{distribution} {found} is in {required}")
    return GateResult(distribution, required, found, False,
                      f"{distribution} {found} is outside {required}")
