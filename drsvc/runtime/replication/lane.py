"""What the engine keeps per source partition it copies (a lane), and the counters it reports.

A lane's replication state (copying, held, paused by the operator, failed, repairing syncs,
restarting) is one immutable :class:`failover.partition_state.PartitionState`, changed only by
the engine through ``step``; the rest of a lane is the bookkeeping of its copies and syncs.
Both delivery modes use the same lanes; what one mode alone keeps of a lane it keeps itself
(see :mod:`.seam`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from drsvc.kafka.clock import Clock
from drsvc.kafka.types import TopicPartition
from drsvc.runtime.replication.metrics import PartitionCounters
from drsvc.runtime.replication.topics import MirroredTopic
from failover import offset_syncs, provenance
from failover.copy_progress import PartitionProgress
from failover.keepalive import (
    KeepalivePolicy,
    LastCopy,
    PartitionSyncState,
    keepalive_due,
    keepalive_sync,
    last_copy_of,
)
from failover.offset_syncs import OffsetSync
from failover.partition_state import PartitionState, keepalive_allowed

#: ``Lane.watch_from`` of a partition no failover asked to watch (no offset reaches it)
NOT_WATCHED = 2**63


@dataclass(eq=False)
class Lane:
    """One source partition this worker copies (a lane is itself: two lanes of one partition,
    before and after a re-assignment, are two lanes; modes key their records by it)."""

    source: TopicPartition
    remote_topic: str
    progress: PartitionProgress
    #: the provenance header's prefix for copies of this partition
    prefix: bytes
    #: what metrics show of this partition (shared with later lanes of the same partition)
    counters: PartitionCounters = field(default_factory=PartitionCounters)
    #: the partition's replication state; only the engine changes it (through ``step``)
    state: PartitionState = field(default_factory=PartitionState)
    #: the hot path's gate: the state copies and the delivery has not halted the lane. Kept as a
    #: plain attribute because it is read for every record; only the engine writes it.
    copying: bool = True
    #: the delivery mode had the lane halted for good (see :class:`.seam.HaltLanes`)
    halted: bool = False
    #: progress committed (at least once: to the source group; exactly once: in the slot's
    #: transaction), -1 while unknown
    committed: int = -1
    #: when this worker was given the partition (monotonic s)
    assigned_at: float = 0.0
    #: the newest copy a written sync maps, what a keepalive sync repeats (see
    #: :mod:`failover.keepalive`); None while unknown
    last_copy: LastCopy | None = None
    #: when a sync holding ``last_copy`` was last written (monotonic ms; None: unknown)
    copy_synced_at_ms: int | None = None
    #: records at or past this offset are judged by their epoch header (a planned failover
    #: moved the application away from the source; see :mod:`failover.stale_epochs`)
    watch_from: int = NOT_WATCHED
    #: the epoch they must carry at least, and the application the watch is for
    watch_epoch: int = 0
    watch_app: str = ""

    @property
    def key(self) -> tuple[str, int]:
        return (self.source.topic, self.source.partition)

    def syncs_acknowledged(self, syncs: Sequence[OffsetSync], now_ms: int) -> None:
        """The target acknowledged ``syncs`` (in write order): follow the last copy they map.

        A keepalive sync counts like any other: it holds the last copy, so the time restarts.
        """
        if any(sync.segments for sync in syncs):
            self.last_copy = last_copy_of(syncs, self.last_copy)
            self.copy_synced_at_ms = now_ms

    def sync_state(
        self, read_up_to: int | None = None, *, unacknowledged: bool = False
    ) -> PartitionSyncState | None:
        """What a keepalive of this partition would be made of, or None while none may be
        written: during a rewind or its backoff, a lost-sync repair, a restart of the lane (after
        retention or for a recreated topic), or while syncs are ``unacknowledged`` (the read
        position must be the end of everything the target holds: at least once, the sync
        writer knows). ``read_up_to`` defaults to the progress's commit position.

        A partition paused by an operator keeps getting keepalives: it is idle, nothing else."""
        progress = self.progress
        if not progress.accepting or not keepalive_allowed(self.state, unacknowledged):
            return None
        return PartitionSyncState(
            tp=progress.tp,
            source_topic_id=progress.source_topic_id,
            target_topic_id=progress.target_topic_id,
            last_copy=self.last_copy,
            read_up_to=progress.commit_position if read_up_to is None else read_up_to,
            copy_synced_at_ms=self.copy_synced_at_ms,
        )

    def keepalive(
        self,
        policy: KeepalivePolicy,
        now_ms: int,
        read_up_to: int | None = None,
        *,
        unacknowledged: bool = False,
    ) -> OffsetSync | None:
        """The keepalive sync to write now, if one is due (see :meth:`sync_state`)."""
        if self.last_copy is None:
            return None  # the common case of a partition never copied: no state to build
        state = self.sync_state(read_up_to, unacknowledged=unacknowledged)
        if state is None or not keepalive_due(state, policy, now_ms):
            return None
        return keepalive_sync(state)

    def restarted(self) -> None:
        """The lane copies a new stretch (after a gap) or a new topic: forget the last copy."""
        self.last_copy = None
        self.copy_synced_at_ms = None


class LaneFactory:
    """Makes the lanes of one flow's worker; a partition's metric counters outlive its lanes, so
    metrics never count backwards across re-assignments."""

    def __init__(self, source_alias: str, clock: Clock) -> None:
        self._source_alias = source_alias
        self._clock = clock
        self._counters: dict[tuple[str, int], PartitionCounters] = {}

    def __call__(self, mirrored: MirroredTopic, partition: int, start: int) -> Lane:
        """A lane for ``partition`` of ``mirrored`` starting at ``start`` (not copied yet)."""
        name = mirrored.source.name
        return Lane(
            source=TopicPartition(name, partition),
            remote_topic=mirrored.remote_name,
            progress=PartitionProgress(
                offset_syncs.TopicPartition(name, partition),
                source_topic_id=mirrored.source.topic_id,
                target_topic_id=mirrored.remote.topic_id,
                start=start,
            ),
            prefix=provenance.header_prefix(self._source_alias, name, partition),
            counters=self._counters.setdefault((name, partition), PartitionCounters()),
            committed=start,
            assigned_at=self._clock.monotonic(),
        )
