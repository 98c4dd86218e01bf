"""Has the fix landed, and in which release? Answered from a local git clone or mirror.

Training clusters often cannot reach api.github.com; a ``git clone --mirror`` of the upstream
repository (it carries ``refs/pull/N/head``) answers the same question :func:`~patchlane.upstream
.track.track` asks GitHub, and :func:`track_git` returns the same
:class:`~patchlane.upstream.records.TrackReport`. What git can tell, and how:

* **landed** -- a commit on a branch or tag (``refs/pull/*`` are not landings) names the PR:
  GitHub's squash subject ``... (#4448)`` (release-branch cherry-picks keep it), a merge commit
  ``Merge pull request #4448 from ...``, or a body line ending in ``(#4448)``; the number
  matches exactly (``#44480`` is another PR). ``Revert "..."`` commits are not landings: a tag
  that carries a revert of the PR does not carry the fix. When ``refs/pull/N/head`` exists and
  is on the default branch, the PR was merged as it was (merge commit or fast-forward).
* **cherry-picked under another subject** -- ``git patch-id --stable`` of the PR (its diff from
  the merge-base with the default branch to ``refs/pull/N/head``) and of every landing commit
  found above, compared with the patch-ids of the commits in release tags but not on the
  default branch (a few hundred commits for Megatron-LM: the whole history is never hashed).
* **released in** -- among the tags ``tag_template`` makes (final releases; prereleases only
  with ``include_prereleases``), in version order, the first that contains a landing commit.

Git cannot tell an open pull request from one closed without merging, nor read an issue:
a PR that has not landed is :attr:`UpstreamState.OPEN
<patchlane.upstream.records.UpstreamState.OPEN>` with a reason that says so, and the report's
``issue`` is None. Nor can it always tell which repository a PR URL means: when the repository
has remotes and none is the PR's ``github.com/OWNER/REPO``, the reason says so (a mirror without
remotes cannot be checked).
"""

from __future__ import annotations

import datetime as _dt
import os
import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from packaging.version import Version

from ..common.versions import parse_version
from .errors import UpstreamError
from .github import require_kind
from .records import PullState, TrackReport, UpstreamState
from .track import gate_names_release, release_note, tag_name

if TYPE_CHECKING:
    from ..registry import Entry

__all__ = ["GitRepo", "GitRepoError", "Landing", "track_git"]

_TIMEOUT = 600.0  # seconds for one git command; a local repository answers in well under one
# Flags that keep diffs identical whatever the user's git config says, so that patch-ids of
# the PR and of release-branch commits are computed the same way.
_DIFF_FLAGS = ("--no-color", "--no-ext-diff", "--no-textconv", "--no-renames", "--full-index",
               "--binary")
_CONFIG = ("-c", "diff.noprefix=false", "-c", "diff.mnemonicPrefix=false",
           "-c", "core.quotePath=true", "-c", "log.showSignature=false")
# Inherited GIT_* variables would make git read another repository than the one named (a test
# run from a git hook has GIT_DIR set).
_REPO_ENV = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY",
             "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_COMMON_DIR", "GIT_NAMESPACE")


class GitRepoError(UpstreamError):
    """A git repository cannot answer: missing, not a repository, git not installed, or a git
    command failed. ``path`` is the repository as given; ``found`` what was there instead."""

    def __init__(self, path: Path | str, found: str, fix: str,
                 expected: str = "a clone or a `git clone --mirror` of the upstream "
                                 "repository, readable with the git command line") -> None:
        self.path = str(path)
        self.found = found
        super().__init__(f"git repository {self.path}: {found}; expected {expected}. "
                         f"Fix: {fix}")


