"""At-least-once keepalive syncs, lane by lane: the last copy follows what the target
acknowledged (in write order, never a lost sync's), and a keepalive is written only for an idle
partition that had a copy, whose syncs are all acknowledged, and that is not being rewound,
backing off, repaired or restarted."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import KafkaError, TopicPartition

from drsvc.runtime.replication.lane import Lane
from drsvc.runtime.replication.metrics import WorkerStats
from drsvc.runtime.replication.settings import WorkerSettings, worker_settings
from drsvc.runtime.replication.sync_writer import SyncTickets, SyncWriter
from drsvc.topology import load_topology_text
from failover import offset_syncs
from failover.copy_progress import FinishedRun, PartitionProgress
from failover.keepalive import KeepalivePolicy, LastCopy
from failover.offset_syncs import OffsetSync, Segment
from failover.partition_state import (
    Event,
    Held,
    OperatorPaused,
    PartitionState,
    PendingRestart,
    RepairStage,
    SyncRepair,
    SyncsLost,
)

PAIR = """
name: pair
clusters:
  east: {bootstrap_servers: "127.0.0.1:1"}
  west: {bootstrap_servers: "127.0.0.1:2"}
flows:
  - {source: east, target: west}
"""
SOURCE_ID = b"S" * 16
TARGET_ID = b"T" * 16
POLICY = KeepalivePolicy(10_000)


class FakeProducer:
    """Keeps what is produced; the test delivers it (or fails it) when it wants."""

    def __init__(self) -> None:
        self.produced: list[tuple[bytes, Callable[[KafkaError | None, Any], None]]] = []

    def produce(self, _topic: str, value: bytes, _key: bytes, **kwargs: Any) -> None:
        self.produced.append((value, kwargs["on_delivery"]))

    def deliver(self, index: int, err: KafkaError | None = None) -> None:
        self.produced[index][1](err, None)


def settings() -> WorkerSettings:
    topology = load_topology_text(PAIR)
    return worker_settings(topology, topology.flow("east", "west"), {})


def new_lane(start: int = 0) -> Lane:
    progress = PartitionProgress(
        offset_syncs.TopicPartition("orders", 1),
        source_topic_id=SOURCE_ID,
        target_topic_id=TARGET_ID,
        start=start,
    )
    return Lane(TopicPartition("orders", 1), "east.orders", progress, b"", committed=start)


def copy(lane: Lane, pairs: list[tuple[int, int]], end: int, epoch: int = 3) -> list[FinishedRun]:
    """Copy ``pairs`` (source, target) and seal the run at ``end``."""
    for source, _target in pairs:
        lane.progress.produced(source, epoch)
    for source, target in pairs:
        lane.progress.delivered(source, target)
    lane.progress.seal(end)
    return lane.progress.take_finished()


class Clock:
    def __init__(self) -> None:
        self.now = 50.0

    def monotonic(self) -> float:
        return self.now

    def time(self) -> float:
        return 1_800_000_000.0 + self.now

    def time_ms(self) -> int:
        return int(self.time() * 1000)

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class Events(list[tuple[Lane, Event]]):
    def __call__(self, lane: Lane, event: Event) -> None:
        self.append((lane, event))


class NoSyncLog:
    """The repair must not read the target in these tests."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the sync log was asked: {name}")


CLOCK = Clock()


@pytest.fixture
def writer() -> tuple[SyncWriter, FakeProducer]:
    producer = FakeProducer()
    CLOCK.now = 50.0
    return (
        SyncWriter(settings(), producer, WorkerStats(), NoSyncLog(), CLOCK, Events()),  # type: ignore[arg-type]
        producer,
    )


def keepalive(syncs: SyncWriter, lane: Lane, now_ms: int) -> OffsetSync | None:
    """The lane's keepalive as the at-least-once mode asks for it (its syncs' tickets known)."""
    return lane.keepalive(POLICY, now_ms, unacknowledged=syncs.unacknowledged(lane))


