"""Which release-matrix sets this suite run sweeps on this interpreter, and their releases
installed ahead of the tests (``python -m tests.releases.matrix_sets``).

``scripts/test`` runs the second interpreter's tests after the first's on a machine with fewer
than 4 CPUs (CI has 2). There the second interpreter's release sets (a torch with its CUDA
libraries, 5.3 GB from a 3 GB download, and the megatron-core releases) used to be installed by
the first matrix test that needed each, a worker waiting on the download meanwhile. The script
installs them in the background while the first interpreter's tests run instead: into the same
cache, under the same lock, so a test that comes to a release still being installed waits for
it and then finds it complete, and one whose install failed here installs it itself (and says
why it could not)."""

from __future__ import annotations

import os
import sys

from patchlane.releases.matrix import MatrixSet, install_dir, interpreter, load_matrix

from .conftest import CACHE, ROOT


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
    """Install every release the sets swept here need; exit 1 if any install failed (each
    failure is printed; the tests install it again and fail with pip's words if they must)."""
    failed = 0
    # the sets that bring a torch first: the largest download, done while the most is left
    swept = [s for s in load_matrix(ROOT / "matrix.yaml") if not_swept_here(s) is None]
    for matrix_set in sorted(swept, key=lambda s: not s.deps):
        for spec in matrix_set.install:
            try:
                where = install_dir(spec, CACHE, spec in matrix_set.deps)
            except Exception as exc:  # each failure is said; the tests decide
                print(f"{matrix_set.name}: {spec} not installed ahead: {exc}", file=sys.stderr)
                failed = 1
                continue
            print(f"{matrix_set.name}: {spec} in {where}", file=sys.stderr)
    return failed


if __name__ == "__main__":
    sys.exit(main())
