"""The registry: ``registry.yaml`` files parsed and validated into frozen :class:`Entry` records.

This is the only place entries are built. Loading is all-or-nothing: every file is parsed and
every entry validated before anything is returned, so a malformed registry can never leave a
process half-patched. YAML is read with a safe loader only.
"""

from __future__ import annotations

import datetime as _dt
import enum
import functools
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import yaml
from packaging.specifiers import InvalidSpecifier, SpecifierSet

from .errors import RegistryError, UnknownEntryError

__all__ = [
    "CompatGate",
    "ConfigSettings",
    "Entry",
    "FingerprintSpec",
    "Kind",
    "KindSpec",
    "PackagingPin",
    "Policy",
    "Registry",
    "RetireWhen",
    "StartupRow",
    "Status",
    "Target",
    "Upstream",
    "VersionFloor",
    "When",
    "load_registries",
    "parse_registry",
    "read_registry_bytes",
]

SCHEMA_VERSION = 1

try:  # The C loader is ~10x faster; both are *safe* loaders (no arbitrary object construction).
    _BaseLoader: Any = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - pyyaml built without libyaml
    _BaseLoader = yaml.SafeLoader


class _DuplicateKey(yaml.MarkedYAMLError):
    pass


class _SafeLoader(_BaseLoader):  # type: ignore[misc]
    """A safe loader that refuses duplicate mapping keys: YAML's last-one-wins would let a
    second ``entries:`` or ``owner:`` silently replace the first."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise _DuplicateKey(problem=f"duplicate key {key!r}",
                                    problem_mark=key_node.start_mark)
            seen.add(key)
        return dict(super().construct_mapping(node, deep=deep))


_SafeLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
                            _SafeLoader.construct_mapping)


class Kind(str, enum.Enum):
    SOURCE_PATCH = "source_patch"
    VERSION_FLOOR = "version_floor"
    COMPAT_GATE = "compat_gate"
    PACKAGING_PIN = "packaging_pin"
    CONFIG = "config"


class Status(str, enum.Enum):
    ACTIVE = "active"
    RETIRED = "retired"


class FingerprintPolicy(str, enum.Enum):
    REFUSE = "refuse"
    WARN = "warn"


# The four value records nested in an Entry are NamedTuples, not frozen dataclasses: equally
# immutable and typed, and ~5x cheaper to define, which `import patchlane` pays every time.
class Target(NamedTuple):
    distribution: str
    """Distribution name whose installed metadata version the gate reads (``megatron-core``)."""
    module: str | None = None
    qualname: str | None = None
    version_from: str | None = None
    """``module:attribute`` where a source tree of the distribution declares its version, for
    a target imported without distribution metadata (defaults: ``gates.KNOWN_TREE_VERSIONS``)."""

    @property
    def object_path(self) -> str | None:
        if self.module is None:
            return None
        return f"{self.module}:{self.qualname}" if self.qualname else self.module


class Upstream(NamedTuple):
    issue: str | None
    pr: str | None
    forwarded: str
    """DEP-3 ``Forwarded``: a URL, ``no`` or ``not-needed``."""
    applied_upstream: str | None
    """DEP-3 ``Applied-Upstream``: the release, commit or URL where upstream carries the fix."""
    distribution: str | None = None
    """The distribution whose releases carry the upstream fix, when it is not the target's
    (a numpy pin fixed in triton)."""
    draft: Path | None = None
    """A public-ready write-up (``drafts/<id>.md``) of a fix not yet forwarded: an active
    source patch whose ``forwarded`` is ``no`` must carry one (``patchlane draft ID`` writes
    it from sweep evidence)."""


class When(NamedTuple):
    """When a ledger check (``version_floor``, ``packaging_pin``) runs: once module
    ``imported`` is imported, and only if every ``env`` variable has its value at that moment.
    Until then the entry is ``pending``; with the module imported but the environment not
    matching it is ``skipped: not applicable``."""

    imported: str
    env: Mapping[str, str] = {}

    def describe(self) -> str:
        """``import triton`` with TRITON_INTERPRET=1: what the check waits for."""
        cond = " and ".join(f"{name}={value}" for name, value in self.env.items())
        module = self.imported or "<the target's module>"  # as written, before the default
        return f"`import {module}`" + (f" with {cond}" if cond else "")

    def __str__(self) -> str:  # `patchlane show` prints the entry's settings with str()
        return self.describe()

    def unmet(self, environ: Mapping[str, str]) -> str | None:
        """Why the environment condition does not hold in ``environ`` (None when it does)."""
        for name, value in self.env.items():
            actual = environ.get(name)
            if actual != value:
                now = "unset" if actual is None else f"{actual!r}"
                return f"{name} is {now}, not {value!r}"
        return None


# Where a distribution's import name is not its own name normalized ('-' and '.' -> '_'): the
# module a version floor or pin waits for when the entry names no module (`target.object`,
# `when.imported`) itself.
KNOWN_IMPORT_NAMES = {
    "megatron-core": "megatron.core",
    "pytorch-triton": "triton",
    "pyyaml": "yaml",
}


def import_name(distribution: str) -> str:
    name = distribution.lower()
    return KNOWN_IMPORT_NAMES.get(name) or re.sub(r"[-.]+", "_", name)


class RetireWhen(NamedTuple):
    release: SpecifierSet | None
    """Releases of the target distribution that carry the fix."""
    probe: bool
    """Whether the overlay's probe reporting upstream-fixed is part of the retirement evidence."""
    upstream_released: bool = False
    """Retire when the linked upstream fix is merged and in a release (``patchlane upstream``)."""


class FingerprintSpec(NamedTuple):
    sha256: tuple[str, ...]
    policy: FingerprintPolicy
    covers: tuple[str, ...] = ()
    """Extra qualnames in the target module whose source the overlay also relies on."""
    objects: tuple[str, ...] = ()
    """When set, exactly these qualnames are fingerprinted instead of the target (+ covers):
    for a target whose own source is not the upstream code at issue (an inherited
    ``autograd.Function.apply`` wrapped to route calls)."""
    releases: Mapping[str, str] = {}
    """Upstream release -> the fingerprint its target had when it ran (evidence, not the gate):
    how ``patchlane doctor`` names the release a source tree is nearest to."""

    def qualnames(self, target: str) -> tuple[str, ...]:
        return self.objects or (target, *self.covers)