def decoded(producer: FakeProducer, index: int) -> OffsetSync:
    return offset_syncs.decode_value("orders", 1, producer.produced[index][0])


def test_a_partition_that_never_had_a_copy_gets_no_keepalive() -> None:
    lane = new_lane(start=40)
    assert lane.sync_state() is not None  # nothing blocks it: there is just nothing to repeat
    assert lane.keepalive(POLICY, 10**12) is None


def test_the_last_acknowledged_copy_is_repeated_once_the_interval_has_passed(
    writer: tuple[SyncWriter, FakeProducer],
) -> None:
    syncs, producer = writer
    lane = new_lane(start=100)
    for finished in copy(lane, [(100, 500), (101, 501), (103, 502)], end=105):
        syncs.write(lane, finished)
    assert keepalive(syncs, lane, 10**12) is None  # not acknowledged yet
    producer.deliver(0)
    assert lane.progress.commit_position == 105
    assert lane.last_copy == LastCopy(103, 502, 3)
    assert lane.copy_synced_at_ms == 50_000
    assert lane.keepalive(POLICY, 50_000 + POLICY.interval_ms - 1) is None
    sync = lane.keepalive(POLICY, 50_000 + POLICY.interval_ms)
    assert sync is not None
    assert (sync.source_begin, sync.source_end, sync.leader_epoch) == (103, 105, 3)
    assert sync.segments == (Segment(103, 502, 1),)
    # Written like any sync, it moves no progress; once acknowledged the interval restarts.
    CLOCK.now = 60.0
    syncs.write_keepalive(lane, sync)
    assert syncs.stats.keepalive_syncs_written == 1
    assert keepalive(syncs, lane, 10**12) is None  # one at a time
    producer.deliver(1)
    assert decoded(producer, 1) == sync
    assert lane.progress.commit_position == 105
    assert lane.copy_synced_at_ms == 60_000
    assert lane.last_copy == LastCopy(103, 502, 3)
    assert lane.keepalive(POLICY, 60_000 + POLICY.interval_ms - 1) is None
    assert lane.keepalive(POLICY, 60_000 + POLICY.interval_ms) is not None


def test_a_run_without_copies_moves_the_read_position_but_not_the_time(
    writer: tuple[SyncWriter, FakeProducer],
) -> None:
    syncs, producer = writer
    lane = new_lane()
    for finished in copy(lane, [(0, 0), (1, 1)], end=2):
        syncs.write(lane, finished)
    producer.deliver(0)
    synced_at = lane.copy_synced_at_ms
    for finished in copy(lane, [], end=4):  # past two transaction markers, say
        syncs.write(lane, finished)
    producer.deliver(1)
    assert lane.copy_synced_at_ms == synced_at
    assert synced_at is not None
    sync = lane.keepalive(POLICY, synced_at + POLICY.interval_ms)
    assert sync is not None
    assert (sync.source_begin, sync.source_end, sync.segments) == (1, 4, (Segment(1, 1, 1),))


def test_acknowledgements_count_in_write_order(writer: tuple[SyncWriter, FakeProducer]) -> None:
    syncs, producer = writer
    lane = new_lane()
    for finished in copy(lane, [(0, 10)], end=1):
        syncs.write(lane, finished)
    for finished in copy(lane, [(1, 11)], end=2):
        syncs.write(lane, finished)
    producer.deliver(1)  # the later one first: nothing moves until the earlier one is in
    assert lane.last_copy is None
    assert keepalive(syncs, lane, 10**12) is None
    producer.deliver(0)
    assert lane.last_copy == LastCopy(1, 11, 3)
    assert lane.progress.commit_position == 2


