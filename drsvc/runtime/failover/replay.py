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

Both clusters are read through the port's :class:`~drsvc.kafka.reader.TopicReader`
(``read_committed``: an aborted record never crossed, and is not replayed), which gives up only
when the read stops moving: a site that was away for a day diverged by a day of records, and
replaying them takes as long as it takes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Generator, Mapping
from contextlib import closing
from dataclasses import dataclass
from itertools import groupby

from drsvc.errors import KafkaUnavailableError
from drsvc.kafka.clients import KafkaClients
from drsvc.kafka.errors import translated
from drsvc.kafka.read_progress import ReadLimits
from drsvc.kafka.reader import TopicReader
from drsvc.kafka.types import KafkaError, Message, Producer
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

#: how long a produce waits for deliveries to make room when the producer's queue is full
_QUEUE_FULL_WAIT_S = 0.1

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
    *,
    clients: KafkaClients | None = None,
) -> int:
    """Copy every record of ``ranges`` not copied yet; return how many are copied in all (by
    this call and by earlier attempts).

    ``timeout_s`` is how long a read may stand still before it gives up
    (:attr:`~drsvc.kafka.read_progress.ReadLimits.stall_s`), not a bound on reading a range, and
    how long the last deliveries are waited for. ``clients`` builds the clients of both clusters
    by their aliases (by default a factory of the two clusters' ``client_config``)."""
    if clients is None:
        clients = KafkaClients.for_configs(
            {source.cluster: source.client_config, target.cluster: target.client_config}
        )
    limits = ReadLimits(stall_s=timeout_s)
    done = _replayed_before(clients, target, failover_id, source.cluster, limits)
    producer = clients.producer(
        target.cluster, {"enable.idempotence": True, "acks": "all", "linger.ms": 5}
    )
    errors: list[str] = []

    def delivered(err: KafkaError | None, _msg: Message) -> None:
        if err is not None:
            errors.append(str(err))

    copied = 0
    what = f"replaying to {target.cluster}"
    partitions = _partition_counts(producer, {r.topic for r in ranges}, timeout_s, target.cluster)
    records = _source_records(clients, source.cluster, ranges, limits)
    with closing(records):  # its reader is closed however the loop ends
        for found, message in records:
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
            partition = found.partition if found.partition < partitions.get(found.topic, 0) else -1
            with translated(what, target.cluster):
                _send(producer, found.topic, partition, message, headers, delivered)
            copied += 1
    with translated(what, target.cluster):
        left = producer.flush(timeout_s)
    if left or errors:
        raise KafkaUnavailableError(
            f"{what}: {left} record(s) not acknowledged"
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


def _send(
    producer: Producer,
    topic: str,
    partition: int,
    message: Message,
    headers: list[tuple[str, str | bytes | None]],
    delivered: Callable[[KafkaError | None, Message], None],
) -> None:
    """Produce the copy of ``message``, waiting for room when the producer's queue is full."""
    while True:
        try:
            producer.produce(
                topic,
                value=message.value(),
                key=message.key(),
                partition=partition,
                headers=headers,
                timestamp=message.timestamp()[1],
                on_delivery=delivered,
            )
            break
        except BufferError:
            # A long range outruns the deliveries. The queue empties as records are delivered
            # or time out (message.timeout.ms), so this ends.
            producer.poll(_QUEUE_FULL_WAIT_S)
    producer.poll(0)


def _reader(clients: KafkaClients, cluster: str, topic: str, limits: ReadLimits) -> TopicReader:
    """A ``read_committed`` reader of ``topic`` (assigned only: never joined nor committed)."""
    return clients.reader(
        cluster,
        topic,
        what="replayed topic",
        group=REPLAY_READER_GROUP,
        committed=True,
        limits=limits,
    )


def _source_records(
    clients: KafkaClients, cluster: str, ranges: Collection[DivergentRange], limits: ReadLimits
) -> Generator[tuple[DivergentRange, Message], None, None]:
    """Every record of ``ranges`` on ``cluster``, range by range in order, each in offset order
    (transaction markers leave gaps; aborted records are not read)."""
    for topic, of_topic in groupby(sorted(ranges), key=lambda r: r.topic):
        with _reader(clients, cluster, topic, limits) as reader:
            for found in of_topic:
                span = {found.partition: (found.first_offset, found.end_offset)}
                for batch in reader.forward(span):
                    for message in batch:
                        yield found, message


def _partition_counts(
    producer: Producer, topics: Collection[str], timeout_s: float, cluster: str
) -> dict[str, int]:
    with translated("listing the topics to replay into", cluster):
        metadata = producer.list_topics(timeout=timeout_s)
    return {
        name: len(metadata.topics[name].partitions)
        for name in topics
        if name in metadata.topics and metadata.topics[name].error is None
    }


def _replayed_before(
    clients: KafkaClients,
    target: ReplayTarget,
    failover_id: str,
    cluster: str,
    limits: ReadLimits,
) -> set[SourceRecord]:
    """The source records an earlier attempt of this failover's replay already copied: those
    named by the copies past the ends recorded when the replay began."""
    done: set[SourceRecord] = set()
    starts = sorted(target.replay_from, key=lambda s: (s.topic, s.partition, s.offset))
    for topic, of_topic in groupby(starts, key=lambda s: s.topic):
        with _reader(clients, target.cluster, topic, limits) as reader:
            bounds = reader.bounds()
            if bounds is None:
                continue
            stretches: dict[int, tuple[int, int]] = {}
            for start in of_topic:
                marks = bounds.get(start.partition)
                if marks is None or marks[1] <= start.offset or start.partition in stretches:
                    continue
                stretches[start.partition] = (start.offset, marks[1])
            for batch in reader.forward(stretches):
                for message in batch:
                    headers = dict(message.headers() or [])
                    if headers.get(REPLAYED_IN_FAILOVER_HEADER) != failover_id.encode():
                        continue
                    raw = headers.get(REPLAYED_FROM_HEADER) or b""
                    text = raw if isinstance(raw, str) else raw.decode(errors="replace")
                    origin = parse_replayed_from(text)
                    if origin is not None and origin[0] == cluster:
                        done.add(origin[1:])
    return done
