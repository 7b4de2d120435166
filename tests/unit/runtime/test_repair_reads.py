"""The sync repair scans (:mod:`drsvc.runtime.replication.repair`) on the in-memory Kafka and its
fake clock: a tail that takes many stall periods to read back is read, a partition that ends in
a transaction marker is done at once, and a read that stops moving raises naming the topic and
the cluster."""

from __future__ import annotations

import pytest
from fake_kafka import FakeClock, FakeCluster, FakeKafkaClients

from drsvc.errors import ConfigError, KafkaUnavailableError
from drsvc.runtime.replication import repair
from failover import offset_syncs, provenance
from failover.keepalive import LastCopy

REMOTE = "east.orders"
SYNCS = "drsvc.offset-syncs.east"
STALL_S = 2.0
IDS = (b"s" * 16, b"t" * 16)
TP = offset_syncs.TopicPartition("orders", 0)


def west_with_topics() -> tuple[FakeClock, FakeCluster, FakeKafkaClients]:
    clock = FakeClock()
    west = FakeCluster("west", clock)
    west.create_topic(REMOTE, 2)
    west.create_topic(SYNCS, 1)
    return clock, west, FakeKafkaClients(west)


def copy_of(offset: int, partition: int = 0, topic: str = "orders") -> list[tuple[str, bytes]]:
    hop = provenance.Provenance("east", topic, partition, offset)
    return [(provenance.PROVENANCE_HEADER, provenance.encode(hop))]


def unsynced(
    clients: FakeKafkaClients, partition: int, committed: int, after: int | None = None
) -> list[tuple[int, int]]:
    return repair.unsynced_copies(
        {},
        REMOTE,
        partition,
        "east",
        "orders",
        committed,
        STALL_S,
        after,
        clients=clients,
        target="west",
    )


def sync_of(source: int, target: int, length: int = 1, ids: tuple[bytes, bytes] = IDS) -> bytes:
    segment = offset_syncs.Segment(source, target, length)
    return offset_syncs.encode_value(
        offset_syncs.OffsetSync("orders", 0, ids[0], ids[1], 3, source, source + length, (segment,))
    )


def test_the_scans_answer_what_the_target_holds() -> None:
    _, west, clients = west_with_topics()
    for source in (10, 11, 12):
        west.append(REMOTE, 0, b"v", headers=copy_of(source))  # targets 0, 1, 2
    west.append(REMOTE, 0, b"v", headers=copy_of(13, topic="other"))  # not ours
    west.append(REMOTE, 0, b"v", headers=copy_of(14), transaction="eos")  # open: counted
    key = offset_syncs.encode_key("orders", 0)
    west.append(SYNCS, 0, sync_of(10, 0, 2), key=key)
    west.append(SYNCS, 0, sync_of(10, 7, ids=(b"x" * 16, IDS[1])), key=key)  # other ids

    assert unsynced(clients, 0, 11) == [(11, 1), (12, 2), (14, 4)]
    assert unsynced(clients, 0, 0, after=2) == [(12, 2), (14, 4)]
    assert unsynced(clients, 1, 0) == []
    assert repair.written_last_copy(
        {}, SYNCS, TP, IDS, 1000, STALL_S, clients=clients, target="west"
    ) == LastCopy(11, 1, 3)
    assert repair.written_sync_end({}, SYNCS, TP, IDS, STALL_S, clients=clients, target="west") == 2
    # Read as uncommitted, assigned only, by the repair group, never committing.
    assert {c.group_id for c in clients.consumers} == {"drsvc-sync-repair"}
    assert not any(c.read_committed for c in clients.consumers)
    assert all(c.closed for c in clients.consumers)