class Policy(str, enum.Enum):
    """What a violated ledger entry does: ``error`` fails (at the protected import, in
    ``check_config``), ``warn`` logs and records it."""

    ERROR = "error"
    WARN = "warn"


class VersionFloor(NamedTuple):
    """``kind: version_floor``: the target distribution must satisfy ``requires``."""

    requires: SpecifierSet
    policy: Policy
    when: When | None = None


class PackagingPin(NamedTuple):
    """``kind: packaging_pin``: the distribution must satisfy ``pin`` and, with ``source``,
    have been installed from that URL (its ``direct_url.json``)."""

    pin: SpecifierSet
    policy: Policy
    source: str | None = None
    when: When | None = None


class CompatGate(NamedTuple):
    """``kind: compat_gate``: ``check_function`` in ``check_file`` judges a run's config."""

    check_file: Path
    check_function: str
    policy: Policy


class ConfigSettings(NamedTuple):
    """``kind: config``: module attributes assigned when their module is imported."""

    settings: Mapping[str, bool | int | float | str]


KindSpec = VersionFloor | PackagingPin | CompatGate | ConfigSettings
"""The per-kind part of an :class:`Entry` (None for a source patch, whose own fields are
``overlay``, ``reproducer`` and ``fingerprint``)."""


@dataclass(frozen=True)
class Entry:
    id: str
    kind: Kind
    summary: str
    target: Target
    applies_to: SpecifierSet | None
    upstream: Upstream
    retire_when: RetireWhen
    owner: str
    added: _dt.date
    status: Status
    source: Path
    """The registry file this entry came from; relative paths are resolved against it."""
    overlay: Path | None = None
    reproducer: Path | None = None
    fingerprint: FingerprintSpec | None = None
    spec: KindSpec | None = None
    """The ledger kinds' own settings, one frozen record per kind."""
    notes: Any = None
    evidence: Any = None
    """Free-form text, list or mapping: what ran, what was read (never evaluated)."""
    retired: _dt.date | None = None
    """When ``status: retired`` was recorded."""
    depends_on: tuple[str, ...] = ()
    """Source patches this one builds on (``depends_on: [id, ...]``). Where a dependency's
    gate admits the installed release, this entry applies only once that dependency is applied
    (or its probe says upstream already behaves as it would make it); where the dependency's
    gate excludes the release (upstream ships the behaviour itself, or it predates it), the
    dependency does not bind and this entry's own gate decides. Example: a follow-up fix to a
    backported behaviour is needed wherever the backport is applied, and on every release that
    ships the behaviour upstream."""
    continued_by: str | None = None
    """The source patch that carries this entry's bug onward on releases past this entry's
    gate (``continued_by: id``): upstream moved the code, the bug came along, and another
    entry guards it there. Past the gate the sweep reports such a row ``covered`` (naming that
    entry) instead of ``still-affected``, wherever that entry's gate admits the release."""

    @property
    def floor(self) -> VersionFloor | None:
        return self.spec if isinstance(self.spec, VersionFloor) else None

    @property
    def pin(self) -> PackagingPin | None:
        return self.spec if isinstance(self.spec, PackagingPin) else None

    @property
    def compat_gate(self) -> CompatGate | None:
        return self.spec if isinstance(self.spec, CompatGate) else None

    @property
    def config(self) -> ConfigSettings | None:
        return self.spec if isinstance(self.spec, ConfigSettings) else None

    @property
    def policy(self) -> Policy | None:
        spec = self.spec
        return spec.policy if isinstance(spec, (VersionFloor, PackagingPin, CompatGate)) \
            else None

    @property
    def active(self) -> bool:
        return self.status is Status.ACTIVE

    # Cached: read for every entry by Registry.startup_index and the ledger hooks, and
    # packaging canonicalizes every version on a SpecifierSet's first str().

    @functools.cached_property
    def applies_to_text(self) -> str:
        """``str(applies_to)`` (``'None'`` when unset), as decisions record it."""
        return str(self.applies_to)

    @functools.cached_property
    def requirement_text(self) -> str | None:
        """A floor's or pin's requirement as decisions record it (``torch>=2.6.0``)."""
        spec = self.spec
        required = spec.requires if isinstance(spec, VersionFloor) else \
            spec.pin if isinstance(spec, PackagingPin) else None
        return f"{self.target.distribution}{required}" if required is not None else None

    @property
    def _declared_when(self) -> When | None:
        """The ``when:`` the registry spelled out (floors and pins only), before defaults."""
        return self.spec.when if isinstance(self.spec, (VersionFloor, PackagingPin)) else None

    @functools.cached_property
    def when(self) -> When | None:
        """For a version floor or packaging pin: the import (and environment) its check waits
        for. ``when.imported`` defaults to the module of ``target.object``, else the
        distribution's import name. None for the other kinds."""
        if self.kind not in (Kind.VERSION_FLOOR, Kind.PACKAGING_PIN):
            return None
        given = self._declared_when
        module = (given.imported if given is not None and given.imported else None) \
            or self.target.module or import_name(self.target.distribution)
        return When(module, given.env if given is not None else {})

    @property
    def names_its_import(self) -> bool:
        """Whether the entry names the module its check waits for (``target.object`` or
        ``when.imported``): only then does ``policy: error`` make that import fail."""
        given = self._declared_when
        return self.target.module is not None or bool(given is not None and given.imported)


