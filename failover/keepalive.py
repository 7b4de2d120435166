"""Keepalive offset syncs: an idle partition stays translatable after the sync topic's retention.

The sync topic deletes syncs by time (``retention.ms``). A partition that gets no new records
gets no new syncs, so once retention has passed since its last copy, every sync describing it is
gone and an index rebuilt from the topic cannot translate its consumers' positions any more
(``UNKNOWN_PARTITION``), although nothing about the partition changed.

So the worker re-emits, for every idle partition, one small sync well before retention can delete
the last one holding the partition's last copy: the **keepalive sync**, the run ``[s_last, F)``
with the single copy ``(s_last -> t_last)``, where ``(s_last, t_last)`` is the partition's last
copy (source and target offset) and ``F`` the position the worker has read up to (every position
of ``(s_last, F)`` held nothing a ``read_committed`` consumer returns, or the worker would have
copied it). What the index makes of it:

* while older syncs are retained, its only copy is already indexed, so it is a duplicate and
  changes nothing (:meth:`failover.offset_index.OffsetIndex.apply` returns False);
* once retention has deleted them, it is the start of the partition's history: ``F`` (caught up)
  and every position of ``(s_last, F]`` translate exactly to ``t_last + 1``, and ``s_last`` itself
  to ``t_last``.

A partition without any copy gets no keepalive: there is nothing to translate to.

Use from a worker (no I/O here): keep a :class:`PartitionSyncState` per partition (update
``last_copy`` with :func:`last_copy_of` whenever syncs are written, and ``copy_synced_at_ms`` to
the time a sync holding the last copy was written), ask :func:`keepalive_due` now and then, and
write :func:`keepalive_sync` like any other sync (in exactly-once mode inside the slot's
transaction), then set ``copy_synced_at_ms`` to now.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from failover.offset_syncs import OffsetSync, Segment, TopicPartition

__all__ = [
    "KeepalivePolicy",
    "LastCopy",
    "PartitionSyncState",
    "keepalive_due",
    "keepalive_sync",
    "last_copy_of",
]

#: what part of the sync topic's retention may pass before an idle partition's keepalive: a
#: quarter leaves three quarters of the retention for a worker that is down or restarting
DEFAULT_RETENTION_FRACTION = 4


@dataclass(frozen=True)
class LastCopy:
    """A partition's newest copy: source record ``source_offset`` is at ``target_offset``,
    read under source leader epoch ``leader_epoch`` (-1: unknown)."""

    source_offset: int
    target_offset: int
    leader_epoch: int = -1


@dataclass(frozen=True)
class KeepalivePolicy:
    """How often an idle partition's last copy is written again (see the module docstring)."""

    interval_ms: int

    @staticmethod
    def for_retention(retention_ms: int, interval_ms: int | None = None) -> KeepalivePolicy:
        """The policy for a sync topic with ``retention.ms`` = ``retention_ms``: ``interval_ms``
        when given (it must be shorter than the retention, or syncs would expire between two
        keepalives), else a quarter of the retention."""
        if retention_ms <= 0:
            raise ValueError(f"sync retention must be positive, got {retention_ms} ms")
        if interval_ms is None:
            interval_ms = retention_ms // DEFAULT_RETENTION_FRACTION
        if not 0 < interval_ms < retention_ms:
            raise ValueError(
                f"keepalive interval {interval_ms} ms must be positive and shorter than the sync "
                f"topic's retention ({retention_ms} ms), or idle partitions lose their syncs"
            )
        return KeepalivePolicy(interval_ms)


@dataclass(frozen=True)
class PartitionSyncState:
    """What the worker knows about one source partition's syncs."""

    tp: TopicPartition
    source_topic_id: bytes
    target_topic_id: bytes
    #: the partition's newest copy, None while it has none
    last_copy: LastCopy | None
    #: ``F``: where the worker continues reading; every position before it was read and its
    #: syncs are written (in exactly-once mode: committed)
    read_up_to: int
    #: when a sync holding ``last_copy`` was last written (the worker's clock, ms); None when
    #: unknown (after a restart), which makes a keepalive due at once
    copy_synced_at_ms: int | None


def keepalive_due(state: PartitionSyncState, policy: KeepalivePolicy, now_ms: int) -> bool:
    """True when the partition's last copy must be written again now."""
    copy = state.last_copy
    if copy is None or state.read_up_to <= copy.source_offset:
        return False
    synced = state.copy_synced_at_ms
    return synced is None or now_ms - synced >= policy.interval_ms


def keepalive_sync(state: PartitionSyncState) -> OffsetSync:
    """The keepalive sync of ``state``: run ``[s_last, F)``, single copy ``s_last -> t_last``.

    Raises ValueError when the partition has no copy or has not been read past it.
    """
    copy = state.last_copy
    if copy is None:
        raise ValueError(f"{state.tp.topic}-{state.tp.partition} has no copy to keep alive")
    if state.read_up_to <= copy.source_offset:
        raise ValueError(
            f"{state.tp.topic}-{state.tp.partition}: read up to {state.read_up_to}, not past "
            f"its last copy of source offset {copy.source_offset}"
        )
    return OffsetSync(
        state.tp.topic,
        state.tp.partition,
        state.source_topic_id,
        state.target_topic_id,
        copy.leader_epoch,
        copy.source_offset,
        state.read_up_to,
        (Segment(copy.source_offset, copy.target_offset, 1),),
    )


def last_copy_of(syncs: Iterable[OffsetSync], previous: LastCopy | None) -> LastCopy | None:
    """The newest copy after writing ``syncs`` (in order): the last segment's last record of the
    last sync that has segments, else ``previous``."""
    last = previous
    for sync in syncs:
        if sync.segments:
            segment = sync.segments[-1]
            last = LastCopy(segment.source_end - 1, segment.target_end - 1, sync.leader_epoch)
    return last
