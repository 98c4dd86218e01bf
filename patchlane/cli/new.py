"""``patchlane new ID``: start a registry entry, its overlay and a reproducer to fill in."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

from .. import startup
from ..common.errors import PatchlaneError
from ..deciding.controls import Controls
from ..registry import KINDS, Kind
from ..registry.per_kind import new_options

if TYPE_CHECKING:  # the parser is built for every command; the module only for this one
    from ..authoring.new import Created


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "new", help="start a registry entry from the installed release: the block, an overlay "
        "that calls through, a reproducer that fails until written",
        description="Append a new entry to a registry file (every other byte stays as it "
        "was) and write its files: patches/ID.py, reproducers/ID.py (failing on purpose "
        "until written), drafts/ID.md when not forwarded, checks/ID.py for a compat gate. "
        "applies_to defaults to >=INSTALLED,<NEXT_MINOR, the fingerprint comes from the "
        "installed release. Guide: docs/adding-an-entry.md.")
    p.add_argument("id", help="the new entry's id ([a-z][a-z0-9_]{2,63}); names its files")
    p.add_argument("--kind", default=Kind.SOURCE_PATCH.value, choices=[k.value for k in Kind])
    p.add_argument("--target", metavar="MODULE:QUALNAME",
                   help="source_patch: the function or method the overlay wraps; "
                   "version_floor / packaging_pin: the module whose import runs the check")
    p.add_argument("--distribution", metavar="DIST",
                   help="the installed distribution the gate reads (default: the one that "
                   "provides the target's package)")
    p.add_argument("--version-from", metavar="MODULE:ATTR",
                   help="for code no installed distribution provides (on PYTHONPATH, a "
                   "source tree): the attribute holding its version, e.g. teamlib:__version__; "
                   "written as target.version_from, which the gate reads")
    p.add_argument("--registry", type=Path, metavar="FILE",
                   help="the registry file to append to (created when missing; default: the "
                   "checkout's registry.yaml)")
    p.add_argument("--summary", help="one line: what upstream gets wrong, what the entry "
                   "changes")
    p.add_argument("--owner", help="default: git config user.name, else 'unknown'")
    p.add_argument("--issue", metavar="URL", help="the upstream issue")
    p.add_argument("--pr", metavar="URL", help="the upstream pull request (forwarded)")
    p.add_argument("--applies-to", metavar="SPEC",
                   help="default: >=INSTALLED,<NEXT_MINOR (upper-bounded)")
    p.add_argument("--retire-release", metavar="SPEC",
                   help="retire_when.release: the releases that carry the fix")
    p.add_argument("--policy", choices=("error", "warn"),
                   help="version_floor, packaging_pin, compat_gate: what a violation does")
    # each kind's own options, as its module declares them
    for name, (option, _) in new_options().items():
        if option.repeatable:
            p.add_argument(option.flag, dest=f"kind_{name}", action="append", default=[],
                           metavar=option.metavar, help=option.help)
        else:
            p.add_argument(option.flag, dest=f"kind_{name}", metavar=option.metavar,
                           help=option.help)


def _default_registry(entry_id: str) -> Path:
    from ..authoring.new import NewEntryError

    path = startup.default_registry_path()
    if "_bundle" in path.parts:
        raise NewEntryError(entry_id, "no registry file to append to", found=str(path),
                            expected="a registry in a checkout (this one is inside the "
                            "installed patchlane package)",
                            fix="name your team's registry with --registry FILE")
    return path


def run_new(args: argparse.Namespace) -> int:
    from ..authoring.new import Request, new_entry

    registry = (args.registry or _default_registry(args.id)).resolve()
    try:
        loaded = startup.current().registry
    except PatchlaneError:
        loaded = None  # strict mode and a rejected registry: only the target file is checked
    others = {e.id: e.source for e in loaded.entries} if loaded is not None else {}
    request = Request(
        entry_id=args.id, registry=registry, kind=Kind(args.kind), target=args.target,
        distribution=args.distribution, version_from=args.version_from,
        summary=args.summary, owner=args.owner,
        issue=args.issue, pr=args.pr, applies_to=args.applies_to, policy=args.policy,
        retire_release=args.retire_release,
        options={name: tuple(value) if isinstance(value, list) else value
                 for name in new_options() if (value := getattr(args, f"kind_{name}"))})
    _report(new_entry(request, others), args.id)
    return 0


def _report(created: Created, entry_id: str) -> None:
    entry, here = created.entry, Path.cwd()

    def shown(path: Path) -> str:
        return os.path.relpath(path, here) if path.is_relative_to(here) else str(path)

    print(f"{entry_id}: appended a {entry.kind.value} entry to {shown(created.registry)}")
    for path in created.files:
        print(f"  wrote {shown(path)}")
    if created.installed is not None and created.applies_to is not None:
        print(f"  applies_to {created.applies_to}: from the installed "
              f"{created.installed.distribution} {created.installed.version}, not yet "
              "verified by runs")
    for note in created.notes:
        print(f"  note: {note}")
    loads = created.registry in {p.resolve() for p in
                                 startup.registry_paths(Controls.from_env(os.environ))}
    env = "" if loads else f"PATCHLANE_REGISTRY={shown(created.registry)} "
    if not loads:
        print(f"  note: this process does not load {shown(created.registry)}; name it in "
              "PATCHLANE_REGISTRY (as below) or `patchlane run --registry`")
    if KINDS[entry.kind].with_overlay:
        print("next:")
        print(f"  1. write reproducers/{entry_id}.py; watch it fail: "
              f"{env}patchlane reproduce {entry_id} --without-overlay")
        print(f"  2. write the fix in patches/{entry_id}.py; {env}patchlane reproduce "
              f"{entry_id} passes")
        print(f"  3. {env}patchlane sweep --only {entry_id} says guarding")
    print("  the guide: docs/adding-an-entry.md")