class StartupRow(NamedTuple):
    """What the startup walk needs of one entry, and nothing else: plain strings, so a cached
    registry can start a lane without rebuilding its entries (patchlane.registry_cache)."""

    id: str
    kind: str
    """``Kind`` value."""
    active: bool
    distribution: str
    module: str | None
    """The module whose import decides it: a source patch's target module, a floor's or pin's
    ``when.imported``; None for the other kinds."""
    modules: tuple[str, ...]
    """A config entry's settings modules (one hook each)."""
    waiting: str
    """The pending record's reason: ``waiting for `import x```."""
    applies_to: str | None
    """As decisions record it: ``applies_to`` of a source patch, the requirement of a floor or
    pin (``torch>=2.6.0``)."""

    @classmethod
    def of(cls, entry: Entry) -> StartupRow:
        module: str | None = None
        modules: tuple[str, ...] = ()
        waiting, applies_to = "", None
        if entry.kind is Kind.SOURCE_PATCH:
            module, applies_to = entry.target.module, entry.applies_to_text
            waiting = f"waiting for `import {module}`"
        elif entry.when is not None:
            module, applies_to = entry.when.imported, entry.requirement_text
            waiting = f"waiting for {entry.when.describe()}"
        elif entry.kind is Kind.CONFIG:
            assert entry.config is not None
            modules = tuple(sorted({str(name).rpartition(".")[0]
                                    for name in entry.config.settings}))
            waiting = f"waiting for `import {', '.join(modules)}`"
        return cls(entry.id, entry.kind.value, entry.active, entry.target.distribution, module,
                   modules, waiting, applies_to)


@dataclass(frozen=True)
class Registry:
    entries: tuple[Entry, ...]
    sources: tuple[Path, ...]
    contents: tuple[bytes, ...] = ()
    """The bytes of every source file as validated, in load order."""

    @functools.cached_property
    def startup_index(self) -> tuple[StartupRow, ...]:
        """One :class:`StartupRow` per entry, in order: all that `import patchlane` reads."""
        return tuple(StartupRow.of(entry) for entry in self.entries)

    @functools.cached_property
    def _by_id(self) -> dict[str, Entry]:
        return {entry.id: entry for entry in self.entries}

    @functools.cached_property
    def digest(self) -> str:
        """sha256 over ``contents``: the registry hash in receipts. Computed on first use so
        ``import patchlane`` does not pay for loading OpenSSL's hashlib."""
        if not self.contents:
            return ""
        import hashlib

        digest = hashlib.sha256()
        for raw in self.contents:
            digest.update(raw)
        return "sha256:" + digest.hexdigest()

    def get(self, entry_id: str) -> Entry:
        entry = self._by_id.get(entry_id)
        if entry is not None:
            return entry
        raise UnknownEntryError(entry_id, (e.id for e in self.entries))

    @functools.cached_property
    def _by_module(self) -> dict[str, tuple[Entry, ...]]:
        index: dict[str, list[Entry]] = {}
        for entry in self.entries:
            if entry.target.module is not None:
                index.setdefault(entry.target.module, []).append(entry)
        return {module: tuple(entries) for module, entries in index.items()}

    def by_module(self, module: str) -> tuple[Entry, ...]:
        # indexed once: every hooked module's import asks, and a registry has hundreds
        return self._by_module.get(module, ())


_ID_RE = re.compile(r"^[a-z][a-z0-9_]{2,63}$")
_DIST_RE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$")
_MODULE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_QUALNAME_RE = _MODULE_RE
_SHA_RE = re.compile(r"^sha256(-v2)?:[0-9a-f]{32}$")
_VERSION_RE = re.compile(r"^\d+(\.\d+)*([a-z]+\d*)?(\.(post|dev)\d+)?$")
_DEP3_FORWARDED = ("no", "not-needed")
_ENV_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

_COMMON_REQUIRED = ("id", "kind", "summary", "upstream", "retire_when", "owner", "added", "status")
_COMMON_OPTIONAL = ("target", "applies_to", "reproducer", "notes", "evidence", "retired")
_KIND_KEYS: dict[Kind, tuple[tuple[str, ...], tuple[str, ...]]] = {
    # kind: (required, optional) on top of the common keys
    Kind.SOURCE_PATCH: (("target", "applies_to", "overlay", "reproducer", "fingerprint"),
                        ("depends_on", "continued_by")),
    Kind.VERSION_FLOOR: (("target", "requires", "policy"), ("when",)),
    Kind.COMPAT_GATE: (("check",), ("policy",)),
    Kind.PACKAGING_PIN: (("target", "pin"), ("source", "policy", "when")),
    Kind.CONFIG: (("settings",), ()),
}


class _Ctx:
    """Where we are while validating, so every error names the file, entry and key."""

    def __init__(self, path: Path, drafts_required: bool = True) -> None:
        self.path = path
        self.entry_id: str | None = None
        self.drafts_required = drafts_required
        """False only for ``patchlane draft``, which writes the draft this rule asks for."""

    def fail(
        self,
        message: str,
        *,
        key: str | None = None,
        found: object = None,
        expected: str | None = None,
        fix: str | None = None,
    ) -> RegistryError:
        return RegistryError(
            self.path,
            message,
            entry_id=self.entry_id,
            key=key,
            found=found,
            expected=expected,
            fix=fix,
        )


def _expect_type(ctx: _Ctx, value: object, typ: type | tuple[type, ...], key: str,
                 what: str) -> Any:
    # bool is an int subclass; YAML `yes`/`no` surprises are exactly what this catches.
    types = typ if isinstance(typ, tuple) else (typ,)
    if isinstance(value, bool) and bool not in types:
        raise ctx.fail("wrong type", key=key, found=value, expected=what)
    if not isinstance(value, typ):
        raise ctx.fail(
            "wrong type", key=key, found=value, expected=f"{what} (got {type(value).__name__})"
        )
    return value


