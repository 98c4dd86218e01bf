"""``patchlane new``: start a registry entry from the installed release, ready to fill in.

A maintainer's first minutes with a bug decide whether the entry is honest. This writes what
the registry asks for from facts it can check here, and nothing it cannot:

* the target is imported and resolved, and its first fingerprint is recorded from the
  installed release (``fingerprint.sha256`` and ``fingerprint.releases``);
* ``applies_to`` is upper-bounded, ``>=INSTALLED,<NEXT_MINOR``, with a comment saying it was
  written from the installed release and no run has verified it yet;
* upstream: the links given, else ``forwarded: "no"`` with a draft stub (``drafts/<id>.md``);
* ``patches/<id>.py`` calls straight through and its ``probe`` says False;
* ``reproducers/<id>.py`` fails on purpose until it is written, so a fresh entry is reported
  ``broken`` by the sweep and never passes (a reproducer passing without the overlay would
  call the bug fixed upstream).

Everything is checked before anything is written; then the files are created (never over an
existing one), the registry is validated with the new block in it, and only then is the
block appended, under the registry's edit lock
(:func:`patchlane.registry.editor.registry_lock`), leaving every other byte of the file as it
was. A failure at any step removes what this command created.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import difflib
import importlib
import importlib.util
import json
import math
import re
import subprocess
import textwrap
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from importlib import metadata
from pathlib import Path
from types import FunctionType, ModuleType
from typing import Any

import yaml
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion

from ..common.errors import PatchlaneError, RegistryError, StrictModeError, UsageError, described
from ..common.files import NotARegularFile, atomic_write, read_regular
from ..common.versions import parse_version, range_problem, shown, why_not_version
from ..installed import fingerprint
from ..installed.gates import import_name, installed_version, resolve_version
from ..registry import Entry, Kind, parse_registry
from ..registry.editor import registry_lock
from ..registry.kinds import KINDS
from ..registry.per_kind import PARTS, Release, new_options
from ..registry.schema import VERSION_FROM_RE
from .entries_table import add_row, docs_table

__all__ = ["Created", "NewEntryError", "Request", "new_entry", "next_minor_range"]

# The registry's id rule (patchlane.registry). Checked here before anything else because the
# id names the files this command writes: a path-like id must never reach the filesystem.
_ID = re.compile(r"[a-z][a-z0-9_]{2,63}")
_DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
# A plain YAML scalar needs no quotes when it looks like this and is not a YAML 1.1 keyword.
_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_.:/@+-]*")
_YAML_WORDS = {"y", "n", "yes", "no", "true", "false", "on", "off", "null", "~"}
_NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")

NEW_REGISTRY_HEADER = (
    "# A patchlane registry, started by `patchlane new`. Load it with\n"
    "# PATCHLANE_REGISTRY=<this file> (or `patchlane run --registry <this file>`).\n"
    "# Schema: patchlane/registry/schema.py; how to add an entry: docs/adding-an-entry.md.\n"
    "schema: 1\n"
    "entries:\n"
)


class NewEntryError(UsageError):
    """``patchlane new`` was asked for an entry it cannot write as asked. Nothing was written."""

    def __init__(self, entry_id: str, problem: str, *, found: object = None,
                 expected: str | None = None, fix: str | None = None) -> None:
        super().__init__(described(f"patchlane new {entry_id}: {problem}", found=found,
                                   expected=expected, fix=fix, echo=False))


@dataclass(frozen=True)
class Request:
    """What ``patchlane new`` was asked for (the command line, as values)."""

    entry_id: str
    registry: Path
    kind: Kind = Kind.SOURCE_PATCH
    target: str | None = None
    """``MODULE:QUALNAME`` for a source patch; a module alone for a floor or a pin."""
    distribution: str | None = None
    version_from: str | None = None
    """``MODULE:ATTR`` holding the version of code no installed distribution provides."""
    summary: str | None = None
    owner: str | None = None
    issue: str | None = None
    pr: str | None = None
    applies_to: str | None = None
    policy: str | None = None
    retire_release: str | None = None
    today: _dt.date = field(default_factory=_dt.date.today)
    options: Mapping[str, Any] = field(default_factory=dict)
    """The kind's own options by name (``requires`` of a floor, ``settings`` of a config
    entry: each kind's ``OPTIONS`` in :mod:`patchlane.registry.per_kind`)."""

    def option(self, name: str) -> Any:
        return self.options.get(name)


Installed = Release
"""The release the entry was written from (``source``: ``metadata`` or ``source tree
(<file>)``, as :func:`patchlane.installed.gates.resolve_version` says)."""


@dataclass(frozen=True)
class Created:
    """What ``patchlane new`` wrote."""

    entry: Entry
    applies_to: str | None
    """As written (a SpecifierSet would print its clauses sorted)."""
    registry: Path
    files: tuple[Path, ...]
    installed: Installed | None
    notes: tuple[str, ...]


# -- the checks before anything is written -------------------------------------------------------

