"""What a flow's heartbeat copier copies, under which names, and with which headers."""

from __future__ import annotations

import logging

import pytest
from confluent_kafka import KafkaError, TopicPartition
from fake_kafka import FakeCluster, FakeConsumer, FakeKafkaClients

from drsvc.kafka.clients import KafkaClients
from drsvc.runtime.replication.heartbeat_copier import (
    LANE_MESSAGE_TIMEOUT_MS,
    STUCK_AFTER_S,
    HeartbeatCopier,
    copier_consumer_config,
    copier_producer_config,
    copy_headers,
    heartbeat_routes,
)
from drsvc.runtime.replication.settings import WorkerSettings, worker_settings
from drsvc.runtime.replication.topics import topic_routes
from drsvc.topology import load_topology_text
from failover import provenance

TRIO = """
name: trio
clusters:
  east: {bootstrap_servers: "127.0.0.1:1"}
  west: {bootstrap_servers: "127.0.0.1:2"}
  south: {bootstrap_servers: "127.0.0.1:3"}
flows:
  - source: east
    target: west
    topics: {include: ["orders"], exclude: [".*heartbeats"]}
  - {source: west, target: east}
  - {source: south, target: east}
  - {source: south, target: west, multi_hop: false}
"""

EAST_TOPICS = [
    "heartbeats",
    "south.heartbeats",
    "west.heartbeats",
    "west.south.heartbeats",
    "orders",
    "east.heartbeats",
    "__consumer_offsets",
]


def settings(source: str, target: str, text: str = TRIO) -> WorkerSettings:
    topology = load_topology_text(text)
    return worker_settings(topology, topology.flow(source, target), {})


def test_the_source_heartbeats_and_upstream_copies_go_under_the_remote_name() -> None:
    # The flow's topic filters would exclude heartbeats: they are copied all the same.
    assert heartbeat_routes(EAST_TOPICS, settings("east", "west")) == {
        "heartbeats": "east.heartbeats",
        "south.heartbeats": "east.south.heartbeats",
    }


def test_without_multi_hop_only_the_local_heartbeats() -> None:
    south_topics = ["heartbeats", "east.heartbeats", "west.heartbeats"]
    assert heartbeat_routes(south_topics, settings("south", "west")) == {
        "heartbeats": "south.heartbeats"
    }


def test_heartbeats_that_came_from_the_target_never_go_back() -> None:
    west_topics = ["heartbeats", "east.heartbeats", "east.south.heartbeats", "south.heartbeats"]
    assert heartbeat_routes(west_topics, settings("west", "east")) == {
        "heartbeats": "west.heartbeats",
        "south.heartbeats": "west.south.heartbeats",
    }


def test_identity_flows_copy_heartbeats_under_their_own_name() -> None:
    identity = """
name: migration
clusters:
  old: {bootstrap_servers: "127.0.0.1:1"}
  new: {bootstrap_servers: "127.0.0.1:2"}
flows:
  - {source: old, target: new, policy: identity}
"""
    assert heartbeat_routes(["heartbeats", "orders"], settings("old", "new", identity)) == {
        "heartbeats": "heartbeats"
    }


def test_custom_heartbeats_name() -> None:
    text = TRIO + "internal_topics: {heartbeats: hb}\n"
    assert heartbeat_routes(["hb", "heartbeats", "south.hb"], settings("east", "west", text)) == {
        "hb": "east.hb",
        "south.hb": "east.south.hb",
    }


def test_copies_keep_headers_and_append_provenance() -> None:
    original = [("trace", b"abc"), ("null", None), (provenance.PROVENANCE_HEADER, b"older-hop")]
    copied = copy_headers(original, "east", "heartbeats", 0, 41)
    assert copied[:3] == original
    key, value = copied[3]
    assert key == provenance.PROVENANCE_HEADER
    assert isinstance(value, bytes)
    assert provenance.decode(value) == provenance.Provenance("east", "heartbeats", 0, 41)
    assert copy_headers(None, "east", "heartbeats", 0, 1)[0][0] == provenance.PROVENANCE_HEADER


def test_clients_have_their_own_group_start_at_the_end_and_drop_late_copies() -> None:
    flow = settings("east", "west")
    consumer = copier_consumer_config(flow)
    assert consumer["group.id"] == "drsvc-heartbeats.east-west" != flow.group_id
    assert consumer["auto.offset.reset"] == "latest"
    assert consumer["enable.auto.commit"] is False
    producer = copier_producer_config(flow)
    assert producer["message.timeout.ms"] == LANE_MESSAGE_TIMEOUT_MS
    assert producer["linger.ms"] <= 5
    # where the clusters are comes from the flow's settings, merged by the client factory
    clients = KafkaClients.for_configs({"east": flow.source_client, "west": flow.target_client})
    assert clients.config("east", consumer)["bootstrap.servers"] == "127.0.0.1:1"
    assert clients.config("west", producer)["bootstrap.servers"] == "127.0.0.1:2"


