"""A recovery's replay (:mod:`drsvc.runtime.failover.replay`) on the in-memory Kafka and its fake
clock: a long divergent range is read however long it takes, a range ending in a transaction
marker is done at once, an attempt run again copies nothing twice, and a read that stops moving
raises naming the topic and the cluster."""

from __future__ import annotations

import pytest
from fake_kafka import FakeClock, FakeCluster, FakeKafkaClients

from drsvc.errors import KafkaUnavailableError
from drsvc.runtime.failover.replay import ReplaySource, ReplayTarget, replay
from failover.naming import REPLAY_READER_GROUP
from failover.site_recovery import (
    REPLAYED_FROM_HEADER,
    REPLAYED_IN_FAILOVER_HEADER,
    DivergentRange,
    PartitionOffset,
)

TOPIC = "orders"
STALL_S = 2.0
FAILOVER = "f-1"


def clusters() -> tuple[FakeClock, FakeCluster, FakeCluster, FakeKafkaClients]:
    """east came back with records that never crossed; the application is active on west."""
    clock = FakeClock()
    east, west = FakeCluster("east", clock), FakeCluster("west", clock)
    east.create_topic(TOPIC, 2)
    west.create_topic(TOPIC, 2)
    return clock, east, west, FakeKafkaClients(east, west)


def run(
    clients: FakeKafkaClients,
    ranges: list[DivergentRange],
    replay_from: list[PartitionOffset] | None = None,
) -> int:
    return replay(
        ReplaySource("east", {}),
        ReplayTarget("west", {}, replay_from or []),
        ranges,
        FAILOVER,
        STALL_S,
        clients=clients,
    )


def test_a_long_divergent_range_is_replayed_however_long_it_takes() -> None:
    clock, east, west, clients = clusters()
    for n in range(60_000):
        east.append(TOPIC, 0, f"v{n}", key=f"k{n}")
    clients.record_cost_s = 0.001  # 60,000 records: 60 s, 30 stall periods
    started = clock.monotonic()

    copied = run(clients, [DivergentRange(TOPIC, 0, 10, 60_000)])

    assert copied == 59_990
    assert clock.monotonic() - started >= 25 * STALL_S
    records = west.records(TOPIC, 0)
    assert [r.value for r in records[:2]] == [b"v10", b"v11"] and len(records) == 59_990
    headers = dict(records[0].headers or [])
    assert headers[REPLAYED_FROM_HEADER] == b"east/orders/0/10"
    assert headers[REPLAYED_IN_FAILOVER_HEADER] == FAILOVER.encode()
    assert {c.group_id for c in clients.consumers} == {REPLAY_READER_GROUP}
    assert all(c.read_committed and c.closed for c in clients.consumers)


def test_a_range_ending_in_a_transaction_marker_is_done_at_once_without_aborted_records() -> None:
    clock, east, west, clients = clusters()
    east.append(TOPIC, 1, b"before")  # 0
    east.append(TOPIC, 1, b"aborted", transaction="gone")  # 1
    east.end_transaction("gone", commit=False)  # marker at 2
    for n in range(3):  # 3, 4, 5
        east.append(TOPIC, 1, f"kept{n}", transaction="kept")
    east.end_transaction("kept")  # marker at 6: the range's last offset
    started = clock.monotonic()

    copied = run(clients, [DivergentRange(TOPIC, 1, 0, 7)])

    assert copied == 4
    assert west.values(TOPIC, 1) == [b"before", b"kept0", b"kept1", b"kept2"]
    assert clock.monotonic() - started < STALL_S


def test_an_attempt_run_again_copies_nothing_twice() -> None:
    _, east, west, clients = clusters()
    for n in range(20):
        east.append(TOPIC, 0, f"v{n}")
    west.append(TOPIC, 0, b"written on west before the replay")
    replay_from = [PartitionOffset(TOPIC, 0, 1), PartitionOffset(TOPIC, 1, 0)]
    ranges = [DivergentRange(TOPIC, 0, 5, 20)]

    assert run(clients, ranges, replay_from) == 15
    assert run(clients, ranges, replay_from) == 15

    assert len(west.records(TOPIC, 0)) == 16


def test_a_read_that_stops_moving_raises_naming_the_topic_and_the_cluster() -> None:
    clock, east, west, clients = clusters()
    for n in range(10):
        east.append(TOPIC, 0, f"v{n}")
    east.lose_leader(TOPIC, 0)
    started = clock.monotonic()

    with pytest.raises(KafkaUnavailableError) as raised:
        run(clients, [DivergentRange(TOPIC, 0, 0, 10)])

    assert "replayed topic orders on east made no progress for 2s" in str(raised.value)
    assert STALL_S <= clock.monotonic() - started <= STALL_S + 1.0
    assert west.records(TOPIC, 0) == []