_COMMON_FLAGS = {"target": "--target", "distribution": "--distribution",
                 "version_from": "--version-from",
                 "applies_to": "--applies-to", "policy": "--policy",
                 "retire_release": "--retire-release"}
"""The options whose meaning every kind shares (their use, each kind's ``new_options``)."""
_EXAMPLES = {"target": "--target megatron.core.rerun_state_machine:RerunStateMachine.state_dict",
             "distribution": "--distribution numpy"}


def _flags() -> dict[str, str]:
    """Every option's flag by name: the shared ones and each kind's own."""
    return {**_COMMON_FLAGS, **{name: option.flag for name, (option, _) in new_options().items()}}


def _given(request: Request, name: str) -> Any:
    return request.option(name) if name not in _COMMON_FLAGS else getattr(request, name)


def _check_options(request: Request) -> None:
    allowed = KINDS[request.kind].new_options
    if request.version_from and not VERSION_FROM_RE.fullmatch(request.version_from):
        raise NewEntryError(request.entry_id, "--version-from is not MODULE:ATTR",
                            found=request.version_from,
                            expected="the module and the attribute holding the version "
                            "string, e.g. teamlib:__version__ or "
                            "megatron.core.package_info:__version__",
                            fix="write it as MODULE:ATTR")
    flags = _flags()
    unknown = sorted(set(request.options) - set(flags))
    if unknown:
        raise NewEntryError(request.entry_id, f"unknown option {unknown[0]!r}", found=unknown,
                            expected=f"one of {sorted(flags)}")
    for name, flag in flags.items():
        if _given(request, name) and name not in allowed:
            kinds = [k.value for k, rules in KINDS.items() if name in rules.new_options]
            raise NewEntryError(request.entry_id, f"{flag} does not apply to a "
                                f"{request.kind.value} entry", found=flag,
                                expected=f"{flag} only with --kind {' or '.join(kinds)}",
                                fix=f"drop {flag}, or choose the kind it belongs to")
    for name in KINDS[request.kind].new_required:
        if not _given(request, name):
            option = new_options().get(name)
            example = _EXAMPLES.get(name) or (
                f"{option[0].flag} {option[0].help.partition('e.g. ')[2] or option[0].metavar}"
                if option else flags[name])
            raise NewEntryError(request.entry_id, f"a {request.kind.value} entry needs "
                                f"{flags[name]}", found="nothing",
                                expected=example, fix=f"add {example}")


def _specifier(request: Request, flag: str, text: str) -> SpecifierSet:
    try:
        spec = SpecifierSet(text)
    except InvalidSpecifier as exc:
        raise NewEntryError(request.entry_id, f"{flag} is not a PEP 440 specifier", found=text,
                            expected="a specifier such as '>=0.14,<0.18'", fix=str(exc)) from None
    if not str(spec):
        raise NewEntryError(request.entry_id, f"{flag} is empty", found=repr(text),
                            expected="at least one clause, such as '>=2.6.0'")
    problem = range_problem(spec)  # what the registry's validation would refuse, said now
    if problem:
        raise NewEntryError(request.entry_id, f"{flag} is not a usable range", found=text,
                            expected="a range some release can satisfy, such as '>=0.14,<0.18'",
                            fix=problem)
    return spec


def _url(request: Request, flag: str, text: str | None) -> str | None:
    if text is not None and not text.startswith(("https://", "http://")):
        raise NewEntryError(request.entry_id, f"{flag} is not a URL", found=text,
                            expected="an http(s) URL such as "
                            "https://github.com/NVIDIA/Megatron-LM/issues/4378")
    return text


def _find(request: Request, module_name: str, flag: str) -> None:
    """Refuse a module this interpreter cannot find (naming a close one when there is)."""
    try:
        found = importlib.util.find_spec(module_name)
    except ModuleNotFoundError:  # a parent package is missing
        found = None
    except StrictModeError:
        return  # a parent's import was refused by the decider: it exists
    except Exception as exc:  # a parent package exists but fails to import here
        raise _import_failed(request, module_name, flag, exc) from None
    if found is None:
        top = module_name.partition(".")[0]
        close = difflib.get_close_matches(module_name, _known_modules(module_name), n=1)
        raise NewEntryError(
            request.entry_id, f"unknown module {module_name!r} ({flag})",
            found="no such module on sys.path"
            + (f" (did you mean {close[0]!r}?)" if close else ""),
            expected="a module this interpreter can import",
            fix=f"correct the name, install the distribution that provides {top!r}, or put "
            "its source tree on PYTHONPATH")


def _import_failed(request: Request, module_name: str, flag: str,
                   exc: BaseException) -> NewEntryError:
    return NewEntryError(
        request.entry_id, f"importing {module_name!r} ({flag}) failed",
        found=f"{type(exc).__name__}: {exc}",
        expected="a module that imports in this environment",
        fix="install what it needs (the training job's own environment), then run "
        "patchlane new again")


