"""A ledger entry's ``when.installed`` scope reads a source checkout's version the way a
source patch's gate does: a triton tree first on ``sys.path`` (no wheel metadata of its own)
is in or out of the numpy pin's ``triton < 3.7`` by the version it declares, not by the
installed wheel it shadows. The tree is a stand-in: this tests patchlane's own version
resolution, never upstream behaviour."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import json
from patchlane.deciding.ledger import installed_outside
from patchlane.registry import load_registries
entry = load_registries([{registry!r}]).get("numpy_pin_triton_interpreter")
import triton  # the pin's hook runs once triton is imported: the tree is what it sees
print(json.dumps([[name, gate.found, gate.reason] for name, _, gate in
                  installed_outside(entry.when)]))
"""


def _outside(tree_version: str, tmp_path: Path) -> list[list[str]]:
    tree = tmp_path / f"tree-{tree_version}"
    (tree / "triton").mkdir(parents=True)
    (tree / "triton" / "__init__.py").write_text(f'__version__ = "{tree_version}"\n')
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), str(ROOT)]),
           "PATCHLANE_DISABLE": "all"}
    out = subprocess.run([sys.executable, "-c",
                          PROBE.format(registry=str(ROOT / "registry.yaml"))],
                         env=env, capture_output=True, text=True, timeout=120, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(("version", "inside"), [("3.6.0", True), ("3.7.0", False)])
def test_when_installed_reads_the_tree_version(version: str, inside: bool,
                                               tmp_path: Path) -> None:
    outside = _outside(version, tmp_path)
    if inside:
        assert outside == [], outside
    else:
        [(name, found, reason)] = outside
        assert (name, found) == ("triton", version)
        assert "source tree" in reason and f"tree-{version}" in reason, reason
