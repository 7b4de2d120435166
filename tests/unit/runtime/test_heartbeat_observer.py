"""Observers with fake consumers: which topics they follow, how records count, what they say."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, cast

import pytest
from confluent_kafka import OFFSET_END, KafkaError, Message, TopicPartition
from prometheus_client import CollectorRegistry

from drsvc.errors import ConfigError
from drsvc.kafka.admin import TopicInfo
from drsvc.kafka.clients import KafkaClients
from drsvc.kafka.types import Consumer
from drsvc.runtime.heartbeats.metrics import heartbeat_metrics
from drsvc.runtime.heartbeats.observer import (
    HeartbeatObserver,
    ObserverSettings,
    consumer_config,
    followed_topics,
)
from drsvc.topology import Topology, load_topology_text
from failover import heartbeats
from failover.heartbeats import FreshnessState

AGGREGATION = """
name: agg
clusters:
  east: {bootstrap_servers: "127.0.0.1:1"}
  west: {bootstrap_servers: "127.0.0.1:2"}
  agg: {bootstrap_servers: "127.0.0.1:3"}
flows:
  - {source: east, target: agg}
  - {source: west, target: agg}
  - {source: agg, target: west}
"""

IDENTITY = """
name: migration
clusters:
  old: {bootstrap_servers: "127.0.0.1:1"}
  new: {bootstrap_servers: "127.0.0.1:2"}
flows:
  - {source: old, target: new, policy: identity}
