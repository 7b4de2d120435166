"""Rebuilding the offset syncs a crashed worker never wrote, from the target's own log.

A worker writes a run's syncs after the run's copies are delivered, and commits source progress
only after the syncs are delivered. A worker killed in between leaves copies on the target that no
sync maps; they all copy source offsets at or after the committed position. Before copying a
partition again, the next worker reads the tail of the remote partition, finds those copies by
their provenance header, and writes syncs for them, so every copy on the target stays mapped.

The tail is bounded by what can be in flight (the producer queue), so the scan reads backwards
from the end in growing windows until it reaches a copy of an offset before the committed one.
:func:`written_sync_end` reads the sync topic's tail the same way, so that only copies past the
last written sync are rebuilt: syncs are appended in target order, never slotted in between.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from drsvc.errors import KafkaUnavailableError
from failover import naming, offset_syncs, provenance
from failover.keepalive import LastCopy, last_copy_of

log = logging.getLogger(__name__)

FIRST_WINDOW = 10_000
#: the sync topic is read backwards at most this far looking for a partition's last sync
MAX_SYNC_SCAN = 5_000_000

#: answers of a partition that has no leader yet (a topic created a moment ago), which librdkafka
#: does not always mark as retriable
LEADERLESS = (
    KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError._NO_OFFSET,
    KafkaError._TRANSPORT,
    KafkaError._TIMED_OUT,
)


def unsynced_copies(
    target_client: Mapping[str, Any],
    remote_topic: str,
    partition: int,
    source_alias: str,
    source_topic: str,
    committed: int,
    timeout_s: float = 60.0,
    after: int | None = None,
) -> list[tuple[int, int]]:
    """``(source offset, target offset)`` of every copy in the remote partition's tail that was
    made from ``source_topic``/``partition`` at or after source offset ``committed``.

    ``after``: every copy below that target offset is known to be mapped (the previous owner
    handed the partition over cleanly, :mod:`failover.handover`): only what lies past it is read.
    """
    consumer = Consumer(_tail_reader_config(target_client))
    try:
        tp = TopicPartition(remote_topic, partition)
        marks = _watermarks(consumer, tp, timeout_s)
        if marks is None:
            return []  # the remote partition does not exist yet: nothing copied there
        low, high = marks
        if after is not None:
            begin = max(low, after)
            return _scan(
                consumer, tp, begin, high, source_alias, source_topic, committed, timeout_s
            )[0]
        window = FIRST_WINDOW
        while True:
            begin = max(low, high - window)
            copies, reached_committed = _scan(
                consumer, tp, begin, high, source_alias, source_topic, committed, timeout_s
            )
            if reached_committed or begin == low:
                return copies
            window *= 4
    finally:
        consumer.close()


def written_sync_end(
    target_client: Mapping[str, Any],
    sync_topic: str,
    tp: offset_syncs.TopicPartition,
    topic_ids: tuple[bytes, bytes],
    timeout_s: float = 60.0,
) -> int:
    """One past the highest target offset a written sync of ``tp`` maps (under ``topic_ids``,
    the source and remote topic ids); 0 when none is found.

    Syncs of a partition are written in target order, so that is one past its newest mapped copy
    (:func:`written_last_copy`, read at most :data:`MAX_SYNC_SCAN` records back).
    """
    last = written_last_copy(target_client, sync_topic, tp, topic_ids, MAX_SYNC_SCAN, timeout_s)
    return 0 if last is None else last.target_offset + 1


def written_last_copy(
    target_client: Mapping[str, Any],
    sync_topic: str,
    tp: offset_syncs.TopicPartition,
    topic_ids: tuple[bytes, bytes],
    max_scan: int,
    timeout_s: float = 60.0,
) -> LastCopy | None:
    """The newest copy a written sync of ``tp`` maps (under ``topic_ids``), read backwards from
    the sync topic's end in growing windows, at most ``max_scan`` records back; None when none is
    found there.

    A worker restarted at its committed progress learns an idle partition's last copy this way,
    so that its keepalive syncs go on (:mod:`failover.keepalive`).
    """
    consumer = Consumer(_tail_reader_config(target_client))
    try:
        marks = _watermarks(consumer, TopicPartition(sync_topic, 0), timeout_s)
        if marks is None:
            return None
        low, high = marks
        key = offset_syncs.encode_key(tp.topic, tp.partition)
        end, window = high, min(FIRST_WINDOW, max_scan)
        while end > low and high - end < max_scan:
            begin = max(low, end - window, high - max_scan)
            found = _last_copy_in(consumer, sync_topic, begin, end, key, topic_ids, timeout_s)
            if found is not None:
                return found
            end, window = begin, window * 4
        return None
    finally:
        consumer.close()


def _last_copy_in(
    consumer: Consumer,
    sync_topic: str,
    begin: int,
    end: int,
    key: bytes,
    topic_ids: tuple[bytes, bytes],
    timeout_s: float,
) -> LastCopy | None:
    """The last copy of the last sync keyed ``key`` with copies in ``[begin, end)``."""
    syncs = []
    for msg in _read_range(consumer, TopicPartition(sync_topic, 0), begin, end, timeout_s):
        if msg.key() != key:
            continue
        try:
            sync = offset_syncs.decode_value("x", 0, msg.value() or b"")
        except offset_syncs.SyncFormatError:
            continue  # not a sync this build reads: the index refuses it anyway
        if (sync.source_topic_id, sync.target_topic_id) == topic_ids:
            syncs.append(sync)
    # Syncs of a partition are written in target order: the last one with copies holds it.
    return last_copy_of(syncs, None)


def _tail_reader_config(target_client: Mapping[str, Any]) -> dict[str, Any]:
    config = dict(target_client)
    config.update(
        {
            "group.id": naming.SYNC_REPAIR_GROUP,
            "enable.auto.commit": False,
            "isolation.level": "read_uncommitted",
            # The end of a partition may be a transaction marker, which is never delivered: the
            # end-of-partition event says the read is complete instead.
            "enable.partition.eof": True,
            "log_level": 4,
        }
    )
    return config


def _watermarks(consumer: Consumer, tp: TopicPartition, timeout_s: float) -> tuple[int, int] | None:
    """(low, high) of ``tp``, waiting for a leader; None when the partition does not exist."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            low, high = consumer.get_watermark_offsets(tp, timeout=timeout_s, cached=False)
            return low, high
        except KafkaException as err:
            code = err.args[0].code()
            if code in (KafkaError._UNKNOWN_PARTITION, KafkaError._UNKNOWN_TOPIC):
                return None
            # A topic created a moment ago may have no leader yet: wait for one.
            transient = err.args[0].retriable() or code in LEADERLESS
            if not transient or time.monotonic() > deadline:
                raise KafkaUnavailableError(
                    f"reading the end of {tp.topic}-{tp.partition}: {err}"
                ) from err
            time.sleep(0.2)


