"""Shared test configuration: integration tests are marked by directory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

INTEGRATION_DIR = Path(__file__).parent / "integration"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if INTEGRATION_DIR in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.integration)


@pytest.fixture(autouse=True)
def _no_topology_consul_left_behind() -> Iterator[None]:
    """A command run in-process declares its topology's Consul block for the whole process
    (``use_topology_consul``): each test starts and ends without one."""
    from drsvc.adapters import consul_access  # noqa: PLC0415 (tests of the installer run first)

    consul_access.use_topology_consul(None, None)
    yield
    consul_access.use_topology_consul(None, None)