def test_a_lost_sync_blocks_keepalives_and_never_becomes_the_last_copy(
    writer: tuple[SyncWriter, FakeProducer], monkeypatch: pytest.MonkeyPatch
) -> None:
    syncs, producer = writer
    lane = new_lane()
    for finished in copy(lane, [(0, 10)], end=1):
        syncs.write(lane, finished)
    producer.deliver(0)
    for finished in copy(lane, [(1, 11)], end=2):
        syncs.write(lane, finished)
    producer.deliver(1, KafkaError(KafkaError._MSG_TIMED_OUT))
    assert lane.sync_state(unacknowledged=syncs.unacknowledged(lane)) is None
    events = syncs.on_event
    assert isinstance(events, Events)
    assert [e for _lane, e in events if isinstance(e, SyncsLost)] == [
        SyncsLost(1, "offset sync not written: Local: Message timed out")
    ]
    # The repair finds nothing to rebuild; the lost sync's ticket is settled without it.
    monkeypatch.setattr(SyncWriter, "rebuild", lambda *_args, **_kwargs: [])
    assert syncs.repair(lane, 1, timeout_s=1.0) is False  # nothing waits for acknowledgements
    tickets = syncs.tickets(lane)
    assert not tickets.unacked and not tickets.lost and not syncs.unacknowledged(lane)
    assert lane.last_copy == LastCopy(0, 10, 3)
    assert lane.sync_state() is None  # the failure still waits for its rewind
    lane.progress.rewind()
    assert lane.sync_state() is not None


@pytest.mark.parametrize(
    ("block", "blocked"),
    [
        ("unacked", True),
        ("needs_repair", True),
        ("rebuild", True),
        ("reset", True),
        ("recreated", True),
        ("failure", True),
        ("backoff", True),
        ("operator_pause", False),
        ("operator_pause_in_backoff", False),
    ],
)
def test_what_holds_keepalives_back(block: str, blocked: bool) -> None:
    lane = new_lane(start=10)
    lane.last_copy = LastCopy(5, 50, 1)
    lane.copy_synced_at_ms = 0
    tickets = SyncTickets()
    if block == "unacked":
        tickets.unacked[0] = (-1, 1, None)
    elif block == "needs_repair":
        lane.state = PartitionState(repair=SyncRepair(10, RepairStage.NEEDED))
    elif block == "rebuild":
        tickets.rebuild.add(3)
    elif block == "reset":
        lane.state = PartitionState(restart=PendingRestart(20))
    elif block == "recreated":
        lane.state = PartitionState(restart=PendingRestart(20, (b"s" * 16, b"t" * 16)))
    elif block == "failure":
        lane.progress.produced(10)
        lane.progress.failed(10, "timed out")
    elif block == "backoff":
        lane.state = PartitionState(hold=Held(123.0), resume_from=10)
    elif block.startswith("operator_pause"):
        lane.state = PartitionState(hold=OperatorPaused(), resume_from=10)
    unacknowledged = tickets.unacknowledged
    assert (lane.keepalive(POLICY, 10**12, unacknowledged=unacknowledged) is None) is blocked


def test_a_restarted_lane_forgets_its_last_copy_and_the_acks_still_due(
    writer: tuple[SyncWriter, FakeProducer],
) -> None:
    """Retention deleted records before they were copied (or the topic was recreated): a
    keepalive from the copy before the gap would claim the deleted records were never there."""
    syncs, producer = writer
    lane = new_lane()
    for finished in copy(lane, [(0, 0), (1, 1)], end=2):
        syncs.write(lane, finished)
    lane.restarted()
    syncs.restarted(lane)
    lane.progress = PartitionProgress(
        lane.progress.tp, source_topic_id=SOURCE_ID, target_topic_id=TARGET_ID, start=50
    )
    producer.deliver(0)  # the sync written before the restart is acknowledged after it
    assert lane.last_copy is None
    assert keepalive(syncs, lane, 10**12) is None
    for finished in copy(lane, [(50, 2)], end=51):
        syncs.write(lane, finished)
    producer.deliver(1)
    assert lane.last_copy == LastCopy(50, 2, 3)
