"""``patchlane fingerprint ID``: the current fingerprint of the target, to record deliberately."""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import inspect
import pkgutil
import sys
import types
from pathlib import Path
from types import ModuleType

from ..common.errors import StrictModeError, UsageError
from ..common.files import read_regular
from ..common.versions import parse_version
from ..installed import fingerprint
from ..installed.gates import resolve_version
from ..registry import Entry
from .common import import_for_output, one_entry


def run_fingerprint(entry_id: str, source: Path | None = None, record: bool = False) -> int:
    entry = one_entry(entry_id)[1]
    if entry.fingerprint is None or not entry.target.module or not entry.target.qualname:
        # Asked of an entry that has nothing to fingerprint: the request, not an overlay, is
        # wrong.
        raise UsageError(f"{entry_id}: a {entry.kind.value} entry has no source fingerprint; "
                         "only a source_patch with a target object has one")
    qualnames = entry.fingerprint.qualnames(entry.target.qualname)
    if source is not None:
        value = _from_source(source, qualnames)
        # read, not run: never record it under fingerprint.releases as if a run had seen it
        label = f"{source} (read from source: nothing ran)"
    else:
        try:
            module = import_for_output(entry.target.module)
        except StrictModeError:
            # Strict mode refused the import (drift is exactly when a maintainer runs this):
            # read the installed module's source instead of importing it.
            spec = importlib.util.find_spec(entry.target.module)
            if spec is None or spec.origin is None:
                raise
            value = fingerprint.compute_from_source(
                Path(spec.origin).read_text(encoding="utf-8"), qualnames)
            where = f"read from {spec.origin}: the import was refused"
        else:
            value = fingerprint.compute(module, qualnames)
            where = f"imported from {module.__file__}"
        version, version_source = resolve_version(entry.target.distribution, module=None,
                                                  version_from=entry.target.version_from)
        label = f"{entry.target.distribution} {version} ({version_source}; {where})"
    if source is not None:
        version, version_source = None, "source"
    recorded = value in entry.fingerprint.sha256
    print(value)
    if record:
        # From an installed release it is that release's value, recorded under it as well;
        # read from a file it is recorded in sha256 alone (nothing ran: no release claims it).
        # Under its public release, as `patchlane new` records it: the registry refuses a
        # local label (2.13.0+cu128 is a build of 2.13.0, and a label does not order)
        parsed = parse_version(version) if source is None and version is not None else None
        release = (parsed.public if parsed is not None else version) if source is None else None
        note = (f"{version} ({version_source})" if release is not None
                else f"read from {source.name if source else '?'}, not run")
        _record(entry, release, value, note)
        print(f"# {label}: recorded in {entry.source} (fingerprint.sha256"
              + (f" and fingerprint.releases[{release!r}])" if release else ")"))
        return 0
    print(f"# {label}: "
          + ("matches the registry" if recorded else
             "NOT in the registry: review the upstream change and the reproducer, then record "
             f"it with `patchlane fingerprint {entry_id} --record`"))
    return 0


def _record(entry: Entry, release: str | None, value: str, note: str) -> None:
    """Write ``value`` into the entry's block, in place, under the registry's edit lock; every
    other byte of the file kept, the result validated before it replaces the file."""
    from ..registry.editor import (
        editing,
        entry_block,
        record_fingerprints,
        stored_lines,
        write_validated,
    )

    def refused(message: str) -> UsageError:
        return UsageError(f"fingerprint {entry.id} --record: {entry.source}: {message}")

    with editing(entry.source, refused) as raw:
        stored = stored_lines(raw)
        start, end, indent = entry_block(stored.lines, entry.id, entry.source, refused)
        record_fingerprints(stored.lines, start, end, indent + 2, stored.newline,
                            [(release, value, note)], refused)
        write_validated(entry.source, stored.text())


def _from_source(source: Path, qualnames: list[str] | tuple[str, ...]) -> str:
    try:
        text = read_regular(source).decode("utf-8")  # a FIFO: refused, not waited on
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"--source {source}: cannot read it as Python source ({exc}); fix: "
                         "name the .py file of the release (UTF-8 text)") from None
    try:
        return fingerprint.compute_from_source(text, qualnames)
    except SyntaxError as exc:
        raise UsageError(f"--source {source}: not Python source ({exc.msg}, line "
                         f"{exc.lineno}); fix: name the .py file of the release, not a diff "
                         "or another file") from None
    except LookupError as exc:
        raise UsageError(f"{source}: {str(exc).partition(': ')[2]}; fix: name a function, "
                         "class or method this file defines") from None


