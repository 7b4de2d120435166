"""Every reader of a long history finishes on real brokers, however short its stall limit.

A flow with a day of history holds millions of offset syncs; the sync repair, a worker's
translation, a checkpoint stream's start, MirrorMaker 2's takeover and a recovery's replay all
read such topics to an end. Each used to give up after a fixed deadline and so failed on exactly
the flows that needed it most. Here one topic holds about a million small offset syncs (written
by a fast producer: batched, lingering, compressed, never flushed per record) and ends in a
transaction marker, a second as many checkpoints; every reader is given a stall limit of 2 s
while its whole read takes much longer, and must finish.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass
from typing import TypeVar

import pytest
from confluent_kafka import Producer
from replication_support import create, end_offsets

from drsvc.devenv.environment import EnvironmentInfo
from drsvc.kafka.clients import KafkaClients
from drsvc.kafka.read_progress import ReadLimits
from drsvc.runtime.checkpoints.checkpoint_topic import read_checkpoints
from drsvc.runtime.failover.replay import _source_records
from drsvc.runtime.migration.mm2_takeover import _read_topic
from drsvc.runtime.replication import repair
from drsvc.runtime.translation.sync_reader import read_sync_topic
from failover import checkpoints, offset_syncs, provenance
from failover.keepalive import LastCopy
from failover.site_recovery import DivergentRange

pytestmark = pytest.mark.timeout(600)

log = logging.getLogger(__name__)

#: records of each long topic: a day of syncs of a busy flow is of this order
RECORDS = 1_000_000
#: how long each read may stand still: far less than any of the reads takes
STALL_S = 2.0
IDS = (b"s" * 16, b"t" * 16)
#: the one sync of partition 0, at the topic's start: the scans must read all the way back
FIRST_SYNC = offset_syncs.OffsetSync(
    "orders", 0, IDS[0], IDS[1], 3, 40, 45, (offset_syncs.Segment(40, 30, 5),)
)
#: what fills the topic: the same sync of partition 1 again and again (applying it again changes
#: nothing, so the readers' state stays small while they read every record)
FILLER_SYNC = offset_syncs.OffsetSync(
    "orders", 1, IDS[0], IDS[1], 3, 0, 1, (offset_syncs.Segment(0, 0, 1),)
)

T = TypeVar("T")


@dataclass(frozen=True)
class LongTopics:
    bootstrap: str
    #: offset syncs, each carrying a provenance header, ending in a transaction marker
    syncs: str
    #: checkpoints of one key, ending in a transaction marker
    checkpoints: str
    #: per topic, the end offset of its partition 0 (the marker's offset + 1)
    ends: dict[str, int]


def _hop(partition: int, offset: int) -> list[tuple[str, bytes]]:
    header = provenance.encode(provenance.Provenance("east", "orders", partition, offset))
    return [(provenance.PROVENANCE_HEADER, header)]


def _fill(bootstrap: str, topic: str, key: bytes, value: bytes, headers: object) -> None:
    """``RECORDS`` copies of one record, as fast as the producer takes them."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 50,
            "batch.size": 1_000_000,
            "compression.type": "lz4",
            "queue.buffering.max.messages": 500_000,
            "acks": 1,
        }
    )
    failed: list[str] = []

    def delivered(err: object, _msg: object) -> None:
        if err is not None:
            failed.append(str(err))

    for _ in range(RECORDS):
        while True:
            try:
                producer.produce(
                    topic, value, key, partition=0, headers=headers, on_delivery=delivered
                )
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(120) == 0 and not failed, failed[:3]


def _end_with_marker(bootstrap: str, topic: str, key: bytes, value: bytes, headers: object) -> None:
    """One last record in a transaction: its commit marker ends the partition."""
    writer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"long-history-{topic}"})
    writer.init_transactions(30)
    writer.begin_transaction()
    writer.produce(topic, value, key, partition=0, headers=headers)
    writer.commit_transaction(30)