def _import(request: Request, module_name: str, flag: str) -> ModuleType | None:
    """Import ``module_name`` as a training job would. None when strict mode refused the
    import (another entry's refusal while the decider decides it): the caller reads the source
    instead, as ``patchlane fingerprint`` does."""
    _find(request, module_name, flag)
    try:
        return importlib.import_module(module_name)
    except StrictModeError:
        return None
    except Exception as exc:
        raise _import_failed(request, module_name, flag, exc) from None


def _known_modules(module_name: str) -> list[str]:
    parent = module_name.rpartition(".")[0]
    if not parent:
        return []
    with contextlib.suppress(Exception):
        package = importlib.import_module(parent)
        import pkgutil

        return [f"{parent}.{info.name}"
                for info in pkgutil.iter_modules(getattr(package, "__path__", []))]
    return []


def _resolve_target(request: Request, module: ModuleType | None, module_name: str,
                    qualname: str) -> str | None:
    from ..targets import Refused, resolve
    from ..targets.place import defining_module

    if module is None:
        return None  # strict mode refused the import; the source read below finds it or not
    try:
        shape = resolve(module, qualname).shape.name
        found = getattr(module, qualname) if "." not in qualname else None
        home = defining_module(found) if isinstance(found, FunctionType) else None
        if home is not None and home is not module and found is not None:
            # Patched on the module that re-exports it, the function would stay upstream's in
            # the module that defines it and in every module that imported it from there.
            raise NewEntryError(request.entry_id, f"{module_name}:{qualname} is a re-export",
                                found=f"{qualname} is defined in {home.__name__}",
                                expected="the module that defines it, patched when it is "
                                "imported, before other modules take their copy",
                                fix=f"--target {home.__name__}:{found.__qualname__}")
        return shape
    except Refused as exc:
        raise NewEntryError(request.entry_id, f"{module_name}:{qualname} cannot be overlaid "
                            "as named", found=exc.problem,
                            expected="a function, method, property, descriptor, class or "
                            "value stored on a module or class",
                            fix=exc.fix or "target where the calls go") from None
    except AttributeError:
        scope: object = module
        parts = qualname.split(".")
        for depth, part in enumerate(parts):
            if not hasattr(scope, part):
                close = difflib.get_close_matches(part, dir(scope), n=3)
                where = ".".join([module_name, *parts[:depth]])
                raise NewEntryError(
                    request.entry_id, f"{module_name} has no {qualname}",
                    found=f"no attribute {part!r} in {where}",
                    expected="an attribute path in the module, such as Class.method"
                    + (f" (close: {', '.join(close)})" if close else ""),
                    fix="correct --target MODULE:QUALNAME") from None
            scope = getattr(scope, part)
        raise


def _fingerprint(request: Request, module: ModuleType | None, module_name: str,
                 qualname: str) -> str:
    try:
        if module is not None:
            return fingerprint.compute(module, [qualname])
        spec = importlib.util.find_spec(module_name)
        origin = spec.origin if spec is not None else None
        if origin is None:
            raise OSError(f"no source file for {module_name}")
        return fingerprint.compute_from_source(Path(origin).read_text(encoding="utf-8"),
                                               [qualname])
    except (OSError, TypeError, LookupError, SyntaxError) as exc:
        raise NewEntryError(
            request.entry_id, f"cannot read the source of {module_name}:{qualname}",
            found=f"{type(exc).__name__}: {exc}",
            expected="a function, method, class, property or value defined in Python source",
            fix="target the Python function that calls it (a builtin or compiled extension "
            "has no source to fingerprint)") from None


def _distribution_of(module_name: str) -> str | None:
    """The installed distribution that provides ``module_name``'s top-level package."""
    top = module_name.partition(".")[0]
    names = sorted(set(metadata.packages_distributions().get(top, ())))
    if len(names) == 1:
        return names[0]
    if names:
        return None  # several distributions share the package: the caller asks which
    try:  # no RECORD/top_level.txt (a bare dist-info): the package is often named as its dist
        return str(metadata.distribution(top).metadata["Name"])
    except metadata.PackageNotFoundError:
        return None


def _distribution(request: Request, module_name: str | None) -> str:
    if request.distribution:
        return request.distribution
    found = _distribution_of(module_name) if module_name else None
    if found is None and request.version_from:
        # A source tree or a folder on PYTHONPATH: no metadata to name it; the gate's name is
        # its top-level package, and its version is what --version-from reads.
        return request.version_from.partition(".")[0].partition(":")[0]
    if found is None:
        top = (module_name or "").partition(".")[0]
        raise NewEntryError(
            request.entry_id, "cannot tell which distribution to gate on",
            found=f"no single installed distribution provides {top!r}" if top else "nothing",
            expected="--distribution DIST (the PyPI name whose version the gate reads), or "
            "--version-from MODULE:ATTR for code no distribution provides",
            fix=f"add --distribution, e.g. --distribution megatron-core; for code on "
            f"PYTHONPATH or a source tree, --version-from {top or 'package'}:__version__")
    return found


