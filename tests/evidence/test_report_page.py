"""The nightly page and the summary without a browser or a sweep: reasons whole and escaped,
the previous run of the same comparison class found under the runs root, history, provenance
from receipts, links only to files that exist, and upstream state read from the cache only."""

from __future__ import annotations

import json
import os
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from patchlane.registry import load_registries
from patchlane.runs.found import class_differences, discover, same_class
from patchlane.runs.index import RunIndex
from patchlane.runs.manifest import RunDir, case_id
from patchlane.runs.verdicts import Verdict
from patchlane.sweep.engine import VerdictRow
from patchlane.sweep.reports import load_index, write_reports
from patchlane.sweep.reproduce import Mode
from patchlane.upstream.cache import CacheEntry, ResponseCache
from patchlane.upstream.known import known_states

from ..conftest import FakeTarget


def key(torch: str = "2.13.0", host: str = "cpu-2c-24g", lane: str = "cpu") -> dict[str, Any]:
    return {"lane": lane, "host_class": host, "torch": torch,
            "distributions": {"megatron-core": "0.16.1", "torch": torch}}


def row(entry: str, v: Verdict, reason: str = "why", torch: str = "2.13.0",
        **fields: Any) -> VerdictRow:
    return VerdictRow(entry, "cpu", 1, v, reason, "0.16.1", comparison_key=key(torch), **fields)


def night(root: Path, name: str, created: str, rows: list[VerdictRow],
          **kwargs: Any) -> dict[str, Any]:
    run = RunDir.create(root / name, {"run_id": name, "shard": "1/1", "lanes": ["cpu"],
                                      "patch_set": "sha256:feed"})
    run.manifest["created"] = created
    return write_reports(run, rows, **kwargs).as_dict()


class Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []
        self.ids: set[str] = set()
        self.tags: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        data = dict(attrs)
        if data.get("id"):
            self.ids.add(str(data["id"]))
        if tag == "a" and data.get("href"):
            self.hrefs.append(str(data["href"]))


def links_resolve(run_dir: Path) -> Links:
    parsed = Links()
    parsed.feed((run_dir / "report.html").read_text())
    for href in parsed.hrefs:
        if href.startswith("#"):
            assert href[1:] in parsed.ids, href
        elif not href.startswith(("http://", "https://")):
            assert (run_dir / href).resolve().is_file(), href
    return parsed


LONG = ("without overlay: run: ValueError: <script>alert('x')</script> in __init__ of `a|b` "
        + " ".join(f"word{i}" for i in range(80)) + " THE-END-OF-THE-REASON")


def test_reasons_are_whole_literal_and_escaped(tmp_path: Path) -> None:
    index = night(tmp_path, "r1", "2026-01-01T00:00:00+00:00",
                  [row("e_err", Verdict.ERROR, LONG, stderr_tail="Traceback\n<b>boom</b>"),
                   row("e_ok", Verdict.GUARDING, "fails without, passes with")])
    summary = (tmp_path / "r1" / "summary.md").read_text()
    table = next(line for line in summary.splitlines() if line.startswith("| e_err |"))
    # whole, in a code span (no HTML, no emphasis from __init__), pipes escaped for the table
    assert "THE-END-OF-THE-REASON" in table and "…" not in table
    # a backtick in the reason: the span's fence is longer than any run of them inside
    assert "| ``without overlay: run: ValueError: <script>alert('x')</script> in __init__ of " \
           "`a\\|b` word0" in table
    # below the table: the reason wrapped at 100 columns, words never cut, nothing dropped
    block = summary.split("### e_err[cpu-ws1]", 1)[1].split("```text\n", 1)[1].split("\n```")[0]
    assert all(len(line) <= 100 for line in block.splitlines())
    assert " ".join(block.split()) == " ".join(LONG.split())
    assert "<b>boom</b>" in summary.split("Last lines of rank", 1)[1]  # a fenced block: literal

    page = (tmp_path / "r1" / "report.html").read_text()
    assert "<script" not in page and "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in page
    assert "&lt;b&gt;boom&lt;/b&gt;" in page and "<b>boom</b>" not in page
    errors = page.split("<h2>Errors</h2>", 1)[1]
    assert "THE-END-OF-THE-REASON" in errors.split("title=")[0]  # visible, not a tooltip
    assert index["counts"] == {"error": 1, "guarding": 1}
    parsed = links_resolve(tmp_path / "r1")
    assert not parsed.tags & {"script", "link", "img"}