def test_a_remote_tail_that_takes_many_stall_periods_to_read_back_is_read() -> None:
    clock, west, clients = west_with_topics()
    for source in range(100_000):
        west.append(REMOTE, 0, b"v", headers=copy_of(source))
    clients.record_cost_s = 0.0005  # 100,000 records: 50 s, 25 stall periods
    started = clock.monotonic()

    copies = unsynced(clients, 0, committed=5)

    assert copies == [(offset, offset) for offset in range(5, 100_000)]
    assert clock.monotonic() - started >= 20 * STALL_S


def test_a_sync_topic_tail_that_takes_many_stall_periods_to_read_back_is_read() -> None:
    clock, west, clients = west_with_topics()
    key = offset_syncs.encode_key("orders", 0)
    west.append(SYNCS, 0, sync_of(40, 30, 5), key=key)  # the partition's last sync, far back
    other = offset_syncs.encode_key("orders", 1)
    for n in range(100_000):  # then a day of another partition's syncs
        west.append(SYNCS, 0, sync_of(n, n), key=other)
    clients.record_cost_s = 0.0005
    started = clock.monotonic()

    end = repair.written_sync_end({}, SYNCS, TP, IDS, STALL_S, clients=clients, target="west")

    assert end == 35
    assert clock.monotonic() - started >= 20 * STALL_S


def test_max_scan_bounds_how_far_back_the_sync_topic_is_read() -> None:
    _, west, clients = west_with_topics()
    key = offset_syncs.encode_key("orders", 0)
    west.append(SYNCS, 0, sync_of(40, 30, 5), key=key)
    for n in range(50):
        west.append(SYNCS, 0, sync_of(n, n), key=offset_syncs.encode_key("orders", 1))

    def last(max_scan: int) -> LastCopy | None:
        return repair.written_last_copy(
            {}, SYNCS, TP, IDS, max_scan, STALL_S, clients=clients, target="west"
        )

    assert last(50) is None
    assert last(51) == LastCopy(44, 34, 3)


@pytest.mark.parametrize("commit", [True, False])
def test_a_partition_ending_in_a_transaction_marker_is_done_at_once(commit: bool) -> None:
    clock, west, clients = west_with_topics()
    for source in range(5):
        west.append(REMOTE, 0, b"v", headers=copy_of(source), transaction="eos")
    west.end_transaction("eos", commit=commit)  # the marker at offset 5 is never delivered
    key = offset_syncs.encode_key("orders", 0)
    west.append(SYNCS, 0, sync_of(0, 0, 2), key=key, transaction="syncs")
    west.end_transaction("syncs", commit=commit)
    started = clock.monotonic()

    copies = unsynced(clients, 0, committed=2)
    end = repair.written_sync_end({}, SYNCS, TP, IDS, STALL_S, clients=clients, target="west")

    # Read uncommitted on purpose: an aborted copy is on the target's log all the same.
    assert copies == [(2, 2), (3, 3), (4, 4)]
    assert end == 2
    assert clock.monotonic() - started < STALL_S


def test_a_scan_that_stops_moving_raises_naming_the_topic_and_the_cluster() -> None:
    clock, west, clients = west_with_topics()
    for source in range(10):
        west.append(REMOTE, 0, b"v", headers=copy_of(source))
    west.lose_leader(REMOTE, 0)  # and no leader comes back
    started = clock.monotonic()

    with pytest.raises(KafkaUnavailableError) as raised:
        unsynced(clients, 0, committed=0)

    assert "remote topic east.orders on west made no progress for 2s" in str(raised.value)
    assert STALL_S <= clock.monotonic() - started <= STALL_S + 1.0
    west.down = True
    with pytest.raises(KafkaUnavailableError, match=r"offset-sync topic \S+ on west"):
        repair.written_sync_end({}, SYNCS, TP, IDS, STALL_S, clients=clients, target="west")


def test_a_factory_without_the_target_alias_is_refused() -> None:
    _, _, clients = west_with_topics()
    with pytest.raises(ConfigError, match="without the alias of the target"):
        repair.unsynced_copies({}, REMOTE, 0, "east", "orders", 0, STALL_S, clients=clients)
