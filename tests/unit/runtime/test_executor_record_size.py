"""Failover records of any size, with the executor on the in-memory coordinator (limited to
Consul's 512 KiB per value), fake clusters and a fake clock: 5,000 group partitions complete; a
record over the ceiling is refused before deactivate; a record the store refuses for its size
(Consul's 413) rolls the failover back, never leaving the application on none."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import pytest
from failover_topologies import Clock, application, east_west, executor_on
from fake_failover_clusters import FakeFailoverClusters, exact
from memory_coordination import MemoryCoordinator

from drsvc.adapters import record_store
from drsvc.errors import RefusedError, TooLargeError
from drsvc.runtime.failover.executor import FailoverExecutor
from failover.active import ActiveDocument, decode_active
from failover.failover_plan import FailoverRequest, FailoverState, StepName
from failover.naming import app_active_key, failover_chunks_prefix, failovers_prefix
from failover.record_chunks import split_record

pytest_plugins = ["failover_fixtures"]

NS = "t"
TOPIC = "orders"
REMOTE = "east.orders"
GROUPS = tuple(f"g{n}" for n in range(5))
PARTITIONS = 1_000
CONSUL_VALUE_LIMIT = 512 * 1024


def _translations(clusters: FakeFailoverClusters, partitions: int) -> None:
    for group in GROUPS:
        clusters.translations[(group, "east", "west")] = [
            exact(TOPIC, p, 10_000 + p, REMOTE, 20_000 + p) for p in range(partitions)
        ]
    clusters.ends["west"] = {(REMOTE, p): 30_000 + p for p in range(partitions)}


@pytest.fixture
def clusters() -> FakeFailoverClusters:
    fake = FakeFailoverClusters()
    _translations(fake, PARTITIONS)
    return fake


@pytest.fixture
def limited(store: MemoryCoordinator) -> MemoryCoordinator:
    store.max_value_bytes = CONSUL_VALUE_LIMIT
    return store


def _executor(
    store: MemoryCoordinator, clusters: FakeFailoverClusters, clock: Clock
) -> FailoverExecutor:
    topology = east_west(NS, application(groups=GROUPS, topics=(TOPIC,), lease_s=3))
    return executor_on(topology, store, clusters, clock, catch_up_timeout_s=30.0)


def _active(store: MemoryCoordinator) -> ActiveDocument:
    entry = store.get(app_active_key(NS, "app"))
    return decode_active(None if entry is None else entry.value, "east")


def _ceiling(monkeypatch: pytest.MonkeyPatch, chunk_bytes: int, max_chunks: int) -> None:
    ceiling = partial(split_record, chunk_bytes=chunk_bytes, max_chunks=max_chunks)
    monkeypatch.setattr(record_store, "split_record", ceiling)


def test_a_planned_failover_of_5000_group_partitions_completes_and_reads_back(
    limited: MemoryCoordinator, clusters: FakeFailoverClusters, clock: Clock
) -> None:
    executor = _executor(limited, clusters, clock)
    record = executor.start(FailoverRequest("app", "west"))
    assert record.state is FailoverState.COMPLETED
    assert len(record.groups) == 5_000 and len(record.cutoffs) == PARTITIONS
    assert _active(limited).cluster == "west"
    assert executor.record(record.plan.failover_id) == record
    assert executor.records() == [record]
    assert limited.list(failover_chunks_prefix(NS, record.plan.failover_id))
    assert sum(len(c) for (_, g), c in clusters.committed.items() if g in GROUPS) == 5_000


def test_a_record_over_the_ceiling_is_refused_before_deactivate(
    limited: MemoryCoordinator,
    clusters: FakeFailoverClusters,
    clock: Clock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _ceiling(monkeypatch, chunk_bytes=64 * 1024, max_chunks=4)
    with pytest.raises(TooLargeError, match="not started, nothing changed") as refused:
        _executor(limited, clusters, clock).start(FailoverRequest("app", "west"))
    assert isinstance(refused.value, RefusedError)
    assert "5000 group partition" in str(refused.value)
    assert limited.get(app_active_key(NS, "app")) is None  # east, by preference: not written
    assert limited.list(failovers_prefix(NS)) == []
    assert clusters.commits == []


def _rolled_back(store: MemoryCoordinator, clusters: FakeFailoverClusters, state: object) -> None:
    assert state is FailoverState.ROLLED_BACK
    active = _active(store)
    assert active.cluster == "east" and active.epoch == 2  # none (1), then east again (2)
    assert clusters.commits == []


def test_a_store_refusing_the_record_for_its_size_rolls_back(
    limited: MemoryCoordinator, clusters: FakeFailoverClusters, clock: Clock
) -> None:
    # The review's case: Consul answers 413 to the positions once deactivate is done.
    limited.max_value_bytes = 64 * 1024
    executor = _executor(limited, clusters, clock)
    record = executor.start(FailoverRequest("app", "west"))
    _rolled_back(limited, clusters, record.state)
    failed = [e for e in record.events if e.step is StepName.SET_OFFSETS]
    assert [e.outcome.value for e in failed] == ["failed"] and "413" in failed[0].detail
    assert executor.record(record.plan.failover_id) == record


class _GrowingClock(Clock):
    """Runs ``during_wait`` at the first sleep (the lease wait, after deactivate)."""

    during_wait: Callable[[], None] | None = None

    def sleep(self, seconds: float) -> None:
        act, self.during_wait = self.during_wait, None
        if act is not None:
            act()
        super().sleep(seconds)


def test_positions_that_outgrew_the_ceiling_after_the_check_roll_back(
    limited: MemoryCoordinator, clusters: FakeFailoverClusters, monkeypatch: pytest.MonkeyPatch
) -> None:
    _ceiling(monkeypatch, chunk_bytes=64 * 1024, max_chunks=4)
    _translations(clusters, 10)
    clock = _GrowingClock()
    store = MemoryCoordinator(clock)
    clock.during_wait = lambda: _translations(clusters, PARTITIONS)
    record = _executor(store, clusters, clock).start(FailoverRequest("app", "west"))
    _rolled_back(store, clusters, record.state)
    failed = next(e for e in record.events if e.step is StepName.SET_OFFSETS)
    assert "ceiling" in failed.detail
