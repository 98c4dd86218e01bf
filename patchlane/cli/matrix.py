"""``patchlane matrix``: the sweep on each release set, checked against the expected verdicts;
``patchlane wheelhouse``: what an air-gapped GPU box needs to run it."""

from __future__ import annotations

import time
from collections.abc import Collection, Sequence
from pathlib import Path

from ..common.errors import MatrixError, UnknownEntryError
from ..common.exit_codes import ExitCode
from ..releases.matrix import MatrixSet, interpreter, load_matrix, run_set
from ..runs.verdicts import ACTION, MEANING, Verdict
from ..sweep.reproduce import Lane
from .common import table, use_wheelhouse


def matrix_file(given: Path | None) -> Path:
    """``--file``, else ``./matrix.yaml`` (a team's own, or the checkout's), else the release
    matrix patchlane ships beside its catalog (``_bundle/matrix.yaml`` in the wheel): the
    matrix runs from the installed package with no checkout."""
    if given is not None:
        return given
    here = Path("matrix.yaml")
    if here.is_file():
        return here
    from .. import startup

    return startup.default_registry_path().with_name("matrix.yaml")


def _chosen(file: Path, names: list[str] | None,
            lanes: Collection[Lane]) -> list[MatrixSet]:
    """The sets ``--set`` names (each must exist), else those whose lanes hold one of
    ``lanes``."""
    sets = load_matrix(file)
    if names:
        unknown = set(names) - {s.name for s in sets}
        if unknown:
            raise MatrixError(f"{file}: no set named {sorted(unknown)}; "
                              f"known: {[s.name for s in sets]}; fix: --set NAME with one of "
                              "those, or add the set to the file")
        return [s for s in sets if s.name in names]
    return [s for s in sets if set(lanes) & set(s.lanes)]


def run_wheelhouse_command(out: Path, file: Path | None, names: list[str] | None,
                           lanes: list[Lane] | None, pythons: list[str] | None,
                           platforms: list[str] | None, torch_builds: bool = False) -> ExitCode:
    from ..releases import wheelhouse
    from .common import decider

    file = matrix_file(file)
    lanes = lanes or ["cpu", "cuda"]
    sets = _chosen(file, names, lanes)
    pythons = list(dict.fromkeys(pythons or ["3.12"]))
    root = Path(__file__).resolve().parents[2]
    project = root if (root / "pyproject.toml").is_file() else None
    houses = wheelhouse.prepare_each(
        out, pythons, sets=sets, platforms=platforms or wheelhouse.PLATFORMS,
        project_root=project, matrix_file=file, registry=decider().registry,
        torch_builds=torch_builds,
        constraints_for=lambda python: _constraints(root, python))
    for python, house in houses.items():
        rows = [[name, " ".join(specs), "in"] for name, specs in house.sets.items()]
        rows += [["(environment)", " ".join(house.environment), "in"]] if house.environment \
            else []
        extra = sorted(set(house.releases) - {s for v in house.sets.values() for s in v})
        rows += [["(bad sides)", " ".join(extra), "in"]] if extra else []
        rows += [[name, "-", f"left out: {why}"] for name, why in house.skipped.items()]
        print(table(["SET", "RELEASES", "WHEELHOUSE"], rows, width=70))
        print(f"{house.root}: {len(list(house.root.glob('*.whl')))} wheels for "
              f"cp{python.replace('.', '')} ({house.project}, {len(house.support)} support)")
    print(f"on a machine with no package index: `patchlane sweep --wheelhouse {out}`, "
          f"`patchlane matrix --wheelhouse {out}`"
          + (f", or the GPU check: `{out}/gpu-check {out}`" if len(houses) == 1
             and (out / "gpu-check").is_file() else ""))
    return ExitCode.OK


def _constraints(root: Path, python: str) -> Path | None:
    """The checkout's pins for ``python``'s support wheels; None from the installed package."""
    path = root / "constraints" / ("ci.txt" if python == "3.11" else "py312.txt")
    return path if path.is_file() else None


