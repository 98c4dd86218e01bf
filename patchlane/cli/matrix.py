"""``patchlane matrix``: the sweep on each release set, checked against the expected verdicts."""

from __future__ import annotations

import time
from pathlib import Path

from ..errors import MatrixError
from ..evidence.matrix import interpreter, load_matrix, run_set
from ..evidence.verdicts import ACTION, Verdict
from ..exit_codes import ExitCode
from .common import table


def run_matrix_command(file: Path, names: list[str] | None, cache: Path, runs_root: Path,
                       jobs: int, timeout: float) -> ExitCode:
    sets = load_matrix(file)
    if names:
        unknown = set(names) - {s.name for s in sets}
        if unknown:
            raise MatrixError(f"{file}: no set named {sorted(unknown)}; "
                              f"known: {[s.name for s in sets]}; fix: --set NAME with one of "
                              "those, or add the set to the file")
        sets = [s for s in sets if s.name in names]
    rows, failed = [], 0
    asks: list[tuple[str, Verdict, str]] = []
    for matrix_set in sets:
        if not matrix_set.runs_here():
            rows.append([matrix_set.name, "skipped", "-",
                         f"needs Python {' or '.join(matrix_set.python)} (this is "
                         f"{interpreter()}): run `PATCHLANE_PY={matrix_set.python[0]} "
                         "./scripts/matrix`", "-", "-"])
            continue
        started = time.monotonic()
        result = run_set(matrix_set, cache=cache, runs_root=runs_root, jobs=jobs,
                         timeout=timeout)
        failed += not result.ok
        asks += [(matrix_set.name, v, entry_id) for entry_id, got in result.verdicts.items()
                 for v in sorted(set(got) & {Verdict.STILL_AFFECTED, Verdict.UPSTREAM_FIXED})]
        got = "; ".join(f"{k}: {','.join(sorted({verdict.value for verdict in v}))}"
                        for k, v in result.verdicts.items())
        rows.append([matrix_set.name, "ok" if result.ok else "MISMATCH", got,
                     "; ".join(result.mismatches) or "-", f"{time.monotonic() - started:.0f}s",
                     str(result.run_dir)])
    print(table(["SET", "RESULT", "VERDICTS", "MISMATCHES", "TIME", "RUN DIR"], rows, width=70))
    for name, verdict, entry_id in asks:
        print(f"{verdict.value}: {entry_id} in {name}: {ACTION[verdict]}")
    return ExitCode.MATRIX_MISMATCH if failed else ExitCode.OK
