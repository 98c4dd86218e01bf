"""The registry's field readers: one value of an entry checked and turned into its record, every
refusal naming the file, the entry, the key, what was found and what was expected.

:class:`Fields` is where validation stands (the file, the entry); the functions read one kind of
value (a type, a PEP 440 range, a file beside the registry, a ``when:`` condition, a policy).
:mod:`patchlane.registry.schema` reads an entry's common keys with them, and each kind's module
(:mod:`patchlane.registry.per_kind`) its own keys.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from ..common.errors import RegistryError
from ..common.versions import MAX_DIGITS, range_problem
from ..installed.gates import import_name
from .records import Policy, Target, When

__all__ = [
    "DIST_RE",
    "ENV_RE",
    "MODULE_RE",
    "Fields",
    "check_keys",
    "expect_type",
    "inside_folder",
    "policy",
    "relative_file",
    "resolved_file",
    "specifier",
    "when_condition",
]

DIST_RE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$")
MODULE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
ENV_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class Fields:
    """Where we are while validating, so every error names the file, entry and key."""

    def __init__(self, path: Path, drafts_required: bool = True,
                 checked: list[tuple[Path, Path]] | None = None) -> None:
        self.path = path
        self.entry_id: str | None = None
        self.drafts_required = drafts_required
        """False only for ``patchlane draft``, which writes the draft this rule asks for."""
        self.checked = checked if checked is not None else []
        """Every file whose existence a rule checked: (the path as written, the registry's
        folder joined with the text; what it resolved to). What the validated-registry cache
        must see unchanged to stand for this validation."""

    def exists(self, written: Path, resolved: Path, key: str) -> bool:
        self.checked.append((written, resolved))
        try:
            return written.is_file()
        except OSError as exc:  # a name too long, a folder unreadable: this file's refusal
            raise self.fail("cannot look the file up", key=key,
                            found=os.path.relpath(written, self.path.parent),
                            expected=f"a file the filesystem can find ({exc.strerror or exc})",
                            fix="correct the path, or make its folder readable") from None

    def fail(
        self,
        message: str,
        *,
        key: str | None = None,
        found: object = None,
        expected: str | None = None,
        fix: str | None = None,
    ) -> RegistryError:
        if fix is None and key is not None and expected is not None:
            fix = f"set `{key}` to {expected}"  # every refusal says what to do
        return RegistryError(
            self.path,
            message,
            entry_id=self.entry_id,
            key=key,
            found=found,
            expected=expected,
            fix=fix,
        )


def expect_type(ctx: Fields, value: object, typ: type | tuple[type, ...], key: str,
                 what: str) -> Any:
    # bool is an int subclass; YAML `yes`/`no` surprises are exactly what this catches.
    types = typ if isinstance(typ, tuple) else (typ,)
    fix = f"write `{key}` as {what}"
    if isinstance(value, bool) and bool not in types:
        raise ctx.fail("wrong type", key=key, found=value, expected=what,
                       fix=fix + " (YAML reads a bare yes/no/on/off as true/false: quote it)")
    if not isinstance(value, typ):
        raise ctx.fail(
            "wrong type", key=key, found=value, expected=f"{what} (got {type(value).__name__})",
            fix=fix,
        )
    return value


def check_keys(ctx: Fields, data: Mapping[str, Any], required: Iterable[str],
                optional: Iterable[str], where: str, prefix: str = "") -> None:
    required = tuple(required)
    allowed = set(required) | set(optional)
    for key in data:
        if key not in allowed:
            raise ctx.fail(
                f"unknown key in {where}",
                key=f"{prefix}{key}",
                found=key,
                expected=f"one of {sorted(allowed)}",
                fix="remove it or correct its spelling",
            )
    for key in required:
        if key not in data or data[key] is None:
            # present with no value (`entries:` and nothing under it) is not "missing": say so
            present = key in data
            holder = "the registry" if where == "the registry" else "the entry"
            raise ctx.fail(
                f"{'empty' if present else 'missing required'} key in {where}",
                key=f"{prefix}{key}",
                found=None,
                expected="a value",
                fix=(f"give `{key}:` a value" + (" (list the entries under it, or write "
                                                   "`entries: []`)" if key == "entries" else "")
                     if present else f"add `{key}:` to {holder}"),
            )


def specifier(ctx: Fields, value: object, key: str) -> SpecifierSet:
    text = expect_type(ctx, value, str, key, "a PEP 440 specifier string such as '>=0.14,<0.18'")
    try:
        spec = SpecifierSet(text)
    except InvalidSpecifier as exc:
        raise ctx.fail(
            "invalid PEP 440 specifier",
            key=key,
            found=text,
            expected="a PEP 440 specifier such as '>=0.14,<0.18'",
            fix=f"write each clause as an operator and a version, comma-separated "
                f"('>=0.14,<0.18'); packaging says: {exc}",
        ) from None
    if not len(spec):
        raise ctx.fail("empty specifier", key=key, found=text, expected="at least one clause",
                       fix=f"write the releases `{key}` admits, such as '>=0.14,<0.18'")
    problem = range_problem(spec)  # before anything prints it: str() parses its versions
    if problem:
        raise ctx.fail("unusable version range", key=key, found=text,
                       expected="a range some release can satisfy, of PEP 440 versions with "
                       f"numbers of at most {MAX_DIGITS} digits",
                       fix=f"{problem}; write the releases the entry really covers, e.g. "
                       "'>=0.14,<0.18'")
    return spec


def inside_folder(ctx: Fields, text: str, key: str) -> None:
    """Files a registry names stay in its folder: no absolute path, no ``..`` out of it
    (checked on the written path; a symlink inside the folder is the owner's choice)."""
    folder = os.path.normpath(ctx.path.parent)
    joined = os.path.normpath(os.path.join(folder, text))
    if os.path.isabs(text) or os.path.commonpath([folder, joined]) != folder:
        raise ctx.fail("path outside the registry's folder", key=key, found=text,
                       expected=f"a path inside {folder}",
                       fix="put the file beside the registry (e.g. patches/<id>.py) and name "
                       "it relative to it")


def resolved_file(ctx: Fields, text: str, key: str) -> Path:
    """The file ``text`` names, relative to the registry: a symlink loop (RuntimeError on
    Python 3.11) or a name the filesystem refuses is this file's refusal, as a missing one."""
    try:
        return (ctx.path.parent / text).resolve()
    except (OSError, RuntimeError) as exc:
        raise ctx.fail("cannot look the file up", key=key, found=text,
                       expected=f"a file the filesystem can find ({exc})",
                       fix="correct the path (a symlink that points at itself?)") from None


def relative_file(ctx: Fields, value: object, key: str, entry_id: str) -> Path:
    text = expect_type(ctx, value, str, key, "a path relative to the registry file")
    inside_folder(ctx, text, key)
    path = resolved_file(ctx, text, key)
    if not ctx.exists(ctx.path.parent / text, path, key):
        raise ctx.fail(
            "file does not exist",
            key=key,
            found=text,
            expected=f"an existing file relative to {ctx.path.parent}",
            fix=f"create {path} or correct the path",
        )
    if path.suffix != ".py" or path.stem != entry_id:
        raise ctx.fail(
            "overlay and reproducer files are named after their entry id",
            key=key,
            found=text,
            expected=f"a file named {entry_id}.py",
            fix=f"rename it to {entry_id}.py so retiring the patch touches one id",
        )
    return path


def when_condition(ctx: Fields, value: object, target: Target) -> When | None:
    """``when:`` of a kind decided at an import; None when the entry has none."""
    if value is None:
        return None
    expected = ("a mapping such as `{imported: triton, env: {TRITON_INTERPRET: \"1\"}}`: "
                "the module whose import triggers the check and/or the environment variables "
                "that must hold")
    data = expect_type(ctx, value, dict, "when", expected)
    check_keys(ctx, data, (), ("imported", "env", "installed"), "when", "when.")
    if data.get("imported") is None and data.get("env") is None and data.get("installed") is None:
        raise ctx.fail("empty condition", key="when", found=data, expected=expected,
                       fix="name the module (`imported:`) and/or the environment (`env:`), or "
                       "drop `when:` to check as soon as the target module is imported")
    imported = ""
    if data.get("imported") is not None:
        imported = expect_type(ctx, data["imported"], str, "when.imported",
                                "a module name such as 'triton'")
        if not MODULE_RE.match(imported):
            raise ctx.fail("invalid module name", key="when.imported", found=imported,
                           expected="a dotted module path such as 'triton' or "
                           "'torch.distributed'")
    elif not MODULE_RE.match(target.module or import_name(target.distribution)):
        raise ctx.fail("cannot tell which module the check waits for", key="when.imported",
                       found=target.distribution,
                       expected="`when: {imported: <module>}` (the distribution's name is not "
                       "a module name)")
    env = {name: _env_value(ctx, name, value) for name, value in _condition(
        ctx, data, "env", "a mapping of environment variable to its required value, such as "
        "`{TRITON_INTERPRET: \"1\"}`", "at least one `NAME: \"value\"`", ENV_RE,
        "invalid environment variable name", "a name such as TRITON_INTERPRET").items()}
    installed = {name: specifier(ctx, spec, f"when.installed.{name}")
                 for name, spec in _condition(
                     ctx, data, "installed", "a mapping of distribution to the range it must be "
                     "installed in, such as `{triton: \"<3.7\"}`",
                     "at least one `distribution: \"<range>\"`", DIST_RE,
                     "invalid distribution name", "a distribution name such as triton").items()}
    return When(imported, env, installed)


def _condition(ctx: Fields, data: Mapping[str, Any], key: str, shape: str, at_least: str,
               name_re: re.Pattern[str], bad_name: str, a_name: str) -> dict[str, Any]:
    """``when.<key>``: absent (empty), or a non-empty mapping whose every key matches
    ``name_re``; the values are the caller's to check."""
    if data.get(key) is None:
        return {}
    raw = expect_type(ctx, data[key], dict, f"when.{key}", shape)
    if not raw:
        raise ctx.fail("empty condition", key=f"when.{key}", found=raw, expected=at_least)
    for name in raw:
        if not isinstance(name, str) or not name_re.match(name):
            raise ctx.fail(bad_name, key=f"when.{key}", found=name, expected=a_name)
    return dict(raw)


def _env_value(ctx: Fields, name: str, required: object) -> str:
    if not isinstance(required, str):
        # YAML reads `1` as an int and `yes` as a bool; the environment holds strings
        raise ctx.fail("wrong type", key=f"when.env.{name}", found=required,
                       expected="a quoted string such as \"1\" (the environment holds text; "
                       "compared exactly)")
    return required


def policy(ctx: Fields, data: Mapping[str, Any], default: Policy) -> Policy:
    raw = data.get("policy", default.value)
    try:
        return Policy(raw)
    except ValueError:
        raise ctx.fail("unknown policy", key="policy", found=raw,
                       expected="'error' or 'warn'") from None
