"""Which release-matrix sets this suite run sweeps on this interpreter, and the releases of
every set it can run installed ahead of the tests (``python -m tests.releases.matrix_sets``).

Those releases (a torch with its CUDA libraries, 5.3 GB from a 3 GB download, and the
megatron-core and liger-kernel releases) used to be installed by the first test that needed
each (the matrix, the fingerprints, a release's fixture), a pytest worker waiting on the
download meanwhile. ``scripts/test`` runs this instead while the lint and the other set-ups run
(the first interpreter) or while the first interpreter's tests run (the second, on fewer than 4
CPUs, where the two take turns): into the same cache, under the same lock, so a test that
comes to a release still being installed waits for it and then finds it complete, and one whose
install failed here installs it itself (and says why it could not)."""

from __future__ import annotations

import os
import sys

from patchlane.releases.matrix import MatrixSet, install_dir, interpreter, load_matrix

from .conftest import CACHE, ROOT

# The megatron-core releases tests/releases/test_cpu_checkpointing.py steps through. Python 3.11
# installs megatron-core up to 0.16 (0.17 and newer ship cp312 wheels only); the 3.12 suite runs
# the installed 0.19.2 and the matrix's 0.17.1.
CHECKPOINTING_RELEASES = (
    ["0.9.0", "0.10.0", "0.11.0", "0.12.0", "0.13.1", "0.14.0", "0.15.3", "0.16.1"]
    if sys.version_info[:2] == (3, 11) else ["0.17.1", "installed"])


def home_interpreter(matrix_set: MatrixSet) -> str | None:
    """The one interpreter of this suite run (``PATCHLANE_TEST_PYTHONS``, set by
    scripts/test) that sweeps ``matrix_set``: the newest it allows, the nightly's (3.12 on the
    H200 boxes). None when pytest runs alone: the set runs wherever it may."""
    from packaging.version import Version

    pythons = os.environ.get("PATCHLANE_TEST_PYTHONS", "").split()
    allowed = [p for p in pythons if not matrix_set.python or p in matrix_set.python]
    return max(allowed, key=Version) if allowed else None


def not_swept_here(matrix_set: MatrixSet) -> str | None:
    """Why this interpreter's test run does not sweep ``matrix_set`` (None: it does)."""
    if not matrix_set.runs_here():
        return (f"{matrix_set.name} needs Python {matrix_set.python}: it runs in the other "
                "interpreter's suite (scripts/test runs both)")
    home = home_interpreter(matrix_set)
    if home is not None and home != interpreter():
        return (f"{matrix_set.name} runs on every interpreter; this suite run sweeps it once, "
                f"with Python {home} (`patchlane matrix` on each interpreter sweeps it there)")
    if "cpu" not in matrix_set.lanes:
        return (f"{matrix_set.name} is swept on {list(matrix_set.lanes)}: the prepared GPU "
                "check runs it (gpu-runs/ holds what it found)")
    return None


def main() -> int:
    """Install the releases of every set this interpreter can run (the sets it sweeps, and the
    releases whose fingerprints its tests check); exit 1 if any install failed (each failure is
    printed; the tests install it again and fail with pip's words if they must)."""
    # the sets that bring a torch first: the largest download, done while the most is left
    here = [s for s in load_matrix(ROOT / "matrix.yaml") if s.runs_here()]
    wanted = [(s.name, spec, spec in s.deps) for s in sorted(here, key=lambda s: not s.deps)
              for spec in s.install]
    wanted += [("checkpointing", f"megatron-core=={release}", False)
               for release in CHECKPOINTING_RELEASES if release != "installed"]
    failed = 0
    for name, spec, deps in wanted:
        try:
            where = install_dir(spec, CACHE, deps)
        except Exception as exc:  # each failure is said; the tests decide
            print(f"{name}: {spec} not installed ahead: {exc}", file=sys.stderr)
            failed = 1
        else:
            print(f"{name}: {spec} in {where}", file=sys.stderr)
    return failed


if __name__ == "__main__":
    sys.exit(main())
