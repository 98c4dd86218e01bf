"""Versions and version ranges from outside patchlane, parsed without ever raising.

Every version string patchlane did not write itself (a registry's ranges, an installed
distribution's metadata, a source tree's ``__version__``, a git tag, a PyPI release key) goes
through :func:`parse_version` or :func:`version_problem`; every range through
:func:`range_problem` (the registry's validation) or :func:`parse_range`. Both answer with a
value or a reason, never an exception.

Why not ``packaging.version.Version`` directly: besides :class:`InvalidVersion`, it raises a
bare ``ValueError`` for a numeric component longer than the interpreter converts to an ``int``
(4,300 digits by default; ``PYTHONINTMAXSTRDIGITS`` or ``sys.set_int_max_str_digits`` move it,
and Python 3.10 has no limit). A ``SpecifierSet`` parses its versions only when it compares,
so the same error would surface far from where the range was read. Here a component of more
than :data:`MAX_DIGITS` digits is refused up front: the same answer on every interpreter and
setting, since no interpreter refuses a number that short.
"""

from __future__ import annotations

import re

from packaging.specifiers import InvalidSpecifier, Specifier, SpecifierSet
from packaging.version import InvalidVersion, Version

__all__ = ["MAX_DIGITS", "in_range", "parse_range", "parse_version", "range_problem", "shown",
           "version_problem", "why_not_version"]

MAX_DIGITS = 640
"""The longest run of digits a version may carry: ``sys.int_info.str_digits_check_threshold``,
the lowest limit any interpreter can be set to (no real release comes near it)."""

_DIGITS = re.compile(r"[0-9]+")  # every run once: linear, where r"[0-9]{641}" backtracks
_SHOWN = 40


def _too_long(text: str) -> bool:
    return any(len(run) > MAX_DIGITS for run in _DIGITS.findall(text))


def shown(text: str) -> str:
    """``text`` as a message repeats it: cut after 40 characters, with its length."""
    return text if len(text) <= _SHOWN else f"{text[:_SHOWN]}... ({len(text)} characters)"


def why_not_version(text: object) -> str | None:
    """Why ``text`` is not a version patchlane can compare, as the end of a sentence about it
    (``is not PEP 440``), or None when it is one."""
    if not isinstance(text, str):
        return f"is a {type(text).__name__}, not a version string"
    if text != text.strip():
        # packaging strips it and reads " 1.3.0\n" as 1.3.0; kept as a release it would put
        # a newline into a file name and a pip spec
        return "has spaces or line breaks around it, which no release name has"
    if _too_long(text):
        return (f"has a number longer than {MAX_DIGITS} digits, which no real release has "
                "(Python refuses to convert such numbers)")
    try:
        Version(text)
    except InvalidVersion:
        return "is not PEP 440"
    except ValueError as exc:  # pragma: no cover - the digit check above comes first
        return f"cannot be read as a version ({exc})"
    return None


def version_problem(text: object) -> str | None:
    """Why ``text`` is not a PEP 440 version patchlane can compare, as a sentence naming it
    (None when it is one)."""
    why = why_not_version(text)
    if why is None:
        return None
    return f"{shown(text) if isinstance(text, str) else text!r} {why}"


def parse_version(text: object) -> Version | None:
    """``Version(text)``, or None when :func:`version_problem` has a reason."""
    if not isinstance(text, str) or _too_long(text):
        return None
    try:
        return Version(text)
    except ValueError:  # InvalidVersion is one; so is an int() past the interpreter's limit
        return None


def in_range(spec: SpecifierSet, version: str | Version) -> bool | None:
    """Whether ``spec`` admits ``version``, pre-releases included (as gates match them); None
    when ``version`` is text that is not a version patchlane can compare."""
    parsed = version if isinstance(version, Version) else parse_version(version)
    return None if parsed is None else spec.contains(parsed, prereleases=True)


