"""PyPI releases, against the fake upstream of :mod:`tests.upstream.fake_upstream`."""

from __future__ import annotations

from patchlane.upstream import pypi_releases

from .fake_upstream import Harness, Reply


def test_pypi_releases_sorts_by_pep440_not_by_string(h: Harness) -> None:
    body = {"releases": {
        "0.10.0": [{"upload_time_iso_8601": "2026-01-03T00:00:00Z", "yanked": False}],
        "0.9.0": [{"upload_time_iso_8601": "2026-01-02T00:00:00Z", "yanked": False}],
        "0.10.0rc1": [{"upload_time_iso_8601": "2026-01-01T00:00:00Z", "yanked": False}],
        "not-a-version": [{"upload_time_iso_8601": "2026-01-01T00:00:00Z", "yanked": False}],
        "0.11.0": [],
    }}
    h.upstream.route("/pypi/pypi/demo/json", Reply(body=body))
    assert [r.version for r in pypi_releases(h.client(), "demo")] == ["0.9.0", "0.10.0rc1",
                                                                      "0.10.0"]



def test_a_release_key_with_a_5000_digit_number_is_skipped_with_its_reason(
        h: Harness, caplog) -> None:
    huge = "1." + "9" * 5000
    files = [{"upload_time_iso_8601": "2026-01-03T00:00:00Z", "yanked": False}]
    h.upstream.route("/pypi/pypi/demo/json", Reply(body={"releases": {huge: files,
                                                                     "0.9.0": files}}))
    with caplog.at_level("DEBUG", logger="patchlane.upstream.pypi"):
        assert [r.version for r in pypi_releases(h.client(), "demo")] == ["0.9.0"]
    (said,) = [r.getMessage() for r in caplog.records if "skipping release" in r.getMessage()]
    assert "has a number longer than 640 digits" in said and len(said) < 300


def test_a_release_key_with_spaces_or_a_line_break_is_skipped(h: Harness, caplog) -> None:
    files = [{"upload_time_iso_8601": "2026-01-03T00:00:00Z", "yanked": False}]
    h.upstream.route("/pypi/pypi/demo/json", Reply(body={"releases": {" 1.3.0\n": files,
                                                                     "1.2.0": files}}))
    with caplog.at_level("DEBUG", logger="patchlane.upstream.pypi"):
        assert [r.version for r in pypi_releases(h.client(), "demo")] == ["1.2.0"]
    (said,) = [r.getMessage() for r in caplog.records if "skipping release" in r.getMessage()]
    assert "has spaces or line breaks around it" in said
