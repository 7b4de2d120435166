"""Session-scoped real environments shared by the integration tests.

One local environment (real KRaft brokers and real Consul servers, one per site plus a witness) is
started per test session in a temporary state directory and stopped at the end. Fixtures that
need more clusters add them to the same environment, so the pair ``east``/``west`` is reused by
the aggregation trio.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from drsvc.devenv.environment import EnvironmentInfo, LocalEnvironment
from drsvc.settings import Settings

PAIR = ("east", "west")
AGGREGATION_SOURCES = ("east", "west", "south")
AGGREGATE = "agg"


@pytest.fixture(scope="session")
def local_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalEnvironment]:
    """The session's local environment (started lazily by the fixtures below)."""
    state_dir: Path = tmp_path_factory.mktemp("drsvc-state")
    # Consul as in production: a server per site of the first clusters started (east, west)
    # and a witness, one quorum; every site's processes may talk to their own site's agent.
    env = LocalEnvironment(Settings.from_env(state_dir=state_dir, consul_layout="per-site"))
    try:
        yield env
    finally:
        env.down()


@pytest.fixture(scope="session")
def cluster_pair(local_env: LocalEnvironment) -> EnvironmentInfo:
    """Clusters ``east`` and ``west`` plus Consul, running."""
    return local_env.up(list(PAIR))


@pytest.fixture(scope="session")
def aggregation_trio(local_env: LocalEnvironment, cluster_pair: EnvironmentInfo) -> EnvironmentInfo:
    """Three source clusters (``east``, ``west``, ``south``) and the aggregate ``agg``."""
    return local_env.up([*AGGREGATION_SOURCES, AGGREGATE])


@pytest.fixture
def east_restored(local_env: LocalEnvironment, cluster_pair: EnvironmentInfo) -> Iterator[None]:
    """For tests that stop east's brokers: east and west run again afterwards."""
    try:
        yield
    finally:
        local_env.up(["east", "west"])
