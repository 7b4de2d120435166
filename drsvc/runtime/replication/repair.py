"""Rebuilding the offset syncs a crashed worker never wrote, from the target's own log.

A worker writes a run's syncs after the run's copies are delivered, and commits source progress
only after the syncs are delivered. A worker killed in between leaves copies on the target that no
sync maps; they all copy source offsets at or after the committed position. Before copying a
partition again, the next worker reads the tail of the remote partition, finds those copies by
their provenance header, and writes syncs for them, so every copy on the target stays mapped.

The tail is bounded by what can be in flight (the producer queue), so the scan reads backwards
from the end in growing windows until it reaches a copy of an offset before the committed one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from drsvc.errors import KafkaUnavailableError
from failover import provenance

log = logging.getLogger(__name__)

FIRST_WINDOW = 10_000

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
) -> list[tuple[int, int]]:
    """``(source offset, target offset)`` of every copy in the remote partition's tail that was
    made from ``source_topic``/``partition`` at or after source offset ``committed``."""
    config = dict(target_client)
    config.update(
        {
            "group.id": "drsvc-sync-repair",
            "enable.auto.commit": False,
            "isolation.level": "read_uncommitted",
            "log_level": 4,
        }
    )
    consumer = Consumer(config)
    try:
        tp = TopicPartition(remote_topic, partition)
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                low, high = consumer.get_watermark_offsets(tp, timeout=timeout_s, cached=False)
                break
            except KafkaException as err:
                code = err.args[0].code()
                if code in (KafkaError._UNKNOWN_PARTITION, KafkaError._UNKNOWN_TOPIC):
                    return []  # the remote partition does not exist yet: nothing copied there
                # A topic created a moment ago may have no leader yet: wait for one.
                transient = err.args[0].retriable() or code in LEADERLESS
                if not transient or time.monotonic() > deadline:
                    raise KafkaUnavailableError(
                        f"reading the end of {remote_topic}-{partition}: {err}"
                    ) from err
                time.sleep(0.2)
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
    reached = False
    if begin >= end:
        return copies, True
    consumer.assign([TopicPartition(tp.topic, tp.partition, begin)])
    deadline = time.monotonic() + timeout_s
    position = begin
    while position < end:
        if time.monotonic() > deadline:
            raise KafkaUnavailableError(
                f"reading {tp.topic}-{tp.partition} [{begin}, {end}) to rebuild offset syncs "
                f"did not finish in {timeout_s:.0f}s"
            )
        for msg in consumer.consume(10_000, 1.0):
            if msg.error() is not None:
                continue
            offset = msg.offset()
            assert offset is not None
            position = offset + 1
            if offset >= end:
                break
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
            copies.append((hop.offset, offset))
    consumer.unassign()
    return copies, reached
