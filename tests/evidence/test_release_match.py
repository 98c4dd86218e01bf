"""Which recorded release an imported tree matches (patchlane.releases.release_match), on a
fake target: the nearest release by fingerprint, and the targets that differ from it. The real
Megatron-LM trees are in tests/releases/test_source_tree.py."""

from __future__ import annotations

from patchlane.installed.fingerprint import compute_from_source
from patchlane.registry import Entry, load_registries
from patchlane.releases.release_match import nearest_release

from ..conftest import TARGET_SOURCE, FakeTarget

EDITED = TARGET_SOURCE.replace('return f"hello {name}"', 'return f"hi {name}"')


def releases(fake: FakeTarget, table: dict[str, str]) -> list[Entry]:
    entry = fake.entry()
    entry["fingerprint"]["releases"] = table
    return list(load_registries([fake.write_registry(entry)]).entries)


def test_the_release_whose_fingerprint_matches_is_named(fake_target: FakeTarget) -> None:
    now, other = fake_target.fingerprint(), compute_from_source(EDITED, ("Greeter.greet",))
    assert now != other
    entries = releases(fake_target, {"1.1.0": other, "1.2.0": now, "1.3.0": other})
    match = nearest_release(entries, fake_target.distribution)
    assert (match.declared, match.source, match.nearest) == ("1.2.0", "metadata", "1.2.0")
    assert match.matched == (fake_target.entry_id,) and match.differ == () == match.unknown
    assert match.found == {fake_target.entry_id: now}
    assert match.as_dict()["matched"] == [fake_target.entry_id]


def test_a_tree_that_differs_from_every_release_says_so(fake_target: FakeTarget) -> None:
    other = compute_from_source(EDITED, ("Greeter.greet",))
    entries = releases(fake_target, {"1.1.0": other, "1.2.0": other})
    match = nearest_release(entries, fake_target.distribution)
    assert match.nearest == "1.2.0"  # nearest to the declared version on a tie
    assert match.differ == (fake_target.entry_id,) and match.matched == ()


def test_no_recorded_releases_means_nothing_to_match(fake_target: FakeTarget) -> None:
    entries = list(load_registries([fake_target.write_registry()]).entries)
    match = nearest_release(entries, fake_target.distribution)
    assert match.nearest is None and match.matched == match.differ == match.unknown == ()