class Stuck:
    """A copier of east -> west whose consumer of ``heartbeats`` has read nothing for longer
    than ``STUCK_AFTER_S``; heartbeats arrive on east when the test appends them."""

    def __init__(self) -> None:
        self.east = FakeCluster("east")
        self.east.create_topic("heartbeats")
        self.clients = FakeKafkaClients(self.east, FakeCluster("west", self.east.clock))
        self.copier = HeartbeatCopier(settings("east", "west"), clients=self.clients)
        self.consumer = self.copier._new_consumer()
        self.copier._consumer = self.consumer
        self.copier._assigned = {("heartbeats", 0)}
        self.east.clock.advance(STUCK_AFTER_S + 1)

    def beat(self) -> None:
        self.east.append("heartbeats", 0, b"a heartbeat")

    @property
    def current(self) -> FakeConsumer:
        return self.copier._consumer  # type: ignore[return-value]


def test_a_consumer_that_reads_nothing_while_heartbeats_arrive_is_replaced() -> None:
    stuck = Stuck()
    stuck.beat()
    stuck.copier._replace_if_stuck()  # the first look only notes the log's end
    assert stuck.current is stuck.consumer
    stuck.beat()
    stuck.copier._replace_if_stuck()
    assert stuck.consumer.closed and stuck.current is not stuck.consumer
    assert stuck.current.cluster is stuck.east  # the new one comes from the factory too
    assert stuck.copier._assigned == set()  # the next refresh assigns it, from the end
    assert stuck.copier.consumers_replaced == 1


def test_an_idle_source_or_a_reading_consumer_is_left_alone() -> None:
    stuck = Stuck()
    stuck.copier._replace_if_stuck()
    stuck.copier._replace_if_stuck()  # nothing new on the source: nothing to read
    assert stuck.current is stuck.consumer
    stuck.copier._last_read_at = stuck.east.clock.monotonic()
    stuck.beat()
    stuck.copier._replace_if_stuck()  # it reads: the log growing is just heartbeats arriving
    stuck.copier._replace_if_stuck()
    assert stuck.current is stuck.consumer and stuck.copier.consumers_replaced == 0


def test_a_source_that_does_not_answer_is_not_taken_for_a_stuck_consumer() -> None:
    stuck = Stuck()
    stuck.beat()
    stuck.copier._replace_if_stuck()
    stuck.beat()
    stuck.east.down = True
    stuck.copier._replace_if_stuck()  # the ends cannot be read: nothing to tell yet
    assert stuck.current is stuck.consumer and stuck.copier.consumers_replaced == 0


def test_a_heartbeat_is_copied_to_its_remote_name_and_a_refused_copy_is_counted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    east = FakeCluster("east")
    east.create_topic("heartbeats")
    west = FakeCluster("west", east.clock)
    west.create_topic("east.heartbeats")
    clients = FakeKafkaClients(east, west)
    flow = settings("east", "west")
    copier = HeartbeatCopier(flow, clients=clients)
    copier.stats.routes = {"heartbeats": "east.heartbeats"}
    copier._remote_partitions = {"east.heartbeats": 1}
    east.append("heartbeats", 0, b"beat-1")
    east.append("heartbeats", 0, b"beat-2")
    source = copier._new_consumer()
    source.assign([TopicPartition("heartbeats", 0, 0)])
    first, second = source.consume(10, 1.0)
    producer = clients.producer("west", copier_producer_config(flow))

    copier._copy(producer, first)
    producer.flush(1.0)
    west.refuse_next_produce("east.heartbeats", KafkaError.MSG_SIZE_TOO_LARGE)
    with caplog.at_level(logging.WARNING):
        copier._copy(producer, second)

    assert west.values("east.heartbeats", 0) == [b"beat-1"]
    (copied,) = west.records("east.heartbeats", 0)
    assert copied.provenance() == provenance.Provenance("east", "heartbeats", 0, 0)
    assert copier.stats.copied == 1 and copier.stats.failed == 1
    assert "cluster 'west': copying a heartbeat to east.heartbeats: MSG_SIZE_TOO_LARGE" in (
        caplog.text
    )


def test_data_topics_and_heartbeats_are_routed_apart() -> None:
    flow = settings("east", "west")
    data = topic_routes(EAST_TOPICS, flow, heartbeats=False)
    assert data.copied == {"orders": "east.orders"}
    assert set(data.skipped) == {"__consumer_offsets"}
    beats = topic_routes(EAST_TOPICS, flow, heartbeats=True)
    assert beats.copied == heartbeat_routes(EAST_TOPICS, flow)
    assert set(beats.skipped) == {"east.heartbeats", "west.heartbeats", "west.south.heartbeats"}
    assert "loop" in beats.skipped["west.heartbeats"]
