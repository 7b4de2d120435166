"""Reading a flow's offset-sync topic from its target cluster into an offset index.

The replicator writes every run it copies as an offset sync to ``drsvc.offset-syncs.<source>`` on
the flow's target (format: ``docs/offset-syncs.md``). :func:`read_sync_topic` reads that topic from
its first retained record up to the end offsets it finds when it starts, in order, and applies each
sync to an :class:`~failover.offset_index.OffsetIndex` together with its position in the sync topic.

What the result can be trusted for:

* Syncs are read ``read_committed``: a sync written in a transaction counts once it is committed.
  A partition is done at the end offset taken at the start, or earlier at its last stable offset
  when an open transaction holds readers back (its syncs are not visible yet, so neither are, in
  exactly-once mode, the copies they describe).
* Syncs produced after the start are not read. Callers that compare the index with end offsets
  read the end offsets afterwards, so what they count as not yet replicated is never too small.
* A sync that contradicts what its partition already holds (two writers, out of order) is not
  applied; the partition is listed in :attr:`SyncTopicRead.conflicts` and its translations must
  not be trusted. A record that is not a sync at all stops the read with a
  :class:`~drsvc.errors.PermanentError`: skipping it could make translations wrong silently.
* The read gives up when it makes no progress for ``timeout_s``: brokers that do not answer in
  time raise :class:`~drsvc.errors.KafkaUnavailableError`. A read that keeps moving is not cut
  short, however long the topic: a flow writes a sync per busy partition about five times a
  second and keeps them for ``sync_retention_ms`` (7 days), millions of syncs that take minutes
  to read (about 110,000 a second), and a fixed deadline would fail every failover after a day
  or two of steady traffic. A long read logs how far it is every ``PROGRESS_LOG_S``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaPartition

from drsvc.errors import KafkaUnavailableError, PermanentError
from failover import naming
from failover.offset_index import OffsetIndex, SyncConflictError, SyncPosition
from failover.offset_syncs import SyncFormatError, TopicPartition, decode_key, decode_value

log = logging.getLogger(__name__)

#: Records per consume() call.
BATCH = 10_000
#: How long one consume() call waits for records.
POLL_S = 0.5
#: How often a long read logs how far it is.
PROGRESS_LOG_S = 10.0
#: librdkafka logs critical problems only: every failure that matters reaches the caller as an
#: error naming the cluster, and a retried connection would otherwise log a line every 50 ms.
QUIET = {"log_level": "2"}


@dataclass
class SyncTopicRead:
    """The index built from one sync topic, and what the read saw on the way."""

    cluster: str
    topic: str
    index: OffsetIndex = field(default_factory=OffsetIndex)
    exists: bool = True
    #: per partition of the sync topic: the offset the read stopped at (its end when it started)
    ends: dict[int, int] = field(default_factory=dict)
    #: sync records read (including those of topics the caller did not ask for)
    records: int = 0
    #: syncs that changed the index (the others repeated copies it already held)
    applied: int = 0
    #: source partitions whose syncs contradicted each other: the first contradiction seen
    conflicts: dict[TopicPartition, str] = field(default_factory=dict)

    def add_record(
        self,
        partition: int,
        offset: int,
        key: bytes | None,
        value: bytes | None,
        wanted: Collection[str] | None = None,
    ) -> None:
        """Apply the sync record at ``offset`` of sync-topic ``partition`` (records in order).

        Syncs of source topics not in ``wanted`` are skipped. A partition whose syncs contradict
        each other goes to :attr:`conflicts` and is not applied further. A record that is not an
        offset sync raises :class:`~drsvc.errors.PermanentError`.
        """
        position = SyncPosition(partition, offset)
        where = f"record {offset} of {self.topic}-{partition} on {self.cluster}"
        self.records += 1
        try:
            if key is None or value is None:
                raise SyncFormatError("key or value is missing")
            tp = decode_key(key)
            if (wanted is not None and tp.topic not in wanted) or tp in self.conflicts:
                self.index.note_position(position)
                return
            sync = decode_value(tp.topic, tp.partition, value)
        except SyncFormatError as err:
            raise PermanentError(
                f"{where} is not an offset sync this build can read ({err}); translations that "
                "skipped it could be wrong, so none are made"
            ) from err
        try:
            changed = self.index.apply(sync, position)
        except SyncConflictError as err:
            self.conflicts[tp] = f"{where}: {err}"
            self.index.note_position(position)
            log.warning("%s contradicts earlier syncs: %s", where, err)
            return
        self.applied += changed


def read_sync_topic(
    client_config: Mapping[str, str],
    sync_topic: str,
    *,
    cluster: str,
    topics: Collection[str] | None = None,
    timeout_s: float = 60.0,
) -> SyncTopicRead:
    """Read ``sync_topic`` on ``cluster`` to its current end into a fresh index.

    ``client_config`` holds the librdkafka settings of the cluster (``bootstrap.servers`` and
    security). Only syncs of source topics in ``topics`` are applied (all when None); the others
    are still read, since one partition of the sync topic holds every topic's syncs. A sync topic
    that does not exist yields an empty index with ``exists`` False: the flow never wrote a sync.
    """
    result = SyncTopicRead(cluster=cluster, topic=sync_topic)
    wanted = None if topics is None else frozenset(topics)
    consumer = Consumer(_consumer_config(client_config))
    try:
        where = f"offset-sync topic {sync_topic} on {cluster}"
        bounds = topic_bounds(consumer, sync_topic, where, timeout_s)
        if bounds is None:
            result.exists = False
            return result
        todo = {p: high for p, (low, high) in bounds.items() if high > low}
        result.ends = {p: low for p, (low, _high) in bounds.items()}
        if todo:
            consumer.assign([KafkaPartition(sync_topic, p, bounds[p][0]) for p in todo])
            _read(consumer, result, todo, wanted, timeout_s)
        log.debug(
            "read %d offset syncs from %s on %s (%d applied, %d conflicting partitions)",
            result.records,
            sync_topic,
            cluster,
            result.applied,
            len(result.conflicts),
        )
        return result
    finally:
        consumer.close()


def _consumer_config(client_config: Mapping[str, str]) -> dict[str, str | int | bool]:
    config: dict[str, str | int | bool] = dict(client_config)
    config.update(
        {
            # Never used to commit: the reader assigns partitions and keeps no progress.
            "group.id": naming.TRANSLATE_READER_GROUP,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
            "socket.connection.setup.timeout.ms": 3000,
            **QUIET,
        }
    )
    return config


def topic_bounds(
    consumer: Consumer, topic: str, where: str, timeout_s: float
) -> dict[int, tuple[int, int]] | None:
    """Low and high watermark of every partition of ``topic``; None if it does not exist.
    ``where`` names the topic in errors (e.g. "offset-sync topic X on west")."""
    try:
        metadata = consumer.list_topics(topic, timeout=timeout_s).topics.get(topic)
        if metadata is None or metadata.error is not None:
            if metadata is not None and metadata.error.code() not in (
                KafkaError.UNKNOWN_TOPIC_OR_PART,
                KafkaError._UNKNOWN_TOPIC,
            ):
                raise KafkaUnavailableError(f"{where}: {metadata.error.str()}")
            return None
        return {
            p: consumer.get_watermark_offsets(
                KafkaPartition(topic, p), timeout=timeout_s, cached=False
            )
            for p in sorted(metadata.partitions)
        }
    except KafkaException as err:
        raise KafkaUnavailableError(f"{where}: {err.args[0].str()}") from err


def _read(
    consumer: Consumer,
    result: SyncTopicRead,
    todo: dict[int, int],
    wanted: frozenset[str] | None,
    timeout_s: float,
) -> None:
    """Read until every partition in ``todo`` reached its end; give up after ``timeout_s``
    without a record read or a partition finished."""
    moved_at = time.monotonic()
    next_log = moved_at + PROGRESS_LOG_S
    seen = (result.records, len(todo))
    while todo:
        now = time.monotonic()
        if (result.records, len(todo)) != seen:
            seen = (result.records, len(todo))
            moved_at = now
        if now - moved_at > timeout_s:
            raise KafkaUnavailableError(
                f"reading offset-sync topic {result.topic} on {result.cluster} made no progress "
                f"for {timeout_s:.0f}s ({_how_far(result, todo)}; {result.records} syncs read)"
            )
        if now >= next_log:
            log.info(
                "reading offset-sync topic %s on %s: %d syncs read so far (%s)",
                result.topic,
                result.cluster,
                result.records,
                _how_far(result, todo),
            )
            next_log = now + PROGRESS_LOG_S
        try:
            messages = consumer.consume(BATCH, POLL_S)
        except KafkaException as err:
            raise KafkaUnavailableError(
                f"reading offset-sync topic {result.topic} on {result.cluster}: {err.args[0].str()}"
            ) from err
        for msg in messages:
            partition = msg.partition()
            offset = msg.offset()
            if partition is None or offset is None or partition not in todo:
                continue
            error = msg.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    # The stable end: with read_committed, never past an open transaction.
                    result.ends[partition] = offset
                    todo.pop(partition)
                elif error.fatal():
                    raise KafkaUnavailableError(
                        f"reading offset-sync topic {result.topic} on {result.cluster}: "
                        f"{error.str()}"
                    )
                else:
                    log.warning("reading %s on %s: %s", result.topic, result.cluster, error.str())
                continue
            if offset >= todo[partition]:
                todo.pop(partition)
                continue
            result.add_record(partition, offset, msg.key(), msg.value(), wanted)
            result.ends[partition] = offset + 1
            if offset + 1 >= todo[partition]:
                todo.pop(partition)


def _how_far(result: SyncTopicRead, todo: dict[int, int]) -> str:
    return ", ".join(
        f"partition {p} at {result.ends[p]} of {end}" for p, end in sorted(todo.items())
    )
