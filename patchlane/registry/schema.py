"""The registry schema: a parsed YAML document validated into :mod:`records <.records>`.

This is the only place entries are built. Every rule a registry file must follow lives here,
and every error names the file, entry and key that broke it (:class:`Fields`). The rules across
files (``depends_on``, ``continued_by``) run once all files are read (:mod:`.loader`).
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from packaging.specifiers import SpecifierSet

from ..common.errors import RegistryError
from ..common.versions import version_problem
from .fields import (
    DIST_RE,
    MODULE_RE,
    Fields,
    check_keys,
    expect_type,
    inside_folder,
    relative_file,
    resolved_file,
    specifier,
)
from .kinds import KINDS, Kind
from .per_kind import PARTS
from .records import (
    Entry,
    FingerprintPolicy,
    FingerprintSpec,
    RetireWhen,
    Status,
    Target,
    Upstream,
)

__all__ = ["SCHEMA_VERSION", "VERSION_FROM_RE", "check_continuations", "check_dependencies",
           "validate_document"]

SCHEMA_VERSION = 1

_ID_RE = re.compile(r"^[a-z][a-z0-9_]{2,63}$")
_QUALNAME_RE = MODULE_RE
VERSION_FROM_RE = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*")
"""``target.version_from`` (and ``patchlane new --version-from``): a module and one attribute
of it, which the gate reads with ``getattr`` (:func:`patchlane.installed.gates.resolve_version`)."""
_SHA_RE = re.compile(r"^sha256(-v2)?:[0-9a-f]{32}$")
_VERSION_RE = re.compile(r"^\d+(\.\d+)*([a-z]+\d*)?(\.(post|dev)\d+)?$")
_DEP3_FORWARDED = ("no", "not-needed")

_COMMON_REQUIRED = ("id", "kind", "summary", "upstream", "retire_when", "owner", "added", "status")
_COMMON_OPTIONAL = ("target", "applies_to", "reproducer", "notes", "evidence", "retired")


def _url_or_none(ctx: Fields, value: object, key: str) -> str | None:
    if value is None:
        return None
    text = expect_type(ctx, value, str, key, "a URL string")
    if not text.startswith(("https://", "http://")):
        raise ctx.fail("not a URL", key=key, found=text, expected="an http(s) URL")
    return str(text)


def _has_upper_bound(spec: SpecifierSet) -> bool:
    return any(s.operator in ("<", "<=", "==", "===", "~=") for s in spec)


def _target(ctx: Fields, value: object, kind: Kind) -> Target:
    data = expect_type(ctx, value, dict, "target", "a mapping with `distribution` and `object`")
    needs_object = KINDS[kind].with_overlay
    check_keys(ctx, data, ("distribution", "object") if needs_object else ("distribution",),
                ("version_from", "shape") if needs_object else ("object", "version_from"),
                "target",
                "target.")
    dist = expect_type(ctx, data["distribution"], str, "target.distribution",
                        "a distribution name such as 'megatron-core'")
    if not DIST_RE.match(dist):
        raise ctx.fail("invalid distribution name", key="target.distribution", found=dist,
                       expected="a PyPI distribution name such as 'megatron-core'")
    module = qualname = None
    if data.get("object") is not None:
        obj = expect_type(ctx, data["object"], str, "target.object", "'package.module:Qual.name'")
        module, sep, qualname = obj.partition(":")
        if not needs_object and not sep and MODULE_RE.match(module):
            pass  # ledger kinds may name a module alone: where the check fires on import
        elif not sep or not MODULE_RE.match(module) or not _QUALNAME_RE.match(qualname):
            raise ctx.fail(
                "invalid target object",
                key="target.object",
                found=obj,
                expected="'package.module:Qual.name' (module path, a colon, attribute path)",
            )
    version_from = None
    if data.get("version_from") is not None:
        version_from = expect_type(ctx, data["version_from"], str, "target.version_from",
                                    "'package.module:attribute' holding the version string")
        if not VERSION_FROM_RE.fullmatch(version_from):
            raise ctx.fail("invalid version_from", key="target.version_from", found=version_from,
                           expected="'package.module:attribute', one attribute name the module "
                           "defines (e.g. 'megatron.core.package_info:__version__')")
    shape = None
    if data.get("shape") is not None:
        # The shapes are listed once, where each is implemented (read only when a registry
        # names one: a start from the cache never gets here).
        from ..targets import SHAPE_NAMES

        names = ", ".join(SHAPE_NAMES)
        shape = expect_type(ctx, data["shape"], str, "target.shape", f"one of {names}")
        if shape not in SHAPE_NAMES:
            raise ctx.fail("unknown target shape", key="target.shape", found=shape,
                           expected=f"one of {names} (what the target is, as the overlay was "
                           "written for it); or leave it out to accept whatever is found")
    return Target(distribution=dist, module=module, qualname=qualname or None,
                  version_from=version_from, shape=shape)


def _upstream(ctx: Fields, value: object) -> Upstream:
    data = expect_type(ctx, value, dict, "upstream", "a mapping")
    check_keys(ctx, data, ("forwarded",),
                ("issue", "pr", "applied_upstream", "discussion", "distribution", "draft"),
                "upstream", "upstream.")
    forwarded = data["forwarded"]
    if forwarded is False:  # YAML 1.1 reads a bare `no` as false; DEP-3 means the string
        forwarded = "no"
    forwarded = expect_type(ctx, forwarded, str, "upstream.forwarded",
                             "a URL, 'no' or 'not-needed' (DEP-3 Forwarded)")
    if forwarded not in _DEP3_FORWARDED:
        _url_or_none(ctx, forwarded, "upstream.forwarded")
    applied = data.get("applied_upstream")
    if applied is not None:
        applied = str(expect_type(ctx, applied, str, "upstream.applied_upstream",
                                   "a release, commit or URL (DEP-3 Applied-Upstream)"))
    return Upstream(
        issue=_url_or_none(ctx, data.get("issue"), "upstream.issue"),
        pr=_url_or_none(ctx, data.get("pr"), "upstream.pr"),
        discussion=_url_or_none(ctx, data.get("discussion"), "upstream.discussion"),
        forwarded=str(forwarded),
        applied_upstream=applied,
        distribution=(expect_type(ctx, data["distribution"], str, "upstream.distribution",
                                   "a distribution name") if data.get("distribution") else None),
        draft=_draft(ctx, data.get("draft")),
    )


def _draft(ctx: Fields, value: object) -> Path | None:
    if value is None:
        return None
    text = expect_type(ctx, value, str, "upstream.draft", "a path relative to the registry "
                        "file, e.g. drafts/<id>.md")
    inside_folder(ctx, text, "upstream.draft")
    path = resolved_file(ctx, text, "upstream.draft")
    if ctx.drafts_required and not ctx.exists(ctx.path.parent / text, path, "upstream.draft"):
        raise ctx.fail("draft does not exist", key="upstream.draft", found=text,
                       expected=f"an existing file relative to {ctx.path.parent}",
                       fix=f"run `patchlane draft {ctx.entry_id}` to write {path} from sweep "
                       "evidence, or correct the path")
    return path


def _require_draft(ctx: Fields, kind: Kind, status: Status, upstream: Upstream) -> None:
    # The rule this product exists for: every local patch names an upstream issue, a PR, or a
    # public-ready draft. A retired entry is upstream's now; it needs none.
    if (not KINDS[kind].with_overlay or status is not Status.ACTIVE
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


def _retire_when(ctx: Fields, value: object, upstream: Upstream) -> RetireWhen:
    data = expect_type(ctx, value, dict, "retire_when",
                        "a mapping with `release`, `probe`, `upstream_released` and/or "
                        "`reproducer`")
    check_keys(ctx, data, (), ("release", "probe", "upstream_released", "reproducer"),
                "retire_when", "retire_when.")
    release = None
    if data.get("release") is not None:
        release = specifier(ctx, data["release"], "retire_when.release")
    flags = {}
    for key in ("probe", "upstream_released", "reproducer"):
        flags[key] = data.get(key, False)
        expect_type(ctx, flags[key], bool, f"retire_when.{key}", "true or false")
    if flags["upstream_released"] and not (upstream.pr or upstream.issue):
        raise ctx.fail("upstream_released needs something to track",
                       key="retire_when.upstream_released", found=True,
                       expected="an upstream.pr or upstream.issue link")
    if release is None and not any(flags.values()):
        raise ctx.fail(
            "retirement condition is not machine-checkable",
            key="retire_when",
            found=data,
            expected="`release: <specifier>`, `probe: true`, `upstream_released: true` and/or "
            "`reproducer: true`",
            fix="say which upstream release carries the fix, rely on the overlay's probe, "
            "track the upstream PR, or retire on a sweep where the reproducer passes without "
            "the overlay",
        )
    return RetireWhen(release=release, probe=bool(flags["probe"]),
                      upstream_released=bool(flags["upstream_released"]),
                      reproducer=bool(flags["reproducer"]))


def _fingerprint(ctx: Fields, value: object) -> FingerprintSpec:
    data = expect_type(ctx, value, dict, "fingerprint", "a mapping with `sha256` and `policy`")
    check_keys(ctx, data, ("sha256",), ("policy", "covers", "objects", "releases"),
                "fingerprint", "fingerprint.")
    raw = data["sha256"]
    values = [raw] if isinstance(raw, str) else raw
    expect_type(ctx, values, list, "fingerprint.sha256", "a fingerprint string or a list of them")
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
        expect_type(ctx, items, list, f"fingerprint.{key}", "a list of qualnames")
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
    expect_type(ctx, releases, dict, "fingerprint.releases",
                 "a mapping of release (quoted, e.g. \"0.16.1\") to its fingerprint")
    for release, value in releases.items():
        if not isinstance(release, str) or not _VERSION_RE.match(release) \
                or version_problem(release):
            raise ctx.fail("invalid release", key="fingerprint.releases", found=release,
                           expected="a quoted release version such as \"0.16.1\"",
                           fix=version_problem(release) or "write it as PEP 440 spells it")
        if not isinstance(value, str) or not _SHA_RE.match(value):
            raise ctx.fail("invalid fingerprint", key=f"fingerprint.releases.{release}",
                           found=value, expected="'sha256-v2:' followed by 32 lowercase hex "
                           "digits", fix=f"print it with `patchlane fingerprint {ctx.entry_id}` "
                           "with that release installed")
    return FingerprintSpec(sha256=tuple(values), policy=policy, covers=lists["covers"],
                           objects=lists["objects"], releases=dict(releases))


def _date(ctx: Fields, value: object, key: str) -> _dt.date:
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


def _entry(ctx: Fields, raw: object, index: int) -> Entry:
    ctx.entry_id = None
    data = expect_type(ctx, raw, dict, f"entries[{index}]", "a mapping describing one entry")
    entry_id, kind, status = _identity(ctx, data, index)
    target = (
        _target(ctx, data["target"], kind)
        if data.get("target") is not None
        else Target(distribution="")
    )
    applies_to = _applies_to(ctx, data, kind)
    summary = expect_type(ctx, data["summary"], str, "summary", "a one-line description")
    owner = expect_type(ctx, data["owner"], str, "owner", "a person or team")
    overlay = reproducer = None
    if data.get("overlay") is not None:
        overlay = relative_file(ctx, data["overlay"], "overlay", entry_id)
    if data.get("reproducer") is not None:
        reproducer = relative_file(ctx, data["reproducer"], "reproducer", entry_id)
    fingerprint = _fingerprint(ctx, data["fingerprint"]) if "fingerprint" in data else None
    upstream = _upstream(ctx, data["upstream"])
    _require_draft(ctx, kind, status, upstream)
    for key in ("notes", "evidence"):
        if data.get(key) is not None:
            expect_type(ctx, data[key], (str, list, dict), key, "text, a list or a mapping")
    spec = PARTS[kind].parse(ctx, data, target)
    retired = _date(ctx, data["retired"], "retired") if data.get("retired") is not None else None
    retire_when = _retire_when(ctx, data["retire_when"], upstream)
    _check_retirement(ctx, retire_when, kind, entry_id, overlay, reproducer)
    return Entry(
        id=entry_id,
        kind=kind,
        summary=summary,
        target=target,
        applies_to=applies_to,
        upstream=upstream,
        retire_when=retire_when,
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
        depends_on=_depends_on(ctx, data.get("depends_on"), entry_id),
        continued_by=_continued_by(ctx, data.get("continued_by"), entry_id),
        applies_to_written=data["applies_to"].strip() if applies_to is not None else None,
    )


def _identity(ctx: Fields, data: Mapping[str, Any], index: int) -> tuple[str, Kind, Status]:
    """The entry's id, kind and status, and its keys checked against its kind's."""
    entry_id = data.get("id")
    if not isinstance(entry_id, str) or not _ID_RE.match(entry_id):
        like = re.sub(r"[^a-z0-9_]+", "_", str(entry_id).lower()).strip("_") \
            if isinstance(entry_id, str) else ""
        raise ctx.fail(
            f"entries[{index}] has no valid id",
            key="id",
            found=entry_id,
            expected="a lowercase identifier ([a-z][a-z0-9_]{2,63}) used as the overlay and "
            "reproducer file name",
            fix=(f"write `id: {like}`" if _ID_RE.match(like) else
                 "give the entry an `id:` of 3 to 64 lowercase letters, digits and "
                 "underscores, starting with a letter"),
        )
    ctx.entry_id = entry_id
    kind_raw = data.get("kind")
    try:
        kind = Kind(kind_raw)
    except ValueError:
        import difflib

        kinds = [k.value for k in Kind]
        close = difflib.get_close_matches(str(kind_raw).replace("-", "_").lower(), kinds, n=1)
        raise ctx.fail("unknown kind", key="kind", found=kind_raw,
                       expected=f"one of {kinds}",
                       fix=f"write `kind: {close[0]}`" if close and kind_raw is not None
                       else f"add `kind:`, one of {', '.join(kinds)}") from None
    required, optional = KINDS[kind].required, KINDS[kind].optional
    check_keys(ctx, data, _COMMON_REQUIRED + required, _COMMON_OPTIONAL + optional + required,
                f"a {kind.value} entry")
    try:
        status = Status(data["status"])
    except ValueError:
        raise ctx.fail("unknown status", key="status", found=data["status"],
                       expected="'active' or 'retired'") from None
    return entry_id, kind, status


def _applies_to(ctx: Fields, data: Mapping[str, Any], kind: Kind) -> SpecifierSet | None:
    applies_to = None
    if data.get("applies_to") is not None:
        applies_to = specifier(ctx, data["applies_to"], "applies_to")
        if KINDS[kind].with_overlay and not _has_upper_bound(applies_to):
            raise ctx.fail(
                "source patches need an upper bound",
                key="applies_to",
                found=str(applies_to),
                expected="a specifier with '<', '<=', '==' or '~=' (e.g. '>=0.14,<0.18')",
                fix="bound it by the first release you have not verified; an unbounded patch "
                "silently applies to releases nobody has tested",
            )
    return applies_to


def _check_retirement(ctx: Fields, retire_when: RetireWhen, kind: Kind, entry_id: str,
                      overlay: Path | None, reproducer: Path | None) -> None:
    """What ``retire_when`` asks for must exist: a reproducer to run, an overlay to probe."""
    if retire_when.reproducer and reproducer is None:
        raise ctx.fail("retirement on the reproducer needs one", key="retire_when.reproducer",
                       found=True, expected=f"`reproducer: reproducers/{entry_id}.py`",
                       fix="add the reproducer, or name another condition")
    # A config entry's probe is built in (upstream's default already equals the setting); a
    # floor, pin or compat gate has no overlay, so nothing could ever report upstream-fixed.
    if retire_when.probe and overlay is None and not KINDS[kind].own_probe:
        raise ctx.fail("a probe needs an overlay", key="retire_when.probe", found=True,
                       expected=f"a {kind.value} entry retires on `release`, "
                       "`upstream_released` or `reproducer` (it has no overlay to probe)",
                       fix="replace `probe: true` with `reproducer: true` and a reproducer that "
                       "fails where the workaround is needed")


def _depends_on(ctx: Fields, value: object, entry_id: str) -> tuple[str, ...]:
    if value is None:
        return ()
    items = expect_type(ctx, value, list, "depends_on", "a list of entry ids")
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


def _continued_by(ctx: Fields, value: object, entry_id: str) -> str | None:
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


def check_continuations(entries: Sequence[Entry]) -> None:
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
        if not KINDS[other.kind].with_overlay or (
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


def check_dependencies(entries: Sequence[Entry], refused: Sequence[Path] = ()) -> None:
    """Every ``depends_on`` names a source patch of the loaded registries, with no cycle.
    ``refused``: the registry files refused on their own, which may declare a missing id."""
    by_id = {e.id: e for e in entries}
    for entry in entries:
        for dep in entry.depends_on:
            target = by_id.get(dep)
            if target is None or not KINDS[target.kind].with_overlay:
                import difflib

                others = [i for i in by_id if i != entry.id]  # never itself
                close = difflib.get_close_matches(dep, others, n=1)
                fix = "correct the id, or load the registry that declares it (PATCHLANE_REGISTRY)"
                if target is None and refused:
                    fix = (f"if {dep!r} is in {', '.join(str(p) for p in refused)}, which was "
                           "refused (its error is said with it), fix that file; else " + fix)
                raise RegistryError(
                    entry.source, "unknown dependency" if target is None
                    else "a dependency must be a source patch", entry_id=entry.id,
                    key="depends_on", found=dep,
                    expected="the id of a source_patch entry in a loaded registry"
                    + (f" (did you mean {close[0]!r}?)" if close and target is None else ""),
                    fix=fix)
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


def validate_document(path: Path, data: Mapping[str, Any], *, drafts_required: bool = True,
                      checked: list[tuple[Path, Path]] | None = None) -> tuple[Entry, ...]:
    """The entries of one registry file's document (a mapping, from
    :func:`.safe_yaml.load_document`), each validated; raises :class:`RegistryError` on the first
    problem. ``drafts_required=False`` lets ``patchlane draft`` read an entry whose draft it is
    about to write. ``checked``, when given, collects every file whose existence a rule
    checked (as written, before symlinks are resolved)."""
    ctx = Fields(path, drafts_required, checked)
    check_keys(ctx, data, ("schema", "entries"), (), "the registry")
    if type(data["schema"]) is not int or data["schema"] != SCHEMA_VERSION:
        raise ctx.fail("unsupported schema version", key="schema", found=data["schema"],
                       expected=str(SCHEMA_VERSION),
                       fix="upgrade patchlane or write the registry for schema 1")
    raw_entries = data["entries"]
    if not isinstance(raw_entries, list):
        raise ctx.fail("wrong type", key="entries", found=raw_entries,
                       expected="a list of entries",
                       fix="write each entry under `entries:` as a list item, `- id: ...` "
                           "(or `entries: []` for none)")
    entries = [_entry(ctx, raw, i) for i, raw in enumerate(raw_entries)]
    seen: dict[str, int] = {}
    for i, entry in enumerate(entries):
        if entry.id in seen:
            ctx.entry_id = entry.id
            raise ctx.fail("duplicate id", key="id", found=entry.id,
                           expected=f"a unique id (entries[{seen[entry.id]}] already uses it)",
                           fix=f"rename entries[{i}], or delete it if it is a copy")
        seen[entry.id] = i
    return tuple(entries)
