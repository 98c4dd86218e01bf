"""``patchlane activate``: the environment-wide activation (a ``.pth`` in site-packages,
:mod:`patchlane.launch.pth`): show it, write it (``--pth``) or take it away (``--remove``)."""

from __future__ import annotations

import json
from pathlib import Path

from ..launch import pth


def run_activate(write: bool, remove: bool, folder: Path | None, as_json: bool) -> int:
    if write:
        path, changed = pth.write(folder)
        said = (f"activated: {path} (every interpreter of this environment now does `import "
                "patchlane`, through the lazy start)" if changed else
                f"already activated: {path} (unchanged)")
    elif remove:
        path, changed = pth.remove(folder)
        said = f"removed: {path}" if changed else f"not activated: no {path}; nothing to remove"
    else:
        found = pth.find()
        if as_json:
            print(json.dumps({"activations": [a.as_dict() for a in found],
                              "site_dir": str(folder or pth.site_dir())}, indent=2))
            return 0
        for activation in found:
            state = "current" if activation.current else \
                "written by another patchlane version: `patchlane activate --pth` rewrites it"
            print(f"activated: {activation.path} ({state})")
        if not found:
            print(f"not activated for the whole environment (`patchlane activate --pth` writes "
                  f"{folder or pth.site_dir()}/{pth.FILE_NAME})")
        return 0
    if as_json:
        print(json.dumps({"path": str(path), "changed": changed}))
    else:
        print(said)
    return 0


def startup_state() -> dict[str, object]:
    """How the startup runs in this environment, for ``status`` and ``doctor``: whether a
    process that imports no target takes the lazy path (and what it watches), why this
    command's own ``import patchlane`` did not if it did not, and the ``.pth`` activations."""
    from ..lazy import arm

    why_not, watching = arm.check()
    return {"lazy": why_not is None, "why_not": why_not, "watching": list(watching),
            "this_process": arm.why_not(),
            "activations": [a.as_dict() for a in pth.find()]}


def startup_lines(state: dict[str, object]) -> list[str]:
    lines = []
    if state["lazy"]:
        watching = ", ".join(state["watching"]) or "nothing"  # type: ignore[arg-type]
        lines.append(f"start: lazy: a process that imports none of {watching} loads only the "
                     "lazy start's watch list; the first import of one of them loads the startup")
    else:
        lines.append(f"start: loads at `import patchlane`: {state['why_not']}")
    activations = state["activations"]
    assert isinstance(activations, list)
    for activation in activations:
        note = "" if activation["current"] else \
            " (written by another patchlane version: `patchlane activate --pth` rewrites it)"
        lines.append(f"activation: {activation['path']}{note}")
    if not activations:
        lines.append("activation: none for the whole environment (`patchlane activate --pth`); "
                     "scripts `import patchlane`, `patchlane run` reaches its command's "
                     "processes")
    return lines
