"""Replay: copy a returned site's divergent records to the cluster where the application is active.

Used by the recovery of an unplanned failover when the application's ``on_recovery`` is
``replay`` (:mod:`failover.site_recovery`). Every record keeps its key, value, timestamp and
headers, goes to the same topic and partition number on the active cluster (by key when that
topic has fewer partitions), in order, and gets two headers: where it came from
(``drsvc-replayed-from: <cluster>/<topic>/<partition>/<offset>``) and the failover whose recovery
replayed it (``drsvc-replayed-in``).

A replay interrupted half-way is run again: the copies the earlier attempt made lie past the end
offsets recorded when the replay began, and carry this failover's id, so they are found there and
not made twice.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from drsvc.errors import KafkaUnavailableError
from failover.naming import REPLAY_READER_GROUP
from failover.site_recovery import (
    REPLAYED_FROM_HEADER,
    REPLAYED_IN_FAILOVER_HEADER,
    DivergentRange,
    PartitionOffset,
    parse_replayed_from,
    replayed_from_value,
)

__all__ = ["ReplaySource", "ReplayTarget", "replay"]

log = logging.getLogger(__name__)

_POLL_S = 1.0

SourceRecord = tuple[str, int, int]


@dataclass(frozen=True)
class ReplaySource:
    cluster: str
    client_config: Mapping[str, str]


@dataclass(frozen=True)
class ReplayTarget:
    cluster: str
    client_config: Mapping[str, str]
    #: where an earlier attempt's copies may start (the ends when the replay began)
    replay_from: Collection[PartitionOffset]


def replay(
    source: ReplaySource,
    target: ReplayTarget,
    ranges: Collection[DivergentRange],
    failover_id: str,
    timeout_s: float = 60.0,
) -> int:
    """Copy every record of ``ranges`` not copied yet; return how many are copied in all (by
    this call and by earlier attempts)."""
    done = _replayed_before(target, failover_id, source.cluster, timeout_s)
    producer = Producer(
        {**target.client_config, "enable.idempotence": True, "acks": "all", "linger.ms": 5}
    )
    errors: list[str] = []

    def delivered(err: KafkaError | None, _msg: Message) -> None:
        if err is not None:
            errors.append(str(err))

    consumer = _reader(source.client_config)
    copied = 0
    try:
        partitions = _partition_counts(producer, {r.topic for r in ranges}, timeout_s)
        for found in sorted(ranges):
            for message in _read_range(consumer, found, timeout_s):
                origin = (found.topic, found.partition, message.offset() or 0)
                if origin in done:
                    continue
                headers: list[tuple[str, str | bytes | None]] = [
                    (str(header[0]), header[1]) for header in message.headers() or []
                ]
                headers.append(
                    (REPLAYED_FROM_HEADER, replayed_from_value(source.cluster, *origin).encode())
                )
                headers.append((REPLAYED_IN_FAILOVER_HEADER, failover_id.encode()))
                # Same partition number when the topic there has it, else by key.
                partition = (
                    found.partition if found.partition < partitions.get(found.topic, 0) else -1
                )
                producer.produce(
                    found.topic,
                    value=message.value(),
                    key=message.key(),
                    partition=partition,
                    headers=headers,
                    timestamp=message.timestamp()[1],
                    on_delivery=delivered,
                )
                producer.poll(0)
                copied += 1
        left = producer.flush(timeout_s)
    finally:
        consumer.close()
    if left or errors:
        raise KafkaUnavailableError(
            f"replaying to {target.cluster}: {left} record(s) not acknowledged"
            + (f", errors: {'; '.join(sorted(set(errors)))}" if errors else "")
            + " (run the recovery again: copies already made are not repeated)"
        )
    earlier = sum(
        1
        for topic, partition, offset in done
        if any(
            (r.topic, r.partition) == (topic, partition) and r.first_offset <= offset < r.end_offset
            for r in ranges
        )
    )
    log.info(
        "replayed %d record(s) from %s to %s (%d more by an earlier attempt)",
        copied,
        source.cluster,
        target.cluster,
        earlier,
    )
    return copied + earlier


def _reader(client_config: Mapping[str, str]) -> Consumer:
    return Consumer(
        {
            **client_config,
            "group.id": REPLAY_READER_GROUP,  # assigned: never joined nor committed
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )


def _partition_counts(
    producer: Producer, topics: Collection[str], timeout_s: float
) -> dict[str, int]:
    metadata = producer.list_topics(timeout=timeout_s)
    return {
        name: len(metadata.topics[name].partitions)
        for name in topics
        if name in metadata.topics and metadata.topics[name].error is None
    }


def _read_range(consumer: Consumer, found: DivergentRange, timeout_s: float) -> list[Message]:
    """The records of ``found`` in order (transaction markers leave gaps; aborted records are
    not read)."""
    consumer.assign([TopicPartition(found.topic, found.partition, found.first_offset)])
    messages: list[Message] = []
    idle_s = 0.0
    while True:
        message = consumer.poll(_POLL_S)
        if message is None:
            idle_s += _POLL_S
            position = _position(consumer, found)
            if position is not None and position >= found.end_offset:
                return messages
            if idle_s >= timeout_s:
                raise KafkaUnavailableError(
                    f"reading {found.topic}-{found.partition} [{found.first_offset}, "
                    f"{found.end_offset}) stopped at {position} for {timeout_s:.0f}s"
                )
            continue
        error = message.error()
        if error is not None:
            if error.code() == KafkaError._PARTITION_EOF:
                if (message.offset() or 0) >= found.end_offset:
                    return messages
                continue
            raise KafkaUnavailableError(f"reading {found.topic}-{found.partition}: {error}")
        idle_s = 0.0
        offset = message.offset() or 0
        if offset >= found.end_offset:
            return messages
        messages.append(message)
        if offset == found.end_offset - 1:
            return messages


def _position(consumer: Consumer, found: DivergentRange) -> int | None:
    try:
        (tp,) = consumer.position([TopicPartition(found.topic, found.partition)])
    except KafkaException:
        return None
    return tp.offset if tp.offset >= 0 else None


def _replayed_before(
    target: ReplayTarget, failover_id: str, cluster: str, timeout_s: float
) -> set[SourceRecord]:
    """The source records an earlier attempt of this failover's replay already copied."""
    done: set[SourceRecord] = set()
    if not target.replay_from:
        return done
    consumer = _reader(target.client_config)
    try:
        for start in target.replay_from:
            end = _end(consumer, start.topic, start.partition, timeout_s)
            if end <= start.offset:
                continue
            stretch = DivergentRange(start.topic, start.partition, start.offset, end)
            for message in _read_range(consumer, stretch, timeout_s):
                headers = dict(message.headers() or [])
                if headers.get(REPLAYED_IN_FAILOVER_HEADER) != failover_id.encode():
                    continue
                raw = headers.get(REPLAYED_FROM_HEADER) or b""
                text = raw if isinstance(raw, str) else raw.decode(errors="replace")
                origin = parse_replayed_from(text)
                if origin is not None and origin[0] == cluster:
                    done.add(origin[1:])
    finally:
        consumer.close()
    return done


def _end(consumer: Consumer, topic: str, partition: int, timeout_s: float) -> int:
    _low, high = consumer.get_watermark_offsets(
        TopicPartition(topic, partition), timeout=timeout_s, cached=False
    )
    return int(high)