@dataclass(frozen=True)
class Landing:
    """One commit that carries the PR's change on a branch or tag, and how it was recognised."""

    sha: str
    how: Literal["squash", "backport", "merge", "message", "pr-head", "cherry-pick"]
    """``squash``: on the default branch, the subject names the PR ``(#N)``; ``backport``:
    the same on another branch (a release-branch cherry-pick that kept the subject); ``merge``:
    ``Merge pull request #N``; ``message``: a body line ends in ``(#N)``; ``pr-head``:
    ``refs/pull/N/head`` itself is on the default branch; ``cherry-pick``: same patch-id as the
    PR or one of the commits above, under another subject."""
    subject: str
    committed_at: _dt.datetime
    where: str
    """The branch (short name) that carries it: the default branch if it does, else the
    shortest-named branch, else a tag."""
    same_as: str | None = None
    """For ``cherry-pick``: what its patch-id matched (``refs/pull/N/head`` or a commit)."""

    def describe(self) -> str:
        """``squash commit 3d7bcd3a37 on main``, ``cherry-pick abc1234567 on core_r0.17.0
        (same patch-id as refs/pull/4448/head)``."""
        noun = {"squash": "squash commit", "backport": "backport", "merge": "merge commit",
                "message": "commit", "pr-head": "PR head", "cherry-pick": "cherry-pick"}
        text = f"{noun[self.how]} {self.sha[:10]} on {self.where}"
        if self.how in ("backport", "message"):
            text += f" (its {'subject' if self.how == 'backport' else 'message'} names the PR)"
        if self.same_as is not None:
            text += f" (same patch-id as {self.same_as})"
        return text


@dataclass(frozen=True)
class _Commit:
    sha: str
    committed_at: _dt.datetime
    parents: tuple[str, ...]
    subject: str
    body: str

    FORMAT = "%H%x1f%cI%x1f%P%x1f%s%x1f%b"

    @classmethod
    def parse(cls, record: str) -> _Commit:
        sha, when, parents, subject, body = record.strip("\n").split("\x1f", 4)
        return cls(sha, _dt.datetime.fromisoformat(when), tuple(parents.split()), subject, body)


