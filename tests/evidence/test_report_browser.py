"""report.html in a real browser: two real (small) sweeps into one runs root, the second run's
page loaded in headless Chromium (Debian's package, driven over its command line: no Python
dependency), and what a maintainer must see read back from the DOM Chromium built.

Chromium comes from the test set-up (scripts/_chromium.sh installs it with apt-get where it is
missing); the test skips, saying so, only where no Chromium can be found at all.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from ..conftest import FakeTarget
from .report_scenario import BROKEN_REASON, ISSUE, PR, two_nights

pytestmark = pytest.mark.slow

_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def chromium() -> str | None:
    """$PATCHLANE_CHROMIUM, else the first Chromium on PATH."""
    named = os.environ.get("PATCHLANE_CHROMIUM")
    if named:
        return shutil.which(named) or (named if os.access(named, os.X_OK) else None)
    return next((found for found in map(shutil.which, _NAMES) if found), None)


def run_chromium(binary: str, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # A profile of its own: two runs at once (or a user's browser) never share one. No GPU,
    # no sandbox (root in containers); nothing here needs either.
    cmd = [binary, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
           f"--user-data-dir={profile}", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180)


class Dom(HTMLParser):
    """What the checks read from Chromium's serialised DOM: links, ids, forbidden elements,
    and the visible text of each section (text inside attributes is not visible)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.hrefs: list[str] = []
        self.ids: set[str] = set()
        self.tags: list[str] = []
        self.sections: dict[str, list[str]] = {}
        self.text: list[str] = []
        self._section: list[str] = []
        self._pre = 0
        self.pre: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        data = dict(attrs)
        self.tags.append(tag)
        if data.get("id"):
            self.ids.add(str(data["id"]))
        if tag == "a" and data.get("href") is not None:
            self.hrefs.append(str(data["href"]))
        if tag == "section":
            self._section.append(str(data.get("id")))
            self.sections.setdefault(str(data.get("id")), [])
        if tag == "pre":
            self._pre += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "section" and self._section:
            self._section.pop()
        if tag == "pre":
            self._pre -= 1

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        for name in self._section:
            self.sections[name].append(data)
        if self._pre:
            self.pre.append(data)

    def visible(self, section: str) -> str:
        return " ".join("".join(self.sections.get(section, [])).split())


def test_the_nightly_page_in_headless_chromium(fake_target: FakeTarget, tmp_path: Path) -> None:
    binary = chromium()
    if binary is None:
        pytest.skip("no Chromium found (chromium, chromium-browser or google-chrome on PATH, "
                    "or $PATCHLANE_CHROMIUM): scripts/_chromium.sh installs Debian's `chromium` "
                    "with apt-get; install it by hand where apt-get is not usable")
    nightly = two_nights(fake_target, tmp_path / "runs")
    run_dir = nightly.second
    report = run_dir / "report.html"
    ids = nightly.ids

    dumped = run_chromium(binary, tmp_path / "profile", "--dump-dom", report.as_uri())
    assert dumped.returncode == 0 and "</html>" in dumped.stdout, dumped.stderr[-3000:]
    (tmp_path / "report.dom.html").write_text(dumped.stdout)
    dom = Dom()
    dom.feed(dumped.stdout)

    # Static and self-contained: nothing to fetch, nothing to run.
    assert not {"script", "link", "img", "iframe", "object"} & set(dom.tags)
    assert set(dom.sections) >= {"changes", "provenance", "errors", "broken", "maintainer",
                                 "rows", "grid", "history", "legend"}

    # At the top: the change since the previous night, found without --compare.
    changes = dom.visible("changes")
    assert "Changes since night1" in changes
    assert f"{ids['flips']}[cpu-ws1]: guarding → broken" in changes
    assert "same comparison class" in changes

    # Provenance header: host, Python, torch, targets, patch set.
    prov = dom.visible("provenance")
    for label in ("host class", "Python", "torch", "CUDA", "GPU", "targets", "patch set"):
        assert label in prov, (label, prov)
    assert "cpu-" in prov and "sha256:" in prov and fake_target.distribution in prov
    assert platform.python_version() in prov

    # Reasons are visible text (not a tooltip), whole, and shown as text: the markup in one
    # never became an element.
    errors = dom.visible("errors")
    assert "without overlay: run: KeyError: 'scratch-7781 is not an assertion'" in errors
    assert ("without overlay: bootstrap: rank 0 exited 3 before reporting: bootstrap-5523: the "
            "rank gives up before reporting") in errors
    assert "fix the lane or the reproducer" in errors  # what the verdict asks
    broken = dom.visible("broken")
    assert f"fails with the overlay: {BROKEN_REASON}" in broken
    assert dumped.stdout.count("still wrong &lt;b&gt;&amp;amp;&lt;/b&gt;") >= 2
    # The failing ranks' log tails, inline: the bootstrap one says what the rank printed.
    tails = "".join(dom.pre)
    assert "bootstrap-5523: the rank gives up before reporting" in tails
    assert "KeyError: 'scratch-7781 is not an assertion'" in tails and "Traceback" in tails

    # What each verdict asks, per row: the retirement command for the upstream-fixed entry.
    maintainer = dom.visible("maintainer")
    assert f"patchlane retire {ids['fixed']} --evidence {run_dir}" in maintainer
    # Upstream links with the state the upstream cache holds.
    assert ISSUE in dom.hrefs and PR in dom.hrefs
    assert "closed (completed)" in maintainer and "merged 2026-04-24" in maintainer
    assert "milestone 1.3.0" in maintainer
    rows = dom.visible("rows")
    for role in ("guard", "errors", "dies", "fixed", "flips"):
        assert ids[role] in rows
    assert ">=1.0" in rows  # the gate (applies_to)

    # History across the runs found under the runs root, this run last.
    history = dom.visible("history")
    assert "night1" in history and "night2" in history and "this run" in history
    assert history.index("night1") < history.index("night2")

    # Every relative link resolves to a file of the run directory (or an earlier run's page);
    # every in-page link to an element.
    local = [h for h in dom.hrefs if not urlsplit(h).scheme]
    assert any(h.startswith("receipts/") for h in local)
    assert any(h.startswith("cases/") and h.endswith(".log") for h in local)
    assert "../night1/report.html" in local
    for href in local:
        if href.startswith("#"):
            assert href[1:] in dom.ids, href
        else:
            target = (run_dir / unquote(urlsplit(href).path)).resolve()
            assert target.is_file(), href
    failing_logs = [h for h in local if "--without/" in h and ids["dies"] in h]
    assert failing_logs and "bootstrap-5523" in (run_dir / unquote(failing_logs[0])).read_text()

    # A picture for a person: in the test's directory and, when asked, the CI artifacts.
    shot = tmp_path / "report.png"
    taken = run_chromium(binary, tmp_path / "profile", f"--screenshot={shot}",
                         "--window-size=1400,2000", "--hide-scrollbars", report.as_uri())
    assert taken.returncode == 0 and shot.is_file(), taken.stderr[-3000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
    artifacts = os.environ.get("PATCHLANE_TEST_ARTIFACTS")
    if artifacts:
        Path(artifacts).mkdir(parents=True, exist_ok=True)
        shutil.copy2(shot, Path(artifacts) / "report-page.png")
