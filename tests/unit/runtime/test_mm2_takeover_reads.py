"""The reads of a takeover from MirrorMaker 2 (:mod:`drsvc.runtime.migration.mm2_takeover`) on
the in-memory Kafka and its fake clock: MirrorMaker's offsets topic ending in a transaction
marker is read at once, a long history of its offset syncs is read however long it takes, and a
source that does not answer raises instead of looking like a copy that does not match."""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from typing import cast

import pytest
from fake_kafka import FakeClock, FakeCluster, FakeKafkaClients

from drsvc.errors import KafkaUnavailableError, RefusedError
from drsvc.kafka.types import AdminClient
from drsvc.runtime.migration.mm2_takeover import (
    Mm2Clusters,
    mm2_clusters,
    plan_takeover,
    read_last_syncs,
    read_progress,
    refuse_if_the_flow_copied,
)
from failover import naming

TOPIC = "orders"
STALL_S = 2.0
TIMESTAMP = 1_700_000_000_000


@dataclass
class _Group:
    id: str
    members: list[object] = field(default_factory=list)


class _GroupsAdmin:
    """The one admin call a takeover plan makes: listing the Connect workers' group."""

    def __init__(self, members: int = 0) -> None:
        self.members = members

    def list_groups(self, group: str, timeout: float) -> list[_Group]:
        return [_Group(group, [object()] * self.members)]


class Mm2Clients(FakeKafkaClients):
    """Fake clients whose admin client answers the group listing (MirrorMaker is stopped)."""

    def __init__(self, *clusters: FakeCluster) -> None:
        super().__init__(*clusters)
        self.admin_client = _GroupsAdmin()

    def admin(self, alias: str) -> AdminClient:
        return cast(AdminClient, self.admin_client)


def progress_key(partition: int) -> bytes:
    source = {"cluster": "east", "partition": partition, "topic": TOPIC}
    return json.dumps(["MirrorSourceConnector", source]).encode()


def sync_record(partition: int, upstream: int, downstream: int) -> tuple[bytes, bytes]:
    name = TOPIC.encode()
    key = struct.pack(">h", len(name)) + name + struct.pack(">i", partition)
    return key, struct.pack(">qq", upstream, downstream)


def setup(copied: int = 20) -> tuple[FakeClock, FakeCluster, FakeCluster, Mm2Clients, Mm2Clusters]:
    """east holds ``orders`` (30 records), west MirrorMaker's copy of the first ``copied``."""
    clock = FakeClock()
    east, west = FakeCluster("east", clock), FakeCluster("west", clock)
    east.create_topic(TOPIC, 1)
    west.create_topic(TOPIC, 1)
    for n in range(30):
        east.append(TOPIC, 0, f"v{n}", key=f"k{n}", timestamp=TIMESTAMP + n)
    for n in range(copied):
        west.append(TOPIC, 0, f"v{n}", key=f"k{n}", timestamp=TIMESTAMP + n)
    clients = Mm2Clients(east, west)
    clusters = mm2_clusters("east", "west", {}, {}, clients=clients)
    east.create_topic(clusters.syncs_topic, 1)
    west.create_topic(clusters.offsets_topic, 25)
    return clock, east, west, clients, clusters


def test_an_offsets_topic_ending_in_a_transaction_marker_is_read_at_once() -> None:
    clock, _, west, clients, clusters = setup()
    for offset in (9, 19):  # Connect commits progress in a transaction (exactly-once source)
        west.append(
            clusters.offsets_topic,
            3,
            json.dumps({"offset": offset}),
            key=progress_key(0),
            transaction="connect",
        )
    west.end_transaction("connect")  # the marker ends the partition: never delivered
    started = clock.monotonic()

    assert read_progress(clusters, STALL_S) == {(TOPIC, 0): 19}
    plan = plan_takeover(clusters, {TOPIC: 1}, [TOPIC], STALL_S)

    assert plan.starts == {(TOPIC, 0): 20}
    assert clock.monotonic() - started < STALL_S
    assert {c.group_id for c in clients.consumers} == {naming.MM2_TAKEOVER_READER_GROUP}
    assert all(c.closed for c in clients.consumers)


def test_a_long_history_of_offset_syncs_is_read_however_long_it_takes() -> None:
    clock, east, west, clients, clusters = setup()
    west.append(clusters.offsets_topic, 0, json.dumps({"offset": 15}), key=progress_key(0))
    for n in range(100_000):  # a long-running copy: syncs of another partition, then ours
        key, value = sync_record(1, n, n)
        east.append(clusters.syncs_topic, 0, value, key=key)
    key, value = sync_record(0, 19, 19)  # it copied past its last commit
    east.append(clusters.syncs_topic, 0, value, key=key)
    clients.record_cost_s = 0.0005  # 100,000 syncs: 50 s, 25 stall periods
    started = clock.monotonic()

    syncs = read_last_syncs(clusters, STALL_S)
    assert syncs[(TOPIC, 0)] == (19, 19)
    plan = plan_takeover(clusters, {TOPIC: 1}, [TOPIC], STALL_S)

    assert plan.starts == {(TOPIC, 0): 20}  # placed by the sync, past the commit at 15
    assert clock.monotonic() - started >= 2 * 20 * STALL_S  # each read: 20 stall periods


def test_a_source_that_does_not_answer_raises_instead_of_refusing_the_copy() -> None:
    clock, east, west, _, clusters = setup()
    west.append(clusters.offsets_topic, 0, json.dumps({"offset": 19}), key=progress_key(0))
    east.lose_leader(TOPIC, 0)  # the record to compare the copy with cannot be read
    started = clock.monotonic()

    with pytest.raises(KafkaUnavailableError) as raised:
        plan_takeover(clusters, {TOPIC: 1}, [TOPIC], STALL_S)

    # Before, the record read as None after the timeout: "not the copy", and a refusal.
    assert not isinstance(raised.value, RefusedError)
    assert "source topic orders on east made no progress for 2s" in str(raised.value)
    assert clock.monotonic() - started <= STALL_S + 1.0


def test_a_copy_that_does_not_match_is_refused() -> None:
    _, _, west, _, clusters = setup()
    west.append(clusters.offsets_topic, 0, json.dumps({"offset": 12}), key=progress_key(0))

    with pytest.raises(RefusedError, match="is not the copy of source offset 12"):
        plan_takeover(clusters, {TOPIC: 1}, [TOPIC], STALL_S)


def test_a_running_mirror_maker_is_refused() -> None:
    _, _, _, clients, clusters = setup()
    clients.admin_client.members = 2

    with pytest.raises(RefusedError, match="has 2 member"):
        plan_takeover(clusters, {TOPIC: 1}, [TOPIC], STALL_S)


def test_progress_the_flow_has_of_its_own_is_refused() -> None:
    _, east, west, _, clusters = setup()
    west.append(clusters.offsets_topic, 0, json.dumps({"offset": 19}), key=progress_key(0))
    plan = plan_takeover(clusters, {TOPIC: 1}, [TOPIC], STALL_S)
    refuse_if_the_flow_copied(clusters, plan, STALL_S)  # no progress of its own: nothing said

    east.set_committed(naming.replicator_group("east", "west"), TOPIC, 0, 7)

    with pytest.raises(
        RefusedError, match=r"already has progress \(1 partition\(s\), e.g. orders-0"
    ):
        refuse_if_the_flow_copied(clusters, plan, STALL_S)
