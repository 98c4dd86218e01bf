"""``patchlane constraints``: the registries' version floors and packaging pins as a constraints
file pip and uv read (``pip install -c FILE``, ``uv pip install -c FILE``), so a team keeps one
source of truth: the registry, enforced at import and handed to the installer.

A floor or pin whose ``when:`` holds only in some processes (an environment variable, another
distribution's range) cannot be said as an environment marker; it is written commented out,
with its condition, rather than constraining every environment."""

from __future__ import annotations

import sys
from pathlib import Path

from ..common.files import atomic_write
from ..registry import Entry
from .common import decider

__all__ = ["constraint_lines", "run_constraints"]


def constraint_lines(entries: list[Entry]) -> list[str]:
    lines = ["# Written by `patchlane constraints` from the registries' version floors and",
             "# packaging pins: regenerate it rather than edit it.",
             "# pip install -c THIS_FILE ...   |   uv pip install -c THIS_FILE ..."]
    for entry in entries:
        requirement = getattr(entry.spec, "requirement", None)
        if not entry.active or requirement is None:  # floors and pins carry a requirement
            continue
        line = f"{entry.target.distribution}{requirement}"
        when = entry.when
        conditional = when is not None and (when.env or when.installed)
        if conditional:
            assert when is not None
            lines.append(f"# {entry.id} ({entry.kind.value}): only {when.describe()}; not a "
                         "marker pip can read, so left to the import-time check:")
            lines.append(f"# {line}")
        else:
            lines.append(f"{line}  # {entry.id} ({entry.kind.value})")
    return lines


def run_constraints(output: Path | None) -> int:
    text = "\n".join(constraint_lines(list(decider().registry.entries))) + "\n"
    if output is None:
        sys.stdout.write(text)
    else:
        atomic_write(output, text)
        print(f"wrote {output}", file=sys.stderr)
    return 0
