"""What a worker keeps per source partition it copies, and the counters it reports."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from confluent_kafka import TopicPartition

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


@dataclass
class Lane:
    """One source partition this worker copies."""

    source: TopicPartition
    remote_topic: str
    progress: PartitionProgress
    prefix: bytes
    committed: int = -1
    failures_in_a_row: int = 0
    resume_at: float | None = None
    resume_from: int = 0
    next_sync_ticket: int = 0
    #: syncs written and not yet acknowledged, in write order: ticket -> (run end or -1, the
    #: run's source leader epoch, the sync; None once it is known not to be on the target)
    unacked_syncs: dict[int, tuple[int, int, OffsetSync | None]] = field(default_factory=dict)
    acked_syncs: set[int] = field(default_factory=set)
    #: a sync was lost: rebuild syncs from the target before copying again
    needs_repair: bool = False
    #: tickets of syncs that were not written, and the persisted position when the first failed
    lost_syncs: set[int] = field(default_factory=set)
    repair_from: int = 0
    #: tickets of rebuilt syncs not yet acknowledged (the lost ones wait for them)
    rebuild_tickets: set[int] = field(default_factory=set)
    #: retention deleted records before they were copied: continue from this offset
    reset_to: int | None = None
    #: the topic was recreated: the new (source, remote) topic ids to restart with
    new_topic_ids: tuple[bytes, bytes] | None = None
    #: last consumer position seen and since when (monotonic), to spot a stalled partition
    watched_position: int = -1
    watched_since: float = 0.0
    stall_reported: bool = False
    #: paused by an operator (flow control); only a resume from there lets it copy again
    operator_paused: bool = False
    repair_at: float = 0.0
    #: what metrics show of this partition (shared with later lanes of the same partition)
    counters: PartitionCounters = field(default_factory=PartitionCounters)
    #: the newest copy an acknowledged sync maps, what a keepalive sync repeats (see
    #: :mod:`failover.keepalive`); None while unknown
    last_copy: LastCopy | None = None
    #: when a sync holding ``last_copy`` was last acknowledged (monotonic ms; None: unknown)
    copy_synced_at_ms: int | None = None
    #: only syncs from this ticket on may set ``last_copy``: those written before a restart of
    #: the lane describe records before a gap (retention) or another topic (recreated)
    copy_tickets_from: int = 0
    #: the lane started at its committed progress: once idle, its last copy may be learned from
    #: the sync topic's tail (after a restart it is otherwise unknown until the next copy)
    learn_last_copy: bool = False
    #: when this worker was given the partition (monotonic s)
    assigned_at: float = 0.0

    def syncs_acknowledged(self, syncs: Sequence[OffsetSync], now_ms: int) -> None:
        """The target acknowledged ``syncs`` (in write order): follow the last copy they map.

        A keepalive sync counts like any other: it holds the last copy, so the time restarts.
        """
        if any(sync.segments for sync in syncs):
            self.last_copy = last_copy_of(syncs, self.last_copy)
            self.copy_synced_at_ms = now_ms

    def sync_state(self) -> PartitionSyncState | None:
        """What a keepalive of this partition would be made of, or None while none may be
        written: during a rewind or its backoff, a lost-sync repair, a restart of the lane (after
        retention or for a recreated topic), or while syncs are unacknowledged (the read
        position ``commit_position`` must be the end of everything the target holds).

        A partition paused by an operator keeps getting keepalives: it is idle, nothing else."""
        progress = self.progress
        backing_off = self.resume_at is not None and not self.operator_paused
        if (
            self.unacked_syncs
            or self.lost_syncs
            or self.rebuild_tickets
            or self.needs_repair
            or self.reset_to is not None
            or self.new_topic_ids is not None
            or not progress.accepting
            or backing_off
        ):
            return None
        return PartitionSyncState(
            tp=progress.tp,
            source_topic_id=progress.source_topic_id,
            target_topic_id=progress.target_topic_id,
            last_copy=self.last_copy,
            read_up_to=progress.commit_position,
            copy_synced_at_ms=self.copy_synced_at_ms,
        )

    def keepalive(self, policy: KeepalivePolicy, now_ms: int) -> OffsetSync | None:
        """The keepalive sync to write now, if one is due (see :meth:`sync_state`)."""
        if self.last_copy is None:
            return None  # the common case of a partition never copied: no state to build
        state = self.sync_state()
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
