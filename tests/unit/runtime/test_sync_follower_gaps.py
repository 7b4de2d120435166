"""A sync follower's gap reads on the in-memory Kafka and its fake clock: a gap is read however
long it takes while the read moves (a long stretch of aborted syncs, say), one reader serves
every gap, and a read that stops moving raises naming the topic and cluster, after which the
next gap gets a fresh reader."""

from __future__ import annotations

import pytest
from fake_kafka import FakeClock, FakeCluster
from stalling_kafka import StallingKafkaClients

from drsvc.errors import KafkaUnavailableError
from drsvc.runtime.checkpoints.plan import SyncSource
from drsvc.runtime.checkpoints.sync_follower import Gap, SyncFollower
from failover import naming
from failover.offset_syncs import OffsetSync, Segment, TopicPartition, encode_sync

SYNC_TOPIC = "drsvc.offset-syncs.east"
STALL_S = 2.0
SOURCE_ID, TARGET_ID = b"S" * 16, b"T" * 16
ORDERS_0 = TopicPartition("orders", 0)


def sync_record(n: int) -> tuple[bytes, bytes]:
    """The ``n``-th sync of orders-0: records ``[n*10, n*10+10)`` copied at the same offsets."""
    return encode_sync(
        OffsetSync(
            "orders",
            0,
            SOURCE_ID,
            TARGET_ID,
            0,
            n * 10,
            n * 10 + 10,
            (Segment(n * 10, n * 10, 10),),
        )
    )


def setup() -> tuple[FakeClock, FakeCluster, StallingKafkaClients, SyncFollower]:
    clock = FakeClock()
    west = FakeCluster("west", clock)
    west.create_topic(SYNC_TOPIC, 1)
    clients = StallingKafkaClients(west)
    follower = SyncFollower(
        SyncSource("east->west", "west", SYNC_TOPIC), {}, STALL_S, clients=clients
    )
    return clock, west, clients, follower


def append_sync(west: FakeCluster, n: int, transaction: str | None = None) -> int:
    key, value = sync_record(n)
    return west.append(SYNC_TOPIC, 0, value, key, transaction=transaction)


def test_a_long_gap_is_read_while_it_moves_and_one_reader_serves_every_gap() -> None:
    clock, west, clients, follower = setup()
    append_sync(west, 0)  # 0: delivered to the agent
    append_sync(west, 1)  # 1: missed by the agent
    for _ in range(20_000):  # 2..20001: aborted syncs, never delivered
        append_sync(west, 99, transaction="tx")
    west.end_transaction("tx", commit=False)  # marker at 20002
    last = append_sync(west, 2)  # 20003: delivered to the agent
    follower.accept(0, 0, *sync_record(0))
    clients.record_cost_s = 0.001  # passing the aborted stretch takes 20 s: ten stall periods
    started = clock.monotonic()

    gap = follower.accept(0, last, *sync_record(2))
    assert gap == Gap(0, 1, last)
    records = follower.read_range(gap)

    assert clock.monotonic() - started >= 10 * STALL_S
    assert [offset for offset, _key, _value in records] == [1]
    follower.fill(gap, records)
    assert follower.accept(0, last, *sync_record(2)) is None
    assert follower.next_offsets == {0: last + 1}
    assert follower.read.index.replicated_end(ORDERS_0) == 30

    # The next gap (a commit marker, say) is read by the same reader.
    append_sync(west, 3, transaction="tx2")  # last + 1
    west.end_transaction("tx2")  # marker at last + 2
    append_sync(west, 4)  # last + 3: delivered
    gap = follower.accept(0, last + 3, *sync_record(4))
    assert gap == Gap(0, last + 1, last + 3)
    assert [offset for offset, _k, _v in follower.read_range(gap)] == [last + 1]
    (consumer,) = clients.consumers
    assert consumer.group_id == naming.CHECKPOINTS_READER_GROUP and consumer.read_committed
    assert not consumer.closed
    follower.close()
    assert consumer.closed


def test_a_gap_read_that_stops_moving_raises_naming_the_topic_and_a_new_reader_follows() -> None:
    clock, west, clients, follower = setup()
    for n in range(5_000):
        append_sync(west, n)
    clients.record_cost_s = 0.001
    clients.stall_after = 1_000  # then west stops answering
    gap = Gap(0, 0, 5_000)
    started = clock.monotonic()

    with pytest.raises(KafkaUnavailableError) as raised:
        follower.read_range(gap)

    message = str(raised.value)
    assert f"reading offset-sync topic {SYNC_TOPIC} on west made no progress for 2s" in message
    assert "(partition 0 at " in message and " of 5000; " in message
    assert clock.monotonic() - started < 30 * STALL_S
    assert clients.consumers[0].closed  # let go: the next gap gets a new one

    west.down = False
    clients.stall_after = None
    records = follower.read_range(gap)
    assert len(records) == 5_000 and len(clients.consumers) == 2


def test_a_gap_past_the_readable_end_is_not_filled_but_asked_again() -> None:
    _clock, west, _clients, follower = setup()
    append_sync(west, 0)  # 0
    append_sync(west, 1, transaction="tx")  # 1: not committed yet
    append_sync(west, 2, transaction="tx")  # 2

    with pytest.raises(KafkaUnavailableError, match="readable up to 1 only"):
        follower.read_range(Gap(0, 0, 3))

    west.end_transaction("tx")
    assert [offset for offset, _k, _v in follower.read_range(Gap(0, 0, 3))] == [0, 1, 2]


def test_load_reads_the_whole_topic_through_the_same_factory() -> None:
    _clock, west, clients, follower = setup()
    for n in range(3):
        append_sync(west, n)
    follower.load()
    assert follower.next_offsets == {0: 3}
    assert follower.read.index.replicated_end(ORDERS_0) == 30
    assert clients.consumers[0].group_id == naming.TRANSLATE_READER_GROUP