def _read_range(
    consumer: Consumer, tp: TopicPartition, begin: int, end: int, timeout_s: float
) -> list[Message]:
    """Every record of ``[begin, end)`` of ``tp`` (transaction markers and aborted records are
    never delivered; the end-of-partition event ends the read when they are all that is left)."""
    records: list[Message] = []
    if begin >= end:
        return records
    consumer.assign([TopicPartition(tp.topic, tp.partition, begin)])
    deadline = time.monotonic() + timeout_s
    position = begin
    try:
        while position < end:
            if time.monotonic() > deadline:
                raise KafkaUnavailableError(
                    f"reading {tp.topic}-{tp.partition} [{begin}, {end}) did not finish in "
                    f"{timeout_s:.0f}s"
                )
            for msg in consumer.consume(10_000, 1.0):
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        position = end  # the log's end (markers are never delivered): done
                    continue
                offset = msg.offset()
                assert offset is not None
                if offset >= end:
                    position = end
                    break
                position = offset + 1
                records.append(msg)
    finally:
        consumer.unassign()
    return records


def _scan(
    consumer: Consumer,
    tp: TopicPartition,
    begin: int,
    end: int,
    source_alias: str,
    source_topic: str,
    committed: int,
    timeout_s: float,
) -> tuple[list[tuple[int, int]], bool]:
    copies: list[tuple[int, int]] = []
    reached = begin >= end
    for msg in _read_range(consumer, tp, begin, end, timeout_s):
        hops = provenance.chain(msg.headers())  # type: ignore[arg-type]
        if not hops:
            continue
        hop = hops[-1]
        if hop.cluster != source_alias or hop.topic != source_topic:
            continue
        if hop.partition != tp.partition:
            continue
        if hop.offset < committed:
            reached = True
            continue
        offset = msg.offset()
        assert offset is not None
        copies.append((hop.offset, offset))
    return copies, reached