def test_the_previous_run_of_the_same_class_is_found_under_the_runs_root(tmp_path: Path) -> None:
    night(tmp_path, "n1", "2026-01-01T02:30:00+00:00",
          [row("e1", Verdict.GUARDING), row("e2", Verdict.GUARDING),
           row("e3", Verdict.GUARDING)])
    # the latest earlier run is of another class (torch 2.12): never the one compared with
    night(tmp_path, "n2", "2026-01-02T02:30:00+00:00",
          [row("e1", Verdict.BROKEN, torch="2.12.0"), row("e2", Verdict.GUARDING, torch="2.12.0")])
    index = night(tmp_path, "n3", "2026-01-03T02:30:00+00:00",
                  [row("e1", Verdict.BROKEN, "fails with the overlay: x"),
                   row("e2", Verdict.GUARDING), row("e4", Verdict.UPSTREAM_FIXED)])
    cmp = index["compare"]
    assert (cmp["previous_run"], cmp["how"], cmp["previous_report"]) == \
        ("n1", "same-class", "../n1/report.html")
    assert sorted((c["key"], c["change"]) for c in cmp["changes"]) == [
        ("e1[cpu-ws1]", "verdict-changed"), ("e3[cpu-ws1]", "gone"), ("e4[cpu-ws1]", "new")]
    assert index["lineage"]["other_class"] == 1 and index["lineage"]["same_class"] == 1

    summary = (tmp_path / "n3" / "summary.md").read_text()
    assert summary.index("## Changes since n1") < summary.index("| entry |")
    assert "- e1[cpu-ws1]: **guarding -> broken**" in summary
    assert "- e3[cpu-ws1]: no longer in the sweep (was guarding)" in summary

    page = (tmp_path / "n3" / "report.html").read_text()
    changes = page.split('<section id="changes">', 1)[1].split("</section>")[0]
    assert '<a href="../n1/report.html">n1</a>' in changes
    assert "fails with the overlay: x" in changes  # the new reason, with the change
    assert page.index('id="changes"') < page.index('id="provenance"') < page.index('id="rows"')
    history = page.split('<section id="history">', 1)[1]
    assert "n1" in history and "n2</a>" not in history  # the other class is left out, and said
    assert "1 earlier run(s) there are of another comparison class" in history
    links_resolve(tmp_path / "n3")

    # a first run of its class: said, with how the latest other run differs
    first = night(tmp_path, "n4", "2026-01-04T02:30:00+00:00",
                  [row("e1", Verdict.GUARDING, torch="2.14.0")])
    assert "compare" not in first
    assert first["lineage"]["nearest_other"]["run_id"] == "n3"
    assert "torch (imported) 2.13.0 -> 2.14.0" in first["lineage"]["nearest_other"]["differs"]
    assert "No earlier run of this comparison class" in \
        (tmp_path / "n4" / "report.html").read_text()


def test_compare_and_history_named_on_the_command_line_still_count(tmp_path: Path) -> None:
    night(tmp_path / "elsewhere", "old", "2026-01-01T00:00:00+00:00",
          [row("e1", Verdict.GUARDING, torch="2.12.0")])
    other = tmp_path / "elsewhere" / "old"
    index = night(tmp_path / "root", "now", "2026-01-02T00:00:00+00:00",
                  [row("e1", Verdict.BROKEN)], previous=load_index(other), history=[other])
    (change,) = index["compare"]["changes"]
    assert index["compare"]["how"] == "compare" and change["change"] == "class-changed"
    page = (tmp_path / "root" / "now" / "report.html").read_text()
    history = page.split('<section id="history">', 1)[1]
    assert '<a href="../../elsewhere/old/report.html">old</a>' in history
    assert "other class: torch (imported) 2.12.0 -&gt; 2.13.0" in history
    links_resolve(tmp_path / "root" / "now")