class GitRepo:
    """A local git repository (a bare ``git clone --mirror`` or a clone with a work tree),
    checked once on construction: it exists, is a repository at that very path, and has a
    default branch (``refs/remotes/origin/HEAD`` when set, else ``HEAD``)."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path).expanduser().absolute()
        if not self.path.is_dir():
            raise GitRepoError(self.path, "no such directory",
                               "pass the directory of a clone or of a `git clone --mirror` "
                               "of the upstream repository")
        env = {k: v for k, v in os.environ.items() if k not in _REPO_ENV}
        # Look for the repository at this path only: a directory inside some other work tree
        # must not answer with that other repository.
        env["GIT_CEILING_DIRECTORIES"] = str(self.path.parent)
        env["GIT_TERMINAL_PROMPT"] = "0"
        self._env = env
        self.git_dir = Path(self.git("rev-parse", "--absolute-git-dir").strip())
        self.shallow = self.git("rev-parse", "--is-shallow-repository").strip() == "true"
        self.default_branch = self._default_branch()
        self._range_ids: dict[tuple[str, ...], dict[str, list[str]]] = {}

    def __repr__(self) -> str:
        return f"GitRepo({str(self.path)!r})"

    # -- running git ---------------------------------------------------------------------------

    def git(self, *args: str) -> str:
        """``git ARGS`` in the repository; its stdout (UTF-8, undecodable bytes replaced).
        A failure raises :class:`GitRepoError` with git's own message."""
        return self.git_bytes(*args).decode("utf-8", errors="replace")

    def git_bytes(self, *args: str, stdin: bytes | None = None) -> bytes:
        """:meth:`git` as bytes (diffs go to ``git patch-id`` byte for byte)."""
        return self._run(args, stdin=stdin)[1]

    def _run(self, args: Sequence[str], *, stdin: bytes | None = None,
             answers: tuple[int, ...] = ()) -> tuple[int, bytes]:
        """``(exit status, stdout)``; a status in ``answers`` is an answer, not a failure."""
        command = ["git", *_CONFIG, *args]
        try:
            done = subprocess.run(command, cwd=self.path, env=self._env, input=stdin,
                                  capture_output=True, check=True, timeout=_TIMEOUT)
        except FileNotFoundError:
            raise GitRepoError(self.path, "the `git` executable is not on PATH",
                               "install git (any version since 2.20), or put it on PATH"
                               ) from None
        except OSError as exc:  # the kernel refused to start it (too many arguments, memory)
            raise GitRepoError(self.path, f"`git {args[0] if args else ''}` could not start "
                               f"({exc.strerror or type(exc).__name__})",
                               "free memory, or report this to patchlane's maintainers with "
                               "the repository's size (tags, branches)") from None
        except subprocess.TimeoutExpired:
            raise GitRepoError(self.path, f"`git {' '.join(args)}` ran past {_TIMEOUT:g} s",
                               "check that the repository is on a local, responsive disk",
                               expected="an answer within seconds") from None
        except subprocess.CalledProcessError as exc:
            if exc.returncode in answers:
                return exc.returncode, exc.stdout
            raise self._failure(args, exc) from None
        return 0, done.stdout

    def _failure(self, args: Sequence[str], exc: subprocess.CalledProcessError) -> GitRepoError:
        said = (exc.stderr or b"").decode("utf-8", errors="replace").strip()
        last = said.splitlines()[-1] if said else f"exit status {exc.returncode}"
        if "not a git repository" in said:
            return GitRepoError(self.path, f"not a git repository (git: {last})",
                                "pass the top-level directory of a clone, or the directory of "
                                "a `git clone --mirror`, of the upstream repository")
        if "dubious ownership" in said:
            return GitRepoError(self.path, "git refuses a repository owned by another user "
                                "(dubious ownership)",
                                f"git config --global --add safe.directory {self.path}")
        return GitRepoError(self.path, f"`git {' '.join(args)}` failed: {last}",
                            "check that the repository is complete (`git fsck`), or fetch it "
                            "again")

    def is_ancestor(self, commit: str, ref: str) -> bool:
        """Whether ``commit`` is in the history of ``ref`` (``git merge-base --is-ancestor``)."""
        # Exit status 1 is the answer "no", not a failure.
        status, _ = self._run(("merge-base", "--is-ancestor", commit, ref), answers=(1,))
        return status == 0

    # -- what the repository holds -------------------------------------------------------------

    def ref(self, name: str) -> str | None:
        """The commit ``name`` (a full ref) points at, None if there is no such ref."""
        out = self.git("for-each-ref", "--format=%(objectname)", name).split()
        # for-each-ref matches whole path components: "refs/pull/44/head" never matches 4448
        return out[0] if out else None

    def _default_branch(self) -> str:
        origin_head = self.git("for-each-ref", "--format=%(symref)",
                               "refs/remotes/origin/HEAD").strip()
        if origin_head and self.ref(origin_head):
            return origin_head
        # Exit status 1 (and no output): a detached HEAD.
        _, out = self._run(("symbolic-ref", "-q", "HEAD"), answers=(1,))
        head = out.decode().strip()
        if head and self.ref(head):
            return head
        what = f"HEAD names {head}, which has no commit" if head else "HEAD is detached"
        raise GitRepoError(self.path, f"no default branch: {what}, and "
                           "refs/remotes/origin/HEAD is not set",
                           "point HEAD at the default branch (`git symbolic-ref HEAD "
                           "refs/heads/main`) or run `git remote set-head origin --auto`",
                           expected="HEAD or refs/remotes/origin/HEAD naming the branch PRs "
                                    "merge into")

    def short(self, ref: str) -> str:
        """``refs/heads/main`` -> ``main`` (``refs/remotes/origin/main`` -> ``origin/main``)."""
        for prefix in ("refs/heads/", "refs/remotes/", "refs/tags/"):
            if ref.startswith(prefix):
                return ref[len(prefix):]
        return ref

    def remote_urls(self) -> list[str]:
        lines = self.git("remote", "-v").splitlines()
        return sorted({line.split()[1] for line in lines if len(line.split()) >= 2})

    def release_tags(self, template: str, *, include_prereleases: bool = False
                     ) -> list[tuple[Version, str, str]]:
        """``(version, version as the tag spells it, tag)`` of every tag ``template`` makes,
        in version order; prereleases only with ``include_prereleases``."""
        marker = "\x00VERSION\x00"
        head, _, tail = tag_name(template, marker).partition(marker)
        pattern = re.compile(rf"^{re.escape(head)}(?P<version>.+){re.escape(tail)}$")
        found = []
        for ref in self.git("for-each-ref", "--format=%(refname)", "refs/tags").split():
            match = pattern.match(ref[len("refs/tags/"):])
            if match is None:
                continue
            version = parse_version(match.group("version"))
            if version is None:  # a tag that names no comparable release is no release
                continue
            if include_prereleases or not version.is_prerelease:
                found.append((version, match.group("version"), ref[len("refs/tags/"):]))
        return sorted(found)

    def _commits_naming(self, number: int) -> list[_Commit]:
        """Commits on branches, tags and remote-tracking branches whose message holds
        ``(#N)`` or ``Merge pull request #N from``: a superset; :func:`_naming` decides."""
        out = self.git("log", "--branches", "--tags", "--remotes", "--fixed-strings",
                       f"--grep=(#{number})", f"--grep=Merge pull request #{number} from",
                       "-z", f"--format={_Commit.FORMAT}")
        return [_Commit.parse(record) for record in out.split("\x00") if record.strip()]

    def _commit(self, sha: str) -> _Commit:
        return _Commit.parse(self.git("show", "-s", f"--format={_Commit.FORMAT}", sha))

    def patch_id(self, base: str, head: str) -> str | None:
        """``git patch-id --stable`` of the diff ``base..head`` (None for an empty diff)."""
        diff = self.git_bytes("diff", *_DIFF_FLAGS, base, head)
        out = self.git_bytes("patch-id", "--stable", stdin=diff).decode().split()
        return out[0] if out else None

    def release_only_patch_ids(self, tags: Sequence[str]) -> dict[str, list[str]]:
        """``{patch-id: [commit, ...]}`` of the non-merge commits in ``tags`` but not on the
        default branch: where a release-branch cherry-pick lives (cached per tag set)."""
        key = tuple(tags)
        if key not in self._range_ids:
            ids: dict[str, list[str]] = {}
            if tags:
                # The revisions go on stdin (`--stdin`), not the command line: a mirror with
                # 100,000 release tags would exceed the kernel's argument-size limit.
                revisions = "".join(f"refs/tags/{t}\n" for t in tags)
                log = self.git_bytes("log", "-p", "--no-merges", "--format=medium",
                                     *_DIFF_FLAGS, "--stdin",
                                     stdin=(revisions + f"^{self.default_branch}\n").encode())
                for line in self.git_bytes("patch-id", "--stable", stdin=log).decode().split(
                        "\n"):
                    if line.strip():
                        patch, sha = line.split()
                        ids.setdefault(patch, []).append(sha)
            self._range_ids[key] = ids
        return self._range_ids[key]

    def tags_containing(self, sha: str) -> set[str]:
        out = self.git("for-each-ref", f"--contains={sha}", "--format=%(refname)", "refs/tags")
        return {ref[len("refs/tags/"):] for ref in out.split()}

    def where(self, sha: str) -> str:
        """The short name of the default branch if it has ``sha``, else of the shortest-named
        branch that does, else of a tag."""
        if self.is_ancestor(sha, self.default_branch):
            return self.short(self.default_branch)
        refs = self.git("for-each-ref", f"--contains={sha}", "--format=%(refname)",
                        "refs/heads", "refs/remotes").split()
        if refs:
            return min((self.short(r) for r in refs), key=lambda n: (len(n), n))
        tags = sorted(self.tags_containing(sha))
        return f"tag {tags[0]}" if tags else "no branch"


