"""The translation view keeps a sync topic's index and reads only the syncs written since, on
real brokers: a second read after N more syncs reads those N and no more, and what it holds is
byte for byte what a full read of the topic builds now. Retention deleting syncs it holds makes
the next read a full one again."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Producer
from replication_support import create
from translation_support import delete_before

from drsvc.devenv.environment import EnvironmentInfo
from drsvc.runtime.translation.cluster_view import KafkaClusterView
from drsvc.runtime.translation.sync_reader import SyncTopicRead, read_sync_topic
from failover.offset_syncs import OffsetSync, Segment, TopicPartition, encode_sync

pytestmark = pytest.mark.timeout(120)

IDS = (b"s" * 16, b"t" * 16)
ORDERS_0 = TopicPartition("orders", 0)


def write_syncs(bootstrap: str, topic: str, first: int, count: int) -> None:
    """Syncs ``first`` to ``first + count`` of orders-0 (each copies 10 records, a transaction
    marker after each run on the target), in one transaction: the topic ends in its marker."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"syncs-{uuid.uuid4().hex}"}
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    for n in range(first, first + count):
        sync = OffsetSync("orders", 0, *IDS, 0, n * 10, n * 10 + 10, (Segment(n * 10, n * 11, 10),))
        key, value = encode_sync(sync)
        producer.produce(topic, value=value, key=key, partition=0)
    producer.commit_transaction(30)


def fresh(bootstrap: str, topic: str) -> SyncTopicRead:
    return read_sync_topic({"bootstrap.servers": bootstrap}, topic, cluster="west")


def assert_same(read: SyncTopicRead, full: SyncTopicRead) -> None:
    assert read.index.snapshot() == full.index.snapshot()
    assert read.ends == full.ends
    for c in range(0, 25_000, 7):
        assert read.index.translate_downstream(ORDERS_0, c) == full.index.translate_downstream(
            ORDERS_0, c
        )


def test_a_second_read_reads_only_the_new_syncs_and_equals_a_full_read(
    cluster_pair: EnvironmentInfo,
) -> None:
    west = cluster_pair.clusters["west"]
    topic = f"drsvc.offset-syncs.incr-{uuid.uuid4().hex[:8]}"
    create(west, topic, 1)
    write_syncs(west, topic, 0, 2000)
    view = KafkaClusterView("west", {"bootstrap.servers": west})

    first = view.read_syncs(topic, ["orders"])
    write_syncs(west, topic, 2000, 37)
    second = view.read_syncs(topic, ["orders"])
    third = view.read_syncs(topic, ["orders"])

    assert (first.full, first.records) == (True, 2000)
    assert (second.full, second.records, second.applied) == (False, 37, 37)
    assert (third.full, third.records) == (False, 0)
    assert second.index.replicated_end(ORDERS_0) == 20_370
    assert_same(third, fresh(west, topic))

    # Retention deletes syncs the kept index holds: a fresh read no longer finds them, and
    # neither may the kept index, so it is read again from the new log start.
    delete_before(west, topic, {0: 500})
    write_syncs(west, topic, 2037, 5)
    after = view.read_syncs(topic, ["orders"])
    full = fresh(west, topic)
    assert after.full and after.records == full.records
    assert str(after.index.translate_downstream(ORDERS_0, 100).reason) == "before-syncs"
    assert_same(after, full)