_IN_C = (types.BuiltinFunctionType, types.MethodDescriptorType, types.WrapperDescriptorType,
         types.MethodWrapperType, types.ClassMethodDescriptorType, types.GetSetDescriptorType,
         types.MemberDescriptorType)
"""Callables and descriptors implemented in C: no Python source to fingerprint."""


def _closest(name: str, names: list[str]) -> str:
    close = difflib.get_close_matches(name, names, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _import_target(target: str, module_name: str) -> ModuleType:
    """``module_name`` imported; a module that is not there is a usage error with the closest
    module that is (a typo in ``--object``), never a traceback."""
    try:
        return import_for_output(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or module_name
        if module_name != missing and not module_name.startswith(missing + "."):
            raise UsageError(f"--object {target}: importing {module_name} failed: {exc} (a "
                             "module it needs is not installed here); fix: install it, or read "
                             "the file with --source FILE") from None
        parent, _, _ = missing.rpartition(".")
        known: list[str] = []
        if not parent:  # the top-level modules on sys.path
            known = [m.name for m in pkgutil.iter_modules()] + list(sys.builtin_module_names)
        else:
            try:
                path = importlib.import_module(parent).__path__
            except (ImportError, AttributeError):
                path = None  # the parent is missing too, or is no package: no suggestion
            if path is not None:
                known = [f"{parent}.{m.name}" for m in pkgutil.iter_modules(path)]
        raise UsageError(f"--object {target}: no module named {missing!r}"
                         f"{_closest(missing, known)}; fix: check the spelling (MODULE:QUALNAME, "
                         "e.g. megatron.core.rerun_state_machine:RerunStateMachine.state_dict)"
                         ) from None


def _fingerprintable(target: str, module: ModuleType, qualname: str) -> None:
    """Raise a usage error unless ``qualname`` in ``module`` is a target some shape carries
    (:mod:`patchlane.targets`) with Python source: a typo names the closest attribute there
    is."""
    obj: object = module
    where = module.__name__
    for part in qualname.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise UsageError(f"--object {target}: {where} has no attribute {part!r}"
                             f"{_closest(part, dir(obj))}; fix: check the spelling") from None
        where = f"{where}.{part}" if where != module.__name__ else f"{where}:{part}"
    from ..targets import Refused, resolve

    try:
        shape = resolve(module, qualname).shape
    except Refused as exc:
        raise UsageError(f"--object {target}: {exc}") from None
    inner = inspect.unwrap(obj) if callable(obj) else obj
    if shape.name in ("function", "method") and isinstance(inner, _IN_C):
        raise UsageError(f"--object {target}: a {type(inner).__name__}, implemented in C: it has "
                         "no Python source to fingerprint; fix: name the Python function or "
                         "method that calls it")


def run_fingerprint_object(target: str, source: Path | None = None) -> int:
    """``patchlane fingerprint --object MODULE:QUALNAME``: no registry is read, so a new entry
    (which the registry refuses until it records a value) can get its first one."""
    module_name, sep, qualname = target.partition(":")
    if not sep or not module_name or not qualname:
        raise UsageError(f"--object: expected MODULE:QUALNAME, found {target!r}; e.g. "
                         "megatron.core.rerun_state_machine:RerunStateMachine.state_dict")
    if source is not None:
        value = _from_source(source, [qualname])
        label = f"{source} (read from source: nothing ran)"
    else:
        module = _import_target(target, module_name)
        _fingerprintable(target, module, qualname)
        try:
            value = fingerprint.compute(module, [qualname])
        except (OSError, TypeError) as exc:  # a class built in C, a module shipped as .pyc
            raise UsageError(f"--object {target}: it has no Python source to fingerprint "
                             f"here ({exc}); fix: read the file with --source FILE") from None
        label = f"{target} imported from {module.__file__}"
    print(value)
    print(f"# {label}: record it under the entry's fingerprint.sha256 (and fingerprint.releases "
          "for the release that ran)")
    return 0
