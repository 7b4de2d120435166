"""Shared test configuration: integration tests are marked by directory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# Property tests check what they generate, not how fast: a machine busy with brokers and Spark
# (CI runs them side by side) can make generation slow enough for Hypothesis's health check to
# fail a test that would pass.
settings.register_profile("drsvc", suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("drsvc")

INTEGRATION_DIR = Path(__file__).parent / "integration"

#: The longest files, longest first (minutes each). ``make test`` hands whole files to two
#: workers in collection order; one of these collected last would run alone at the end while
#: the other worker idles, so they go first and the short files fill in behind them.
LONGEST_FIRST = (
    "test_chaos_suite.py",
    "test_demo.py",
    "test_controller.py",
    "test_verify.py",
    "test_secured_estate.py",
    "test_crash_translation.py",
    "test_failover_unplanned.py",
    "test_chaos_secured.py",
    "test_secret_hygiene.py",
    "test_exactly_once.py",
    "test_migrate_workflow.py",
    "test_eos_short_timeouts.py",
)


def _rank(item: pytest.Item) -> int:
    name = Path(str(item.fspath)).name
    return LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if INTEGRATION_DIR in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.integration)
    items.sort(key=_rank)  # stable: the rest keep their order


@pytest.fixture(autouse=True)
def _no_topology_consul_left_behind() -> Iterator[None]:
    """A command run in-process declares its topology's Consul block for the whole process
    (``use_topology_consul``): each test starts and ends without one."""
    from drsvc.adapters import consul_access  # noqa: PLC0415 (tests of the installer run first)

    consul_access.use_topology_consul(None, None)
    yield
    consul_access.use_topology_consul(None, None)
