"""LANES and WORLD_SIZES as the sweep reads them from a reproducer (by AST, without importing
it): every way of writing them either counts or is refused with a message that says where and
how to write it, never silently replaced by the defaults (cpu, world size 1)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from patchlane.common.errors import PatchlaneError, ReproducerError
from patchlane.common.exit_codes import ExitCode
from patchlane.registry import Entry, load_registries
from patchlane.sweep.reproduce import read_spec

from ..conftest import FakeTarget


def entry_with(fake: FakeTarget, source: str) -> Entry:
    (fake.root / "reproducers" / f"{fake.entry_id}.py").write_text(source)
    return load_registries([fake.write_registry()]).entries[0]


def test_annotated_assignments_count(fake_target: FakeTarget) -> None:
    entry = entry_with(fake_target, "LANES: tuple[str, ...] = ('cpu', 'cuda')\n"
                                    "WORLD_SIZES: tuple[int, ...] = (1, 2)\n")
    spec = read_spec(entry)
    assert spec.lanes == ("cpu", "cuda")
    assert spec.world_sizes == (1, 2)


def test_a_bare_annotation_is_no_declaration(fake_target: FakeTarget) -> None:
    # `LANES: tuple[str, ...]` binds nothing at run time either: the defaults hold
    entry = entry_with(fake_target, "LANES: tuple[str, ...]\nWORLD_SIZES = (2,)\n")
    assert read_spec(entry).lanes == ("cpu",)
    assert read_spec(entry).world_sizes == (2,)


def test_chained_assignment_counts(fake_target: FakeTarget) -> None:
    entry = entry_with(fake_target, "LANES = SUPPORTED = ('cuda',)\n")
    assert read_spec(entry).lanes == ("cuda",)


@pytest.mark.parametrize(("source", "name", "found"), [
    ("CUDA = ('cuda',)\nLANES = CUDA\n", "LANES", "`CUDA`, not a literal"),
    ("LANES: tuple[str, ...] = tuple(['cpu'])\n", "LANES", "`tuple(['cpu'])`, not a literal"),
    ("WORLD_SIZES = tuple(range(1, 3))\n", "WORLD_SIZES", "not a literal"),
    ("LANES = 'cpu'\n", "LANES", "'cpu'"),
    ("WORLD_SIZES = ('2',)\n", "WORLD_SIZES", "('2',)"),
    ("WORLD_SIZES = (1.5,)\n", "WORLD_SIZES", "(1.5,)"),
    ("WORLD_SIZES = (True,)\n", "WORLD_SIZES", "(True,)"),
    ("LANES, WORLD_SIZES = ('cpu',), (1,)\n", "LANES", "`(LANES, WORLD_SIZES) = ...`"),
])
def test_what_cannot_be_read_is_refused_clearly(fake_target: FakeTarget, source: str,
                                                name: str, found: str) -> None:
    entry = entry_with(fake_target, source)
    with pytest.raises(ReproducerError) as caught:
        read_spec(entry)
    message = str(caught.value)
    assert isinstance(caught.value, PatchlaneError)  # a message and exit 7, not exit 70
    assert caught.value.exit_code is ExitCode.REPRODUCER_ERROR
    assert str(entry.reproducer) in message and "line " in message  # the file, the line
    assert f"{name}: found " in message and found in message  # the name, what was found
    assert "expected a literal tuple of" in message  # what is expected
    assert "fix: " in message


def test_reproduce_reports_it_as_a_message_not_a_traceback(fake_target: FakeTarget) -> None:
    entry_with(fake_target, "LANES = SUPPORTED\n")
    env = dict(os.environ, PATCHLANE_DEFAULT_REGISTRY="0",
               PATCHLANE_REGISTRY=str(fake_target.registry),
               PYTHONPATH=os.pathsep.join([str(fake_target.root),
                                           str(Path(__file__).resolve().parents[2])]))
    env.pop("PATCHLANE_STRICT", None)
    out = subprocess.run([sys.executable, "-m", "patchlane.cli.main", "reproduce",
                          fake_target.entry_id], capture_output=True, text=True, env=env,
                         timeout=120)
    assert out.returncode == ExitCode.REPRODUCER_ERROR, out.stderr
    assert "Traceback" not in out.stderr
    assert "LANES: found `SUPPORTED`, not a literal" in out.stderr


def test_requires_names_modules_and_finds_the_missing(fake_target: FakeTarget) -> None:
    entry = entry_with(fake_target, "REQUIRES = ('os', 'no_such_module_xyz.sub')\n")
    spec = read_spec(entry)
    assert spec.requires == ("os", "no_such_module_xyz.sub")
    assert spec.missing() == ["no_such_module_xyz.sub"]


def test_requires_refuses_what_is_not_a_module_name(fake_target: FakeTarget) -> None:
    entry = entry_with(fake_target, "REQUIRES = ('liger-kernel',)\n")
    with pytest.raises(ReproducerError, match="REQUIRES: found \\['liger-kernel'\\]"):
        read_spec(entry)
