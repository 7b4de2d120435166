"""Offset indexes kept for the life of a process and extended, instead of re-read every time.

A full read of a sync topic costs its whole history (a busy flow writes about 33 million syncs a
week, read at about 110,000 a second), and a planned failover translates every group of the
application on every poll of its wait for replication. :class:`KeptSyncs` keeps one
:class:`~failover.offset_index.OffsetIndex` per (cluster, sync topic): the first read is full,
each later one reads only the syncs written since (:func:`failover.sync_extension.plan_extension`
decides what, and when to start again from scratch: a recreated topic, or retention deleting
syncs the index holds). Syncs are applied in sync-topic order either way, so the index is the one
a full read would build now, and translations are exactly as exact.

A kept index holds every source topic's syncs (one partition of the sync topic holds them all,
and the next caller may ask for other topics); a read hands each caller only the conflicts of
the topics it asked for, as a full read of those topics reports them.

Threads: the API translates on several at once. One lock per kept topic is held for a whole
extension and for each query of its index (:class:`GuardedIndex`), so a query never sees a sync
half applied. Queries of one translation may see the index grow between them; each answer is then
that of a full read made a little later, and the syncs behind it were still read before any end
offset the translation reads afterwards, the order the translation relies on.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Collection, Iterable

from drsvc.kafka.reader import TopicReader
from drsvc.runtime.translation.sync_reader import SyncTopicRead
from failover.offset_index import OffsetIndex, SyncPosition
from failover.offset_syncs import OffsetSync, TopicPartition
from failover.sync_extension import KeptRead, plan_extension
from failover.translation import Translation, TranslationBatch

__all__ = ["GuardedIndex", "KeptSyncTopic", "KeptSyncs"]

log = logging.getLogger(__name__)


class GuardedIndex(OffsetIndex):
    """An :class:`OffsetIndex` whose every method holds ``lock``: one thread extends it while
    others translate. The lock is re-entrant, so an extension that holds it applies through it."""

    __slots__ = ("_lock",)

    def __init__(self, lock: threading.RLock) -> None:
        super().__init__()
        self._lock = lock

    def apply(self, sync: OffsetSync, position: SyncPosition | None = None) -> bool:
        with self._lock:
            return super().apply(sync, position)

    def apply_all(self, syncs: Iterable[tuple[OffsetSync, SyncPosition | None]]) -> int:
        with self._lock:
            return super().apply_all(syncs)

    def note_position(self, position: SyncPosition) -> None:
        with self._lock:
            super().note_position(position)

    @property
    def resume_offsets(self) -> dict[int, int]:
        with self._lock:
            return dict(self._positions)

    def trim_before(
        self, tp: TopicPartition, source_offset: int, *, source_topic_id: bytes | None = None
    ) -> int:
        with self._lock:
            return super().trim_before(tp, source_offset, source_topic_id=source_topic_id)

    def forget(self, tp: TopicPartition, *, keep_current: bool = False) -> None:
        with self._lock:
            super().forget(tp, keep_current=keep_current)

    def translate_downstream(
        self,
        tp: TopicPartition,
        offset: int,
        *,
        source_topic_id: bytes | None = None,
        target_topic_id: bytes | None = None,
        leader_epoch: int | None = None,
    ) -> Translation:
        with self._lock:
            return super().translate_downstream(
                tp,
                offset,
                source_topic_id=source_topic_id,
                target_topic_id=target_topic_id,
                leader_epoch=leader_epoch,
            )

    def translate_downstream_batch(
        self,
        tp: TopicPartition,
        offsets: Iterable[int],
        *,
        source_topic_id: bytes | None = None,
        target_topic_id: bytes | None = None,
    ) -> TranslationBatch:
        with self._lock:
            return super().translate_downstream_batch(
                tp, offsets, source_topic_id=source_topic_id, target_topic_id=target_topic_id
            )

    def translate_upstream(
        self,
        tp: TopicPartition,
        offset: int,
        *,
        source_topic_id: bytes | None = None,
        target_topic_id: bytes | None = None,
        target_end: int | None = None,
    ) -> Translation:
        with self._lock:
            return super().translate_upstream(
                tp,
                offset,
                source_topic_id=source_topic_id,
                target_topic_id=target_topic_id,
                target_end=target_end,
            )

    def partitions(self) -> list[TopicPartition]:
        with self._lock:
            return super().partitions()

    def frontier(self, tp: TopicPartition) -> int | None:
        with self._lock:
            return super().frontier(tp)

    def replicated_end(self, tp: TopicPartition) -> int | None:
        with self._lock:
            return super().replicated_end(tp)

    def segment_count(self) -> int:
        with self._lock:
            return super().segment_count()

    def memory_bytes(self) -> int:
        with self._lock:
            return super().memory_bytes()

    def snapshot(self) -> bytes:
        with self._lock:
            return super().snapshot()


class KeptSyncTopic:
    """The kept index of one sync topic on one cluster, and how far it has read the topic."""

    def __init__(self, cluster: str, topic: str) -> None:
        self.cluster = cluster
        self.topic = topic
        self._lock = threading.RLock()
        self._index = GuardedIndex(self._lock)
        self._conflicts: dict[TopicPartition, str] = {}
        self._kept: KeptRead | None = None
        #: full reads made (the first one, and every rebuild)
        self.full_reads = 0

    def extend(
        self, reader: TopicReader, topic_id: bytes | None, topics: Collection[str] | None
    ) -> SyncTopicRead:
        """Bring the kept index up to the topic's end now through ``reader`` (a
        ``read_committed`` reader of the topic), and return it as a read of ``topics`` (all when
        None). ``topic_id`` is the topic's id now, when known. A topic that does not exist
        drops what was kept and reads as ``exists`` False."""
        with self._lock:
            bounds = reader.bounds()
            if bounds is None:
                if self._kept is not None:
                    log.info("offset-sync topic %s on %s is gone", self.topic, self.cluster)
                self._reset()
                return SyncTopicRead(
                    cluster=self.cluster, topic=self.topic, index=self._index, exists=False
                )
            plan = plan_extension(self._kept, bounds, topic_id)
            if plan.rebuild is not None:
                log.info(
                    "offset syncs of %s on %s: reading them again from the start: %s",
                    self.topic,
                    self.cluster,
                    plan.rebuild,
                )
            if plan.full:
                self._reset()
            kept = self._kept
            origins = dict(kept.origins) if kept is not None else {}
            next_offsets = dict(kept.next_offsets) if kept is not None else {}
            for p, (low, _high) in bounds.items():
                origins.setdefault(p, low)
                next_offsets.setdefault(p, low)
            read = SyncTopicRead(
                cluster=self.cluster,
                topic=self.topic,
                index=self._index,
                conflicts=self._conflicts,
                full=plan.full,
            )
            try:
                for batch in reader.forward(plan.ranges):
                    for message in batch:
                        partition, offset = message.partition(), message.offset()
                        if partition is not None and offset is not None:
                            read.add_record(partition, offset, message.key(), message.value())
                # Past trailing transaction markers too: where each partition's read stopped.
                for p, reached in reader.state.reached.items():
                    next_offsets[p] = max(next_offsets[p], reached)
            finally:
                # Also after a failed read: every record applied has its position noted, and
                # the next extension must not apply it twice (a repeated run with no copies
                # would read as a restart of the worker).
                for p, after in self._index.resume_offsets.items():
                    next_offsets[p] = max(next_offsets.get(p, 0), after)
                self._kept = KeptRead(topic_id, next_offsets, origins)
            if plan.full:
                self.full_reads += 1
                # What this class exists to avoid, so each one is visible.
                log.info(
                    "offset syncs of %s on %s: read from the start (%d syncs), kept from now on",
                    self.topic,
                    self.cluster,
                    read.records,
                )
            wanted = None if topics is None else frozenset(topics)
            return SyncTopicRead(
                cluster=self.cluster,
                topic=self.topic,
                index=self._index,
                ends=dict(next_offsets),
                records=read.records,
                applied=read.applied,
                conflicts={
                    tp: message
                    for tp, message in self._conflicts.items()
                    if wanted is None or tp.topic in wanted
                },
                full=plan.full,
            )

    def _reset(self) -> None:
        # A new index object: reads handed out before keep the old one, which no longer changes.
        self._index = GuardedIndex(self._lock)
        self._conflicts = {}
        self._kept = None


class KeptSyncs:
    """The kept sync topics of a process (or of whatever shares this object), by cluster alias
    and topic. Safe to share between threads."""

    def __init__(self) -> None:
        self._topics: dict[tuple[str, str], KeptSyncTopic] = {}
        self._guard = threading.Lock()

    def topic(self, cluster: str, topic: str) -> KeptSyncTopic:
        """The kept index of ``topic`` on ``cluster`` (empty until first extended)."""
        with self._guard:
            kept = self._topics.get((cluster, topic))
            if kept is None:
                kept = self._topics[cluster, topic] = KeptSyncTopic(cluster, topic)
            return kept
