"""Failover records of 5,000 group partitions on a real Consul agent (the session's local
environment).

Consul is real: its 512 KiB limits per value and per transaction, its 413 answers, its
transactions and sessions. Kafka is not: building 5,000 committed group partitions on the local
brokers would take most of the run, so the executor gets its Kafka side through its port
(:class:`~drsvc.runtime.failover.clusters.FailoverClusters`) from the unit tests' fake clusters,
five groups of 1,000 partitions each, translated exactly.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from functools import partial

import pytest
import requests
from failover_topologies import application, east_west
from fake_failover_clusters import FakeFailoverClusters, exact

from drsvc.adapters import record_store
from drsvc.adapters.consul_coordination import ConsulCoordinator
from drsvc.adapters.coordination import Put
from drsvc.adapters.record_store import read_record, read_records
from drsvc.client.application import ClientApplication
from drsvc.devenv.environment import EnvironmentInfo
from drsvc.errors import FailoverError, KafkaUnavailableError, TooLargeError
from drsvc.runtime.failover.executor import FailoverExecutor, LockTiming
from drsvc.topology.models import Topology
from failover.active import decode_active
from failover.failover_plan import FailoverRequest, FailoverState, StepName
from failover.failover_record import encode_record
from failover.naming import (
    app_active_key,
    consul_prefix,
    failover_chunks_prefix,
    failover_record_key,
    failovers_prefix,
)
from failover.record_chunks import split_record

TOPIC = "orders"
REMOTE = "east.orders"
GROUPS = tuple(f"group-{n}" for n in range(5))
PARTITIONS = 1_000


@dataclass
class _Clusters(FakeFailoverClusters):
    """The fake clusters, whose new cluster stops answering for its ends once offsets were
    committed there while ``ends_fail`` (an executor that cannot finish activate)."""

    ends_fail: bool = False

    def partition_ends(self, alias: str, topics: Collection[str]) -> dict[tuple[str, int], int]:
        if self.ends_fail and self.commits and alias == "west":
            raise KafkaUnavailableError("west does not answer (this test's fault)")
        return super().partition_ends(alias, topics)


@pytest.fixture(scope="module")
def consul_addr(cluster_pair: EnvironmentInfo) -> str:
    addr = cluster_pair.consul_http_addr
    assert addr is not None
    return addr


@pytest.fixture
def topology(consul_addr: str) -> Iterator[Topology]:
    namespace = f"records-{uuid.uuid4().hex[:10]}"
    yield east_west(namespace, application(groups=GROUPS, topics=(TOPIC,), lease_s=1))
    answer = requests.delete(
        f"http://{consul_addr}/v1/kv/{consul_prefix(namespace)}/", params="recurse", timeout=10
    )
    answer.raise_for_status()


@pytest.fixture
def store(consul_addr: str) -> Iterator[ConsulCoordinator]:
    coordinator = ConsulCoordinator(consul_addr, timeout_s=15.0)
    try:
        yield coordinator
    finally:
        coordinator.close()


@pytest.fixture
def clusters() -> _Clusters:
    fake = _Clusters()
    for group in GROUPS:
        fake.translations[(group, "east", "west")] = [
            exact(TOPIC, p, 1_000_000 + p, REMOTE, 2_000_000 + p) for p in range(PARTITIONS)
        ]
    fake.ends["west"] = {(REMOTE, p): 3_000_000 + p for p in range(PARTITIONS)}
    return fake


def _executor(
    topology: Topology, store: ConsulCoordinator, clusters: _Clusters
) -> FailoverExecutor:
    return FailoverExecutor(
        topology, store, clusters, lock_timing=LockTiming(ttl_s=10, lock_delay_s=1)
    )


def _active_cluster(store: ConsulCoordinator, topology: Topology) -> str | None:
    entry = store.get(app_active_key(topology.namespace, "app"))
    return decode_active(None if entry is None else entry.value, "east").cluster


def test_a_failover_of_5000_group_partitions_saves_loads_resumes_and_is_read(
    topology: Topology, store: ConsulCoordinator, clusters: _Clusters, consul_addr: str
) -> None:
    ns = topology.namespace
    clusters.ends_fail = True
    with pytest.raises(FailoverError, match="stays running"):
        _executor(topology, store, clusters).start(FailoverRequest("app", "west"))
    assert _active_cluster(store, topology) is None
    (stopped,) = read_records(store, ns)
    failover_id = stopped.plan.failover_id
    assert stopped.state is FailoverState.RUNNING and stopped.done(StepName.SET_OFFSETS)
    assert len(stopped.groups) == 5_000
    # The same record as one value, as the previous version stored it: Consul refuses it.
    with pytest.raises(TooLargeError, match="413"):
        store.write([Put(f"{failover_record_key(ns, failover_id)}-whole", encode_record(stopped))])
    chunks = store.list(failover_chunks_prefix(ns, failover_id))
    head = store.get(failover_record_key(ns, failover_id))
    assert head is not None and len(chunks) > 1
    assert all(len(e.value) <= 512 * 1024 for e in [head, *chunks])

    # Another executor, on another connection, resumes it from what Consul holds.
    clusters.ends_fail = False
    resumer_store = ConsulCoordinator(consul_addr, timeout_s=15.0)
    try:
        resumer = _executor(topology, resumer_store, clusters)
        assert resumer.record(failover_id) == stopped
        done = resumer.resume(failover_id, wait_s=30)
    finally:
        resumer_store.close()
    assert done.state is FailoverState.COMPLETED
    assert _active_cluster(store, topology) == "west"
    assert done.groups == stopped.groups  # the positions stored before any commit
    assert len(done.cutoffs) == PARTITIONS
    assert len(clusters.commits) == 5_000  # set once: the resume went on at activate

    # Every reader: the executor's record and listing, the record store, the client's cut-offs.
    fresh = _executor(topology, store, clusters)
    assert fresh.record(failover_id) == done
    assert fresh.records() == [done]
    assert read_record(store, ns, failover_id) == done
    cutoffs = ClientApplication.of("app", topology).cutoffs(store, failover_id)
    assert len(cutoffs) == PARTITIONS and cutoffs[(REMOTE, 7)] == 3_000_007
    # Only the chunks the head names are left.
    left = store.list(failover_chunks_prefix(ns, failover_id))
    tags = {e.key.rsplit("/", 2)[-2] for e in left}
    assert len(tags) == 1


def test_a_record_over_the_ceiling_is_refused_before_deactivate(
    topology: Topology,
    store: ConsulCoordinator,
    clusters: _Clusters,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    small = partial(split_record, chunk_bytes=64 * 1024, max_chunks=4)
    monkeypatch.setattr(record_store, "split_record", small)
    with pytest.raises(TooLargeError, match="not started, nothing changed"):
        _executor(topology, store, clusters).start(FailoverRequest("app", "west"))
    assert store.get(app_active_key(topology.namespace, "app")) is None  # east, untouched
    assert _active_cluster(store, topology) == "east"
    assert store.list(failovers_prefix(topology.namespace)) == []
    assert clusters.commits == []


def test_consul_refusing_a_chunk_for_its_size_rolls_the_failover_back(
    topology: Topology,
    store: ConsulCoordinator,
    clusters: _Clusters,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Chunks larger than Consul takes: its own 413 after deactivate, as the review simulated.
    oversized = partial(split_record, chunk_bytes=2 * 1024 * 1024)
    monkeypatch.setattr(record_store, "split_record", oversized)
    record = _executor(topology, store, clusters).start(FailoverRequest("app", "west"))
    assert record.state is FailoverState.ROLLED_BACK
    assert _active_cluster(store, topology) == "east"
    assert clusters.commits == []
    failed = next(e for e in record.events if e.step is StepName.SET_OFFSETS)
    assert "413" in failed.detail
    assert read_record(store, topology.namespace, record.plan.failover_id) == record
