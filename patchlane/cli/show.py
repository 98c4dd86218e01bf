"""``patchlane show ID``: the registry entry, resolved, plus its decision, taken as ``status``
takes it (the target imported unless ``--no-import``), so the two always agree."""

from __future__ import annotations

import enum

import patchlane

from .common import one_entry


def run_show(entry_id: str, import_target: bool = True) -> int:
    current, entry = one_entry(entry_id)
    if import_target:
        from .status import decide_now

        decide_now(current, [entry])
    rows: list[tuple[str, object]] = [
        ("id", entry.id), ("kind", entry.kind.value), ("status", entry.status.value),
        ("summary", entry.summary), ("owner", entry.owner), ("added", entry.added),
        ("target", entry.target.object_path or entry.target.distribution),
        ("target.shape", entry.target.shape or "-"),
        ("distribution", entry.target.distribution), ("applies_to", entry.applies_to),
        ("upstream.issue", entry.upstream.issue), ("upstream.pr", entry.upstream.pr),
        ("upstream.discussion", entry.upstream.discussion),
        ("upstream.forwarded", entry.upstream.forwarded),
        ("upstream.applied_upstream", entry.upstream.applied_upstream),
        ("upstream.draft", entry.upstream.draft),
        ("depends_on", ", ".join(entry.depends_on) or None),
        ("retire_when.release", entry.retire_when.release),
        ("retire_when.probe", entry.retire_when.probe),
        ("overlay", entry.overlay), ("reproducer", entry.reproducer),
        ("registry", entry.source),
    ]
    if entry.fingerprint is not None:
        rows += [("fingerprint.policy", entry.fingerprint.policy.value),
                 ("fingerprint.covers", ", ".join(entry.fingerprint.covers) or "-"),
                 ("fingerprint.sha256", ", ".join(entry.fingerprint.sha256))]
    if entry.spec is not None:
        for key, value in entry.spec._asdict().items():
            rows.append((key, value.value if isinstance(value, enum.Enum) else value))
    for key, value in (("notes", entry.notes), ("evidence", entry.evidence),
                       ("retired", entry.retired)):
        if value is not None:
            rows.append((key, value))
    found = next(e for e in patchlane.report()["entries"] if e["id"] == entry_id)
    decision = found["decision"]
    rows += [("decision", decision["outcome"] if decision else "-"),
             ("reason", decision["reason"] if decision else "-")]
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        text = "-" if value is None else _shown(value)
        print(f"{key.ljust(width)}  {text}")
    return 0


SHOW_LIMIT = 4000
"""Characters of one free-text value `show` prints: notes and evidence are user input."""


def _shown(value: object) -> str:
    if isinstance(value, (list, dict)) and len(value) > 200:
        return f"<{type(value).__name__} of {len(value)} items; see the registry file>"
    text = str(value)
    if len(text) > SHOW_LIMIT:
        return f"{text[:SHOW_LIMIT]}… ({len(text) - SHOW_LIMIT} more characters in the registry)"
    return text
