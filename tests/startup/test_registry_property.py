"""Property: any registry text, valid or not, is accepted or refused with a RegistryError,
in bounded time and output (issue 14). Hypothesis builds documents from the real schema's
keys and values (so many are close to valid), plus arbitrary YAML-ish text and aliases."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import yaml

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from patchlane.common.errors import RegistryError  # noqa: E402
from patchlane.registry import parse_registry  # noqa: E402

KEYS = ["id", "kind", "summary", "target", "applies_to", "upstream", "retire_when", "owner",
        "added", "status", "overlay", "reproducer", "fingerprint", "depends_on", "requires",
        "policy", "pin", "settings", "check", "when", "notes", "evidence", "retired"]
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-5, 10**6),
                    st.text(max_size=40),
                    st.sampled_from(["source_patch", "version_floor", "active", "retired",
                                     ">=0.14,<0.18", "no", "not-needed", "2026-11-22",
                                     "patches/x.py", "../x.py", "megatron-core",
                                     "https://github.com/NVIDIA/Megatron-LM/pull/1",
                                     "sha256-v2:" + "0" * 32, "mod:Obj.attr"]))
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(KEYS), inner, max_size=5)),
    max_leaves=25)
ENTRY = st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=12)
DOCS = st.one_of(
    st.builds(lambda entries: {"schema": 1, "entries": entries}, st.lists(ENTRY, max_size=3)),
    st.dictionaries(st.sampled_from(["schema", "entries", "extra"]), VALUES, max_size=3),
    VALUES)


def check(path: Path, text: str) -> None:
    path.write_text(text)
    started = time.monotonic()
    try:
        parse_registry(path)
    except RegistryError as exc:
        assert len(str(exc)) < 5000, len(str(exc))
    assert time.monotonic() - started < 5.0


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(doc=DOCS)
def test_generated_documents_load_or_are_refused_with_a_registry_error(
        tmp_path: Path, doc: Any) -> None:
    check(tmp_path / "registry.yaml", yaml.safe_dump(doc, sort_keys=False))


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(alphabet=st.sampled_from(list("schema: 1\nentries:-[]{}&*ab'\"#!|>%@`\t")),
                    max_size=300))
def test_arbitrary_text_with_anchors_and_aliases_never_escapes(tmp_path: Path,
                                                               text: str) -> None:
    check(tmp_path / "registry.yaml", text)