def _installed(request: Request, dist: str, module: ModuleType | None,
               metadata_only: bool = False) -> Installed:
    """The release of ``dist`` this entry is written from; refused when there is none."""
    if metadata_only:  # floors and pins judge the installed distribution's metadata only
        version, source = installed_version(dist), "metadata"
        why = f"no distribution {dist!r} is installed (no metadata)"
    else:
        version, why = resolve_version(dist, module, request.version_from)
        source = why
    if version is None:
        close = difflib.get_close_matches(
            dist.lower(), [str(d.metadata["Name"]).lower() for d in metadata.distributions()
                           if d.metadata["Name"]], n=1)
        raise NewEntryError(
            request.entry_id, f"distribution {dist!r} is not installed here",
            found=why + (f" (did you mean {close[0]!r}?)" if close else ""),
            expected="the distribution installed in this interpreter, the release the entry "
            "is written from",
            fix="run patchlane new in the environment that has the affected release, or "
            "correct --distribution" + ("" if request.version_from else
                                        "; for code no distribution provides (PYTHONPATH, a "
                                        "source tree), add --version-from MODULE:ATTR, e.g. "
                                        f"--version-from {import_name(dist)}:__version__"))
    return Installed(dist, version, source)


def next_minor_range(version: str) -> str:
    """``>=INSTALLED,<NEXT_MINOR``: the installed release up to the next minor one, which no
    run has seen (``1.2.0+cu128`` -> ``>=1.2.0,<1.3.0``; a local label does not order)."""
    parsed = parse_version(version)
    if parsed is None:
        raise InvalidVersion(f"{shown(version)!r} {why_not_version(version)}")
    major, minor = (*parsed.release, 0)[:2]
    return f">={parsed.public},<{major}.{minor + 1}.0"


def _applies_to(request: Request, installed: Installed) -> tuple[str, str]:
    """(the specifier, its YAML comment)."""
    if request.applies_to:
        spec = _specifier(request, "--applies-to", request.applies_to)
        return str(spec), (f"given to `patchlane new` ({installed.distribution} "
                           f"{installed.version} installed); not yet verified by runs")
    try:
        text = next_minor_range(installed.version)
    except InvalidVersion:
        raise NewEntryError(
            request.entry_id, f"the installed {installed.distribution} version "
            f"{why_not_version(installed.version)}", found=repr(shown(installed.version)),
            expected="a version such as 0.16.1",
            fix="give the range yourself: --applies-to '>=A,<B'") from None
    origin = "" if installed.source == "metadata" else f" ({installed.source})"
    return text, (f"written by `patchlane new` from the installed {installed.distribution} "
                  f"{installed.version}{origin}: not yet verified by runs")


