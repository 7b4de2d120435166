"""What a flow's heartbeat copier copies, under which names, and with which headers."""

from __future__ import annotations

import time

import pytest

from drsvc.runtime.replication import heartbeat_copier
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
    assert consumer["bootstrap.servers"] == "127.0.0.1:1"
    producer = copier_producer_config(flow)
    assert producer["bootstrap.servers"] == "127.0.0.1:2"
    assert producer["message.timeout.ms"] == LANE_MESSAGE_TIMEOUT_MS
    assert producer["linger.ms"] <= 5


class FakeSourceConsumer:
    """The copier's source consumer, as far as the stuck check uses it."""

    def __init__(self, config: object = None) -> None:
        self.end = 10
        self.closed = False

    def get_watermark_offsets(
        self, tp: object, timeout: float | None = None, cached: bool = False
    ) -> tuple[int, int]:
        return 0, self.end

    def close(self) -> None:
        self.closed = True


def stuck_copier(monkeypatch: pytest.MonkeyPatch) -> tuple[HeartbeatCopier, FakeSourceConsumer]:
    monkeypatch.setattr(heartbeat_copier, "Consumer", FakeSourceConsumer)
    copier = HeartbeatCopier(settings("east", "west"))
    consumer = FakeSourceConsumer()
    copier._consumer = consumer  # type: ignore[assignment]
    copier._assigned = {("heartbeats", 0)}
    copier._last_read_at = time.monotonic() - STUCK_AFTER_S - 1
    return copier, consumer


def test_a_consumer_that_reads_nothing_while_heartbeats_arrive_is_replaced(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    copier, consumer = stuck_copier(monkeypatch)
    copier._replace_if_stuck()  # the first look only notes the log's end
    assert copier._consumer is consumer
    consumer.end = 15
    copier._replace_if_stuck()
    assert consumer.closed and copier._consumer is not consumer
    assert copier._assigned == set()  # the next refresh assigns the new one, from the end
    assert copier.consumers_replaced == 1


def test_an_idle_source_or_a_reading_consumer_is_left_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    copier, consumer = stuck_copier(monkeypatch)
    copier._replace_if_stuck()
    copier._replace_if_stuck()  # nothing new on the source: nothing to read
    assert copier._consumer is consumer
    copier._last_read_at = time.monotonic()
    consumer.end = 20
    copier._replace_if_stuck()  # it reads: the log growing is just heartbeats arriving
    copier._replace_if_stuck()
    assert copier._consumer is consumer and copier.consumers_replaced == 0
