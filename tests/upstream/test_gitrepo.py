"""track_git(): upstream tracking from a local git repository, against REAL repositories built
here with git (squash merges, a GitHub merge commit, a release-branch cherry-pick under another
subject, refs/pull/N/head, prerelease tags, a revert, a bare mirror and a plain clone), and,
when ``PATCHLANE_MEGATRON_GIT`` points at a mirror of NVIDIA/Megatron-LM, against the real one.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from patchlane.registry import Entry
from patchlane.upstream import TagTemplateError, UpstreamState, UpstreamURLError
from patchlane.upstream.gitrepo import GitRepo, GitRepoError, track_git

from .fake_upstream import with_gate, with_upstream

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs the git executable")

TEMPLATE = "core_v{version}"
PR = "https://github.com/NVIDIA/Megatron-LM/pull/{}"


# -- building real repositories ----------------------------------------------------------------


class GitBuilder:
    """A repository with a work tree, written through the git command line. Identity, dates
    and config are fixed here, so it builds the same on a fresh CI box (no ~/.gitconfig)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.clock = dt.datetime(2026, 1, 5, 9, 0, tzinfo=dt.timezone.utc)
        path.mkdir(parents=True)
        self.git("init", "-q")
        self.git("symbolic-ref", "HEAD", "refs/heads/main")  # whatever init.defaultBranch says

    @staticmethod
    def env(home: Path) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
        env.update({"GIT_AUTHOR_NAME": "Upstream Dev", "GIT_AUTHOR_EMAIL": "dev@example.invalid",
                    "GIT_COMMITTER_NAME": "Upstream Dev",
                    "GIT_COMMITTER_EMAIL": "dev@example.invalid",
                    "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
                    "HOME": str(home)})
        return env

    def git(self, *args: str) -> str:
        stamp = self.clock.isoformat()
        self.clock += dt.timedelta(hours=1)
        env = self.env(self.path.parent) | {"GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp}
        done = subprocess.run(
            ["git", "-c", "user.name=Upstream Dev", "-c", "user.email=dev@example.invalid",
             "-c", "commit.gpgsign=false", "-c", "tag.gpgsign=false", "-c", "core.autocrlf=false",
             *args],
            cwd=self.path, env=env, capture_output=True, text=True, check=True)
        return done.stdout.strip()

    def write(self, name: str, text: str) -> None:
        (self.path / name).write_text(text)
        self.git("add", name)

    def commit(self, subject: str, body: str = "", **files: str) -> str:
        for name, text in files.items():
            self.write(f"{name}.py", text)
        message = subject + (f"\n\n{body}" if body else "")
        self.git("commit", "-q", "--allow-empty", "-m", message)
        return self.git("rev-parse", "HEAD")

    def branch(self, name: str, start: str = "main") -> None:
        self.git("checkout", "-q", "-b", name, start)


    def checkout(self, name: str) -> None:
        self.git("checkout", "-q", name)

    def tag(self, name: str) -> None:
        self.git("tag", "-a", name, "-m", name)

    def pull_ref(self, number: int, commit: str) -> None:
        """What GitHub keeps of a PR in every mirror: refs/pull/N/head."""
        self.git("update-ref", f"refs/pull/{number}/head", commit)

    def cherry_pick(self, commit: str, subject: str) -> str:
        """A backport as release managers make it: the change, under a new subject."""
        self.git("cherry-pick", "--no-commit", commit)
        self.git("commit", "-q", "-m", subject)
        return self.git("rev-parse", "HEAD")


def fixed_in_pr7(root: Path) -> Path:
    """An upstream repository under ``root``: v1.0.0 without the fix, v1.1.0 with PR #7
    squashed in (``greet`` of an empty name)."""
    g = GitBuilder(root / "upstream-src")
    g.commit("Initial import", greet="def greet(name):\n    return name\n")
    g.git("tag", "v1.0.0")
    g.commit("Fix greet for empty names (#7)",
             greet="def greet(name):\n    return name or 'nobody'\n")
    g.git("tag", "v1.1.0")
    return g.path


def lines(*changed: str, n: int = 8) -> str:
    """A file of ``n`` lines, with ``changed`` in place of the first ones (so that a change
    keeps the same context on every branch, as real fixes in untouched code do)."""
    body = [f"line_{i} = {i}" for i in range(n)]
    body[: len(changed)] = changed
    return "\n".join(body) + "\n"


@dataclasses.dataclass
class Upstream:
    """The repository and the commits the tests talk about."""

    path: Path
    shas: dict[str, str]


def build_upstream(root: Path) -> Upstream:
    """main and core_r0.17.0, tags core_v0.17.0 .. core_v0.18.0 (and core_v0.18.0rc1):

    ===============  =======================================================================
    PR #4448         squash on main, in 0.18.0rc1 and 0.18.0, not in 0.17.1 or 0.17.2
    PR #44, #44480   squashes on main whose numbers share digits with 4448
    PR #4500         GitHub merge commit ("Merge pull request #4500 from ...") on main
    PR #4321         squash on main (0.18.0) and a cherry-pick under another subject on
                     core_r0.17.0 (0.17.2), with refs/pull/4321/head
    PR #4322         never on main: only refs/pull/4322/head and a cherry-pick under another
                     subject on core_r0.17.0 (0.17.2)
    PR #4600         squash on main after the last tag
    PR #4700         squash on main in 0.18.0rc1, reverted before 0.18.0
    PR #4999         refs/pull/4999/head only: proposed, never landed
    ===============  =======================================================================
    """
    g = GitBuilder(root)
    s: dict[str, str] = {}
    s["init"] = g.commit("Initial import", rerun=lines(), grad=lines(), clip=lines(),
                         flag=lines(), version='__version__ = "0.17.0"\n')
    g.commit("Add docs (#10)", docs=lines())
    g.tag("core_v0.17.0")
    g.branch("core_r0.17.0")
    g.commit("Bump version to 0.17.1", version='__version__ = "0.17.1"\n')
    g.tag("core_v0.17.1")

    g.checkout("main")
    s["4448"] = g.commit("Fix checkpoint loading with rerun state machine  (#4448)",
                         "* keep the sentinel's structure constant\n\n"
                         "Signed-off-by: Upstream Dev <dev@example.invalid>",
                         rerun=lines("STRUCTURE = 'constant'"))
    s["44480"] = g.commit("Unrelated refactor (#44480)", docs=lines("refactored = True"))
    s["44"] = g.commit("Tiny typo fix (#44)", docs=lines("refactored = True", "typo = 0"))
    s["4700"] = g.commit("Risky change (#4700)", flag=lines("RISKY = True"))
    g.tag("core_v0.18.0rc1")
    s["4700-revert"] = g.commit('Revert "Risky change (#4700)" (#4701)',
                                "This reverts commit " + s["4700"] + ".", flag=lines())

    # #4500: a branch merged with GitHub's merge button (a merge commit, no squash).
    g.branch("alice/feature-flag")
    s["4500-head"] = g.commit("add the feature flag", flag=lines("FLAG = True"))
    g.pull_ref(4500, s["4500-head"])
    g.checkout("main")
    g.git("merge", "-q", "--no-ff", "alice/feature-flag",
          "-m", "Merge pull request #4500 from alice/feature-flag", "-m", "Add a feature flag")
    s["4500"] = g.git("rev-parse", "HEAD")
    g.git("branch", "-q", "-D", "alice/feature-flag")

    # #4321: two commits on a PR branch, squashed onto main.
    g.branch("bob/grad-norm")
    g.commit("wip: grad norm", grad=lines("norm = 1"))
    s["4321-head"] = g.commit("grad norm: review comments", grad=lines("norm = 2", "eps = 0"))
    g.pull_ref(4321, s["4321-head"])
    g.checkout("main")
    g.git("merge", "-q", "--squash", "bob/grad-norm")
    s["4321"] = g.commit("Fix grad norm with zero eps (#4321)")
    g.git("branch", "-q", "-D", "bob/grad-norm")

    # #4322: proposed against main, never merged there, but picked onto the release branch.
    g.branch("carol/clip")
    s["4322-head"] = g.commit("clip gradients before the all-reduce", clip=lines("clip = 1"))
    g.pull_ref(4322, s["4322-head"])
    g.checkout("main")
    g.git("branch", "-q", "-D", "carol/clip")
    g.tag("core_v0.18.0")

    g.checkout("core_r0.17.0")
    s["4321-cp"] = g.cherry_pick(s["4321"], "[0.17] backport the grad norm fix")
    s["4322-cp"] = g.cherry_pick(s["4322-head"], "release: clip before all-reduce")
    g.commit("Bump version to 0.17.2", version='__version__ = "0.17.2"\n')
    g.tag("core_v0.17.2")

    g.checkout("main")
    s["4600"] = g.commit("Late fix (#4600)", rerun=lines("STRUCTURE = 'constant'", "late = 1"))
    g.branch("dave/never")
    s["4999-head"] = g.commit("an idea that never landed", grad=lines("idea = 1"))
    g.pull_ref(4999, s["4999-head"])
    g.checkout("main")
    g.git("branch", "-q", "-D", "dave/never")
    return Upstream(root, s)


@pytest.fixture(scope="module")
def upstream_repo(tmp_path_factory: pytest.TempPathFactory) -> Upstream:
    return build_upstream(tmp_path_factory.mktemp("git") / "megatron-lm")


@pytest.fixture(scope="module")
def repo(upstream_repo: Upstream) -> GitRepo:
    return GitRepo(upstream_repo.path)


def pr(entry: Entry, number: int) -> Entry:
    return with_upstream(entry, pr=PR.format(number))


# -- what landed, and where --------------------------------------------------------------------


def test_squash_on_main_is_released_in_the_first_tag_that_has_it(
        repo: GitRepo, upstream_repo: Upstream, entry: Entry) -> None:
    report = track_git(entry, repo, tag_template=TEMPLATE)
    sha = upstream_repo.shas["4448"]
    assert report.state is UpstreamState.RELEASED
    assert report.released_in == "0.18.0"  # not 0.17.1 / 0.17.2; 0.18.0rc1 is a prerelease
    assert report.latest_release == "0.18.0"
    assert report.gate_names_release is True  # retire_when.release is '>=0.18.0'
    assert report.issue is None and report.stale is False  # git has no issues, no cache
    assert report.pr is not None
    assert (report.pr.merged, report.pr.state, report.pr.merge_commit_sha) == (True, "closed", sha)
    assert report.pr.title == "Fix checkpoint loading with rerun state machine  (#4448)"
    assert report.pr.url == entry.upstream.pr
    assert report.pr.merged_at is not None and report.pr.merged_at.tzinfo is not None
    assert f"squash commit {sha[:10]} on main" in report.reason
    assert "first released in megatron-core 0.18.0 (tag core_v0.18.0)" in report.reason
    assert "which retire_when.release '>=0.18.0' names" in report.reason


def test_prerelease_tags_count_only_when_asked(repo: GitRepo, entry: Entry) -> None:
    report = track_git(entry, repo, tag_template=TEMPLATE, include_prereleases=True)
    assert report.released_in == "0.18.0rc1"
    assert report.latest_release == "0.18.0"  # the newest *final* release either way


@pytest.mark.parametrize(("number", "landed_as"), [(44, "44"), (4448, "4448"), (44480, "44480")])
def test_the_pr_number_matches_exactly(repo: GitRepo, upstream_repo: Upstream, entry: Entry,
                                       number: int, landed_as: str) -> None:
    report = track_git(pr(entry, number), repo, tag_template=TEMPLATE)
    assert report.pr is not None and report.pr.merge_commit_sha == upstream_repo.shas[landed_as]
    others = {k for k in ("44", "4448", "44480") if k != landed_as}
    assert not any(upstream_repo.shas[k][:10] in report.reason for k in others)


def test_a_github_merge_commit(repo: GitRepo, upstream_repo: Upstream, entry: Entry) -> None:
    report = track_git(pr(entry, 4500), repo, tag_template=TEMPLATE)
    sha = upstream_repo.shas["4500"]
    assert report.state is UpstreamState.RELEASED and report.released_in == "0.18.0"
    assert report.pr is not None and report.pr.merge_commit_sha == sha
    assert report.pr.title == "Merge pull request #4500 from alice/feature-flag"
    assert f"merge commit {sha[:10]} on main" in report.reason
    assert "PR head" not in report.reason  # the merged head is the merge commit's parent


def test_a_cherry_pick_under_another_subject_is_found_by_patch_id(
        repo: GitRepo, upstream_repo: Upstream, entry: Entry) -> None:
    report = track_git(pr(entry, 4321), repo, tag_template=TEMPLATE)
    shas = upstream_repo.shas
    assert report.state is UpstreamState.RELEASED
    assert report.released_in == "0.17.2"  # the backport, before 0.18.0 has the squash
    assert report.pr is not None and report.pr.merge_commit_sha == shas["4321"]  # main's
    assert (f"cherry-pick {shas['4321-cp'][:10]} on core_r0.17.0 (same patch-id as "
            "refs/pull/4321/head)") in report.reason
    assert f"(tag core_v0.17.2, which carries {shas['4321-cp'][:10]})" in report.reason
    # the gate says >=0.18.0: the shared reasoning tells the maintainer to widen it
    assert report.gate_names_release is False
    assert "does not name it" in report.reason and "release: '>=0.17.2'" in report.reason


def test_a_pr_only_cherry_picked_is_found_from_refs_pull(
        repo: GitRepo, upstream_repo: Upstream, entry: Entry) -> None:
    report = track_git(pr(entry, 4322), repo, tag_template=TEMPLATE)
    sha = upstream_repo.shas["4322-cp"]
    assert report.state is UpstreamState.RELEASED and report.released_in == "0.17.2"
    assert report.pr is not None and report.pr.merge_commit_sha == sha
    assert report.pr.title == "release: clip before all-reduce"
    assert f"landed as cherry-pick {sha[:10]} on core_r0.17.0" in report.reason
    # only on the 0.17 line: 0.18.0 never had it, and the reason says so
    assert "but the newest release, 0.18.0 (tag core_v0.18.0), does not carry it" \
        in report.reason


def test_landed_but_in_no_tag(repo: GitRepo, upstream_repo: Upstream, entry: Entry) -> None:
    report = track_git(pr(entry, 4600), repo, tag_template=TEMPLATE)
    assert report.state is UpstreamState.MERGED_UNRELEASED
    assert report.released_in is None and report.latest_release == "0.18.0"
    assert report.pr is not None and report.pr.merge_commit_sha == upstream_repo.shas["4600"]
    assert "none of the 4 release tags ('core_v{version}', newest core_v0.18.0)" in report.reason
    assert report.gate_names_release is False


def test_a_revert_takes_the_fix_out_of_the_tags_that_carry_it(
        repo: GitRepo, upstream_repo: Upstream, entry: Entry) -> None:
    report = track_git(pr(entry, 4700), repo, tag_template=TEMPLATE)
    assert report.state is UpstreamState.MERGED_UNRELEASED  # 0.18.0 has the revert too
    assert report.pr is not None and report.pr.merge_commit_sha == upstream_repo.shas["4700"]
    assert f"reverted by {upstream_repo.shas['4700-revert'][:10]} on main" in report.reason
    with_rc = track_git(pr(entry, 4700), repo, tag_template=TEMPLATE, include_prereleases=True)
    assert with_rc.released_in == "0.18.0rc1"  # before the revert
    # released once, then reverted: the newest release lacks it, so it is not "released" (a
    # retirement, or `release: '>=0.18.0rc1'`, would name releases that have the bug)
    assert with_rc.state is UpstreamState.MERGED_UNRELEASED, with_rc.reason
    assert "but the newest release, 0.18.0 (tag core_v0.18.0), does not carry it" \
        in with_rc.reason


def test_a_proposed_pr_that_never_landed(repo: GitRepo, upstream_repo: Upstream,
                                         entry: Entry) -> None:
    report = track_git(pr(entry, 4999), repo, tag_template=TEMPLATE)
    assert report.state is UpstreamState.OPEN
    assert report.pr is not None and report.pr.merged is False and report.pr.state == "open"
    assert report.pr.merge_commit_sha is None and report.latest_release is None
    assert report.pr.title == "an idea that never landed"
    assert (f"PR #4999 exists in {repo.path} (refs/pull/4999/head at "
            f"{upstream_repo.shas['4999-head'][:10]}) but has not landed") in report.reason
    assert "git cannot tell an open PR from one closed without merging" in report.reason


def test_a_pr_git_knows_nothing_about(repo: GitRepo, entry: Entry) -> None:
    report = track_git(pr(entry, 5000), repo, tag_template=TEMPLATE)
    assert report.state is UpstreamState.OPEN
    assert report.pr is not None and report.pr.title == ""
    assert "no commit on a branch or tag" in report.reason
    assert "refs/pull/5000/head" in report.reason and "git clone --mirror" in report.reason


def test_no_pr_link(repo: GitRepo, entry: Entry) -> None:
    report = track_git(with_upstream(entry, pr=None), repo, tag_template=TEMPLATE)
    assert report.state is UpstreamState.NO_UPSTREAM_LINK and report.pr is None


@pytest.mark.parametrize(
    ("gate", "names", "says"),
    [
        (">=0.19", False, "does not name it"),
        (">=0.17", True, "also names earlier releases (0.17.0, 0.17.1, 0.17.2) that do not "
                         "carry a landing commit"),
        (None, False, "has no release specifier"),
    ],
)
def test_the_gate_is_weighed_as_track_weighs_it(repo: GitRepo, entry: Entry, gate: str | None,
                                                names: bool, says: str) -> None:
    report = track_git(with_gate(entry, gate), repo, tag_template=TEMPLATE)
    assert report.released_in == "0.18.0"
    assert report.gate_names_release is names
    assert says in report.reason


def test_a_fix_shipped_by_another_distribution_never_names_the_gate(repo: GitRepo,
                                                                     entry: Entry) -> None:
    report = track_git(with_upstream(entry, distribution="megatron-lm"), repo,
                       tag_template=TEMPLATE)
    assert report.state is UpstreamState.RELEASED and report.gate_names_release is False
    assert "retire_when.release is about megatron-core" in report.reason


# -- mirrors and clones ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mirror(upstream_repo: Upstream) -> Path:
    path = upstream_repo.path.parent / "mirror.git"
    subprocess.run(["git", "clone", "-q", "--mirror", str(upstream_repo.path), str(path)],
                   check=True, env=GitBuilder.env(path.parent))
    return path


def test_a_bare_mirror_answers_the_same(mirror: Path, upstream_repo: Upstream,
                                        entry: Entry) -> None:
    repo = GitRepo(mirror)
    assert repo.default_branch == "refs/heads/main"
    assert track_git(entry, repo, tag_template=TEMPLATE).released_in == "0.18.0"
    picked = track_git(pr(entry, 4322), repo, tag_template=TEMPLATE)  # needs refs/pull
    assert picked.released_in == "0.17.2"
    assert picked.pr is not None and picked.pr.merge_commit_sha == upstream_repo.shas["4322-cp"]
    # Its remote is a local path, not github.com/NVIDIA/Megatron-LM: said, not refused.
    assert "note: the PR is in github.com/NVIDIA/Megatron-LM" in picked.reason
    assert str(upstream_repo.path) in picked.reason


def test_a_mirror_with_100k_release_tags_is_read_without_hitting_the_argument_limit(
        mirror: Path, upstream_repo: Upstream, entry: Entry, tmp_path: Path) -> None:
    """The release tags' patch-ids are read with the tags on git's stdin: on the command line,
    100,000 of them are more than the kernel takes ("Argument list too long")."""
    many = tmp_path / "many-tags.git"
    subprocess.run(["git", "clone", "-q", "--mirror", str(mirror), str(many)], check=True,
                   env=GitBuilder.env(tmp_path))
    packed = many / "packed-refs"
    # Written straight into packed-refs (git sorts a file whose header does not say "sorted"):
    # creating 100,000 refs through git would take minutes.
    kept = [line for line in packed.read_text().splitlines() if not line.startswith("#")]
    init = upstream_repo.shas["init"]
    extra = [f"{init} refs/tags/core_v0.16.{i}" for i in range(100_000)]
    packed.write_text("# pack-refs with: peeled fully-peeled \n" + "\n".join(kept + extra)
                      + "\n")
    repo = GitRepo(many)
    assert len(repo.release_tags(TEMPLATE)) > 100_000
    picked = track_git(pr(entry, 4322), repo, tag_template=TEMPLATE)  # reads the patch-ids
    assert picked.released_in == "0.17.2"
    assert picked.pr is not None and picked.pr.merge_commit_sha == upstream_repo.shas["4322-cp"]


def test_a_plain_clone_reads_origin_and_says_what_refs_pull_would_add(
        upstream_repo: Upstream, entry: Entry) -> None:
    path = upstream_repo.path.parent / "clone"
    subprocess.run(["git", "clone", "-q", str(upstream_repo.path), str(path)], check=True,
                   env=GitBuilder.env(path.parent))
    repo = GitRepo(path)
    assert repo.default_branch == "refs/remotes/origin/main"
    report = track_git(pr(entry, 4321), repo, tag_template=TEMPLATE)
    assert report.released_in == "0.17.2"  # origin/core_r0.17.0 and the tags came along
    # Without refs/pull/4322/head, a pick under another subject cannot be recognised.
    missing = track_git(pr(entry, 4322), repo, tag_template=TEMPLATE)
    assert missing.state is UpstreamState.OPEN
    assert "'+refs/pull/*/head:refs/pull/*/head'" in missing.reason


def test_a_remote_on_github_that_matches_adds_no_note(upstream_repo: Upstream,
                                                      entry: Entry) -> None:
    path = upstream_repo.path.parent / "clone-named"
    subprocess.run(["git", "clone", "-q", str(upstream_repo.path), str(path)], check=True,
                   env=GitBuilder.env(path.parent))
    subprocess.run(["git", "remote", "set-url", "origin",
                    "https://github.com/NVIDIA/Megatron-LM.git"], cwd=path, check=True,
                   env=GitBuilder.env(path.parent))
    report = track_git(entry, GitRepo(path), tag_template=TEMPLATE)
    assert report.released_in == "0.18.0" and "note:" not in report.reason


# -- errors ------------------------------------------------------------------------------------


def test_a_directory_that_is_not_a_repository(tmp_path: Path, entry: Entry) -> None:
    with pytest.raises(GitRepoError, match="not a git repository") as caught:
        track_git(entry, tmp_path, tag_template=TEMPLATE)
    assert caught.value.path == str(tmp_path)
    assert "Fix: pass the top-level directory of a clone" in str(caught.value)


def test_a_directory_inside_another_work_tree_is_not_that_repository(
        upstream_repo: Upstream) -> None:
    inside = upstream_repo.path / "subdir"
    inside.mkdir(exist_ok=True)
    with pytest.raises(GitRepoError, match="not a git repository"):
        GitRepo(inside)


def test_a_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(GitRepoError, match="no such directory") as caught:
        GitRepo(tmp_path / "nowhere")
    assert str(tmp_path / "nowhere") in str(caught.value)


def test_git_not_installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    with pytest.raises(GitRepoError, match="`git` executable is not on PATH"):
        GitRepo(tmp_path)


def test_a_repository_without_a_default_branch(tmp_path: Path) -> None:
    g = GitBuilder(tmp_path / "empty")
    assert g.path.exists()
    with pytest.raises(GitRepoError, match="no default branch") as caught:
        GitRepo(g.path)
    assert "git remote set-head origin --auto" in str(caught.value)


def test_a_bad_template_or_link_fails_before_git_runs(tmp_path: Path, entry: Entry) -> None:
    with pytest.raises(TagTemplateError):
        track_git(entry, tmp_path / "nowhere", tag_template="core_v")
    with pytest.raises(UpstreamURLError):
        track_git(with_upstream(entry, pr=entry.upstream.issue), _tiny_repo(tmp_path),
                  tag_template=TEMPLATE)


def _tiny_repo(root: Path) -> GitRepo:
    g = GitBuilder(root / "tiny")
    g.commit("Initial import", a="x = 1\n")
    return GitRepo(g.path)


def test_inherited_git_dir_does_not_redirect_the_reader(
        upstream_repo: Upstream, tmp_path: Path, entry: Entry,
        monkeypatch: pytest.MonkeyPatch) -> None:
    # A test run from a git hook has GIT_DIR set to the repository being committed to.
    other = _tiny_repo(tmp_path)
    monkeypatch.setenv("GIT_DIR", str(other.git_dir))
    report = track_git(entry, upstream_repo.path, tag_template=TEMPLATE)
    assert report.released_in == "0.18.0"


# -- the real Megatron-LM mirror ---------------------------------------------------------------

MEGATRON = os.environ.get("PATCHLANE_MEGATRON_GIT")


@pytest.fixture
def megatron() -> Iterator[GitRepo]:
    if not MEGATRON:
        pytest.skip("PATCHLANE_MEGATRON_GIT is not set: point it at a `git clone --mirror` of "
                    "https://github.com/NVIDIA/Megatron-LM to run the real-upstream check")
    yield GitRepo(MEGATRON)


@pytest.mark.upstream
def test_real_megatron_mirror_pr_4448_is_in_core_v0_18_0(megatron: GitRepo,
                                                          entry: Entry) -> None:
    start = time.perf_counter()
    report = track_git(entry, megatron, tag_template=TEMPLATE)
    took = time.perf_counter() - start
    assert report.state is UpstreamState.RELEASED
    assert report.released_in == "0.18.0"  # in core_v0.18.0, .18.2, .19.0; in no 0.17.x tag
    assert report.pr is not None and report.pr.merge_commit_sha is not None
    assert report.pr.merge_commit_sha.startswith("3d7bcd3a37")
    assert "squash commit 3d7bcd3a37 on main" in report.reason
    assert report.gate_names_release is True
    assert took < 60, f"tracking one PR took {took:.1f} s"


def test_a_tag_whose_version_has_a_5000_digit_number_is_no_release(
        mirror: Path, upstream_repo: Upstream, entry: Entry, tmp_path: Path) -> None:
    """Packed refs hold names no file system would (a loose ref is a file): such a tag is a
    tag that names no comparable release, never a ValueError out of ``patchlane upstream``."""
    copy = tmp_path / "copy.git"
    shutil.copytree(mirror, copy)
    subprocess.run(["git", "pack-refs", "--all"], cwd=copy, check=True,
                   env=GitBuilder.env(tmp_path))
    sha = upstream_repo.shas["4448"]
    with open(copy / "packed-refs", "a") as refs:
        refs.write(f"{sha} refs/tags/core_v1.{'9' * 5000}\n")
    repo = GitRepo(copy)
    assert all(version.release[0] == 0 for version, _, _ in repo.release_tags(TEMPLATE))
    assert track_git(entry, repo, tag_template=TEMPLATE).released_in == "0.18.0"