def _naming(commit: _Commit, number: int) -> Literal["squash", "merge", "message", "revert"
                                                     ] | None:
    """How ``commit``'s message names PR ``number``, if it does in a way that means it landed."""
    ref = re.compile(rf"\(#{number}\)")
    merge = re.compile(rf"^Merge pull request #{number} from ")
    if commit.subject.startswith(("Revert \"", "Revert '")):
        return "revert" if ref.search(commit.subject) or merge.search(
            commit.subject.split('"', 1)[-1]) else None
    if merge.match(commit.subject):
        return "merge"
    if ref.search(commit.subject):
        return "squash"
    for line in commit.body.splitlines():
        text = line.strip()
        if merge.match(text):
            return "merge"
        # "* Fix X (#4448)": the squash of a backport PR lists the commits it carries.
        if re.search(rf"\(#{number}\)$", text) and not text.lstrip("*- ").startswith("Revert"):
            return "message"
    return None


def _landings(repo: GitRepo, number: int, tags: Sequence[str]) -> tuple[
        list[Landing], list[tuple[str, str]], str | None]:
    """The commits that carry PR ``number`` (in the order found), the reverts of it, and the
    commit ``refs/pull/N/head`` names (None without it)."""
    found: list[tuple[_Commit, Literal["squash", "merge", "message", "pr-head", "cherry-pick"],
                      str | None]] = []  # (commit, how, what its patch-id matched)
    reverts: list[_Commit] = []
    for commit in repo._commits_naming(number):
        how = _naming(commit, number)
        if how == "revert":
            reverts.append(commit)
        elif how is not None:
            found.append((commit, how, None))
    head = repo.ref(f"refs/pull/{number}/head")
    seen = {commit.sha for commit, _, _ in found}
    merged_heads = {parent for commit, _, _ in found for parent in commit.parents[1:]}
    # The head itself on the default branch: merged as it was (fast-forward, or a merge
    # commit whose message does not say "Merge pull request").
    if head is not None and head not in seen | merged_heads \
            and repo.is_ancestor(head, repo.default_branch):
        found.append((repo._commit(head), "pr-head", None))
        seen.add(head)
    # Patch-ids: of the PR as a whole, and of each landing commit (a release branch picks the
    # squash commit, often with "cp:" and a new number in the subject).
    wanted: dict[str, str] = {}
    if head is not None and head not in seen:
        # Exit status 1: no common history (a PR against an unrelated branch).
        _, out = repo._run(("merge-base", repo.default_branch, head), answers=(1,))
        base = out.decode().strip()
        patch = repo.patch_id(base, head) if base else None
        if patch is not None:
            wanted[patch] = f"refs/pull/{number}/head"
    for commit, kind, _ in list(found):
        if kind != "pr-head" and commit.parents:
            patch = repo.patch_id(commit.parents[0], commit.sha)
            if patch is not None:
                wanted.setdefault(patch, f"{kind} commit {commit.sha[:10]}")
    if wanted:
        for patch, shas in repo.release_only_patch_ids(tags).items():
            for sha in shas:
                if patch in wanted and sha not in seen:
                    found.append((repo._commit(sha), "cherry-pick", wanted[patch]))
                    seen.add(sha)
    default = repo.short(repo.default_branch)
    landings = []
    for commit, found_as, same_as in found:
        where = repo.where(commit.sha)
        landings.append(Landing(commit.sha, "backport" if found_as == "squash"
                                and where != default else found_as, commit.subject,
                                commit.committed_at, where, same_as))
    return landings, [(c.sha, repo.where(c.sha)) for c in reverts], head


