"""Reading a sync topic gives up when the read stops moving, never because the topic is long.

A flow keeps a week of syncs, millions of them for a busy flow: a read of them takes minutes, and a
fixed deadline made every failover and every checkpoint-stream start fail once the topic had grown.
The read runs on the in-memory Kafka and its fake clock, each record costing fake time.
"""

from __future__ import annotations

import logging

import pytest
from fake_kafka import FakeClock, FakeCluster, FakeKafkaClients
from stalling_kafka import StallingKafkaClients

from drsvc.errors import KafkaUnavailableError
from drsvc.runtime.translation.sync_reader import SyncTopicRead, read_sync_topic
from failover import naming
from failover.offset_syncs import OffsetSync, Segment, TopicPartition, encode_sync

SOURCE_ID, TARGET_ID = b"S" * 16, b"T" * 16
SYNC_TOPIC = "drsvc.offset-syncs.east"
TIMEOUT_S = 5.0
PROGRESS_LOGGER = "drsvc.kafka.read_progress"
ORDERS_0 = TopicPartition("orders", 0)


def write_syncs(west: FakeCluster, count: int, partition: int = 0) -> None:
    """``count`` syncs of orders-0, each copying the next 100 records."""
    for n in range(count):
        key, value = encode_sync(
            OffsetSync(
                "orders",
                0,
                SOURCE_ID,
                TARGET_ID,
                0,
                n * 100,
                n * 100 + 100,
                (Segment(n * 100, n * 100, 100),),
            )
        )
        west.append(SYNC_TOPIC, partition, value, key)


def west_with_syncs(
    count: int, clients_type: type[FakeKafkaClients] = FakeKafkaClients
) -> tuple[FakeClock, FakeCluster, FakeKafkaClients]:
    clock = FakeClock()
    west = FakeCluster("west", clock)
    west.create_topic(SYNC_TOPIC, 1)
    write_syncs(west, count)
    return clock, west, clients_type(west)


def read(clients: FakeKafkaClients, topics: list[str] | None = None) -> SyncTopicRead:
    return read_sync_topic(
        {}, SYNC_TOPIC, cluster="west", topics=topics, timeout_s=TIMEOUT_S, clients=clients
    )


def test_a_read_that_keeps_moving_runs_past_the_timeout_and_says_how_far_it_is(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock, _west, clients = west_with_syncs(30_000)
    clients.record_cost_s = 0.001  # 30 s to read: six times the stall period
    started = clock.monotonic()

    with caplog.at_level(logging.INFO, logger=PROGRESS_LOGGER):
        result = read_sync_topic(
            {}, SYNC_TOPIC, cluster="west", timeout_s=TIMEOUT_S, clients=clients
        )

    assert clock.monotonic() - started >= 6 * TIMEOUT_S
    assert result.exists and result.records == 30_000 and result.applied == 30_000
    assert result.ends == {0: 30_000}
    assert result.index.replicated_end(ORDERS_0) == 3_000_000
    progress = [r.getMessage() for r in caplog.records if r.name == PROGRESS_LOGGER]
    assert len(progress) >= 2, "a long read logs how far it is"
    assert progress[0].startswith(f"reading offset-sync topic {SYNC_TOPIC} on west: partition 0 at")
    assert "of 30000" in progress[0]
    # Read as a reader that never joins its group.
    (consumer,) = clients.consumers
    assert consumer.group_id == naming.TRANSLATE_READER_GROUP and consumer.read_committed
    assert consumer.closed


def test_a_read_that_stops_moving_gives_up_after_the_timeout_naming_where_it_stopped() -> None:
    _clock, west, clients = west_with_syncs(10_000, StallingKafkaClients)
    assert isinstance(clients, StallingKafkaClients)
    clients.stall_after = 3_000  # then the cluster stops answering
    clients.record_cost_s = 0.001

    with pytest.raises(KafkaUnavailableError) as raised:
        read(clients)

    assert west.down
    message = str(raised.value)
    assert f"reading offset-sync topic {SYNC_TOPIC} on west made no progress for 5s" in message
    assert "(partition 0 at " in message and " of 10000; " in message
    assert clients.consumers[0].closed


def test_only_the_topics_asked_for_are_applied_and_a_missing_topic_reads_empty() -> None:
    _clock, _west, clients = west_with_syncs(10)
    result = read_sync_topic({}, SYNC_TOPIC, cluster="west", topics=["payments"], clients=clients)
    assert result.records == 10 and result.applied == 0
    assert result.index.replicated_end(ORDERS_0) is None

    missing = read_sync_topic({}, "drsvc.offset-syncs.south", cluster="west", clients=clients)
    assert not missing.exists and missing.records == 0 and missing.ends == {}


def test_an_open_transaction_holds_the_read_at_the_last_stable_offset() -> None:
    _clock, west, clients = west_with_syncs(5)
    key, value = encode_sync(
        OffsetSync("orders", 0, SOURCE_ID, TARGET_ID, 0, 500, 600, (Segment(500, 500, 100),))
    )
    west.append(SYNC_TOPIC, 0, value, key, transaction="tx")  # offset 5, not committed yet

    result = read(clients)

    assert result.records == 5 and result.ends == {0: 5}
    assert result.index.replicated_end(ORDERS_0) == 500
