"""What the engine keeps per source partition it copies (a lane), and the counters it reports.

A lane's replication state (copying, held, paused by the operator, failed, repairing syncs,
restarting) is one immutable :class:`failover.partition_state.PartitionState`, changed only by
the engine through ``step``; the rest of a lane is the bookkeeping of its copies and syncs.
Both delivery modes use the same lanes; a few fields belong to one mode only (marked so).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from drsvc.kafka.types import TopicPartition
from drsvc.runtime.replication.metrics import PartitionCounters
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

if TYPE_CHECKING:
    from drsvc.runtime.replication.exactly_once import Slot


#: ``Lane.watch_from`` of a partition no failover asked to watch (no offset reaches it)
NOT_WATCHED = 2**63


@dataclass
class Lane:
    """One source partition this worker copies."""

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
    #: plain attribute because it is read for every record.
    copying: bool = True
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

    # ---- at least once: the sync writes of this lane (see :mod:`.sync_writer`)
    next_sync_ticket: int = 0
    #: syncs written and not yet acknowledged, in write order: ticket -> (run end or -1, the
    #: run's source leader epoch, the sync; None once it is known not to be on the target)
    unacked_syncs: dict[int, tuple[int, int, OffsetSync | None]] = field(default_factory=dict)
    acked_syncs: set[int] = field(default_factory=set)
    #: tickets of syncs that were not written
    lost_syncs: set[int] = field(default_factory=set)
    #: tickets of rebuilt syncs not yet acknowledged (the lost ones wait for them)
    rebuild_tickets: set[int] = field(default_factory=set)
    #: only syncs from this ticket on may set ``last_copy``: those written before a restart of
    #: the lane describe records before a gap (retention) or another topic (recreated)
    copy_tickets_from: int = 0
    #: the lane started at its committed progress: once idle, its last copy may be learned from
    #: the sync topic's tail (after a restart it is otherwise unknown until the next copy)
    learn_last_copy: bool = False

    # ---- exactly once: the slot whose transactions carry this lane's copies
    slot: Slot | None = None
    #: next target offset after the committed copies (-1 while unknown)
    next_target: int = -1
    #: last target offset acknowledged in the open transaction (-1 none)
    last_target: int = -1
    #: when this worker last committed the partition's progress (monotonic s; None: never)
    progress_committed_at: float | None = None

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

    def sync_state(self, read_up_to: int | None = None) -> PartitionSyncState | None:
        """What a keepalive of this partition would be made of, or None while none may be
        written: during a rewind or its backoff, a lost-sync repair, a restart of the lane (after
        retention or for a recreated topic), or while syncs are unacknowledged (the read
        position must be the end of everything the target holds). ``read_up_to`` defaults to
        the progress's commit position.

        A partition paused by an operator keeps getting keepalives: it is idle, nothing else."""
        progress = self.progress
        unacknowledged = bool(self.unacked_syncs or self.lost_syncs or self.rebuild_tickets)
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
        self, policy: KeepalivePolicy, now_ms: int, read_up_to: int | None = None
    ) -> OffsetSync | None:
        """The keepalive sync to write now, if one is due (see :meth:`sync_state`)."""
        if self.last_copy is None:
            return None  # the common case of a partition never copied: no state to build
        state = self.sync_state(read_up_to)
        if state is None or not keepalive_due(state, policy, now_ms):
            return None
        return keepalive_sync(state)

    def restarted(self) -> None:
        """The lane copies a new stretch (after a gap) or a new topic: forget the last copy, and
        ignore the acknowledgements still due for syncs written before."""
        self.last_copy = None
        self.copy_synced_at_ms = None
        self.copy_tickets_from = self.next_sync_ticket
        self.learn_last_copy = False


@dataclass
class WorkerStats:
    """Counters a benchmark or status report reads (monotonic, never reset)."""

    records_read: int = 0
    records_copied: int = 0
    bytes_copied: int = 0
    delivery_failures: int = 0
    rewinds: int = 0
    syncs_written: int = 0
    skipped_loops: int = 0
    records_lost_to_retention: int = 0
    log_truncations: int = 0
    stalled_partitions: int = 0
    keepalive_syncs_written: int = 0
    transactions_committed: int = 0
    transactions_failed: int = 0
    transactions_timed_out: int = 0
    stale_epoch_records: int = 0