def test_an_unreadable_run_under_the_root_is_left_out_and_said(tmp_path: Path) -> None:
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "index.json").write_text("{half")
    (tmp_path / "odd").mkdir()
    (tmp_path / "odd" / "index.json").write_text(json.dumps(
        {"run_id": "odd", "created": "2025", "rows": [
            {"entry_id": "e", "lane": "cpu", "world_size": 1, "verdict": "fine"}]}))
    (tmp_path / "notarun").mkdir()
    index = night(tmp_path, "r", "2026-01-01T00:00:00+00:00", [row("e1", Verdict.GUARDING)])
    problems = index["lineage"]["unreadable"]
    assert [p.split(":")[0] for p in problems] == ["junk", "odd"]
    assert "'fine' is not a verdict" in problems[1]
    assert "Left out (no readable index): junk: JSONDecodeError" in \
        (tmp_path / "r" / "report.html").read_text()


def test_run_classes() -> None:
    def idx(*rows: dict[str, Any], shard: str = "1/1") -> RunIndex:
        return RunIndex.from_dict({"run_id": "r", "created": "", "shard": shard,
                                   "rows": list(rows)})

    def r(entry: str, dists: dict[str, str], torch: str = "2.13.0") -> dict[str, Any]:
        return {"entry_id": entry, "lane": "cpu", "world_size": 1, "verdict": "guarding",
                "comparison_key": {"lane": "cpu", "host_class": "h", "torch": torch,
                                   "distributions": dists}}

    base = idx(r("a", {"megatron-core": "0.16.1"}))
    # an entry on a new distribution keeps the class
    assert same_class(idx(r("a", {"megatron-core": "0.16.1"}), r("b", {"liger": "0.8.1"})),
                      base)
    assert not same_class(idx(r("a", {"megatron-core": "0.17.1"})), base)
    assert class_differences(idx(r("a", {"megatron-core": "0.17.1"})), base) == \
        ["megatron-core 0.16.1 -> 0.17.1"]
    assert not same_class(idx(r("a", {"megatron-core": "0.16.1"}), shard="2/2"), base)
    assert not same_class(idx(r("z", {"megatron-core": "0.16.1"})), base)  # no row shared


def write_receipt(run: RunDir, cid: str, mode: str, ranks: list[dict[str, Any]],
                  outcome: str, runtime: dict[str, Any]) -> str:
    receipt = {"case_id": cid, "mode": mode, "outcome": outcome, "stderr_tail": None,
               "ranks": ranks,
               "provenance": {"runtime": runtime, "patch_set": "sha256:feed",
                              "applies_to": ">=0.14.0,<0.18.0"}}
    run.write_receipt(cid, receipt)
    return str(run.receipt_path(cid).relative_to(run.path))


H200 = {"name": "NVIDIA H200", "capability": "9.0", "memory_gib": 139.8}


