"""An offset index kept current as offset syncs arrive, without trusting who delivers them.

At start :meth:`SyncFollower.load` reads the whole sync topic once (as ``drsvc translate`` does) and
notes, per partition of the sync topic, where it stopped. Then a faust agent hands every sync
record it consumes to :meth:`SyncFollower.accept`, which applies records strictly in sync-topic
order:

* a record before the next expected offset was applied already (faust starts from its group's
  committed offset, which is at or before where the load stopped): skipped;
* the record at the next expected offset: applied;
* a record after it: the offsets in between were not seen. Syncs must be applied in order, so the
  follower reports the gap, the caller reads that range directly (:meth:`read_range`, a
  ``read_committed`` topic reader the follower keeps) and hands it to :meth:`fill`. Offsets the
  range read does not return held transaction markers, aborted syncs or records removed by
  retention.

This makes the index independent of where faust starts and of records its consumer might drop
around a rebalance (``docs/faust-on-kafka4.md``). The index is not thread-safe: ``accept``,
``fill`` and every translation run on the event loop; only :meth:`load` and :meth:`read_range`
(blocking reads that touch no shared state until they return) run in a worker thread.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from drsvc.errors import DrsvcError, KafkaUnavailableError, PermanentError
from drsvc.kafka.clients import KafkaClients
from drsvc.kafka.read_progress import ReadLimits
from drsvc.kafka.reader import TopicReader, reader_settings
from drsvc.runtime.checkpoints.plan import SyncSource
from drsvc.runtime.translation.sync_reader import SyncTopicRead, read_sync_topic
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


#: A gap is usually a transaction marker or two, read several times a second on an exactly-once
#: flow: small batches, short polls, and a broker that answers an empty fetch soon.
_GAP_BATCH = 1000
_GAP_POLL_S = 0.2
_GAP_SETTINGS = {"fetch.wait.max.ms": 50}


class SyncFollower:
    """The offset index of one sync topic, following the topic record by record.

    ``client_config`` holds the settings of the sync topic's cluster; ``clients``, when given,
    is the factory its readers come from instead. ``timeout_s`` is the stall period of the gap
    reads (and, at least 60 s, of the load): a read gives up only after that long without
    progress.
    """

    def __init__(
        self,
        source: SyncSource,
        client_config: Mapping[str, str],
        timeout_s: float = 30.0,
        *,
        clients: KafkaClients | None = None,
    ) -> None:
        self.source = source
        if clients is None:
            clients = KafkaClients.for_configs({source.cluster: client_config})
        self._clients = clients
        self._client = dict(client_config)
        self._timeout_s = timeout_s
        self.read = SyncTopicRead(cluster=source.cluster, topic=source.topic)
        self._next: dict[int, int] = {}
        self.broken: str | None = None
        """Set when a record is not a sync this build can read: translations stop."""
        self.gaps_filled = 0
        self._gap_reader: TopicReader | None = None

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
            clients=self._clients,
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
        """The records of ``gap`` a ``read_committed`` reader returns (blocking). On a sync
        topic written in transactions (exactly-once flows) every commit marker is such a gap,
        several a second: one reader is kept for them, and a new one built after a failure.

        Gives up with :class:`~drsvc.errors.KafkaUnavailableError` naming the topic, the
        cluster and where the read stopped when it makes no progress for ``timeout_s``, and
        when the partition's readable end is still before the gap's end (the records the agent
        was handed are not readable yet): the caller asks again."""
        reader = self._reader()
        records: list[SyncRecord] = []
        try:
            for batch in reader.forward({gap.partition: (gap.start, gap.stop)}):
                for message in batch:
                    offset = message.offset()
                    if offset is not None:  # always, for a record
                        records.append((offset, message.key(), message.value()))
        except DrsvcError:
            self.close()  # a fresh reader for the next gap
            raise
        reached = reader.state.reached.get(gap.partition, gap.start)
        if reached < gap.stop:
            # Filling the gap now would skip the offsets past ``reached`` for good.
            raise KafkaUnavailableError(
                f"reading offset-sync topic {self.source.topic} on {self.source.cluster}: "
                f"partition {gap.partition} is readable up to {reached} only, before the end "
                f"of offsets {gap.start}-{gap.stop - 1}"
            )
        return records

    def _reader(self) -> TopicReader:
        if self._gap_reader is None:
            consumer = self._clients.consumer(
                self.source.cluster,
                {
                    # never joined, never committed
                    **reader_settings(naming.CHECKPOINTS_READER_GROUP, committed=True),
                    **_GAP_SETTINGS,
                },
            )
            self._gap_reader = TopicReader(
                consumer,
                self.source.topic,
                cluster=self.source.cluster,
                what="offset-sync topic",
                clock=self._clients.clock,
                limits=ReadLimits(stall_s=self._timeout_s, batch=_GAP_BATCH, poll_s=_GAP_POLL_S),
            )
        return self._gap_reader

    def close(self) -> None:
        """Let the gap reader go (a new one is made when needed)."""
        if self._gap_reader is not None:
            reader, self._gap_reader = self._gap_reader, None
            reader.close()