def _owner(request: Request) -> str:
    if request.owner:
        return request.owner
    try:  # the maintainer who ran it, as git knows them; "unknown" says nobody was named
        out = subprocess.run(["git", "config", "user.name"], capture_output=True, text=True,
                             cwd=request.registry.parent, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() or "unknown"


def _setting(request: Request, item: str) -> tuple[str, bool | int | float | str]:
    name, sep, raw = item.partition("=")
    name = name.strip()
    if not sep or not _DOTTED.fullmatch(name) or "." not in name:
        raise NewEntryError(request.entry_id, "--setting is not NAME=VALUE", found=item,
                            expected="'package.module.attribute=value', e.g. "
                            "torch._dynamo.config.recompile_limit=64")
    try:
        value = yaml.safe_load(raw)
    except yaml.YAMLError:
        value = None
    if isinstance(value, str) and _NUMBER.fullmatch(raw.strip()):
        value = float(raw)  # YAML 1.1 reads 1e-05 (no dot) as text; a user means the number
    if isinstance(value, str) or (isinstance(value, (bool, int, float))
                                  and not (isinstance(value, float) and math.isnan(value))):
        return name, value
    raise NewEntryError(request.entry_id, f"--setting {name}: the value is not a scalar",
                        found=repr(raw), expected="a bool, number or string (YAML: 64, true, "
                        "0.5, fast; quote a string that looks like a number: '\"64\"')")


# -- what is written -----------------------------------------------------------------------------

def _scalar(value: str) -> str:
    if _PLAIN.fullmatch(value) and value.lower() not in _YAML_WORDS:
        return value
    return json.dumps(value)  # a JSON string is a valid double-quoted YAML scalar


def _value(value: bool | int | float | str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isinf(value):
            return ".inf" if value > 0 else "-.inf"
        text = repr(value)
        # YAML 1.1 (PyYAML) reads 1e-05 as a string: a float needs its dot
        return text if "." in text else text.replace("e", ".0e", 1)
    return json.dumps(value)


def _folded(key: str, text: str, pad: str) -> list[str]:
    body = textwrap.wrap(" ".join(text.split()), width=max(40, 96 - len(pad) - 2))
    return [f"{pad}{key}: >-", *(f"{pad}  {line}" for line in body)]


def _comment(text: str) -> list[str]:
    return [f"# {line}" for line in textwrap.wrap(text, width=88)]


def _item_indent(raw: str) -> str:
    """The indentation of the entries list's items, as the file writes them (two spaces in a
    new file): an item indented otherwise would not continue the list."""
    starts = [m.end() for m in re.finditer(r"^entries:[^\n]*\n", raw, re.MULTILINE)]
    match = re.compile(r"^( *)-( |$)", re.MULTILINE).search(raw, starts[-1]) if starts else None
    return match.group(1) if match else "  "


@dataclass
class _Draft:
    """Everything the entry will be, before any byte is written."""

    request: Request
    lines: list[str] = field(default_factory=list)
    """The entry's block, relative indentation, without newlines."""
    files: dict[str, str] = field(default_factory=dict)
    """Path relative to the registry's folder -> text."""
    installed: Installed | None = None
    notes: list[str] = field(default_factory=list)
    settings: dict[str, bool | int | float | str] = field(default_factory=dict)
    applies_to: str | None = None

    # What a kind's writer may ask (patchlane.registry.per_kind.Drafting): the request's
    # parts and this module's checks, each refusal a NewEntryError naming the option.

    @property
    def entry_id(self) -> str:
        return self.request.entry_id

    @property
    def kind(self) -> str:
        return self.request.kind.value

    @property
    def target(self) -> str | None:
        return self.request.target

    @property
    def version_from(self) -> str | None:
        return self.request.version_from

    @property
    def policy(self) -> str | None:
        return self.request.policy

    def option(self, name: str) -> Any:
        return self.request.option(name)

    def refuse(self, problem: str, *, found: object = None, expected: str | None = None,
               fix: str | None = None) -> Exception:
        return NewEntryError(self.entry_id, problem, found=found, expected=expected, fix=fix)

    def find(self, module_name: str, flag: str) -> None:
        _find(self.request, module_name, flag)

    def imported(self, module_name: str, flag: str) -> ModuleType | None:
        return _import(self.request, module_name, flag)

    def resolve_target(self, module: ModuleType | None, module_name: str,
                       qualname: str) -> str | None:
        return _resolve_target(self.request, module, module_name, qualname)

    def fingerprint(self, module: ModuleType | None, module_name: str, qualname: str) -> str:
        return _fingerprint(self.request, module, module_name, qualname)

    def distribution(self, module_name: str | None) -> str:
        return _distribution(self.request, module_name)

    def release(self, distribution: str, module: ModuleType | None,
                metadata_only: bool = False) -> Release:
        self.installed = _installed(self.request, distribution, module, metadata_only)
        return self.installed

    def gate(self, release: Release) -> tuple[str, str]:
        return _applies_to(self.request, release)

    def gated(self, module_name: str | None, module: ModuleType | None) -> None:
        """``target`` and ``applies_to`` of a kind gated on a distribution when it names one
        (a config entry, a compat gate)."""
        if not (self.request.distribution or module_name):
            return
        dist = self.distribution(module_name)
        spec, why = self.gate(self.release(dist, module))
        self.applies_to = spec
        self.lines += ["target:", f"  distribution: {_scalar(dist)}",
                       *([f"  version_from: {_scalar(self.request.version_from)}"]
                         if self.request.version_from else []), *_comment(why),
                       f"applies_to: {json.dumps(spec)}"]

    def specifier(self, flag: str, text: str) -> SpecifierSet:
        return _specifier(self.request, flag, text)

    def setting(self, item: str) -> tuple[str, bool | int | float | str]:
        return _setting(self.request, item)

    def scalar(self, text: str) -> str:
        return _scalar(text)

    def value(self, value: bool | int | float | str) -> str:
        return _value(value)

    def comment(self, text: str) -> list[str]:
        return _comment(text)

    def upstream_lines(self) -> list[str]:
        return _upstream_lines(self)

    def retire_lines(self, probe: list[str] | None = None) -> list[str]:
        return _retire_lines(self, probe)

    def stub(self, what: str, **values: Any) -> str:
        if what == "overlay":
            return _overlay_stub(self.request, values["release"], values.get("shape"))
        if what == "reproducer":
            return _reproducer_stub(self.request)
        if what == "check":
            return _check_stub(self.request, values["function"])
        raise ValueError(f"no starting file {what!r}: overlay, reproducer or check")


def _upstream_lines(draft: _Draft) -> list[str]:
    req, eid = draft.request, draft.request.entry_id
    issue, pr = _url(req, "--issue", req.issue), _url(req, "--pr", req.pr)
    lines = ["upstream:"]
    if issue:
        lines.append(f"  issue: {_scalar(issue)}")
    if pr:
        lines.append(f"  pr: {_scalar(pr)}")
    if not KINDS[req.kind].with_overlay:
        # a floor, pin, setting or refused configuration is local configuration: there is
        # no patch to forward, only the upstream bug to link
        lines.append("  forwarded: not-needed")
    elif pr or issue:
        lines.append(f"  forwarded: {_scalar(pr or issue or '')}")
    else:
        lines += ['  forwarded: "no"',
                  f"  # a stub until `patchlane draft {eid} --evidence RUN_DIR` writes it",
                  f"  draft: drafts/{eid}.md"]
        draft.files[f"drafts/{eid}.md"] = _draft_stub(req)
    return lines


def _retire_lines(draft: _Draft, probe: list[str] | None) -> list[str]:
    req = draft.request
    lines = ["retire_when:"]
    if req.retire_release:
        spec = _specifier(req, "--retire-release", req.retire_release)
        lines.append(f"  release: {json.dumps(str(spec))}")
    if probe:
        lines += probe
    elif req.issue or req.pr:
        lines.append("  upstream_released: true  # the linked fix in a release")
    elif not req.retire_release:
        raise NewEntryError(
            req.entry_id, f"a {req.kind.value} entry needs a retirement condition a machine "
            "can check", found="no --issue, --pr or --retire-release",
            expected="--issue URL or --pr URL (retired once upstream releases the fix), or "
            "--retire-release SPEC (the releases that carry it)",
            fix="link the upstream bug with --issue URL")
    return lines


def _block(draft: _Draft, summary: str) -> list[str]:
    req = draft.request
    return [f"- id: {req.entry_id}",
            f"  kind: {req.kind.value}",
            *_folded("summary", summary, "  "),
            *(f"  {line}" for line in draft.lines),
            f"  owner: {_scalar(_owner(req))}",
            f"  added: {req.today.isoformat()}",
            "  status: active"]


def _prepare(request: Request, others: Mapping[str, Path]) -> tuple[_Draft, list[str]]:
    eid = request.entry_id
    if not _ID.fullmatch(eid):
        raise NewEntryError(eid, "not a valid entry id", found=repr(eid),
                            expected="a lowercase identifier, [a-z][a-z0-9_]{2,63} (it names "
                            "the overlay and reproducer files)",
                            fix="e.g. mcore_rerun_sentinel: the distribution, then the bug")
    _check_options(request)
    if request.policy and request.policy not in ("error", "warn"):
        raise NewEntryError(eid, "unknown --policy", found=request.policy,
                            expected="error or warn")
    if eid in others and others[eid] != request.registry:
        raise NewEntryError(eid, "the id is taken", found=f"entry {eid!r} in {others[eid]}",
                            expected="an id no loaded registry declares",
                            fix="choose another id (ids are unique across the registries a "
                            "process loads)")
    draft = _Draft(request)
    PARTS[request.kind].write(draft)
    summary = request.summary or ("TODO (written by patchlane new): what upstream gets wrong, "
                                  "and what this entry changes")
    if not summary.strip():
        raise NewEntryError(eid, "--summary is empty", found="''",
                            expected="one line: what upstream gets wrong and what the entry "
                            "changes")
    return draft, _block(draft, summary)


# -- the registry file ---------------------------------------------------------------------------

def _read_registry(request: Request) -> str:
    path = request.registry
    if not path.exists():
        if not path.parent.is_dir():
            raise NewEntryError(request.entry_id, "the registry's folder does not exist",
                                found=str(path.parent), expected="an existing folder",
                                fix="create it, or correct --registry")
        return ""
    try:
        data = read_regular(path)  # a FIFO put in its place never blocks this
    except NotARegularFile as exc:
        raise NewEntryError(request.entry_id, "the registry is not a file",
                            found=str(exc).partition(";")[0],
                            expected="a registry file (or no file: new creates it)",
                            fix="correct --registry") from None
    try:
        raw = data.decode("utf-8")  # as stored: CRLF stays CRLF
    except UnicodeDecodeError as exc:
        raise NewEntryError(request.entry_id, "the registry is not UTF-8 text",
                            found=f"{path}: byte {exc.start}: {exc.reason}",
                            expected="a YAML file in UTF-8",
                            fix="convert it to UTF-8, or correct --registry") from None
    if _no_entries_yet(raw):
        return raw  # the header `new` writes, its entries list still empty: append to it
    existing = parse_registry(path, raw)  # a registry already rejected is fixed first
    if any(entry.id == request.entry_id for entry in existing):
        raise NewEntryError(request.entry_id, "the id is taken",
                            found=f"entry {request.entry_id!r} in {path}",
                            expected="a new id", fix=f"choose another id, or edit the entry "
                            f"in {path} (`patchlane show {request.entry_id}`)")
    tops = [line for line in raw.splitlines() if re.match(r"[A-Za-z_]", line)]
    if not tops or not re.fullmatch(r"entries:\s*(#.*)?", tops[-1]):
        raise NewEntryError(
            request.entry_id, "cannot append an entry to this registry",
            found=f"{path} ends with the top-level line {tops[-1] if tops else '(none)'!r}",
            expected="`entries:` as the last top-level key, its items in block style "
            "(`  - id: ...`)",
            fix="move the entries list to the end of the file, written as a block list")
    return raw


def _no_entries_yet(raw: str) -> bool:
    """Whether ``raw`` is a registry whose ``entries:`` holds nothing yet (the header ``new``
    writes, or a registry whose last entry was deleted): ``schema: 1`` and an empty
    ``entries:`` as the last top-level line, comments aside."""
    tops = [line for line in raw.splitlines() if re.match(r"[A-Za-z_]", line)]
    items = [line for line in raw.splitlines() if re.match(r"\s+-", line)]
    return (not items and bool(tops)
            and re.fullmatch(r"entries:\s*(\[\s*\]\s*)?(#.*)?", tops[-1]) is not None
            and any(re.fullmatch(r"schema:\s*1\s*(#.*)?", line) for line in tops))


def _compose(raw: str, block: list[str]) -> str:
    newline = "\r\n" if raw.partition("\n")[0].endswith("\r") else "\n"
    indent = _item_indent(raw)
    text = raw or NEW_REGISTRY_HEADER
    # `entries: []` (a registry whose last entry was deleted) takes its first item as a block
    text = re.sub(r"(?m)^entries:[ \t]*\[[ \t]*\]", "entries:", text, count=1)
    if not text.endswith(("\n", "\r")):
        text += newline
    if not re.search(r"(^|\n)entries:\s*(#.*)?\r?\n$", text):
        text += newline  # a blank line between entries, as the file keeps them
    return text + newline.join(f"{indent}{line}" for line in block) + newline


@contextlib.contextmanager
def _created(root: Path, files: Mapping[str, str]) -> Iterator[list[Path]]:
    """Create ``files`` under ``root`` (never over an existing file); on any failure inside
    the block, remove them and any folder created for them."""
    made: list[Path] = []
    folders: list[Path] = []
    try:
        for rel, text in files.items():
            path = root / rel
            for parent in reversed([p for p in path.relative_to(root).parents if str(p) != "."]):
                folder = root / parent
                if not folder.exists():
                    folder.mkdir()
                    folders.append(folder)
            with open(path, "x", encoding="utf-8", newline="\n") as handle:
                made.append(path)
                handle.write(text)
        yield made
    except BaseException:
        for path in reversed(made):
            with contextlib.suppress(OSError):
                path.unlink()
        for folder in reversed(folders):
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise


def _refuse_existing(request: Request, files: Mapping[str, str]) -> None:
    for rel in files:
        path = request.registry.parent / rel
        if path.exists() or path.is_symlink():
            raise NewEntryError(
                request.entry_id, f"{rel} already exists", found=str(path),
                expected="no file yet (patchlane new never overwrites one)",
                fix="move it aside, or choose another id: each file is named after its entry")


def new_entry(request: Request, others: Mapping[str, Path] | None = None) -> Created:
    """Write the entry ``request`` asks for; ``others``: ids already declared by the registries
    loaded beside this one (id -> file). Raises :class:`NewEntryError` (nothing written)."""
    request = _with_registry(request)
    _read_registry(request)  # refusals about the file itself, before importing anything
    draft, block = _prepare(request, others or {})
    _refuse_existing(request, draft.files)
    path = request.registry

    def locked(message: str) -> PatchlaneError:
        return NewEntryError(request.entry_id, "the registry is being edited",
                             found=message, expected="the registry's edit lock")

    with registry_lock(path, locked):
        raw = _read_registry(request)  # again, under the lock: another edit may have landed
        text = _compose(raw, block)
        with _created(path.parent, draft.files) as made:
            try:
                entries = parse_registry(path, text)
            except RegistryError as exc:
                if exc.entry_id == request.entry_id:
                    # The new block itself, as the options made it (`--applies-to '>=1.0'`):
                    # the registry's own words and fix, not a hint at the file's end
                    key = f"`{exc.key}`: " if exc.key else ""
                    raise NewEntryError(request.entry_id, f"the entry as asked is refused by "
                                        f"the registry ({key}{exc.problem}); nothing was "
                                        "written", found=exc.found,
                                        expected=exc.expected or "a value the registry accepts",
                                        fix=exc.fix or "correct the option it names") from None
                raise NewEntryError(request.entry_id, "the registry does not validate with "
                                    "the new block appended; nothing was written",
                                    found=str(exc), expected="a registry the loader accepts",
                                    fix=f"check how the end of {path} is written (the block "
                                    "goes after the last entry), or add the entry by hand; "
                                    "if the file looks right, report it with the command "
                                    "line you ran") from None
            entry = entries[-1]
            if entry.id != request.entry_id or (
                    draft.settings and dict(getattr(entry.spec, "settings", {})) != draft.settings):
                raise NewEntryError(request.entry_id, "the appended block did not read back "
                                    "as written; nothing was written", found=entry.id,
                                    expected=request.entry_id,
                                    fix="check the end of the registry file")
            atomic_write(path, text)  # a new registry gets the umask's mode, as open() gives
        table = docs_table(path)  # the docs' entries table beside the registry: its row
        try:
            if table is not None and add_row(table, entry, draft.applies_to):
                draft.notes.append(f"added its row to the entries table in {table}")
        except OSError as exc:
            # The entry and its files are written and valid: the docs' row is a courtesy, and
            # failing here (exit 74 naming a temporary file) left them in place while a rerun
            # refused the id as taken.
            draft.notes.append(f"could not add its row to the entries table in {table} "
                               f"({exc.strerror or exc}); add it by hand")
    return Created(entry, draft.applies_to, path, tuple(made), draft.installed,
                   tuple(draft.notes))


def _with_registry(request: Request) -> Request:
    # resolved, as the loader records a registry's source (and retire writes it)
    return replace(request, registry=Path(request.registry).resolve())


# -- the files -----------------------------------------------------------------------------------
# Written to pass the checkout's own ruff and mypy (patches/ and reproducers/ are checked):
# names of any length are wrapped, never left past the line length.

def _wrap(text: str, indent: str = "") -> str:
    return textwrap.fill(text, width=96, initial_indent=indent, subsequent_indent=indent,
                         break_long_words=False, break_on_hyphens=False)


def _string_lines(text: str, indent: str) -> str:
    """``text`` as adjacent Python string literals, one per line."""
    parts = textwrap.wrap(text, width=96 - len(indent) - 2, break_long_words=False,
                          break_on_hyphens=False)
    return "\n".join(indent + json.dumps(part + (" " if i < len(parts) - 1 else ""))
                     for i, part in enumerate(parts))


def _overlay_stub(request: Request, installed: Installed, shape: str | None) -> str:
    from ..targets import shape_named

    body = shape_named(shape or "function").stub(request.target or "")
    eid, target = request.entry_id, request.target
    first = _wrap(f'"""Overlay for {eid}: {target} ({installed.distribution} '
                  f"{installed.version}).")
    about = _wrap(f"What upstream gets wrong, and what this overlay changes: write it here. "
                  f"`patchlane draft {eid}` quotes this docstring in the public-ready draft "
                  "for upstream.")
    return f'''{first}

{about}
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from patchlane.loading import entry_id

ENTRY_ID = entry_id(__name__)  # the decider loads this file under its entry id


{body}

def probe(module: ModuleType) -> bool:
    """True once upstream itself behaves correctly in ``module`` (the imported target
    module): the decider then keeps the overlay out, and the entry can retire.

    Check what upstream's fix changes, cheaply and without side effects: a parameter the
    fixed release added (``inspect.signature(...).parameters``), an attribute it defines, a
    constant it corrected. Never call the target here."""
    return False
'''


def _reproducer_stub(request: Request) -> str:
    eid, target = request.entry_id, request.target or ""
    module, _, qualname = target.partition(":")
    first = _wrap(f'"""Reproducer for {eid}: {target}.')
    message = _string_lines(f"write the reproducer (reproducers/{eid}.py): call {qualname} the "
                            "way the bug shows and assert the correct result", " " * 8)
    return f'''{first}

``run(ctx)`` raises ``AssertionError`` when the upstream bug shows, and only then: any other
exception is an error of the harness, never a verdict. Assert the correct behaviour, so the
reproducer fails on the unpatched release (the bug shows) and passes with the overlay:

    patchlane reproduce {eid} --without-overlay
    patchlane reproduce {eid}

Import the target inside ``run`` (the decider decides the overlay at that import).
``ctx.process_group()`` gives a process group for WORLD_SIZES above 1, ``ctx.device`` the
device of the lane.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from patchlane.reproducer import ReproContext

LANES = ("cpu",)  # add "cuda" when the bug needs a GPU to show
WORLD_SIZES = (1,)  # add 2 when it needs ranks


def run(ctx: ReproContext) -> None:
    import importlib

    # The startup decides the overlay when the target's module is imported; the sweep checks
    # that decision (disabled without the overlay, applied and run with it).
    importlib.import_module(
{_string_lines(module, " " * 8)})
    # Fails on purpose until it is written: a placeholder that passed without the overlay
    # would tell the sweep upstream had fixed the bug. Until then the sweep reports this
    # entry as an error (the overlay is applied but never runs), never as a pass.
    raise AssertionError(
{message})
'''


def _check_stub(request: Request, function: str) -> str:
    eid = request.entry_id
    first = _wrap(f'"""Compat gate {eid}: the run configurations upstream gets wrong.')
    return f'''{first}

``{function}(config)`` returns None when the configuration is safe, else one sentence: what
goes wrong with these settings and which setting avoids it. ``patchlane.check_config(config)``
runs it on a Megatron args namespace or a TransformerConfig.
"""

from __future__ import annotations

from typing import Any


def {function}(config: Any) -> str | None:
    # Refuses to judge until it is written: a stub that answered "safe" would let the bad
    # configuration through without a word.
    raise NotImplementedError(
{_string_lines(f"write the check: checks/{eid}.py", " " * 8)})
'''


def _draft_stub(request: Request) -> str:
    eid = request.entry_id
    return f"""# {eid}: not written yet

*A stub written by `patchlane new`. This entry is not forwarded upstream (`forwarded: "no"`).*

Once the sweep shows the bug (`patchlane sweep --only {eid}` reports `guarding`),
`patchlane draft {eid} --evidence RUN_DIR` replaces this file with the public-ready draft:
the symptom, the affected releases (what ran), the reproducer and the proposed change
(`drafts/{eid}.change.yaml`). Then post it, and record the issue or PR under `upstream:`.
"""