def track_git(entry: Entry, repo: GitRepo | Path | str, *, tag_template: str,
              include_prereleases: bool = False) -> TrackReport:
    """Where the fix ``entry`` carries stands upstream, read from the git repository ``repo``
    (see the module docstring for the method). The report is the one
    :func:`~patchlane.upstream.track.track` gives, with ``issue`` None (git has no issues) and
    ``stale`` False; ``retire_when.release`` is weighed by the same code."""
    tag_name(tag_template, "0")  # fail on a bad template before running git
    repo = repo if isinstance(repo, GitRepo) else GitRepo(repo)
    dist = entry.upstream.distribution or entry.target.distribution or "upstream"

    def report(state: UpstreamState, reason: str, pr: PullState | None = None,
               released_in: str | None = None, latest: str | None = None) -> TrackReport:
        return TrackReport(entry_id=entry.id, issue=None, pr=pr, released_in=released_in,
                           latest_release=latest, state=state, reason=reason,
                           gate_names_release=gate_names_release(entry, released_in))

    if not entry.upstream.pr:
        return report(UpstreamState.NO_UPSTREAM_LINK,
                      "the entry links no upstream pull request (git cannot read the state of "
                      "an issue). Fix: add upstream.pr once a fix is proposed upstream, so it "
                      "can be tracked")
    owner, name, number = require_kind(entry.upstream.pr, "pull")
    notes = _remote_note(repo, owner, name, number)
    tags = repo.release_tags(tag_template, include_prereleases=include_prereleases)
    finals = [version for parsed, version, _ in tags if not parsed.is_prerelease]
    latest = finals[-1] if finals else None  # the newest final release, prereleases or not
    landings, reverts, head = _landings(repo, number, [tag for _, _, tag in tags])

    if not landings:
        reason = _not_landed(repo, number, head, reverts)
        title = repo._commit(head).subject if head is not None else ""
        pr = PullState(number=number, state="open", merged=False, merged_at=None,
                       merge_commit_sha=None, milestone=None, title=title,
                       url=entry.upstream.pr)
        return report(UpstreamState.OPEN, reason + _shallow(repo) + notes, pr)

    default = repo.short(repo.default_branch)
    on_default = sorted((ld for ld in landings if ld.where == default),
                        key=lambda ld: ld.committed_at)
    main = on_default[0] if on_default else landings[0]
    pr = PullState(number=number, state="closed", merged=True, merged_at=main.committed_at,
                   merge_commit_sha=main.sha, milestone=None, title=main.subject,
                   url=entry.upstream.pr)
    others = [ld for ld in landings if ld is not main]
    landed = f"PR #{number} landed as {main.describe()}, committed {main.committed_at.date()}"
    if others:
        shown = ", ".join(ld.describe() for ld in others[:4])
        landed += f"; also {shown}" + (f" and {len(others) - 4} more" if len(others) > 4 else "")

    carrying: dict[str, Landing] = {}
    for landing in [main, *others]:  # a tag the main landing is in names it
        for tag in repo.tags_containing(landing.sha):
            carrying.setdefault(tag, landing)
    undone = {tag for sha, _ in reverts for tag in repo.tags_containing(sha)}
    if reverts:
        landed += (f"; reverted by {_commits(reverts)}"
                   + (f" (tags carrying the revert do not count: {', '.join(sorted(undone))})"
                      if undone else ""))
    first = next(((version, tag) for _, version, tag in tags
                  if tag in carrying and tag not in undone), None)
    if first is None:
        if tags:
            why = (f"none of the {len(tags)} release tags ({tag_template!r}, newest "
                   f"{tags[-1][2]}) contains it")
        else:
            why = (f"no tag in {repo.path} matches {tag_template!r} (check the tag template, "
                   "or fetch the tags)")
        return report(UpstreamState.MERGED_UNRELEASED,
                      f"{landed}; {why}. Keep carrying the patch until a release has it"
                      + _shallow(repo) + notes, pr, latest=latest)
    released_in, tag = first
    newest = next((t for parsed, _, t in reversed(tags) if not parsed.is_prerelease), None)
    if newest is not None and newest in undone:
        # Released once, then reverted: the releases a job installs from now on lack the fix,
        # and a retirement (or `release: '>=FIRST'`) would name releases that have the bug.
        return report(UpstreamState.MERGED_UNRELEASED,
                      f"{landed}; first released in {dist} {released_in} (tag {tag}), but the "
                      f"newest release, {latest} (tag {newest}), does not carry it. Keep "
                      "carrying the patch until a release has it again"
                      + _shallow(repo) + notes, pr, released_in=released_in, latest=latest)
    via = carrying[tag]
    reason = (f"{landed}; first released in {dist} {released_in} (tag {tag}"
              + ("" if via is main else f", which carries {via.sha[:10]}") + ")")
    reason += release_note(entry, released_in, [version for _, version, _ in tags], dist=dist,
                           carrier="a landing commit")
    if newest is not None and newest not in carrying:
        # A backport to an older release line only: the newest release never had it
        reason += (f"; but the newest release, {latest} (tag {newest}), does not carry it: a "
                   f"retirement on '>={released_in}' would name releases with the bug")
    return report(UpstreamState.RELEASED, reason + notes, pr, released_in=released_in,
                  latest=latest)