def parse_range(text: object) -> SpecifierSet | None:
    """``SpecifierSet(text)`` from outside (a ``Requires-Python``, a range read from a file),
    or None when it is not one, or names a version :func:`version_problem` refuses (which
    would raise later, on the first comparison)."""
    if not isinstance(text, str):
        return None
    try:
        spec = SpecifierSet(text)
    except InvalidSpecifier:
        return None
    return None if _clause_problem(spec) else spec


def _clause_problem(spec: SpecifierSet) -> str | None:
    for clause in spec:
        if clause.operator == "===":  # compared as text, never parsed
            continue
        problem = version_problem(clause.version.removesuffix(".*"))
        if problem:
            # operator + version, not str(clause): packaging parses the version for that
            return f"in {shown(clause.operator + clause.version)}: {problem}"
    return None


def range_problem(spec: SpecifierSet) -> str | None:
    """Why a range written in a registry would not gate what it seems to (None when it is
    fine): a version that cannot be compared; an epoch (``2!1.0``) outside a range confined
    to it (``<2!1.0`` admits every release without an epoch, all of 0.x to 99.x); a set no
    version satisfies (``>=1.3,<1.3``)."""
    problem = _clause_problem(spec)
    if problem:
        return problem
    clauses = [c for c in spec if c.operator != "==="]
    epochs = {Version(c.version.removesuffix(".*")).epoch for c in clauses}
    if epochs - {0}:
        bounded_below = any(c.operator in (">", ">=", "==", "~=") for c in clauses)
        if len(epochs) > 1 or not bounded_below:
            return (f"{spec} names an epoch ('N!'): every release of a lower epoch (any "
                    "release written without one) sorts below it, so a range with an epoch "
                    "must give every bound that epoch and a lower bound in it")
    unsatisfiable = getattr(spec, "is_unsatisfiable", None)  # packaging 26.1 and later
    if unsatisfiable is not None:
        empty = unsatisfiable()
    else:
        empty = len(clauses) == len(spec) and bool(clauses) and not _satisfiable(spec, clauses)
    if empty:
        return f"no version satisfies {spec}: its bounds contradict each other"
    return None


def _satisfiable(spec: SpecifierSet, clauses: list[Specifier]) -> bool:
    """Whether some version satisfies ``spec``, by probing candidates derived from its
    clauses: each clause's version, its base release, its dev-, pre- and post-releases, the
    release just above it and the release just below it (deep enough to fall between any two
    of the set's releases). An ordered bound, a pin, a wildcard and an exclusion each cut the
    line at those versions, so a set with room left holds one of them.

    Written here only for packaging before 26.1 (patchlane supports 23 and later), which has
    no ``SpecifierSet.is_unsatisfiable``; it gives the same answers on the ranges the tests
    try both ways (tests/startup/test_versions.py)."""
    versions = [Version(c.version.removesuffix(".*")) for c in clauses]
    depth = max(len(v.release) for v in versions) + 2
    candidates: set[str] = {"0", "0.dev0"}
    for v in versions:
        release = list(v.release) + [0] * (depth - len(v.release))
        base = ".".join(map(str, v.release))
        epoch = f"{v.epoch}!" if v.epoch else ""
        candidates.update({str(v), f"{epoch}{base}", f"{epoch}{base}.dev0",
                           f"{epoch}{base}a0", f"{epoch}{base}.post1", f"{v.public}.post1",
                           f"{epoch}{'.'.join(map(str, [*release[:-1], 1]))}"})
        if v.dev is None:
            candidates.add(f"{v.public}.dev0")
        if v.pre is not None:
            candidates.add(f"{epoch}{base}{v.pre[0]}{v.pre[1] + 1}")
        nonzero = [i for i, part in enumerate(release) if part]
        if nonzero:  # the release just below: the last non-zero part less one, then 10**9
            below = release[: nonzero[-1] + 1]
            below[-1] -= 1
            candidates.add(f"{epoch}{'.'.join(map(str, [*below, 10 ** 9]))}")
    return any(spec.contains(c, prereleases=True) for c in candidates)
