"""What a flow's heartbeat copier copies, under which names, and with which headers."""

from __future__ import annotations

from drsvc.runtime.replication.heartbeat_copier import (
    LANE_MESSAGE_TIMEOUT_MS,
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
