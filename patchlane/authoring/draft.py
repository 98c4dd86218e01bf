"""Public-ready drafts for fixes not yet forwarded upstream (``forwarded: no``).

The rule this product exists to enforce: every local patch names an upstream issue, a PR, or a
draft someone could post today. ``patchlane draft ID`` writes ``drafts/<id>.md`` from what ran,
never from what was read:

* the symptom: the entry's summary and its overlay's docstring (why the fix is what it is);
* affected releases: the entry's rows in the sweep run directories given as evidence (each
  with the interpreter, lane and world size it ran on, and what the reproducer did with and
  without the overlay); releases no run covered are not listed as affected;
* the reproducer, whole, and its failing output without the overlay (the receipt's message);
* the change as a unified diff against the installed release's own file, from
  ``drafts/<id>.change.yaml``: the upstream object to change and a few exact-text edits to it,
  each ``{replace: TEXT, with: NEW}`` or, for a longer region, ``{from: FIRST, through: LAST,
  with: NEW}`` (two anchor lines, not the region). Edits, not a rewritten copy: the repository
  keeps no upstream code, and an edit whose text no longer occurs in a release fails loudly
  (the proposal drifted) instead of diffing against code that moved.

Local paths are written relative to the registry directory or the release's site directory,
so the text can be posted as it is.
"""

from __future__ import annotations

import ast
import datetime as _dt
import difflib
import io
import json
import re
import tokenize
from dataclasses import dataclass
from pathlib import Path

import yaml

from ..common.errors import PatchlaneError
from ..common.exit_codes import ExitCode
from ..installed.gates import locate_source, resolve_version
from ..registry import Entry
from ..runs.index import read_index
from ..runs.verdicts import MEANING, Verdict

__all__ = ["AppliedChange", "DraftError", "Proposal", "affected_rows", "apply_proposal",
           "draft_paths", "load_proposal", "overlay_docstring", "render_draft"]


class DraftError(PatchlaneError):
    exit_code = ExitCode.USAGE


@dataclass(frozen=True)
class Proposal:
    """``drafts/<id>.change.yaml``: the upstream object and exact-text edits to its source."""

    path: Path
    object: str
    """``module:Qualified.name``: the function upstream should change."""
    edits: tuple[tuple[str, str | None, str], ...]
    """``(from, through, with)``: the region from ``from`` to the end of the first ``through``
    after it (``through`` None: ``from`` alone) is replaced by ``with``; ``from`` occurs exactly
    once in the object's dedented source."""