def test_links_provenance_and_the_failing_rank(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path / "run", {"run_id": "run", "lanes": ["cuda"],
                                           "patch_set": "sha256:feed", "shard": "1/1"})
    cid = case_id("e", "cuda", 2, Mode.WITHOUT)
    run.manifest["cases"][cid] = {"attempts": 2}
    logs = run.case_dir(cid) / "attempt2"
    logs.mkdir(parents=True)
    (logs / "rank1.log").write_text("line\nRuntimeError: NCCL said no\n")
    runtime = {"python": "3.12.3", "implementation": "CPython", "host_class": "gpu-2xNVIDIA-H200",
               "torch": {"version": "2.13.0+cu128", "cuda": "12.8", "gpus": [H200, H200],
                         "driver": "570.86"},
               "distributions": {"megatron-core": "0.19.2", "torch": "2.13.0+cu128"},
               "version_sources": {"megatron-core": "metadata"}}
    ranks = [{"rank": 0, "outcome": "error", "log": str(logs / "rank0.log"),  # not kept
              "stderr_tail": "rank 0 waited"},
             {"rank": 1, "outcome": "error", "log": str(logs / "rank1.log"),
              "stderr_tail": "RuntimeError: NCCL said no"}]
    rel = write_receipt(run, cid, "without", ranks, "error", runtime)
    # rank 1 died first; the sweep names the first rank in error: rank 0
    v = VerdictRow("e", "cuda", 2, Verdict.ERROR, "without overlay: run: RuntimeError",
                   "0.19.2", receipts={"without": rel}, stderr_tail="rank 0 waited")
    index = write_reports(run, [v]).as_dict()
    (out,) = index["rows"]
    assert out["links"]["receipts"] == {"without": f"receipts/{cid}.json"}
    assert out["links"]["logs"]["without"] == [
        {"rank": 0, "outcome": "error", "path": None},
        {"rank": 1, "outcome": "error", "path": f"cases/{cid}/attempt2/rank1.log"}]
    assert out["links"]["failing"] == {"mode": "without", "rank": 0, "log": None,
                                       "tail": "rank 0 waited"}
    assert out["applies_to"] == ">=0.14.0,<0.18.0"
    prov = index["provenance"]
    assert prov["gpus"] == ["2x NVIDIA H200 (sm 9.0, 139.8 GiB)"]
    assert (prov["cuda"], prov["driver"], prov["python"]) == (["12.8"], ["570.86"],
                                                              ["3.12.3 CPython"])
    assert prov["distributions"]["megatron-core"] == ["0.19.2"]
    page = (run.path / "report.html").read_text()
    prov_html = page.split('<section id="provenance">', 1)[1].split("</section>")[0]
    for text in ("gpu-2xNVIDIA-H200", "3.12.3 CPython", "2.13.0+cu128", "12.8",
                 "2x NVIDIA H200 (sm 9.0, 139.8 GiB)", "570.86", "megatron-core 0.19.2",
                 "sha256:feed"):
        assert text in prov_html, text
    assert "without r0 (not kept)" in page and f'href="cases/{cid}/attempt2/rank1.log"' in page
    assert "rank 0 waited" in page.split("<h2>Errors</h2>", 1)[1]
    summary = (run.path / "summary.md").read_text()
    assert "GPU 2x NVIDIA H200 (sm 9.0, 139.8 GiB)" in summary
    assert f"[rank 1 log (without)](cases/{cid}/attempt2/rank1.log)" in summary
    links_resolve(run.path)


ISSUE = "https://github.com/example-org/fakeproj/issues/7"
PR = "https://github.com/example-org/fakeproj/pull/8"