def _not_landed(repo: GitRepo, number: int, head: str | None,
                reverts: list[tuple[str, str]]) -> str:
    """Why a PR counts as not landed: its head is there but nothing carries it, or git has
    neither a commit naming it nor its head to compare patch-ids with."""
    if head is not None:
        reason = (f"PR #{number} exists in {repo.path} (refs/pull/{number}/head at "
                  f"{head[:10]}) but has not landed: no commit on a branch or tag names it "
                  "and no release commit has its patch-id")
    else:
        reason = (f"no commit on a branch or tag of {repo.path} names PR #{number} "
                  f"('(#{number})' or 'Merge pull request #{number}'), and it has no "
                  f"refs/pull/{number}/head to compare patch-ids with (a `git clone "
                  "--mirror` has it; a clone needs `git fetch origin "
                  "'+refs/pull/*/head:refs/pull/*/head'`)")
    reason += ("; git cannot tell an open PR from one closed without merging: check it "
               "on GitHub. Keep carrying the patch")
    if reverts:
        reason += f"; reverted by {_commits(reverts)}"
    return reason


def _remote_note(repo: GitRepo, owner: str, name: str, number: int) -> str:
    urls = repo.remote_urls()
    wanted = f"{owner}/{name}".lower()
    if not urls or any(re.search(rf"[/:]{re.escape(wanted)}(\.git)?/?$", url.lower())
                       for url in urls):
        return ""
    return (f"; note: the PR is in github.com/{owner}/{name} but the repository's remotes are "
            f"{', '.join(urls)}: if they are another project, #{number} there is another change")


def _commits(shas_where: list[tuple[str, str]]) -> str:
    return ", ".join(f"{sha[:10]} on {where}" for sha, where in shas_where)


def _shallow(repo: GitRepo) -> str:
    return ("; note: the repository is shallow, so older commits are missing (Fix: git fetch "
            "--unshallow)" if repo.shallow else "")