def _check_keys(ctx: _Ctx, data: Mapping[str, Any], required: Iterable[str],
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
            raise ctx.fail(
                f"missing required key in {where}",
                key=f"{prefix}{key}",
                found=None,
                expected="a value",
                fix=f"add `{key}:` to the entry",
            )


def _url_or_none(ctx: _Ctx, value: object, key: str) -> str | None:
    if value is None:
        return None
    text = _expect_type(ctx, value, str, key, "a URL string")
    if not text.startswith(("https://", "http://")):
        raise ctx.fail("not a URL", key=key, found=text, expected="an http(s) URL")
    return str(text)


def _specifier(ctx: _Ctx, value: object, key: str) -> SpecifierSet:
    text = _expect_type(ctx, value, str, key, "a PEP 440 specifier string such as '>=0.14,<0.18'")
    try:
        spec = SpecifierSet(text)
    except InvalidSpecifier as exc:
        raise ctx.fail(
            "invalid PEP 440 specifier",
            key=key,
            found=text,
            expected="a PEP 440 specifier such as '>=0.14,<0.18'",
            fix=str(exc),
        ) from None
    if not str(spec):
        raise ctx.fail("empty specifier", key=key, found=text, expected="at least one clause")
    return spec


def _has_upper_bound(spec: SpecifierSet) -> bool:
    return any(s.operator in ("<", "<=", "==", "===", "~=") for s in spec)


def _inside_folder(ctx: _Ctx, text: str, key: str) -> None:
    """Files a registry names stay in its folder: no absolute path, no ``..`` out of it
    (checked on the written path; a symlink inside the folder is the owner's choice)."""
    folder = os.path.normpath(ctx.path.parent)
    joined = os.path.normpath(os.path.join(folder, text))
    if os.path.isabs(text) or os.path.commonpath([folder, joined]) != folder:
        raise ctx.fail("path outside the registry's folder", key=key, found=text,
                       expected=f"a path inside {folder}",
                       fix="put the file beside the registry (e.g. patches/<id>.py) and name "
                       "it relative to it")


def _relative_file(ctx: _Ctx, value: object, key: str, entry_id: str) -> Path:
    text = _expect_type(ctx, value, str, key, "a path relative to the registry file")
    _inside_folder(ctx, text, key)
    path: Path = (ctx.path.parent / text).resolve()
    if not path.is_file():
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


def _target(ctx: _Ctx, value: object, kind: Kind) -> Target:
    data = _expect_type(ctx, value, dict, "target", "a mapping with `distribution` and `object`")
    needs_object = kind is Kind.SOURCE_PATCH
    _check_keys(ctx, data, ("distribution", "object") if needs_object else ("distribution",),
                ("version_from",) if needs_object else ("object", "version_from"), "target",
                "target.")
    dist = _expect_type(ctx, data["distribution"], str, "target.distribution",
                        "a distribution name such as 'megatron-core'")
    if not _DIST_RE.match(dist):
        raise ctx.fail("invalid distribution name", key="target.distribution", found=dist,
                       expected="a PyPI distribution name such as 'megatron-core'")
    module = qualname = None
    if data.get("object") is not None:
        obj = _expect_type(ctx, data["object"], str, "target.object", "'package.module:Qual.name'")
        module, sep, qualname = obj.partition(":")
        if not needs_object and not sep and _MODULE_RE.match(module):
            pass  # ledger kinds may name a module alone: where the check fires on import
        elif not sep or not _MODULE_RE.match(module) or not _QUALNAME_RE.match(qualname):
            raise ctx.fail(
                "invalid target object",
                key="target.object",
                found=obj,
                expected="'package.module:Qual.name' (module path, a colon, attribute path)",
            )
    version_from = None
    if data.get("version_from") is not None:
        version_from = _expect_type(ctx, data["version_from"], str, "target.version_from",
                                    "'package.module:attribute' holding the version string")
        vmod, vsep, vattr = version_from.partition(":")
        if not vsep or not _MODULE_RE.match(vmod) or not _QUALNAME_RE.match(vattr):
            raise ctx.fail("invalid version_from", key="target.version_from", found=version_from,
                           expected="'package.module:attribute' (e.g. "
                           "'megatron.core.package_info:__version__')")
    return Target(distribution=dist, module=module, qualname=qualname or None,
                  version_from=version_from)


def _upstream(ctx: _Ctx, value: object) -> Upstream:
    data = _expect_type(ctx, value, dict, "upstream", "a mapping")
    _check_keys(ctx, data, ("forwarded",),
                ("issue", "pr", "applied_upstream", "discussion", "distribution", "draft"),
                "upstream", "upstream.")
    forwarded = data["forwarded"]
    if forwarded is False:  # YAML 1.1 reads a bare `no` as false; DEP-3 means the string
        forwarded = "no"
    forwarded = _expect_type(ctx, forwarded, str, "upstream.forwarded",
                             "a URL, 'no' or 'not-needed' (DEP-3 Forwarded)")
    if forwarded not in _DEP3_FORWARDED:
        _url_or_none(ctx, forwarded, "upstream.forwarded")
    applied = data.get("applied_upstream")
    if applied is not None:
        applied = str(_expect_type(ctx, applied, str, "upstream.applied_upstream",
                                   "a release, commit or URL (DEP-3 Applied-Upstream)"))
    return Upstream(
        issue=_url_or_none(ctx, data.get("issue"), "upstream.issue"),
        pr=_url_or_none(ctx, data.get("pr"), "upstream.pr"),
        forwarded=str(forwarded),
        applied_upstream=applied,
        distribution=(_expect_type(ctx, data["distribution"], str, "upstream.distribution",
                                   "a distribution name") if data.get("distribution") else None),
        draft=_draft(ctx, data.get("draft")),
    )


def _draft(ctx: _Ctx, value: object) -> Path | None:
    if value is None:
        return None
    text = _expect_type(ctx, value, str, "upstream.draft", "a path relative to the registry "
                        "file, e.g. drafts/<id>.md")
    _inside_folder(ctx, text, "upstream.draft")
    path: Path = (ctx.path.parent / text).resolve()
    if ctx.drafts_required and not path.is_file():
        raise ctx.fail("draft does not exist", key="upstream.draft", found=text,
                       expected=f"an existing file relative to {ctx.path.parent}",
                       fix=f"run `patchlane draft {ctx.entry_id}` to write {path} from sweep "
                       "evidence, or correct the path")
    return path


def _require_draft(ctx: _Ctx, kind: Kind, status: Status, upstream: Upstream) -> None:
    # The rule this product exists for: every local patch names an upstream issue, a PR, or a
    # public-ready draft. A retired entry is upstream's now; it needs none.
    if (kind is not Kind.SOURCE_PATCH or status is not Status.ACTIVE
            or upstream.forwarded != "no" or upstream.draft is not None
            or not ctx.drafts_required):
        return
    raise ctx.fail(
        "a source patch not forwarded upstream needs a public-ready draft",
        key="upstream.draft", found="forwarded: no and no upstream.draft",
        expected=f"upstream.draft: drafts/{ctx.entry_id}.md (or forwarded: <the PR/issue URL>)",
        fix=f"run `patchlane draft {ctx.entry_id}` (it writes drafts/{ctx.entry_id}.md from the "
        "sweep's evidence) and add `draft: drafts/" + f"{ctx.entry_id}.md` under upstream",
    )


def _retire_when(ctx: _Ctx, value: object, upstream: Upstream) -> RetireWhen:
    data = _expect_type(ctx, value, dict, "retire_when",
                        "a mapping with `release`, `probe` and/or `upstream_released`")
    _check_keys(ctx, data, (), ("release", "probe", "upstream_released"), "retire_when",
                "retire_when.")
    release = None
    if data.get("release") is not None:
        release = _specifier(ctx, data["release"], "retire_when.release")
    probe = data.get("probe", False)
    _expect_type(ctx, probe, bool, "retire_when.probe", "true or false")
    released = data.get("upstream_released", False)
    _expect_type(ctx, released, bool, "retire_when.upstream_released", "true or false")
    if released and not (upstream.pr or upstream.issue):
        raise ctx.fail("upstream_released needs something to track",
                       key="retire_when.upstream_released", found=True,
                       expected="an upstream.pr or upstream.issue link")
    if release is None and not probe and not released:
        raise ctx.fail(
            "retirement condition is not machine-checkable",
            key="retire_when",
            found=data,
            expected="`release: <specifier>`, `probe: true` and/or `upstream_released: true`",
            fix="say which upstream release carries the fix, rely on the overlay's probe, or "
            "track the upstream PR",
        )
    return RetireWhen(release=release, probe=bool(probe), upstream_released=bool(released))


def _fingerprint(ctx: _Ctx, value: object) -> FingerprintSpec:
    data = _expect_type(ctx, value, dict, "fingerprint", "a mapping with `sha256` and `policy`")
    _check_keys(ctx, data, ("sha256",), ("policy", "covers", "objects", "releases"),
                "fingerprint", "fingerprint.")
    raw = data["sha256"]
    values = [raw] if isinstance(raw, str) else raw
    _expect_type(ctx, values, list, "fingerprint.sha256", "a fingerprint string or a list of them")
    if not values:
        raise ctx.fail("no fingerprint recorded", key="fingerprint.sha256", found=values,
                       expected="at least one 'sha256-v2:...' value",
                       fix="record the verified release's value: `patchlane fingerprint "
                       "--object MODULE:QUALNAME` with the entry's target.object (it reads no "
                       "registry)")
    for item in values:
        if not isinstance(item, str) or not _SHA_RE.match(item):
            raise ctx.fail(
                "invalid fingerprint",
                key="fingerprint.sha256",
                found=item,
                expected="'sha256-v2:' (or the legacy format-1 'sha256:') followed by 32 "
                "lowercase hex digits",
                fix=f"print the current value with `patchlane fingerprint {ctx.entry_id}`",
            )
    policy_raw = data.get("policy", "refuse")
    try:
        policy = FingerprintPolicy(policy_raw)
    except ValueError:
        raise ctx.fail("unknown drift policy", key="fingerprint.policy", found=policy_raw,
                       expected="'refuse' or 'warn'") from None
    lists = {}
    for key in ("covers", "objects"):
        items = data.get(key, [])
        _expect_type(ctx, items, list, f"fingerprint.{key}", "a list of qualnames")
        for item in items:
            if not isinstance(item, str) or not _QUALNAME_RE.match(item):
                raise ctx.fail("invalid qualname", key=f"fingerprint.{key}", found=item,
                               expected="a dotted attribute path in the target module")
        lists[key] = tuple(items)
    if lists["covers"] and lists["objects"]:
        raise ctx.fail("covers and objects are exclusive", key="fingerprint.objects",
                       found=data, expected="either covers (added to the target) or objects "
                       "(instead of the target)")
    releases = data.get("releases") or {}
    _expect_type(ctx, releases, dict, "fingerprint.releases",
                 "a mapping of release (quoted, e.g. \"0.16.1\") to its fingerprint")
    for release, value in releases.items():
        if not isinstance(release, str) or not _VERSION_RE.match(release):
            raise ctx.fail("invalid release", key="fingerprint.releases", found=release,
                           expected="a quoted release version such as \"0.16.1\"")
        if not isinstance(value, str) or not _SHA_RE.match(value):
            raise ctx.fail("invalid fingerprint", key=f"fingerprint.releases.{release}",
                           found=value, expected="'sha256-v2:' followed by 32 lowercase hex "
                           "digits", fix=f"print it with `patchlane fingerprint {ctx.entry_id}` "
                           "with that release installed")
    return FingerprintSpec(sha256=tuple(values), policy=policy, covers=lists["covers"],
                           objects=lists["objects"], releases=dict(releases))


def _date(ctx: _Ctx, value: object, key: str) -> _dt.date:
    if isinstance(value, _dt.datetime):
        return value.date()
    if isinstance(value, _dt.date):
        return value
    if isinstance(value, str):
        try:
            return _dt.date.fromisoformat(value)
        except ValueError:
            pass
    raise ctx.fail("invalid date", key=key, found=value, expected="an ISO date such as 2026-11-22")


def _when(ctx: _Ctx, value: object, target: Target) -> When:
    expected = ("a mapping such as `{imported: triton, env: {TRITON_INTERPRET: \"1\"}}`: "
                "the module whose import triggers the check and/or the environment variables "
                "that must hold")
    data = _expect_type(ctx, value, dict, "when", expected)
    _check_keys(ctx, data, (), ("imported", "env"), "when", "when.")
    if data.get("imported") is None and data.get("env") is None:
        raise ctx.fail("empty condition", key="when", found=data, expected=expected,
                       fix="name the module (`imported:`) and/or the environment (`env:`), or "
                       "drop `when:` to check as soon as the target module is imported")
    imported = ""
    if data.get("imported") is not None:
        imported = _expect_type(ctx, data["imported"], str, "when.imported",
                                "a module name such as 'triton'")
        if not _MODULE_RE.match(imported):
            raise ctx.fail("invalid module name", key="when.imported", found=imported,
                           expected="a dotted module path such as 'triton' or "
                           "'torch.distributed'")
    elif not _MODULE_RE.match(target.module or import_name(target.distribution)):
        raise ctx.fail("cannot tell which module the check waits for", key="when.imported",
                       found=target.distribution,
                       expected="`when: {imported: <module>}` (the distribution's name is not "
                       "a module name)")
    env: dict[str, str] = {}
    if data.get("env") is not None:
        raw = _expect_type(ctx, data["env"], dict, "when.env",
                           "a mapping of environment variable to its required value, such as "
                           "`{TRITON_INTERPRET: \"1\"}`")
        if not raw:
            raise ctx.fail("empty condition", key="when.env", found=raw,
                           expected="at least one `NAME: \"value\"`")
        for name, required in raw.items():
            if not isinstance(name, str) or not _ENV_RE.match(name):
                raise ctx.fail("invalid environment variable name", key="when.env", found=name,
                               expected="a name such as TRITON_INTERPRET")
            if not isinstance(required, str):
                # YAML reads `1` as an int and `yes` as a bool; the environment holds strings
                raise ctx.fail("wrong type", key=f"when.env.{name}", found=required,
                               expected="a quoted string such as \"1\" (the environment "
                               "holds text; compared exactly)")
            env[name] = required
    return When(imported, env)


def _policy(ctx: _Ctx, data: Mapping[str, Any], default: Policy) -> Policy:
    raw = data.get("policy", default.value)
    try:
        return Policy(raw)
    except ValueError:
        raise ctx.fail("unknown policy", key="policy", found=raw,
                       expected="'error' or 'warn'") from None


def _kind_spec(ctx: _Ctx, kind: Kind, data: Mapping[str, Any], target: Target) -> KindSpec | None:
    # `when` is only allowed on floors and pins (_KIND_KEYS)
    when = _when(ctx, data["when"], target) if data.get("when") is not None else None
    if kind is Kind.VERSION_FLOOR:
        return VersionFloor(_specifier(ctx, data["requires"], "requires"),
                            _policy(ctx, data, Policy.ERROR), when)
    if kind is Kind.PACKAGING_PIN:
        source = None
        if data.get("source") is not None:
            source = _expect_type(ctx, data["source"], str, "source",
                                  "the URL the distribution must be installed from "
                                  "(compared with its direct_url.json)")
        return PackagingPin(_specifier(ctx, data["pin"], "pin"), _policy(ctx, data, Policy.WARN),
                            source, when)
    if kind is Kind.COMPAT_GATE:
        text = _expect_type(ctx, data["check"], str, "check",
                            "'patches/<id>.py:function' that validates a run configuration")
        file, sep, function = text.rpartition(":")
        if not sep or not _QUALNAME_RE.match(function):
            raise ctx.fail("invalid check", key="check", found=text,
                           expected="'patches/<id>.py:function'")
        policy = _policy(ctx, data, Policy.ERROR)
        return CompatGate(_relative_file(ctx, file, "check", str(ctx.entry_id)), function, policy)
    if kind is Kind.CONFIG:
        settings = _expect_type(ctx, data["settings"], dict, "settings",
                                "a mapping of 'package.module.attribute' to value")
        if not settings:
            raise ctx.fail("no settings", key="settings", found=settings,
                           expected="at least one 'package.module.attribute: value'")
        for name, value in settings.items():
            module = str(name).rpartition(".")[0]
            if not module or not _MODULE_RE.match(str(name)):
                raise ctx.fail("invalid setting name", key=f"settings.{name}", found=name,
                               expected="'package.module.attribute' (e.g. "
                               "'torch._dynamo.config.recompile_limit')")
            if not isinstance(value, (bool, int, float, str)) or value is None:
                raise ctx.fail("invalid setting value", key=f"settings.{name}", found=value,
                               expected="a bool, number or string")
        return ConfigSettings(dict(settings))
    return None


def _entry(ctx: _Ctx, raw: object, index: int) -> Entry:
    ctx.entry_id = None
    data = _expect_type(ctx, raw, dict, f"entries[{index}]", "a mapping describing one entry")
    entry_id = data.get("id")
    if not isinstance(entry_id, str) or not _ID_RE.match(entry_id):
        raise ctx.fail(
            f"entries[{index}] has no valid id",
            key="id",
            found=entry_id,
            expected="a lowercase identifier ([a-z][a-z0-9_]{2,63}) used as the overlay and "
            "reproducer file name",
        )
    ctx.entry_id = entry_id
    kind_raw = data.get("kind")
    try:
        kind = Kind(kind_raw)
    except ValueError:
        raise ctx.fail("unknown kind", key="kind", found=kind_raw,
                       expected=f"one of {[k.value for k in Kind]}") from None
    required, optional = _KIND_KEYS[kind]
    _check_keys(ctx, data, _COMMON_REQUIRED + required, _COMMON_OPTIONAL + optional + required,
                f"a {kind.value} entry")
    try:
        status = Status(data["status"])
    except ValueError:
        raise ctx.fail("unknown status", key="status", found=data["status"],
                       expected="'active' or 'retired'") from None

    target = (
        _target(ctx, data["target"], kind)
        if data.get("target") is not None
        else Target(distribution="")
    )
    applies_to = None
    if data.get("applies_to") is not None:
        applies_to = _specifier(ctx, data["applies_to"], "applies_to")
        if kind is Kind.SOURCE_PATCH and not _has_upper_bound(applies_to):
            raise ctx.fail(
                "source patches need an upper bound",
                key="applies_to",
                found=str(applies_to),
                expected="a specifier with '<', '<=', '==' or '~=' (e.g. '>=0.14,<0.18')",
                fix="bound it by the first release you have not verified; an unbounded patch "
                "silently applies to releases nobody has tested",
            )
    summary = _expect_type(ctx, data["summary"], str, "summary", "a one-line description")
    owner = _expect_type(ctx, data["owner"], str, "owner", "a person or team")
    overlay = reproducer = None
    if data.get("overlay") is not None:
        overlay = _relative_file(ctx, data["overlay"], "overlay", entry_id)
    if data.get("reproducer") is not None:
        reproducer = _relative_file(ctx, data["reproducer"], "reproducer", entry_id)
    fingerprint = _fingerprint(ctx, data["fingerprint"]) if "fingerprint" in data else None
    upstream = _upstream(ctx, data["upstream"])
    _require_draft(ctx, kind, status, upstream)
    for key in ("notes", "evidence"):
        if data.get(key) is not None:
            _expect_type(ctx, data[key], (str, list, dict), key, "text, a list or a mapping")
    spec = _kind_spec(ctx, kind, data, target)
    retired = _date(ctx, data["retired"], "retired") if data.get("retired") is not None else None
    depends_on = _depends_on(ctx, data.get("depends_on"), entry_id)
    continued_by = _continued_by(ctx, data.get("continued_by"), entry_id)
    return Entry(
        id=entry_id,
        kind=kind,
        summary=summary,
        target=target,
        applies_to=applies_to,
        upstream=upstream,
        retire_when=_retire_when(ctx, data["retire_when"], upstream),
        owner=owner,
        added=_date(ctx, data["added"], "added"),
        status=status,
        source=ctx.path,
        overlay=overlay,
        reproducer=reproducer,
        fingerprint=fingerprint,
        spec=spec,
        notes=data.get("notes"),
        evidence=data.get("evidence"),
        retired=retired,
        depends_on=depends_on,
        continued_by=continued_by,
    )


def _depends_on(ctx: _Ctx, value: object, entry_id: str) -> tuple[str, ...]:
    if value is None:
        return ()
    items = _expect_type(ctx, value, list, "depends_on", "a list of entry ids")
    ids: list[str] = []
    for item in items:
        if not isinstance(item, str) or not _ID_RE.match(item):
            raise ctx.fail("not an entry id", key="depends_on", found=item,
                           expected="an id such as mcore_rerun_sentinel")
        if item == entry_id:
            raise ctx.fail("an entry cannot depend on itself", key="depends_on", found=item,
                           expected="other entries' ids", fix="remove it from depends_on")
        if item not in ids:
            ids.append(item)
    return tuple(ids)


def _continued_by(ctx: _Ctx, value: object, entry_id: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not _ID_RE.match(value):
        raise ctx.fail("not an entry id", key="continued_by", found=value,
                       expected="the id of the source patch that guards this bug on later "
                       "releases, e.g. mcore_dsa_streamed_index_scores_fn")
    if value == entry_id:
        raise ctx.fail("an entry cannot continue itself", key="continued_by", found=value,
                       expected="another entry's id",
                       fix="remove continued_by, or name the entry that guards the bug past "
                       "this entry's gate")
    return value


def _check_continuations(entries: Sequence[Entry]) -> None:
    """Every ``continued_by`` names a source patch of the loaded registries on the same
    distribution, and following the links never comes back to where it started."""
    import difflib

    by_id = {e.id: e for e in entries}
    for entry in entries:
        if entry.continued_by is None:
            continue
        other = by_id.get(entry.continued_by)
        if other is None:
            close = difflib.get_close_matches(entry.continued_by, list(by_id), n=1)
            raise RegistryError(
                entry.source, "unknown continuation", entry_id=entry.id, key="continued_by",
                found=entry.continued_by,
                expected="the id of a source_patch entry in a loaded registry"
                + (f" (did you mean {close[0]!r}?)" if close else ""),
                fix="correct the id, or load the registry that declares it (PATCHLANE_REGISTRY)")
        if other.kind is not Kind.SOURCE_PATCH or (
                other.target.distribution.lower() != entry.target.distribution.lower()):
            raise RegistryError(
                entry.source, "a continuation must be a source patch on the same distribution",
                entry_id=entry.id, key="continued_by",
                found=f"{other.id} ({other.kind.value} on "
                      f"{other.target.distribution or 'no distribution'})",
                expected=f"a source_patch entry whose target is {entry.target.distribution}",
                fix="name the entry that patches the same bug in a later release of "
                    f"{entry.target.distribution}, or remove continued_by")
        seen = [entry.id]
        step: Entry | None = other
        while step is not None:
            if step.id in seen:
                raise RegistryError(entry.source, "continuation cycle", entry_id=entry.id,
                                    key="continued_by",
                                    found=" -> ".join([*seen, step.id]),
                                    expected="a chain that ends (each link a later release)",
                                    fix="drop one continued_by link")
            seen.append(step.id)
            step = by_id.get(step.continued_by) if step.continued_by else None


def _check_dependencies(entries: Sequence[Entry]) -> None:
    """Every ``depends_on`` names a source patch of the loaded registries, with no cycle."""
    by_id = {e.id: e for e in entries}
    for entry in entries:
        for dep in entry.depends_on:
            target = by_id.get(dep)
            if target is None or target.kind is not Kind.SOURCE_PATCH:
                import difflib

                close = difflib.get_close_matches(dep, list(by_id), n=1)
                raise RegistryError(
                    entry.source, "unknown dependency" if target is None
                    else "a dependency must be a source patch", entry_id=entry.id,
                    key="depends_on", found=dep,
                    expected="the id of a source_patch entry in a loaded registry"
                    + (f" (did you mean {close[0]!r}?)" if close and target is None else ""),
                    fix="correct the id, or load the registry that declares it "
                        "(PATCHLANE_REGISTRY)")
    state: dict[str, int] = {}  # 1: on the path, 2: done

    def visit(entry_id: str, path: list[str]) -> None:
        if state.get(entry_id) == 2:
            return
        if state.get(entry_id) == 1:
            cycle = [*path[path.index(entry_id):], entry_id]
            first = by_id[cycle[0]]
            raise RegistryError(first.source, "dependency cycle", entry_id=first.id,
                                key="depends_on", found=" -> ".join(cycle),
                                expected="no cycle", fix="drop one depends_on link")
        state[entry_id] = 1
        for dep in by_id[entry_id].depends_on:
            visit(dep, [*path, entry_id])
        state[entry_id] = 2

    for entry in entries:
        visit(entry.id, [])


MAX_REGISTRY_BYTES = 16 * 2**20
"""A registry larger than this is refused before it is read: 2,000 entries take ~1 MiB."""


def read_registry_bytes(path: Path) -> bytes:
    """A registry file's bytes: a regular file of at most :data:`MAX_REGISTRY_BYTES`, or a
    :class:`RegistryError` naming it."""
    import stat

    try:
        # Only a regular file: a FIFO would block `import patchlane` forever and /dev/zero
        # would exhaust memory. fstat on the opened file, so a swap after the check is seen.
        with open(path, "rb", opener=lambda p, f: os.open(p, f | os.O_NONBLOCK)) as handle:
            info = os.fstat(handle.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise RegistryError(path, "not a regular file", found=_file_kind(info.st_mode),
                                    expected="a YAML file",
                                    fix="point PATCHLANE_REGISTRY at the registry file itself")
            if info.st_size > MAX_REGISTRY_BYTES:
                raise RegistryError(path, "registry file too large", found=info.st_size,
                                    expected=f"at most {MAX_REGISTRY_BYTES} bytes",
                                    fix="split it into several registries")
            return handle.read(MAX_REGISTRY_BYTES + 1)
    except OSError as exc:
        raise RegistryError(path, f"cannot read registry: {exc.strerror}",
                            fix="check PATCHLANE_REGISTRY and the file permissions") from None


def _file_kind(mode: int) -> str:
    import stat

    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISDIR, "a directory"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return "not a regular file"


def _refuse_shared(ctx: _Ctx, data: Any) -> None:
    """YAML anchors and aliases are allowed (teams share an ``upstream:`` or ``when:`` block),
    but not the "billion laughs": a few hundred bytes of nested aliases that expand to
    gigabytes wherever the value is walked or echoed. The expanded size is counted without
    expanding (each list or mapping once, memoised), so this is linear in the document; a
    recursive alias is refused too."""
    sizes: dict[int, int] = {}
    on_path: set[int] = set()
    # Iterative post-order walk: (value, children pushed?)
    stack: list[tuple[Any, bool]] = [(data, False)]
    while stack:
        value, expanded = stack.pop()
        if not isinstance(value, (dict, list)) or (not expanded and id(value) in sizes):
            continue
        children = list(value.values()) if isinstance(value, dict) else value
        if expanded:
            on_path.discard(id(value))
            sizes[id(value)] = 1 + sum(sizes.get(id(c), 1) for c in children)
            continue
        if id(value) in on_path:
            raise ctx.fail("recursive YAML alias", found="*alias", expected="a finite value",
                           fix="write the value out instead of referring to itself")
        on_path.add(id(value))
        stack.append((value, True))
        for child in children:
            if isinstance(child, (dict, list)):
                if id(child) in on_path:
                    raise ctx.fail("recursive YAML alias", found="*alias",
                                   expected="a finite value",
                                   fix="write the value out instead of referring to itself")
                stack.append((child, False))
    expanded_size, unique = sizes.get(id(data), 1), len(sizes)
    if expanded_size > 10 * unique + 10_000:
        raise ctx.fail("YAML aliases expand too far", found=f"{expanded_size} nodes from "
                       f"{unique} written", expected="aliases that expand at most ~10x",
                       fix="write the values out; nested aliases of aliases (the \"billion "
                       "laughs\") are refused because they expand without bound")


def _decode(path: Path, raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RegistryError(path, f"not UTF-8 text (byte {exc.start})",
                            fix="save the registry as UTF-8") from None


def parse_registry(path: Path, text: str | None = None, *,
                   drafts_required: bool = True) -> tuple[Entry, ...]:
    """Parse and validate one registry file. Raises :class:`RegistryError` on any problem.
    ``drafts_required=False`` lets ``patchlane draft`` read an entry whose draft it is about
    to write."""
    path = Path(path).resolve()
    ctx = _Ctx(path, drafts_required)
    if text is None:
        text = _decode(path, read_registry_bytes(path))
    try:
        data = yaml.load(text, Loader=_SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ctx.fail(f"invalid YAML{where}: {getattr(exc, 'problem', exc)}",
                       fix="fix the YAML syntax") from None
    if not isinstance(data, dict):
        raise ctx.fail("registry must be a mapping", found=type(data).__name__,
                       expected="a mapping with `schema: 1` and `entries: [...]`")
    _refuse_shared(ctx, data)
    _check_keys(ctx, data, ("schema", "entries"), (), "the registry")
    if type(data["schema"]) is not int or data["schema"] != SCHEMA_VERSION:
        raise ctx.fail("unsupported schema version", key="schema", found=data["schema"],
                       expected=str(SCHEMA_VERSION),
                       fix="upgrade patchlane or write the registry for schema 1")
    raw_entries = data["entries"]
    if not isinstance(raw_entries, list):
        raise ctx.fail("wrong type", key="entries", found=raw_entries,
                       expected="a list of entries")
    entries = [_entry(ctx, raw, i) for i, raw in enumerate(raw_entries)]
    seen: dict[str, int] = {}
    for i, entry in enumerate(entries):
        if entry.id in seen:
            ctx.entry_id = entry.id
            raise ctx.fail("duplicate id", key="id", found=entry.id,
                           expected=f"a unique id (entries[{seen[entry.id]}] already uses it)")
        seen[entry.id] = i
    return tuple(entries)


def load_registries(paths: Sequence[Path], *, drafts_required: bool = True) -> Registry:
    """Load several registry files as one. Duplicate ids across files are an error."""
    entries: list[Entry] = []
    contents: list[bytes] = []
    owners: dict[str, Path] = {}
    resolved: list[Path] = []
    for raw_path in paths:
        path = Path(raw_path).resolve()
        if path in resolved:
            continue  # the same file named twice (default + env) is one registry
        resolved.append(path)
        raw = read_registry_bytes(path)
        parsed = parse_registry(path, _decode(path, raw), drafts_required=drafts_required)
        contents.append(raw)
        for entry in parsed:
            if entry.id in owners:
                raise RegistryError(
                    path,
                    "duplicate id across registries",
                    entry_id=entry.id,
                    key="id",
                    found=entry.id,
                    expected=f"an id not already declared in {owners[entry.id]}",
                    fix="rename one of them or drop one registry from PATCHLANE_REGISTRY",
                )
            owners[entry.id] = path
            entries.append(entry)
    _check_dependencies(entries)
    _check_continuations(entries)
    return Registry(entries=tuple(entries), sources=tuple(resolved), contents=tuple(contents))