def test_known_upstream_state_comes_from_the_cache_only(fake_target: FakeTarget, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from patchlane.upstream.http import Client

    monkeypatch.setattr(Client, "_request", lambda *a, **k: pytest.fail("a request was sent"))
    for folder in ("patches", "reproducers"):
        source = fake_target.root / folder / f"{fake_target.entry_id}.py"
        (fake_target.root / folder / "linked.py").write_text(source.read_text())
    linked = fake_target.entry(id="linked", overlay="patches/linked.py",
                               reproducer="reproducers/linked.py",
                               upstream={"issue": ISSUE, "pr": PR, "forwarded": PR})
    registry = load_registries([fake_target.write_registry(fake_target.entry(), linked)])
    cache = tmp_path / "cache"
    assert known_states(registry.entries, cache_dir=cache) == {}
    api = "https://api.github.com/repos/example-org/fakeproj"
    ResponseCache(cache).write(f"{api}/pulls/8", CacheEntry(
        {"number": 8, "state": "open", "merged": False, "merged_at": None, "milestone": None,
         "title": "fix <it>", "html_url": PR}, 1_780_000_000.0, None, None))
    known = known_states(registry.entries, cache_dir=cache)
    assert list(known) == ["linked"]  # example.invalid is no GitHub link: nothing known
    assert known["linked"]["pr"]["state"] == "open" and "issue" not in known["linked"]
    assert known["linked"]["fetched_at"].startswith("2026-05-28")

    run = RunDir.create(tmp_path / "run", {"run_id": "run"})
    write_reports(run, [VerdictRow("linked", "cpu", 1, Verdict.GUARDING, "fails without")],
                  registry=registry, upstream=known)
    page = (run.path / "report.html").read_text()
    cell = re.search(r"PR <a href=\"[^\"]+\">example-org/fakeproj#8</a> <b>open</b>", page)
    assert cell is not None
    assert f'<a href="{ISSUE}">example-org/fakeproj#7</a>' in page  # link, state unknown
    assert '<span class="muted">as of 2026-05-28</span>' in page
    assert "<code class=\"gate\">&gt;=1.0,&lt;2.0</code>" in page  # as the registry says


def test_discover_ignores_the_run_itself_and_orders_by_creation(tmp_path: Path) -> None:
    night(tmp_path, "b", "2026-01-01T00:00:00+00:00", [row("e", Verdict.GUARDING)])
    night(tmp_path, "a", "2026-01-02T00:00:00+00:00", [row("e", Verdict.GUARDING)])
    found = discover(tmp_path, exclude=tmp_path / "a")
    assert [f.path.name for f in found.runs] == ["b"] and found.unreadable == []
    assert [f.path.name for f in discover(tmp_path).runs] == ["b", "a"]  # by creation
    # only the newest index files are read (a) and the rest counted
    os.utime(tmp_path / "b" / "index.json", (1_000_000, 1_000_000))
    newest = discover(tmp_path, limit=1)
    assert [f.path.name for f in newest.runs] == ["a"] and newest.not_read == 1
    assert discover(tmp_path / "missing").runs == []


def test_gates_are_shown_as_the_registry_wrote_them(fake_target: FakeTarget,
                                                    tmp_path: Path) -> None:
    # packaging's str() sorts the clauses (`<0.20.0,>=0.16.0`); a reader compares the page
    # with the registry file, so the page, the summary and the receipts say it as written.
    from patchlane.sweep.receipts import build_receipt
    from patchlane.sweep.reproduce import CaseResult, RunOutcome

    written = ">=0.16.0,<0.20.0,!=0.17.0"
    registry = load_registries([fake_target.write_registry(fake_target.entry(
        applies_to=f"  {written} "))])
    (entry,) = registry.entries
    assert str(entry.applies_to) == "!=0.17.0,<0.20.0,>=0.16.0"  # what was shown before
    assert entry.applies_to_shown == written
    run = RunDir.create(tmp_path / "run", {"run_id": "run"})
    cid = case_id(entry.id, "cpu", 1, Mode.WITHOUT)
    result = CaseResult(entry.id, Mode.WITHOUT, "cpu", 1, RunOutcome.FAIL, "bug shows")
    receipt = build_receipt(run_id="run", case_id=cid, entry=entry, result=result,
                            started="s", finished="f", header={})
    assert receipt["provenance"]["applies_to"] == written
    write_reports(run, [VerdictRow(entry.id, "cpu", 1, Verdict.GUARDING, "fails without")],
                  registry=registry)
    page = (run.path / "report.html").read_text()
    assert '<code class="gate">&gt;=0.16.0,&lt;0.20.0,!=0.17.0</code>' in page
    assert "&lt;0.20.0,&gt;=0.16.0" not in page
    assert f"`{written}`" in (run.path / "summary.md").read_text()
    assert load_index(run.path).entries[entry.id]["applies_to"] == written
