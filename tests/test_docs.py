"""The documentation against what it documents: the entries table against registry.yaml, links
that resolve, the quick start CI runs, and no tracker numbers of this project in product text
(they mean nothing to a reader, or to upstream reading a draft)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted((ROOT / "docs").glob("*.md"))
PRODUCT_TEXT = [ROOT / "README.md", *DOCS, ROOT / "registry.yaml", ROOT / "benchmarks" /
                "README.md", *sorted((ROOT / "drafts").glob("*.md")),
                *sorted((ROOT / "patches").glob("*.py"))]


def entries_table() -> dict[str, str]:
    """The rows of the "## Entries" table (the GPU section's rows name entries too)."""
    text = (ROOT / "docs" / "entries.md").read_text()
    text = text[text.index("## Entries"):]
    text = text[:text.index("\n## ", 1)]
    rows = {}
    for line in text.splitlines():
        match = re.match(r"\| `([a-z0-9_]+)` \|", line)
        if match:
            rows[match.group(1)] = line
    return rows


def registry_entries() -> list[dict[str, object]]:
    entries: list[dict[str, object]] = yaml.safe_load((ROOT / "registry.yaml").read_text())[
        "entries"]
    return entries


@pytest.mark.parametrize("entry", registry_entries(), ids=lambda e: str(e["id"]))
def test_every_entry_has_a_true_row(entry: dict[str, object]) -> None:
    row = entries_table().get(str(entry["id"]))
    assert row is not None, f"docs/entries.md has no row for {entry['id']}"
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert cells[1] == entry["kind"]
    for key in ("applies_to", "requires", "pin"):  # the range exactly as the registry says it
        if entry.get(key):
            assert f"`{entry[key]}`" in row, (key, entry[key], row)
    target = entry.get("target") or {}
    assert isinstance(target, dict)
    if entry["kind"] == "source_patch":
        shown = cells[2].strip("`").lstrip("…")
        assert str(target["object"]).endswith(shown), (target["object"], shown)
    upstream = entry["upstream"]
    assert isinstance(upstream, dict)
    for key in ("issue", "pr"):
        if upstream.get(key):
            assert f"({upstream[key]})" in row, (key, upstream[key])


def test_the_table_lists_only_registry_entries() -> None:
    assert sorted(entries_table()) == sorted(str(e["id"]) for e in registry_entries())


@pytest.mark.parametrize("path", PRODUCT_TEXT, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_issue_numbers_of_this_project(path: Path) -> None:
    # upstream references keep their repository or a '#': "issue [#4378](...)",
    # "Megatron-LM #4448"; ours were bare ("issue 12", "(issue 13 part 4)")
    found = re.findall(r"\b[Ii]ssues? \d+\b|\b[Ii]ssue \d+'s\b", path.read_text())
    assert not found, f"{path.relative_to(ROOT)}: {found}"


@pytest.mark.parametrize("path", [ROOT / "README.md", *DOCS], ids=lambda p: p.name)
def test_relative_links_resolve(path: Path) -> None:
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", path.read_text()):
        if "://" in target:
            continue
        assert (path.parent / target).exists(), f"{path.name}: {target}"


def test_the_readme_keeps_the_quick_start_ci_runs() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "./scripts/sweep   #" in readme and "./scripts/test    #" in readme
    assert "CI runs `.ci/run`, which is `./scripts/test`." in readme
    ci = ROOT / ".ci" / "run"
    if ci.exists():  # a checkout (an sdist ships no .ci/)
        assert "exec ./scripts/test" in ci.read_text()
    assert "| Python 3.11 | `.venv` |" in readme and "| Python 3.12 (NGC containers) |" in readme
