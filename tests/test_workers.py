"""The suite's own scheduling: a module's tests stay on one pytest-xdist worker (tests/conftest.py
groups them), so its module fixtures (a real sweep, an installed wheel) run once."""

from __future__ import annotations

import os

import pytest


def test_a_module_s_group_reaches_the_scheduler(request: pytest.FixtureRequest) -> None:
    """pytest-xdist's loadgroup renames a grouped test's id to ``<id>@<group>``; a pytest whose
    ``Node.nodeid`` does not read that name (9.2 reads ``Node._id``) leaves every module split
    over the workers, silently running its fixtures once per worker."""
    if not os.environ.get("PYTEST_XDIST_WORKER") or not getattr(request.config.option,
                                                                "loadgroup", False):
        pytest.skip("not on a pytest-xdist worker under --dist loadgroup (./scripts/test)")
    assert request.node.nodeid.endswith("@tests.test_workers"), (
        f"{request.node.nodeid!r}: pytest {pytest.__version__} does not show pytest-xdist's "
        "group in the test id, so each module's tests split over the workers; expected a "
        "pytest whose Node.nodeid reads the _nodeid pytest-xdist sets; fix: pin one in "
        "constraints/ (9.1.1 is one)")