def run_matrix_command(file: Path | None, names: list[str] | None, cache: Path,
                       runs_root: Path,
                       jobs: int, timeout: float, *, lane: Lane = "cpu",
                       wheelhouse: Path | None = None,
                       rank_start: str | None = None) -> ExitCode:
    if wheelhouse is not None:
        house = use_wheelhouse(wheelhouse)
        if file is None:  # the kit's own matrix: what its wheels were chosen from
            file = house.root / "matrix.yaml"
        missing = set(names or ()) - set(house.sets)
        if missing:
            raise MatrixError(f"{wheelhouse}: holds no releases for sets {sorted(missing)} "
                              f"(it has {sorted(house.sets)}); fix: prepare it with "
                              "`patchlane wheelhouse DIR --set NAME`")
        # No --set: the sets the wheelhouse holds, of this lane
        names = names or [s.name for s in _chosen(matrix_file(file), None, [lane])
                          if s.name in house.sets]
        if not names:
            raise MatrixError(f"{wheelhouse}: holds no set of the {lane} lane (it has "
                              f"{sorted(house.sets)}); fix: prepare it with `patchlane "
                              f"wheelhouse DIR --lane {lane}`")
    file = matrix_file(file)
    sets = _chosen(file, names, [lane])
    all_sets = load_matrix(file)  # the advice names every set where an entry still guards
    rows, failed = [], 0
    asks: list[tuple[str, Verdict, str]] = []
    not_run: list[str] = []
    unverified = 0  # sets whose every row the lane kept out: nothing was compared
    for matrix_set in sets:
        if not matrix_set.runs_here():
            rows.append([matrix_set.name, "skipped", "-",
                         f"needs Python {' or '.join(matrix_set.python)} (this is "
                         f"{interpreter()}): run `PATCHLANE_PY={matrix_set.python[0]} "
                         "./scripts/matrix`", "-", "-"])
            continue
        started = time.monotonic()
        result = run_set(matrix_set, cache=cache, runs_root=runs_root, jobs=jobs,
                         timeout=timeout, lanes=[lane], wheelhouse=wheelhouse,
                         rank_start=rank_start)
        failed += not result.ok
        # What a maintainer is asked to act on: the verdicts of the report's maintainer section.
        asks += [(matrix_set.name, v, entry_id) for entry_id, got in result.verdicts.items()
                 for v in sorted(v for v in set(got) if MEANING[v].section == "maintainer")]
        got = "; ".join(f"{k}: {','.join(sorted({verdict.value for verdict in v}))}"
                        for k, v in result.verdicts.items())
        nothing = result.ok and not result.verdicts and bool(result.not_run)
        unverified += nothing
        rows.append([matrix_set.name, "NOT RUN" if nothing else "ok" if result.ok else
                     "MISMATCH", got,
                     "; ".join(result.mismatches) or "-", f"{time.monotonic() - started:.0f}s",
                     str(result.run_dir)])
        not_run += [f"{matrix_set.name}: {line}" for line in result.not_run]
    print(table(["SET", "RESULT", "VERDICTS", "MISMATCHES", "TIME", "RUN DIR"], rows, width=70))
    for line in not_run:
        print(f"not run on this {lane} lane (no verdict to compare): {line}")
    for name, verdict, entry_id in asks:
        if verdict is Verdict.UPSTREAM_FIXED:
            print(f"{verdict.value}: {entry_id} in {name}: "
                  + _fixed_advice(entry_id, name, all_sets))
            continue
        print(f"{verdict.value}: {entry_id} in {name}: {ACTION[verdict]}")
    if failed:
        return ExitCode.MATRIX_MISMATCH
    if unverified:
        print(f"{unverified} set(s) not run at all on this {lane} lane: nothing was compared")
        return ExitCode.REPRODUCER_ERROR
    return ExitCode.OK


def _fixed_advice(entry_id: str, fixed_in: str, sets: Sequence[MatrixSet]) -> str:
    """The advice for an upstream-fixed entry: the matrix's other sets where it still guards
    are releases its gate admits and someone runs."""
    from .. import startup
    from .common import upstream_fixed_advice

    guarding = [s.name for s in sets
                if s.name != fixed_in and s.expect.get(entry_id) is Verdict.GUARDING]
    try:
        entry = startup.current().registry.get(entry_id)
    except UnknownEntryError:  # an id of another registry set: the advice without the gate
        return upstream_fixed_advice(entry_id, None, None, guarding)
    return upstream_fixed_advice(entry_id, None, entry.serves, guarding,
                                 registry=entry.source)