def load_proposal(path: Path) -> Proposal:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise DraftError(f"{path}: cannot read the proposed change ({exc.strerror}). Fix: "
                         "write it: `object: module:Qualified.name` and `edits: [{replace: "
                         "..., with: ...}]`") from None
    except yaml.YAMLError as exc:
        raise DraftError(f"{path}: not YAML ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("object"), str) \
            or ":" not in data["object"] or not isinstance(data.get("edits"), list) \
            or not data["edits"]:
        found = sorted(data) if isinstance(data, dict) else type(data).__name__
        raise DraftError(f"{path}: expected `object: module:Qualified.name` and a non-empty "
                         f"`edits:` list; found {found}")
    edits: list[tuple[str, str | None, str]] = []
    for i, edit in enumerate(data["edits"]):
        keys = set(edit) if isinstance(edit, dict) else set()
        if keys not in ({"replace", "with"}, {"from", "through", "with"}) or not all(
                isinstance(edit[k], str) and (edit[k] or k == "with") for k in keys):
            raise DraftError(f"{path}: edits[{i}]: expected {{replace: <text>, with: <text>}} "
                             "or {from: <text>, through: <text>, with: <text>} (non-empty "
                             f"anchors); found {edit!r}")
        edits.append((edit["replace"], None, edit["with"]) if "replace" in edit
                     else (edit["from"], edit["through"], edit["with"]))
    return Proposal(path, data["object"], tuple(edits))


def _span(tree: ast.Module, qualname: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    scope: list[ast.stmt] = list(tree.body)
    node: ast.AST | None = None
    for part in qualname.split("."):
        node = next((n for n in scope if isinstance(
            n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and n.name == part), None)
        if node is None:
            return None
        scope = list(getattr(node, "body", []))
    return node if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) else None


@dataclass(frozen=True)
class AppliedChange:
    """A proposal applied, in memory, to the installed release's file."""

    module: str
    file: Path
    """The release's file, found on ``sys.path`` (untouched)."""
    original: str
    changed: str
    relative: str
    """``megatron/core/...``: the file's path inside the release."""
    site: Path
    """The directory holding the release's top package (``relative`` is under it)."""
    against: str
    """``megatron-core 0.19.2, megatron/core/...``: what the diff is against."""

    @property
    def diff(self) -> str:
        return "".join(difflib.unified_diff(
            self.original.splitlines(keepends=True), self.changed.splitlines(keepends=True),
            f"a/{self.relative}", f"b/{self.relative}"))


def apply_proposal(proposal: Proposal, distribution: str, *,
                   target_module: str | None = None) -> AppliedChange:
    """The proposal applied to the release on ``sys.path`` (found without importing it).
    Raises :class:`DraftError` when the object or an edit's text is not there.

    ``distribution`` is the entry's; the diff is labelled with the distribution that owns the
    changed module, which may be another one (a fix that belongs in torch for an entry gated
    on megatron-core). A module no installed distribution owns is labelled as the entry's only
    when it is in ``target_module``'s top package (a source tree on ``PYTHONPATH``), or when
    ``target_module`` is not given."""
    module, _, qualname = proposal.object.partition(":")
    file = locate_source(module)
    if file is None:
        raise DraftError(f"{proposal.path}: {module} is not on sys.path. Fix: install the "
                         f"release to diff against (or put its tree on PYTHONPATH)")
    text = file.read_text(encoding="utf-8")
    node = _span(ast.parse(text), qualname)
    if node is None:
        raise DraftError(f"{proposal.path}: {file} defines no function {qualname}: the object "
                         "moved in this release. Fix: point `object:` at where it lives now")
    lines = _lines(text)
    start = min([node.lineno, *(d.lineno for d in node.decorator_list)]) - 1
    end = node.end_lineno or node.lineno
    # The indentation is the def's (or its first decorator's) own, not the smallest common
    # one (textwrap.dedent): a multi-line string written flush left inside the function
    # would make that zero, and its lines are the string's text, never to be re-indented.
    indent = len(lines[start]) - len(lines[start].lstrip())
    prefix = lines[start][:indent]
    in_string = _string_lines(text)
    dedented = [_dedent_line(line, prefix, start + 1 + i in in_string)
                for i, line in enumerate(lines[start:end])]
    body = "".join(dedented)
    for i, (first, last, new) in enumerate(proposal.edits):
        count = body.count(first)
        if count != 1:
            raise DraftError(f"{proposal.path}: edits[{i}]: its first anchor occurs {count} "
                             f"times in {qualname} of {file} (expected exactly once): the "
                             "proposal no longer matches this release. Fix: update the edit")
        start_at = body.index(first)
        end_at = start_at + len(first)
        if last is not None:
            found = body.find(last, end_at)
            if found < 0:
                raise DraftError(f"{proposal.path}: edits[{i}]: `through` does not occur after "
                                 f"`from` in {qualname} of {file}. Fix: update the edit")
            end_at = found + len(last)
        body = body[:start_at] + new + body[end_at:]
    changed = _reindent(lines[start:end], dedented, body, prefix, proposal, qualname)
    root = _site_root(file, module)
    relative = file.relative_to(root).as_posix() if root else file.name
    return AppliedChange(
        module=module, file=file, original=text,
        changed="".join([*lines[:start], *changed, *lines[end:]]), relative=relative,
        site=root or file.parent,
        against=f"{_owner(module, distribution, target_module)}, {relative}")


def _lines(text: str) -> list[str]:
    """``text``'s lines as Python numbers them (``ast``, ``tokenize``): split only at
    ``\\n``, ``\\r\\n`` and ``\\r``, unlike ``str.splitlines`` (a form feed, U+2028)."""
    return io.StringIO(text, newline="").readlines()


def _string_lines(source: str) -> set[int]:
    """The (1-based) lines of ``source`` that start inside a string literal: the lines after
    the first of a multi-line string. Their leading whitespace is the string's text."""
    starts = {getattr(tokenize, n) for n in ("FSTRING_START", "TSTRING_START")
              if hasattr(tokenize, n)}
    ends = {getattr(tokenize, n) for n in ("FSTRING_END", "TSTRING_END") if hasattr(tokenize, n)}
    inside: set[int] = set()
    opened: list[int] = []  # the rows f-strings (3.12+: several tokens each) start on
    for tok in tokenize.generate_tokens(io.StringIO(source, newline="").readline):
        if tok.type == tokenize.STRING:
            inside.update(range(tok.start[0] + 1, tok.end[0] + 1))
        elif tok.type in starts:
            opened.append(tok.start[0])
        elif tok.type in ends and opened:
            inside.update(range(opened.pop() + 1, tok.end[0] + 1))
    return inside


def _dedent_line(line: str, prefix: str, in_string: bool) -> str:
    if in_string:
        return line
    if not line.strip():  # as textwrap.dedent: a whitespace-only line is an empty one
        return line[len(line.rstrip("\r\n")):]
    return line[len(prefix):] if line.startswith(prefix) else line


def _reindent(original: list[str], dedented: list[str], body: str, prefix: str,
              proposal: Proposal, qualname: str) -> list[str]:
    """The edited function's lines in the file: each line the edits left as it was is the
    original line, byte for byte; each new line gets the def's indentation, unless it is
    inside a string literal (its text) or blank."""
    new = _lines(body)
    try:
        in_string = _string_lines(body)
    except (tokenize.TokenError, SyntaxError) as exc:  # IndentationError is a SyntaxError
        raise DraftError(f"{proposal.path}: the edits leave {qualname} not valid Python "
                         f"({type(exc).__name__}: {exc}); expected the function, changed, "
                         "as upstream would merge it. Fix: correct the edits' `with:` "
                         "text") from None
    out: list[str] = []
    # difflib pairs the unchanged lines, so only what the edits wrote is re-indented.
    matcher = difflib.SequenceMatcher(None, dedented, new, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            out.extend(original[i1:i2])
            continue
        for j in range(j1, j2):
            line = new[j]
            out.append(line if j + 1 in in_string or not line.strip() else prefix + line)
    return out


def _owner(module: str, distribution: str, target_module: str | None) -> str:
    """``megatron-core 0.19.2``: the distribution that owns ``module``, and its version."""
    from importlib import metadata

    from packaging.utils import canonicalize_name

    top = module.partition(".")[0]
    owners = metadata.packages_distributions().get(top, [])
    mine = canonicalize_name(distribution) in {canonicalize_name(o) for o in owners}
    if mine or (not owners and (target_module is None
                                or target_module.partition(".")[0] == top)):
        version, _ = resolve_version(distribution)
        return f"{distribution} {version or '(version unknown)'}"
    if owners:
        other = sorted(owners)[0]
        try:
            version = metadata.version(other)
        except metadata.PackageNotFoundError:
            version = "(version unknown)"
        return f"{other} {version} (not {distribution}, the entry's distribution)"
    return (f"{top} (no installed distribution owns it, and it is not {distribution}, the "
            "entry's distribution; version unknown)")


def _site_root(file: Path, module: str) -> Path | None:
    # megatron/core/x.py for module megatron.core.x: the directory that holds the top package.
    depth = module.count(".") + 1
    return file.parents[depth - 1] if len(file.parents) >= depth else None


@dataclass(frozen=True)
class AffectedRow:
    run: str
    release: str | None
    python: str | None
    lane: str
    world_size: int
    verdict: Verdict
    without: str
    """The reproducer's message without the overlay (the failing output)."""
    stale: tuple[str, ...] = ()
    """Content parts (reproducer, overlay, entry) that changed since this run: its output is
    another version's (:mod:`patchlane.registry.content`)."""


def _not_a_run(text: str) -> DraftError:
    return DraftError(f"not a sweep run directory: {text}")


def affected_rows(entry: Entry, run_dirs: list[Path]) -> list[AffectedRow]:
    """``entry``'s rows in each run directory's ``index.json``, with the interpreter and the
    without-overlay message from the receipt. A directory that is not a sweep's is named."""
    from ..registry.content import changed_parts, entry_content

    now = entry_content(entry)
    rows: list[AffectedRow] = []
    for run_dir in run_dirs:
        try:
            index = read_index(run_dir, _not_a_run)
        except OSError as exc:
            raise _not_a_run(f"{run_dir}: {type(exc).__name__}: {exc}. Fix: pass --evidence "
                             "RUN_DIR written by `patchlane sweep`") from None
        for row in index.rows:
            if row.entry_id != entry.id or not row.receipts:
                continue
            try:
                receipt = json.loads((run_dir / row.receipts["without"])
                                     .read_text(encoding="utf-8"))
                runtime = receipt["provenance"]["runtime"]
            except (OSError, ValueError, KeyError, TypeError) as exc:
                raise DraftError(f"{run_dir}: not a sweep run directory ({type(exc).__name__}: "
                                 f"{exc}). Fix: pass --evidence RUN_DIR written by `patchlane "
                                 "sweep`") from None
            rows.append(AffectedRow(
                run=index.run_id, release=row.installed, python=runtime.get("python"),
                lane=row.lane, world_size=row.world_size, verdict=row.verdict,
                without=str(receipt.get("message", "")),
                stale=tuple(changed_parts(receipt.get("content"), now))))
    return rows


def forwarding(entry: Entry) -> str:
    """Where the fix stands upstream, as the entry says: a draft for an entry already forwarded
    (made with ``--pr``, say) must not call it unsent."""
    up = entry.upstream
    if up.forwarded not in (None, "no", "not-needed"):
        return f"Forwarded: {up.forwarded}."
    if up.pr:
        return f"Upstream pull request: {up.pr}."
    return "Not yet forwarded."


def render_draft(entry: Entry, rows: list[AffectedRow], change: AppliedChange | None, *,
                 today: _dt.date, overlay_doc: str | None,
                 verified: list[tuple[int, str, str]] | None = None) -> str:
    """The draft as Markdown (see the module docstring for what goes in)."""
    base = entry.source.parent
    title = entry.summary.split(". ")[0].rstrip(".")
    out = [f"# {title}", "",
           f"*Draft for upstream, written by `patchlane draft {entry.id}` on {today} from "
           f"{len({r.run for r in rows})} sweep run(s). {forwarding(entry)}*", "",
           "## Symptom", "", entry.summary.strip(), ""]
    if overlay_doc:
        out += ["### Why, and what the fix does (from the local fix's notes)", "",
                overlay_doc.strip(), ""]
    affected = [r for r in rows if MEANING[r.verdict].affected]
    out += ["## Affected releases (what ran)", ""]
    if rows:
        out += ["| release | Python | lane | world size | reproducer |", "|---|---|---|---|---|"]
        for r in sorted(rows, key=lambda r: (r.release or "", r.python or "", r.lane,
                                             r.world_size)):
            out.append(f"| {entry.target.distribution} {r.release or '?'} | {r.python or '?'} "
                       f"| {r.lane} | {r.world_size} | {MEANING[r.verdict].shows} "
                       "|")
        seen = ", ".join(sorted({r.release or "?" for r in affected})) or "none seen"
        out += ["", f"Affected: {seen}. Releases not in this table were not run and are not "
                "claimed.", ""]
    else:
        out += ["No sweep evidence was given (`--evidence RUN_DIR`): nothing is claimed.", ""]
    if entry.reproducer is not None:
        source = entry.reproducer.read_text(encoding="utf-8")
        out += ["## Reproducer", "",
                f"`{_rel(entry.reproducer, base)}` (it runs each rank in its own process, on "
                "CPU with gloo or on CUDA with NCCL; `run(ctx)` raises AssertionError when the "
                "bug shows"
                + ("; its helpers come from `pip install patchlane`" if "patchlane" in source
                   else "") + "):", "", "```python", source.rstrip(), "```", ""]
        # the output of this reproducer, never an earlier version's when a current one exists
        failing = next((r for r in affected if r.without and "reproducer" not in r.stale),
                       None) or next((r for r in affected if r.without), None)
        if failing is not None:
            top = (entry.target.module or "").partition(".")[0]
            out += [f"Output without the fix ({entry.target.distribution} {failing.release}, "
                    f"Python {failing.python}, {failing.lane}, world size "
                    f"{failing.world_size}):", "", "```text",
                    f"AssertionError: {_site_relative(failing.without, top)}", "```", ""]
            if "reproducer" in failing.stale:
                out += ["**Stale:** this output came from an earlier version of the reproducer "
                        f"(run {failing.run} recorded other content); sweep again before "
                        "sending.", ""]
    out += ["## Proposed change", ""]
    if change is not None:
        out += [f"Against {change.against}:", "", "```diff", change.diff.rstrip(), "```", ""]
        if verified is None:
            out += ["Not run with this change applied (`patchlane draft --verify` runs the "
                    "reproducer against the release with it).", ""]
        else:
            ok = all(outcome == "pass" for _, outcome, _ in verified)
            out += [("Verified" if ok else "**Not verified**") + f" on {today}: the "
                    "reproducer, run against a copy of the release with this change written in "
                    "and no local fix, "
                    + ("passes" if ok else "does not pass") + " ("
                    + "; ".join(f"world size {ws}: {outcome}"
                                + (f", {_site_relative(msg, change.module.partition('.')[0])}"
                                   if outcome != "pass" else "")
                                for ws, outcome, msg in verified) + ", cpu).", ""]
    else:
        out += ["(no `drafts/<id>.change.yaml`: the change is the overlay "
                f"`{_rel(entry.overlay, base) if entry.overlay else '-'}`)", ""]
    links = [f"- {k}: {v}" for k, v in (("issue", entry.upstream.issue),
                                         ("pull request", entry.upstream.pr)) if v]
    if links:
        out += ["## Links", "", *links, ""]
    return "\n".join(out).rstrip() + "\n"


def _site_relative(text: str, top: str) -> str:
    """Paths into the installed release as ``megatron/...``: no local directory in a draft."""
    if not top:
        return text
    return re.sub(rf"(?:[^\s'\"(]*/)(?={re.escape(top)}/)", "", text)


def _rel(path: Path, base: Path) -> str:
    try:
        return path.resolve().relative_to(base.resolve()).as_posix()
    except ValueError:
        return path.name


def overlay_docstring(entry: Entry) -> str | None:
    """The overlay file's module docstring, read without importing it."""
    if entry.overlay is None:
        return None
    return ast.get_docstring(ast.parse(entry.overlay.read_text(encoding="utf-8")))


def draft_paths(entry: Entry) -> tuple[Path, Path]:
    """``drafts/<id>.md`` (or the entry's ``upstream.draft``) and ``drafts/<id>.change.yaml``."""
    folder = entry.source.parent / "drafts"
    md = entry.upstream.draft or folder / f"{entry.id}.md"
    return md, md.with_name(f"{entry.id}.change.yaml")


