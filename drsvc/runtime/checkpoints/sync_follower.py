"""An offset index kept current as offset syncs arrive, without trusting who delivers them.

At start :meth:`SyncFollower.load` reads the whole sync topic once (as ``drsvc translate`` does) and
notes, per partition of the sync topic, where it stopped. Then a faust agent hands every sync
record it consumes to :meth:`SyncFollower.accept`, which applies records strictly in sync-topic
order:

* a record before the next expected offset was applied already (faust starts from its group's
  committed offset, which is at or before where the load stopped): skipped;
* the record at the next expected offset: applied;
* a record after it: the offsets in between were not seen. Syncs must be applied in order, so the
  follower reports the gap, the caller reads that range directly (:meth:`read_range`, a plain
  ``read_committed`` consumer) and hands it to :meth:`fill`. Offsets the range read does not
  return held transaction markers, aborted syncs or records removed by retention.

This makes the index independent of where faust starts and of records its consumer might drop
around a rebalance (``docs/faust-on-kafka4.md``). The index is not thread-safe: ``accept``,
``fill`` and every translation run on the event loop; only :meth:`load` and :meth:`read_range`
(blocking reads that touch no shared state until they return) run in a worker thread.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaPartition

from drsvc.errors import KafkaUnavailableError, PermanentError
from drsvc.runtime.checkpoints.plan import SyncSource
from drsvc.runtime.translation.sync_reader import QUIET, SyncTopicRead, read_sync_topic
from failover import naming

__all__ = ["Gap", "SyncFollower", "SyncRecord"]

log = logging.getLogger(__name__)

SyncRecord = tuple[int, bytes | None, bytes | None]
"""(offset, key, value) of one sync record."""


@dataclass(frozen=True)
class Gap:
    """Offsets ``[start, stop)`` of sync-topic ``partition`` that were not seen."""

    partition: int
    start: int
    stop: int


class SyncFollower:
    """The offset index of one sync topic, following the topic record by record."""

    def __init__(
        self, source: SyncSource, client_config: Mapping[str, str], timeout_s: float = 30.0
    ) -> None:
        self.source = source
        self._client = dict(client_config)
        self._timeout_s = timeout_s
        self.read = SyncTopicRead(cluster=source.cluster, topic=source.topic)
        self._next: dict[int, int] = {}
        self.broken: str | None = None
        """Set when a record is not a sync this build can read: translations stop."""
        self.gaps_filled = 0
        self._gap_reader: Consumer | None = None

    @property
    def next_offsets(self) -> dict[int, int]:
        """Per sync-topic partition, the first offset not applied yet."""
        return dict(self._next)

    def load(self) -> None:
        """Build the index from the whole sync topic (blocking; call before following)."""
        read = read_sync_topic(
            self._client,
            self.source.topic,
            cluster=self.source.cluster,
            timeout_s=max(self._timeout_s, 60.0),
        )
        self.read = read
        self._next = dict(read.ends)
        log.info(
            "offset syncs of %s: %d read from %s on %s (%d applied)",
            self.source.flow_id,
            read.records,
            self.source.topic,
            self.source.cluster,
            read.applied,
        )

    def accept(
        self, partition: int, offset: int, key: bytes | None, value: bytes | None
    ) -> Gap | None:
        """Apply the sync record at ``offset``, or return the gap to :meth:`fill` first."""
        if self.broken is not None:
            return None
        expected = self._next.get(partition, 0)
        if offset < expected:
            return None
        if offset > expected:
            return Gap(partition, expected, offset)
        self._apply(partition, offset, key, value)
        return None

    def fill(self, gap: Gap, records: list[SyncRecord]) -> None:
        """Apply what :meth:`read_range` returned for ``gap``; the rest of it held no sync."""
        if self._next.get(gap.partition, 0) != gap.start:
            return  # filled meanwhile
        for offset, key, value in records:
            if gap.start <= offset < gap.stop and offset >= self._next.get(gap.partition, 0):
                self._apply(gap.partition, offset, key, value)
                if self.broken is not None:
                    return
        self._next[gap.partition] = max(self._next.get(gap.partition, 0), gap.stop)
        if records:
            self.gaps_filled += 1
            log.info(
                "%s on %s: read %d sync record(s) the agent had not delivered (offsets %d-%d)",
                self.source.topic,
                self.source.cluster,
                len(records),
                gap.start,
                gap.stop - 1,
            )

    def _apply(self, partition: int, offset: int, key: bytes | None, value: bytes | None) -> None:
        try:
            self.read.add_record(partition, offset, key, value)
        except PermanentError as err:
            self.broken = str(err)
            log.error("stopped following %s: %s", self.source.topic, err)
            return
        self._next[partition] = offset + 1

    def read_range(self, gap: Gap) -> list[SyncRecord]:
        """The records of ``gap`` a ``read_committed`` consumer returns (blocking). On a sync
        topic written in transactions (exactly-once flows) every commit marker is such a gap,
        several a second: one consumer is kept for them and only re-assigned."""
        if self._gap_reader is None:
            self._gap_reader = Consumer(
                {
                    **self._client,
                    "group.id": naming.CHECKPOINTS_READER_GROUP,  # never joined, never committed
                    "enable.auto.commit": False,
                    "enable.auto.offset.store": False,
                    "isolation.level": "read_committed",
                    "enable.partition.eof": True,
                    "auto.offset.reset": "earliest",
                    "socket.connection.setup.timeout.ms": 3000,
                    "fetch.wait.max.ms": 50,
                    **QUIET,
                }
            )
        consumer = self._gap_reader
        where = f"offset-sync topic {self.source.topic} on {self.source.cluster}"
        records: list[SyncRecord] = []
        deadline = time.monotonic() + self._timeout_s
        try:
            consumer.assign([KafkaPartition(self.source.topic, gap.partition, gap.start)])
            while time.monotonic() < deadline:
                for msg in consumer.consume(1000, 0.2):
                    offset = msg.offset()
                    error = msg.error()
                    if error is not None:
                        if error.code() == KafkaError._PARTITION_EOF:
                            if offset is not None and offset >= gap.stop:
                                return records  # the rest of the gap held no sync
                            continue
                        if error.fatal():
                            raise KafkaUnavailableError(f"{where}: {error.str()}")
                        continue
                    if offset is None:
                        continue
                    if offset >= gap.stop:
                        return records
                    records.append((offset, msg.key(), msg.value()))
                    if offset + 1 >= gap.stop:
                        return records
        except KafkaException as err:
            self.close()  # a fresh consumer for the next gap
            raise KafkaUnavailableError(f"{where}: {err.args[0].str()}") from err
        raise KafkaUnavailableError(
            f"{where}: offsets {gap.start}-{gap.stop - 1} of partition {gap.partition} not read "
            f"within {self._timeout_s:.0f}s"
        )

    def close(self) -> None:
        """Let the gap reader go (a new one is made when needed)."""
        if self._gap_reader is not None:
            reader, self._gap_reader = self._gap_reader, None
            reader.close()
