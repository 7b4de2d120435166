"""What a worker keeps per source partition it copies, and the counters it reports."""

from __future__ import annotations

from dataclasses import dataclass, field

from confluent_kafka import TopicPartition

from drsvc.runtime.replication.metrics import PartitionCounters
from failover.copy_progress import PartitionProgress


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
    #: run's source leader epoch)
    unacked_syncs: dict[int, tuple[int, int]] = field(default_factory=dict)
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
