"""The fixtures of tests on the fake clock: ``clock`` (with a wall time) and ``store`` (the
in-memory coordinator on it). A test module takes them with
``pytest_plugins = ["failover_fixtures"]`` (and imports nothing else from here, so that pytest
loads this module itself).
"""

from __future__ import annotations

import pytest
from failover_topologies import Clock
from memory_coordination import MemoryCoordinator


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(clock: Clock) -> MemoryCoordinator:
    return MemoryCoordinator(clock)