@pytest.fixture(scope="module")
def long_topics(cluster_pair: EnvironmentInfo) -> LongTopics:
    east = cluster_pair.clusters["east"]
    suffix = uuid.uuid4().hex[:8]
    syncs, cps = f"long-syncs-{suffix}", f"long-checkpoints-{suffix}"
    create(east, syncs, 1)
    create(east, cps, 1)
    started = time.monotonic()
    first_key, first_value = offset_syncs.encode_sync(FIRST_SYNC)
    writer = Producer({"bootstrap.servers": east})
    writer.produce(syncs, first_value, first_key, partition=0, headers=_hop(0, 0))
    assert writer.flush(30) == 0
    key, value = offset_syncs.encode_sync(FILLER_SYNC)
    _fill(east, syncs, key, value, _hop(1, 0))
    # The last record is a copy of partition 0 that no sync maps, and the marker ends the log.
    _end_with_marker(east, syncs, key, value, _hop(0, 5))
    cp_key = checkpoints.encode_key(checkpoints.CheckpointKey("app", "east.orders", 0))
    cp_value = checkpoints.encode_value(checkpoints.Checkpoint("orders", 10, 10, "exact"))
    _fill(east, cps, cp_key, cp_value, None)
    _end_with_marker(east, cps, cp_key, cp_value, None)
    ends = {syncs: end_offsets(east, syncs)[0], cps: end_offsets(east, cps)[0]}
    assert ends == {syncs: RECORDS + 3, cps: RECORDS + 2}
    log.info("wrote two topics of %d records in %.1fs", RECORDS, time.monotonic() - started)
    return LongTopics(east, syncs, cps, ends)


def _timed(what: str, read: Callable[[], T]) -> T:
    started = time.monotonic()
    result = read()
    log.info("%s: %.1fs with a stall limit of %gs", what, time.monotonic() - started, STALL_S)
    return result


def test_the_repair_scans_read_back_to_the_start(long_topics: LongTopics) -> None:
    client = {"bootstrap.servers": long_topics.bootstrap}
    topic = long_topics.syncs
    marker = long_topics.ends[topic] - 1

    copies = _timed(
        "unsynced copies",
        lambda: repair.unsynced_copies(client, topic, 0, "east", "orders", 1, STALL_S),
    )
    tp = offset_syncs.TopicPartition("orders", 0)
    last = _timed(
        "written last copy",
        lambda: repair.written_last_copy(client, topic, tp, IDS, repair.MAX_SYNC_SCAN, STALL_S),
    )

    # Only the copy of offset 0, at the topic's start, told the scan it went back far enough.
    assert copies == [(5, marker - 1)]
    assert last == LastCopy(44, 34, 3)


def test_the_sync_topic_is_read_to_its_end_for_a_translation(long_topics: LongTopics) -> None:
    topic = long_topics.syncs
    read = _timed(
        "sync topic",
        lambda: read_sync_topic(
            {"bootstrap.servers": long_topics.bootstrap},
            topic,
            cluster="east",
            topics=["orders"],
            timeout_s=STALL_S,
        ),
    )
    assert read.records == RECORDS + 2
    assert read.ends == {0: long_topics.ends[topic]}
    assert not read.conflicts


def test_the_checkpoints_topic_is_read_to_its_end(long_topics: LongTopics) -> None:
    topic = long_topics.checkpoints
    read = _timed(
        "checkpoints topic",
        lambda: read_checkpoints(
            {"bootstrap.servers": long_topics.bootstrap},
            topic,
            cluster="east",
            timeout_s=STALL_S,
        ),
    )
    assert read.records == RECORDS + 1
    assert read.ends == {0: long_topics.ends[topic]}
    assert len(read.checkpoints) == 1


def test_mirror_makers_topics_are_read_to_their_end(long_topics: LongTopics) -> None:
    clients = KafkaClients.for_configs({"east": {"bootstrap.servers": long_topics.bootstrap}})
    records = _timed(
        "MirrorMaker 2 topic",
        lambda: len(_read_topic(clients, "east", long_topics.syncs, "offset-syncs topic", STALL_S)),
    )
    assert records == RECORDS + 2


def test_a_replay_reads_a_long_divergent_range(long_topics: LongTopics) -> None:
    clients = KafkaClients.for_configs({"east": {"bootstrap.servers": long_topics.bootstrap}})
    end = long_topics.ends[long_topics.syncs]
    span = DivergentRange(long_topics.syncs, 0, 0, end)

    def count() -> int:
        records = _source_records(clients, "east", [span], ReadLimits(stall_s=STALL_S))
        with closing(records):
            return sum(1 for _ in records)

    assert _timed("replayed range", count) == RECORDS + 2
