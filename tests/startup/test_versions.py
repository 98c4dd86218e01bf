"""patchlane.common.versions: every version and range from outside parsed without an exception."""

from __future__ import annotations

import sys

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from patchlane.common import versions
from patchlane.common.versions import (
    MAX_DIGITS,
    in_range,
    parse_range,
    parse_version,
    range_problem,
    version_problem,
    why_not_version,
)

HUGE = "1." + "9" * 5000


def test_no_interpreter_setting_refuses_a_number_as_short_as_the_limit() -> None:
    threshold = getattr(sys.int_info, "str_digits_check_threshold", None)  # 3.11+
    if threshold is not None:
        assert threshold == MAX_DIGITS
    assert parse_version("1." + "9" * MAX_DIGITS) is not None
    assert parse_version("1." + "9" * (MAX_DIGITS + 1)) is None


@pytest.mark.parametrize(("text", "why"), [
    (HUGE, "has a number longer than 640 digits"),
    ("1.0+" + "7" * 5000, "has a number longer than 640 digits"),  # a local label too
    ("banana", "is not PEP 440"),
    (None, "is a NoneType, not a version string"),
])
def test_what_is_not_a_version_says_why(text: object, why: str) -> None:
    assert parse_version(text) is None
    assert str(why_not_version(text)).startswith(why)
    problem = version_problem(text)
    assert problem is not None and why in problem and len(problem) < 200


def test_a_version_parses() -> None:
    assert parse_version("0.16.1+cu128") == Version("0.16.1+cu128")
    assert why_not_version("0.16.1") is None and version_problem("0.16.1") is None


def test_membership_of_what_is_not_a_version_is_unknown() -> None:
    spec = SpecifierSet(">=0.14,<0.18")
    assert in_range(spec, HUGE) is None and in_range(spec, "banana") is None
    assert in_range(spec, "0.18.0rc1") is False and in_range(spec, "0.16.2.dev0") is True


@pytest.mark.parametrize("text", ["<3." + "9" * 5000, ">=3.8,<4|", 7])
def test_a_range_from_outside_that_would_raise_later_is_none(text: object) -> None:
    assert parse_range(text) is None


RANGES = [">=1.3,<1.3", ">2,<1", "==1.0,!=1.0", "<1.0,>=1.0", "==1.*,>=2", ">1.0,<1.0.post2",
          ">1.0rc1,<1.0rc2", ">=0.14,<0.18", ">=2!1.0,<2!2.0", "~=1.4.5", "~=1.4.5,!=1.4.*",
          ">1.2.999,<1.3", "<0", "<0.dev0", ">=1.0,<2.0,!=1.0.*,!=1.*", ">=1.0,<2.0,!=1.0.*",
          "==1.0.*,!=1.0", "<=1.0,>=1.0", "<1.0.dev0,>0.9.post1", ">=1.0rc1,<1.0", "==1!1.0",
          ">1.0,<1.0.0.0.1", ">1,<1.0.0.0.0.0.0.0.1", "==1.0+local,!=1.0+local"]


@pytest.mark.parametrize("text", RANGES)
def test_the_fallback_emptiness_probe_agrees_with_packaging(text: str) -> None:
    """packaging before 26.1 has no is_unsatisfiable; the probe used there answers alike."""
    spec = SpecifierSet(text)
    if not hasattr(spec, "is_unsatisfiable"):
        pytest.skip("packaging before 26.1: nothing to compare with")
    assert (not versions._satisfiable(spec, list(spec))) == spec.is_unsatisfiable()


def test_the_fallback_is_what_answers_without_is_unsatisfiable(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(SpecifierSet, "is_unsatisfiable", raising=False)
    assert range_problem(SpecifierSet(">=1.3,<1.3")) == \
        "no version satisfies <1.3,>=1.3: its bounds contradict each other"
    assert range_problem(SpecifierSet(">=1.3,<1.4")) is None


@pytest.mark.parametrize(("text", "fine"), [
    ("<2!1.0", False), (">=1.0,<2!0", False), (">=1!1.0,<2!1.0", False),
    (">=2!1.0,<2!2.0", True), ("==1!1.0", True), ("~=1!1.4", True),
])
def test_an_epoch_is_allowed_only_in_a_range_confined_to_it(text: str, fine: bool) -> None:
    assert (range_problem(SpecifierSet(text)) is None) is fine