"""


def topology(text: str) -> Topology:
    return load_topology_text(text)


def beat(source: str, sequence: int = 0) -> bytes:
    return heartbeats.encode(heartbeats.Heartbeat(source, 0, 7, sequence))


def message(topic: str, offset: int, value: bytes | None, partition: int = 0) -> Message:
    return Message(topic=topic, partition=partition, offset=offset, value=value)


def observer_of(text: str, **kwargs: Any) -> tuple[HeartbeatObserver, CollectorRegistry]:
    registry = CollectorRegistry()
    observer = HeartbeatObserver(
        topology(text),
        {},
        ObserverSettings(stale_after_s=3.0),
        metrics=heartbeat_metrics(registry),
        **kwargs,
    )
    return observer, registry


def test_each_cluster_follows_its_own_heartbeats_and_every_flow_into_it() -> None:
    agg = topology(AGGREGATION)
    assert followed_topics(agg, "agg") == {
        "heartbeats": frozenset({"agg"}),
        "east.heartbeats": frozenset({"east"}),
        "west.heartbeats": frozenset({"west"}),
    }
    assert followed_topics(agg, "west") == {
        "heartbeats": frozenset({"west"}),
        "agg.heartbeats": frozenset({"agg"}),
    }
    assert followed_topics(agg, "east") == {"heartbeats": frozenset({"east"})}


def test_identity_copies_share_the_local_topic() -> None:
    assert followed_topics(topology(IDENTITY), "new") == {"heartbeats": frozenset({"new", "old"})}


def test_custom_heartbeats_topic_name() -> None:
    text = AGGREGATION + "internal_topics: {heartbeats: drsvc-hb}\n"
    assert set(followed_topics(topology(text), "west")) == {"drsvc-hb", "agg.drsvc-hb"}


def test_pairs_are_unknown_then_fresh_then_stale() -> None:
    observer, registry = observer_of(AGGREGATION)
    observer.begin(now=100.0)
    assert observer.expected() == [
        ("agg", "agg"),
        ("agg", "east"),
        ("agg", "west"),
        ("east", "east"),
        ("west", "agg"),
        ("west", "west"),
    ]
    assert {f.state for f in observer.freshness(101.0).values()} == {FreshnessState.UNKNOWN}
    counted = observer.record(
        "agg",
        [message("east.heartbeats", 10, beat("east")), message("heartbeats", 3, beat("agg"))],
        now=101.0,
    )
    assert counted == 2
    seen = observer.freshness(102.0)
    assert seen[("agg", "east")].state == FreshnessState.FRESH
    assert seen[("agg", "east")].seconds == pytest.approx(1.0)
    assert seen[("agg", "east")].last_offset == 10
    assert seen[("agg", "west")].state == FreshnessState.UNKNOWN
    later = observer.freshness(104.5)
    assert later[("agg", "east")].state == FreshnessState.STALE
    assert later[("agg", "west")].state == FreshnessState.STALE
    observer.publish("agg", 104.5)
    labels = {"cluster": "agg", "source": "east"}
    assert registry.get_sample_value("drsvc_heartbeat_freshness_seconds", labels) == 3.5
    assert registry.get_sample_value("drsvc_heartbeat_last_offset", labels) == 10
    assert (
        registry.get_sample_value(
            "drsvc_heartbeat_last_offset", {"cluster": "agg", "source": "west"}
        )
        is None
    )


def test_records_are_attributed_by_their_source_under_identity() -> None:
    observer, _ = observer_of(IDENTITY)
    observer.begin(now=0.0)
    observer.record("new", [message("heartbeats", 5, beat("old"))], now=1.0)
    observer.record("new", [message("heartbeats", 6, beat("new"))], now=2.5)
    seen = observer.freshness(3.0)
    assert seen[("new", "old")].seconds == pytest.approx(2.0)
    assert seen[("new", "new")].seconds == pytest.approx(0.5)


def test_an_unreadable_record_counts_for_the_topics_only_source(
    caplog: pytest.LogCaptureFixture,
) -> None:
    observer, _ = observer_of(AGGREGATION)
    observer.begin(now=0.0)
    newer = b"\x02" + beat("east")[1:]
    assert observer.record("agg", [message("east.heartbeats", 4, newer)], now=1.0) == 1
    assert observer.freshness(1.0)[("agg", "east")].state == FreshnessState.FRESH
    identity, _ = observer_of(IDENTITY)
    identity.begin(now=0.0)
    with caplog.at_level(logging.WARNING):
        for offset in (1, 2, 3):
            assert identity.record("new", [message("heartbeats", offset, newer)], now=1.0) == 0
    assert len(caplog.records) == 1
    assert "unreadable heartbeat in heartbeats on new" in caplog.text


def test_sources_not_routed_here_are_tracked_from_when_they_show_up() -> None:
    observer, _ = observer_of(IDENTITY)
    observer.begin(now=0.0)
    observer.record("new", [message("heartbeats", 9, beat("south"))], now=5.0)
    assert observer.freshness(5.0)[("new", "south")].state == FreshnessState.FRESH
    assert ("new", "south") not in observer.expected()


def test_consume_errors_are_not_heartbeats() -> None:
    observer, _ = observer_of(AGGREGATION)
    observer.begin(now=0.0)
    failed = Message(topic="heartbeats", error=KafkaError(KafkaError._TRANSPORT))
    assert observer.record("agg", [failed], now=1.0) == 0


@dataclass
class FakeConsumer:
    """Hands out ``queued`` messages and remembers its assignment."""

    queued: list[Message] = field(default_factory=list)
    assigned: list[TopicPartition] = field(default_factory=list)
    closed: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def incremental_assign(self, partitions: list[TopicPartition]) -> None:
        self.assigned.extend(partitions)

    def incremental_unassign(self, partitions: list[TopicPartition]) -> None:
        gone = {(tp.topic, tp.partition) for tp in partitions}
        self.assigned = [tp for tp in self.assigned if (tp.topic, tp.partition) not in gone]

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Message]:
        with self.lock:
            taken, self.queued = self.queued[:num_messages], self.queued[num_messages:]
        if not taken:
            time.sleep(min(timeout, 0.01))
        return taken

    def close(self) -> None:
        self.closed = True


@dataclass
class FakeCluster:
    """The topics of one cluster (name -> info) and the consumers made for it, newest last."""

    topics: dict[str, TopicInfo] = field(default_factory=dict)
    consumers: list[FakeConsumer] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, name: str, partitions: int, topic_id: bytes = b"1") -> None:
        with self.lock:
            self.topics[name] = TopicInfo(name, topic_id, partitions)

    def find(self, names: list[str]) -> dict[str, TopicInfo]:
        with self.lock:
            return {n: self.topics[n] for n in names if n in self.topics}

    def new_consumer(self, _config: dict[str, Any]) -> FakeConsumer:
        self.consumers.append(FakeConsumer())
        return self.consumers[-1]

    def latest(self) -> FakeConsumer:
        return self.consumers[-1]


class ClusterClients(KafkaClients):
    """The client factory of the aggregation topology whose consumers are ``cluster``'s fakes,
    built with the settings the real factory gives them (kept in ``configs``)."""

    def __init__(self, cluster: FakeCluster) -> None:
        super().__init__(topology(AGGREGATION))
        self.cluster = cluster
        self.configs: list[dict[str, Any]] = []

    def consumer(self, alias: str, overlay: Mapping[str, Any] | None = None) -> Consumer:
        config = self.config(alias, overlay)
        self.configs.append(config)
        return cast(Consumer, self.cluster.new_consumer(config))


def wait_until(predicate: Any, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)


def watched(cluster: FakeCluster, registry: CollectorRegistry) -> HeartbeatObserver:
    return HeartbeatObserver(
        topology(AGGREGATION),
        {},
        ObserverSettings(stale_after_s=3.0, refresh_interval_s=0.05, poll_timeout_s=0.01),
        clusters=["agg"],
        metrics=heartbeat_metrics(registry),
        clients=ClusterClients(cluster),
        finder_factory=lambda _alias: cluster.find,
    )


def positions(consumer: FakeConsumer) -> list[tuple[str | None, int, int]]:
    return sorted((tp.topic, tp.partition, tp.offset) for tp in consumer.assigned)


def test_watching_assigns_existing_topics_from_their_end_and_finds_new_ones() -> None:
    cluster = FakeCluster()
    cluster.add("heartbeats", 1)
    cluster.add("other", 3)
    registry = CollectorRegistry()
    observer = watched(cluster, registry)
    observer.start()
    try:
        wait_until(lambda: cluster.consumers and cluster.latest().assigned)
        consumer = cluster.latest()
        assert positions(consumer) == [("heartbeats", 0, OFFSET_END)]
        cluster.add("east.heartbeats", 2)  # the lane created it meanwhile
        with consumer.lock:
            consumer.queued.append(message("east.heartbeats", 0, beat("east"), partition=1))
        wait_until(lambda: len(consumer.assigned) == 3)
        wait_until(lambda: observer.freshness()[("agg", "east")].seen)
        wait_until(
            lambda: (
                registry.get_sample_value(
                    "drsvc_heartbeat_last_offset", {"cluster": "agg", "source": "east"}
                )
                == 0
            )
        )
        assert observer.freshness()[("agg", "agg")].state == FreshnessState.UNKNOWN
    finally:
        observer.stop()
    assert consumer.closed


def test_a_recreated_topic_gets_a_new_consumer() -> None:
    cluster = FakeCluster()
    cluster.add("heartbeats", 1)
    cluster.add("east.heartbeats", 1)
    observer = watched(cluster, CollectorRegistry())
    observer.start()
    try:
        wait_until(lambda: cluster.consumers and len(cluster.latest().assigned) == 2)
        first = cluster.latest()
        cluster.add("east.heartbeats", 1, topic_id=b"2")
        wait_until(lambda: len(cluster.consumers) == 2 and len(cluster.latest().assigned) == 2)
        assert first.closed
        assert positions(cluster.latest()) == [
            ("east.heartbeats", 0, OFFSET_END),
            ("heartbeats", 0, OFFSET_END),
        ]
    finally:
        observer.stop()


def test_a_deleted_topic_is_let_go() -> None:
    cluster = FakeCluster()
    cluster.add("heartbeats", 1)
    cluster.add("east.heartbeats", 1)
    observer = watched(cluster, CollectorRegistry())
    observer.start()
    try:
        wait_until(lambda: cluster.consumers and len(cluster.latest().assigned) == 2)
        with cluster.lock:
            del cluster.topics["east.heartbeats"]
        wait_until(lambda: len(cluster.latest().assigned) == 1)
        assert len(cluster.consumers) == 1
    finally:
        observer.stop()


def test_consumer_never_commits_and_starts_at_the_end() -> None:
    config = consumer_config("west")
    assert config["enable.auto.commit"] is False
    assert config["auto.offset.reset"] == "latest"
    assert config["group.id"] == "drsvc-heartbeat-observer.west"


def test_the_consumers_reach_their_cluster_with_its_security_settings() -> None:
    cluster = FakeCluster()
    cluster.add("heartbeats", 1)
    clients = ClusterClients(cluster)
    observer = HeartbeatObserver(
        topology(AGGREGATION),
        {},
        ObserverSettings(stale_after_s=3.0, refresh_interval_s=0.05, poll_timeout_s=0.01),
        clusters=["agg"],
        metrics=heartbeat_metrics(CollectorRegistry()),
        clients=clients,
        finder_factory=lambda _alias: cluster.find,
    )
    observer.start()
    try:
        wait_until(lambda: bool(cluster.consumers and cluster.latest().assigned))
    finally:
        observer.stop()
    (config,) = clients.configs
    assert config["bootstrap.servers"] == "127.0.0.1:3"
    assert config["client.id"] == "drsvc-heartbeat-observer-agg"


def test_a_cluster_that_cannot_be_reached_for_want_of_a_secret_is_refused_at_once() -> None:
    text = AGGREGATION.replace(
        'agg: {bootstrap_servers: "127.0.0.1:3"}',
        'agg: {bootstrap_servers: "127.0.0.1:3", security: {protocol: SASL_PLAINTEXT,'
        " sasl: {mechanism: PLAIN, username: drsvc, password_env: HB_TEST_NO_SUCH_SECRET}}}",
    )
    with pytest.raises(ConfigError, match="HB_TEST_NO_SUCH_SECRET"):
        HeartbeatObserver(topology(text), {}, metrics=heartbeat_metrics(CollectorRegistry()))


def test_an_observer_survives_what_nobody_expected(caplog: pytest.LogCaptureFixture) -> None:
    cluster = FakeCluster()
    cluster.add("heartbeats", 1)
    failures = [RuntimeError("surprise"), RuntimeError("surprise again")]

    def flaky_find(names: list[str]) -> dict[str, TopicInfo]:
        if failures:
            raise failures.pop(0)
        return cluster.find(names)

    observer = HeartbeatObserver(
        topology(AGGREGATION),
        {},
        ObserverSettings(stale_after_s=3.0, refresh_interval_s=0.05, poll_timeout_s=0.01),
        clusters=["agg"],
        metrics=heartbeat_metrics(CollectorRegistry()),
        clients=ClusterClients(cluster),
        finder_factory=lambda _alias: flaky_find,
    )
    with caplog.at_level(logging.INFO, logger="drsvc.runtime.heartbeats.observer"):
        observer.start()
        try:
            wait_until(lambda: bool(cluster.consumers and cluster.latest().assigned), 10)
        finally:
            observer.stop()
    failing = [r for r in caplog.records if "failing" in r.getMessage()]
    assert len(failing) == 1
    assert failing[0].exc_info is not None
    assert "working again after 2 failed attempt(s)" in caplog.text
