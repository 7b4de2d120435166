"""Reading a checkpoints topic back: the newest checkpoint per key, tombstones, foreign records;
a long topic read however long it takes, and a read that stops moving named (on the in-memory
Kafka and its fake clock); the topic created compacted through the cluster's admin client."""

from __future__ import annotations

import logging

import pytest
from fake_kafka import FakeClock, FakeCluster
from stalling_kafka import StallingKafkaClients

from drsvc.errors import KafkaUnavailableError, PermanentError
from drsvc.runtime.checkpoints.checkpoint_topic import (
    CHECKPOINT_TOPIC_CONFIGS,
    CheckpointsRead,
    checkpoint_as_dict,
    ensure_checkpoints_topic,
    read_checkpoints,
)
from failover import naming
from failover.checkpoints import (
    VALUE_MAGIC,
    VALUE_VERSION,
    Checkpoint,
    CheckpointKey,
    encode_key,
    encode_value,
)

KEY = CheckpointKey("g", "east.orders", 0)
TOPIC = "east.checkpoints.internal"
STALL_S = 2.0
PROGRESS_LOGGER = "drsvc.kafka.read_progress"


def west_with_checkpoints(count: int, groups: int = 100) -> tuple[FakeClock, StallingKafkaClients]:
    """``count`` checkpoints of ``groups`` groups on west, each group's newest last."""
    clock = FakeClock()
    west = FakeCluster("west", clock)
    west.create_topic(TOPIC, 1)
    for n in range(count):
        key = CheckpointKey(f"g{n % groups}", "east.orders", 0)
        west.append(TOPIC, 0, encode_value(Checkpoint("orders", n, n, "exact")), encode_key(key))
    return clock, StallingKafkaClients(west)


def test_the_newest_checkpoint_of_a_key_wins_and_a_tombstone_deletes_it() -> None:
    read = CheckpointsRead(cluster="west", topic="east.checkpoints.internal")
    read.add_record(0, 0, encode_key(KEY), encode_value(Checkpoint("orders", 5, 5, "exact")))
    read.add_record(0, 1, encode_key(KEY), encode_value(Checkpoint("orders", 9, 9, "exact")))
    assert read.checkpoints[KEY].source_offset == 9
    assert checkpoint_as_dict(KEY, read.checkpoints[KEY])["target_offset"] == 9
    read.add_record(0, 2, encode_key(KEY), None)
    assert read.checkpoints == {}
    assert read.records == 3


def test_a_record_of_an_unknown_version_stops_the_read_naming_it() -> None:
    read = CheckpointsRead(cluster="west", topic="east.checkpoints.internal")
    newer = (
        bytes([VALUE_MAGIC, VALUE_VERSION + 1])
        + encode_value(Checkpoint("orders", 5, 5, "exact"))[2:]
    )
    with pytest.raises(PermanentError, match=r"record 7 of east.checkpoints.internal-0 on west"):
        read.add_record(0, 7, encode_key(KEY), newer)
    with pytest.raises(PermanentError, match="has no key"):
        read.add_record(0, 8, None, b"x")


def test_a_long_checkpoints_topic_is_read_however_long_it_takes_and_says_how_far_it_is(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock, clients = west_with_checkpoints(40_000)
    clients.record_cost_s = 0.001  # 40 s to read: twenty stall periods
    started = clock.monotonic()

    with caplog.at_level(logging.INFO, logger=PROGRESS_LOGGER):
        read = read_checkpoints({}, TOPIC, cluster="west", timeout_s=STALL_S, clients=clients)

    assert clock.monotonic() - started >= 20 * STALL_S
    assert read.exists and read.records == 40_000 and read.ends == {0: 40_000}
    assert len(read.checkpoints) == 100
    assert read.checkpoints[CheckpointKey("g7", "east.orders", 0)].source_offset == 39_907
    lines = [r.getMessage() for r in caplog.records if r.name == PROGRESS_LOGGER]
    assert len(lines) >= 2, "a long read says how far it is"
    assert lines[0].startswith(f"reading checkpoints topic {TOPIC} on west: partition 0 at ")
    (consumer,) = clients.consumers
    assert consumer.group_id == naming.CHECKPOINTS_READER_GROUP and consumer.read_committed
    assert consumer.closed


def test_a_checkpoints_read_that_stops_moving_raises_naming_the_topic_and_cluster() -> None:
    _clock, clients = west_with_checkpoints(10_000)
    clients.record_cost_s = 0.0005
    clients.stall_after = 4_000  # then west stops answering

    with pytest.raises(KafkaUnavailableError) as raised:
        read_checkpoints({}, TOPIC, cluster="west", timeout_s=STALL_S, clients=clients)

    message = str(raised.value)
    assert f"reading checkpoints topic {TOPIC} on west made no progress for 2s" in message
    assert "(partition 0 at " in message and " of 10000; " in message
    assert clients.consumers[0].closed


def test_a_missing_checkpoints_topic_reads_empty_and_is_created_compacted() -> None:
    _clock, clients = west_with_checkpoints(0)
    missing = read_checkpoints({}, "west.checkpoints.internal", cluster="west", clients=clients)
    assert not missing.exists and missing.checkpoints == {}

    assert ensure_checkpoints_topic(
        {}, "west.checkpoints.internal", cluster="west", clients=clients
    )
    assert not ensure_checkpoints_topic({}, TOPIC, cluster="west", clients=clients)
    assert clients.admins["west"].created == [
        ("west.checkpoints.internal", 1, CHECKPOINT_TOPIC_CONFIGS)
    ]
