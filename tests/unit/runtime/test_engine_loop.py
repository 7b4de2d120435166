"""The whole replication engine loop of both delivery modes, on fake clients and a fake clock.

Each test builds a flow ``east->west`` on two in-memory clusters (``fake_kafka.py``), runs the
real :class:`ReplicationEngine` (discovery, control, the hot path, delivery reports, syncs,
commits or transactions, the lanes' state machine) until a condition holds, and checks what landed
on the target the way a consumer of the target would. Nothing sleeps: waits advance the clock.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from confluent_kafka import KafkaError, TopicPartition
from fake_kafka import FakeClock, FakeCluster, FakeKafka, FakeProducer, bootstrap_servers

from drsvc.errors import FatalClientError
from drsvc.runtime.replication.at_least_once import AtLeastOnce
from drsvc.runtime.replication.control import FlowControl
from drsvc.runtime.replication.engine import COPYING_GC_THRESHOLDS, ReplicationEngine
from drsvc.runtime.replication.exactly_once import ExactlyOnce
from drsvc.runtime.replication.lane import NOT_WATCHED
from drsvc.runtime.replication.settings import worker_settings
from drsvc.runtime.replication.stale_records import StaleRecordsLog
from drsvc.topology import load_topology_text
from failover import naming, provenance
from failover.epoch_header import EPOCH_HEADER, encode_epoch
from failover.handover import decode_synced_to
from failover.offset_syncs import TopicPartition as SyncPartition
from failover.partition_state import phase
from failover.slot_state import copies as copies_state
from failover.slots import SlotProgress
from failover.stale_epochs import EpochWatch, StaleEntry

TOPOLOGY = """
name: pair
clusters:
  east: {bootstrap_servers: "127.0.0.1:1"}
  west: {bootstrap_servers: "127.0.0.1:2"}
flows:
  - {source: east, target: west, delivery: DELIVERY}
"""
MODES = ["at-least-once", "exactly-once"]
TOPIC, REMOTE = "orders", "east.orders"


@pytest.fixture(autouse=True)
def _unfreeze() -> Iterator[None]:
    # The engine freezes the garbage collector's view of what exists when it starts (a worker
    # lives as long as its process); tests run many engines in one process.
    yield
    gc.unfreeze()


@dataclass
class Flow:
    clock: FakeClock
    east: FakeCluster
    west: FakeCluster
    kafka: FakeKafka
    engine: ReplicationEngine
    #: the flow's control document as the engine reads it (None: no document)
    control: list[FlowControl | None] = field(default_factory=lambda: [None])
    cycles: int = 0
    #: called on the loop's thread at every cycle, before the steps
    every_cycle: Callable[[], None] | None = None

    def run(self, *steps: tuple[Callable[[], bool], Callable[[], None] | None]) -> None:
        """Run the engine; each step waits (cycle by cycle) until its condition holds, then does
        its action; the engine stops after the last step. Fails if a step never comes."""
        pending = list(steps)
        limit = self.cycles + 50_000

        def on_cycle(engine: ReplicationEngine) -> None:
            self.cycles += 1
            if self.every_cycle is not None:
                self.every_cycle()
            while pending and pending[0][0]():
                _until, then = pending.pop(0)
                if then is not None:
                    then()
            if not pending or self.cycles >= limit:
                engine.stop()

        self.engine.run(on_cycle=on_cycle)
        assert not pending, f"gave up after {self.cycles} cycles waiting for step {pending[0]}"

    def copied(self, partition: int) -> list[bytes | None]:
        """Values of the copies a read_committed consumer of the target sees."""
        if REMOTE not in self.west.topics:
            return []
        return self.west.values(REMOTE, partition)

    def source_values(self, partition: int) -> list[bytes | None]:
        return self.east.values(TOPIC, partition)


def new_flow(delivery: str = "at-least-once", partitions: int = 2, **overrides: object) -> Flow:
    clock = FakeClock()
    east, west = FakeCluster("east", clock), FakeCluster("west", clock)
    east.create_topic(TOPIC, partitions)
    topology = load_topology_text(TOPOLOGY.replace("DELIVERY", delivery))
    settings = worker_settings(
        topology,
        topology.flow("east", "west"),
        bootstrap_servers(east, west),
        refresh_interval_s=1.0,
        **({"slots": 2} if delivery == "exactly-once" else {}),
        **overrides,
    )
    kafka = FakeKafka(east, west, settings)
    control: list[FlowControl | None] = [None]
    engine = ReplicationEngine(settings, kafka=kafka, clock=clock, control=lambda: control[0])
    return Flow(clock, east, west, kafka, engine, control)


def produce(flow: Flow, count: int, first: int = 0, partitions: int = 2) -> None:
    for seq in range(first, first + count):
        for partition in range(partitions):
            flow.east.append(
                TOPIC,
                partition,
                f"{partition}-{seq}".encode(),
                key=f"k{seq}".encode(),
                headers=[("app", b"orders-service")],
            )


def caught_up(flow: Flow, partitions: int = 2) -> Callable[[], bool]:
    """Every source record is on the target (in at-least-once mode possibly more than once)."""

    def check() -> bool:
        return all(set(flow.copied(p)) >= set(flow.source_values(p)) for p in range(partitions))

    return check


def progress_at_end(flow: Flow, partitions: int = 2) -> Callable[[], bool]:
    """The flow's progress says every source record is copied (and its syncs written)."""
    settings = flow.engine.settings

    def check() -> bool:
        for p in range(partitions):
            end = flow.east.end_offset(TOPIC, p)
            if settings.delivery == "exactly-once":
                found = flow.west.group_offsets.get(settings.group_id, {}).get((REMOTE, p))
                if found is None or SlotProgress.decode(found.metadata).next_source_offset != end:
                    return False
            elif flow.east.committed_offset(settings.group_id, TOPIC, p) != end:
                return False
        return True

    return check


def both(*checks: Callable[[], bool]) -> Callable[[], bool]:
    return lambda: all(check() for check in checks)


# ---------------------------------------------------------------------------------- copying


@pytest.mark.parametrize("delivery", MODES)
def test_every_record_is_copied_with_its_key_headers_timestamp_and_partition(delivery: str) -> None:
    flow = new_flow(delivery)
    produce(flow, 300)
    flow.run((both(caught_up(flow), progress_at_end(flow)), None))

    for partition in range(2):
        sources = flow.east.records(TOPIC, partition)
        copies = flow.west.records(REMOTE, partition)
        assert [c.value for c in copies] == [s.value for s in sources]  # once each, in order
        for source, copy in zip(sources, copies, strict=True):
            assert copy.key == source.key
            assert copy.timestamp == source.timestamp
            headers = copy.header_list() or []
            assert headers[:-1] == [("app", b"orders-service")]  # originals first, in order
            origin = provenance.decode(headers[-1][1])
            assert (origin.cluster, origin.topic, origin.partition, origin.offset) == (
                "east",
                TOPIC,
                partition,
                source.offset,
            )
    # Every copy is mapped by a written offset sync.
    sync_log = flow.kafka.sync_log()
    for partition in range(2):
        ids = (flow.east.topic_id(TOPIC), flow.west.topic_id(REMOTE))
        end = sync_log.written_sync_end(SyncPartition(TOPIC, partition), ids, 1.0)
        assert end == flow.west.end_offset(REMOTE, partition) or delivery == "exactly-once"
    stats = flow.engine.stats
    assert stats.records_copied == 600
    assert stats.rewinds == 0
    if delivery == "exactly-once":
        assert stats.transactions_committed > 0
        assert isinstance(flow.engine.delivery, ExactlyOnce)


@pytest.mark.parametrize("delivery", MODES)
def test_reports_count_per_partition_and_sample_the_latency(delivery: str) -> None:
    flow = new_flow(delivery)
    produce(flow, 100)
    reports: dict[tuple[str, int], object] = {}

    def snapshot() -> None:
        reports.update({(r.topic, r.partition): r for r in flow.engine.partition_reports()})

    flow.run((both(caught_up(flow), progress_at_end(flow)), None), (lambda: True, snapshot))
    assert set(reports) == {(TOPIC, 0), (TOPIC, 1)}
    for partition in range(2):
        report = reports[(TOPIC, partition)]
        assert report.records_copied == 100  # type: ignore[attr-defined]
        assert report.bytes_copied == sum(  # type: ignore[attr-defined]
            len(r.value or b"") + len(r.key or b"") for r in flow.east.records(TOPIC, partition)
        )
        assert report.replicated_offset == 100  # type: ignore[attr-defined]
        assert report.latency_ms is not None  # type: ignore[attr-defined]
        assert report.remote_topic == REMOTE  # type: ignore[attr-defined]


# ---------------------------------------------------------------------------------- failures


@pytest.mark.parametrize("delivery", MODES)
def test_failed_deliveries_are_copied_again_and_nothing_is_skipped(delivery: str) -> None:
    flow = new_flow(delivery)
    produce(flow, 200)
    flow.west.create_topic(REMOTE, 2)
    flow.west.fail_next_deliveries(REMOTE, 5, KafkaError._MSG_TIMED_OUT)
    flow.run((both(caught_up(flow), progress_at_end(flow)), None))

    stats = flow.engine.stats
    assert stats.delivery_failures >= 5
    assert stats.rewinds >= 1
    for partition in range(2):
        copies = flow.copied(partition)
        assert set(copies) == set(flow.source_values(partition))
        if delivery == "exactly-once":
            # The failed transaction was aborted: a read_committed reader sees each record once.
            assert copies == flow.source_values(partition)
    if delivery == "exactly-once":
        assert stats.transactions_failed >= 1


def test_a_lost_sync_is_repaired_before_the_partition_is_copied_again() -> None:
    flow = new_flow()
    produce(flow, 100)
    sync_topic = flow.engine.settings.sync_topic
    flow.west.create_topic(sync_topic, 1)
    flow.west.fail_next_deliveries(sync_topic, 1, KafkaError._MSG_TIMED_OUT)
    flow.run((both(caught_up(flow), progress_at_end(flow)), None))
    assert flow.engine.stats.rewinds >= 1
    for partition in range(2):
        assert set(flow.copied(partition)) == set(flow.source_values(partition))


def test_offset_syncs_have_a_producer_of_their_own_that_lingers_briefly() -> None:
    flow = new_flow(linger_ms=100)
    produce(flow, 300)
    flow.run((both(caught_up(flow), progress_at_end(flow)), None))
    copies, syncs = flow.kafka.producers
    assert copies.config["linger.ms"] == 100 and syncs.config["linger.ms"] == 5
    stats = flow.engine.stats
    assert copies.delivered == stats.records_copied == 600
    assert syncs.delivered == stats.syncs_written > 0


@pytest.mark.parametrize("producer", [0, 1], ids=["copies", "syncs"])
def test_a_fatal_producer_error_stops_the_at_least_once_engine(producer: int) -> None:
    flow = new_flow()
    produce(flow, 10)

    def fatal() -> None:
        flow.kafka.producers[producer].raise_fatal(KafkaError._FATAL, "idempotence broke")

    with pytest.raises(FatalClientError, match="fatal error"):
        flow.run((caught_up(flow), fatal), (lambda: False, None))


# ---------------------------------------------------------------------------------- control


@pytest.mark.parametrize("delivery", MODES)
def test_an_operator_pause_stops_copying_and_a_resume_copies_the_rest(delivery: str) -> None:
    flow = new_flow(delivery)
    produce(flow, 50)
    copied_at_pause: list[int] = []

    def pause() -> None:
        flow.control[0] = FlowControl(paused_topics=frozenset({TOPIC}))

    def paused_a_while() -> bool:
        # Two refreshes after the pause, more records arrived and none of them was copied.
        return flow.engine.stats.records_copied == copied_at_pause[0] and flow.cycles > mark[0]

    mark = [0]

    def more_records() -> None:
        copied_at_pause.append(flow.engine.stats.records_copied)
        produce(flow, 50, first=50)
        mark[0] = flow.cycles + 200

    def resume() -> None:
        flow.control[0] = FlowControl()

    flow.run(
        (both(caught_up(flow), progress_at_end(flow)), pause),
        (lambda: "paused by the operator" in phases(flow), more_records),
        (paused_a_while, resume),
        (both(caught_up(flow), progress_at_end(flow)), None),
    )
    assert copied_at_pause == [100]
    for partition in range(2):
        if delivery == "exactly-once":
            assert flow.copied(partition) == flow.source_values(partition)
        else:
            assert set(flow.copied(partition)) == set(flow.source_values(partition))


@pytest.mark.parametrize("delivery", MODES)
def test_a_floor_written_while_paused_keeps_those_records_from_ever_being_copied(
    delivery: str,
) -> None:
    """What a failover's recovery does: the flow is paused for the topic, records it must never
    copy arrive, then one document sets floors at the end and resumes; what comes next is
    copied, exactly once in that mode, and the progress reaches the end."""
    flow = new_flow(delivery)
    produce(flow, 50)
    mark = [0]

    def pause() -> None:
        flow.control[0] = FlowControl(paused_topics=frozenset({TOPIC}))

    def diverge() -> None:
        produce(flow, 30, first=50)
        mark[0] = flow.cycles + 200

    def skip_and_resume() -> None:
        floors = {(TOPIC, p): flow.east.end_offset(TOPIC, p) for p in range(2)}
        flow.control[0] = FlowControl(skip_below=floors)
        produce(flow, 20, first=80)

    def copied_the_rest() -> bool:
        return (
            all(f"{p}-99".encode() in flow.copied(p) for p in range(2)) and progress_at_end(flow)()
        )

    flow.run(
        (both(caught_up(flow), progress_at_end(flow)), pause),
        (lambda: "paused by the operator" in phases(flow), diverge),
        (lambda: flow.cycles > mark[0], skip_and_resume),
        (copied_the_rest, None),
    )
    for partition in range(2):
        wanted = [f"{partition}-{seq}".encode() for seq in [*range(50), *range(80, 100)]]
        if delivery == "exactly-once":
            assert flow.copied(partition) == wanted
        else:
            assert set(flow.copied(partition)) == set(wanted)


def phases(flow: Flow) -> set[str]:
    return {phase(lane.state).value for lane in flow.engine.lanes.values()}


# ---------------------------------------------------------------------------------- anomalies


@pytest.mark.parametrize("delivery", MODES)
def test_a_hung_source_transaction_is_reported_as_a_stall(delivery: str) -> None:
    flow = new_flow(delivery, stall_warning_s=5.0)
    produce(flow, 10)
    flow.east.append(TOPIC, 0, b"held back", transaction="hung")
    produce(flow, 10, first=10)  # behind the open transaction: nobody reads them

    flow.run((lambda: flow.engine.stats.stalled_partitions >= 1, None))
    assert flow.engine.stats.stalled_partitions == 1  # one report per stall


def test_records_deleted_by_retention_while_paused_are_reported_and_the_copy_goes_on() -> None:
    flow = new_flow()
    produce(flow, 20)
    lost_before = [0]

    def pause() -> None:
        flow.control[0] = FlowControl(paused_topics=frozenset({TOPIC}))

    def retention_runs() -> None:
        produce(flow, 30, first=20)
        lost_before[0] = flow.engine.stats.records_lost_to_retention
        for partition in range(2):
            flow.east.delete_records(TOPIC, partition, 40)  # 20 never copied records gone
        flow.control[0] = FlowControl()

    def copied_what_is_left() -> bool:
        return (
            all(set(flow.copied(p)) >= set(flow.source_values(p)) for p in range(2))
            and progress_at_end(flow)()
        )

    flow.run(
        (both(caught_up(flow), progress_at_end(flow)), pause),
        (lambda: "paused by the operator" in phases(flow), retention_runs),
        (copied_what_is_left, None),
    )
    assert flow.engine.stats.records_lost_to_retention - lost_before[0] == 40
    for partition in range(2):
        copies = set(flow.copied(partition))
        assert {f"{partition}-{seq}".encode() for seq in range(20, 40)}.isdisjoint(copies)
        assert {f"{partition}-{seq}".encode() for seq in range(40, 50)} <= copies


def test_a_recreated_source_topic_is_copied_from_its_start_with_new_syncs() -> None:
    flow = new_flow()
    produce(flow, 20)

    def recreate() -> None:
        flow.east.recreate_topic(TOPIC)
        produce(flow, 5, first=100)

    def new_records_copied() -> bool:
        return all(
            {f"{p}-{seq}".encode() for seq in range(100, 105)} <= set(flow.copied(p))
            for p in range(2)
        )

    flow.run(
        (both(caught_up(flow), progress_at_end(flow)), recreate),
        (both(new_records_copied, progress_at_end(flow)), None),
    )
    new_id = flow.east.topic_id(TOPIC)
    syncs = [s for s in flow.kafka.sync_log().syncs() if s.source_topic_id == new_id]
    assert {s.partition for s in syncs} == {0, 1}
    assert all(s.source_begin >= 0 for s in syncs)


class HeldDiscovery:
    """The fake catalog, whose discoveries off the loop run only when the test lets them.

    A discovery on the discovery thread waits until the loop's thread, at a cycle, lets it run
    and waits for it meanwhile (:meth:`let_one_run`), so the fakes (which are not shared between
    threads) are never used by both at once. While :attr:`held`, it waits on, as discovery does
    while the source cluster is down.
    """

    def __init__(self, catalog: Any, loop_thread: threading.Thread) -> None:
        self.catalog = catalog
        self.loop_thread = loop_thread
        self.held = False
        #: set once the test is over: everything runs at once
        self.open = False
        self.waiting = threading.Event()
        self.go = threading.Event()
        self.done = threading.Event()
        self.off_loop = 0

    def refresh(self) -> Any:
        if threading.current_thread() is self.loop_thread or self.open:
            return self.catalog.refresh()
        self.waiting.set()
        assert self.go.wait(30), "the test never let a discovery run"
        self.go.clear()
        try:
            self.off_loop += 1
            return self.catalog.refresh()
        finally:
            self.done.set()

    def let_one_run(self) -> None:
        if self.held or not self.waiting.is_set():
            return
        self.waiting.clear()
        self.done.clear()
        self.go.set()
        assert self.done.wait(30)

    def release_all(self) -> None:
        self.open = True
        self.go.set()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.catalog, name)


def test_a_discovery_that_hangs_holds_up_neither_copies_nor_syncs_nor_commits() -> None:
    """While discovery waits (a source cluster going away answers no request until its
    timeout), the loop goes on: it copies, serves delivery reports, writes syncs and commits.
    What the hanging discovery would have found is used once it returns."""
    flow = new_flow()
    flow.kafka.background_discovery = True
    held = HeldDiscovery(flow.kafka.topics(), threading.current_thread())
    flow.kafka.topics = lambda: held  # type: ignore[method-assign]
    flow.every_cycle = held.let_one_run
    produce(flow, 20)

    def hold() -> None:
        held.held = True

    def write_more() -> None:
        produce(flow, 30, first=20)
        flow.east.create_topic("payments", 1)
        flow.east.append("payments", 0, b"p-0")

    def release() -> None:
        assert "east.payments" not in flow.west.topics
        held.held = False

    try:
        flow.run(
            (both(caught_up(flow), progress_at_end(flow), lambda: held.off_loop > 0), hold),
            (held.waiting.is_set, write_more),
            # Copied, synced and committed while that discovery hangs.
            (both(caught_up(flow), progress_at_end(flow), held.waiting.is_set), release),
            (lambda: "east.payments" in flow.west.topics, None),
            (lambda: flow.west.values("east.payments", 0) == [b"p-0"], None),
        )
    finally:
        held.release_all()
    assert flow.engine.stats.records_copied >= 100


def test_start_positions_clamp_progress_deleted_by_retention() -> None:
    flow = new_flow()
    produce(flow, 50)
    group = flow.engine.settings.group_id
    flow.east.set_committed(group, TOPIC, 0, 10)
    flow.east.delete_records(TOPIC, 0, 30)
    flow.east.set_committed(group, TOPIC, 1, 45)
    flow.run((both(progress_at_end(flow)), None))
    assert flow.engine.stats.records_lost_to_retention == 20
    assert flow.copied(0) == [f"0-{seq}".encode() for seq in range(30, 50)]
    assert flow.copied(1) == [f"1-{seq}".encode() for seq in range(45, 50)]


def test_the_delivery_mode_follows_the_flow() -> None:
    assert isinstance(new_flow("at-least-once").engine.delivery, AtLeastOnce)
    assert isinstance(new_flow("exactly-once").engine.delivery, ExactlyOnce)


def test_records_older_than_the_progress_are_never_copied_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The consumer going back on its own (a source topic recreated before discovery saw it)
    must not copy records into a run that has moved past them: they are left, discovery runs at
    once, and copying goes on where the partition was."""
    flow = new_flow()
    produce(flow, 30)

    def go_back() -> None:
        flow.engine.consumer.seek(TopicPartition(TOPIC, 0, 5))
        produce(flow, 10, first=30)

    with caplog.at_level("WARNING", logger="drsvc.runtime.replication.engine"):
        flow.run(
            (both(caught_up(flow), progress_at_end(flow)), go_back),
            (both(caught_up(flow), progress_at_end(flow)), None),
        )
    for partition in range(2):
        assert flow.copied(partition) == flow.source_values(partition)
    assert any("older than the progress" in r.getMessage() for r in caplog.records)


def test_commits_that_failed_are_made_again_after_the_partitions_went_quiet(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An asynchronous commit that failed (the source's group coordinator moving after its
    broker was paused) is answered through on_commit only; nothing new to copy would otherwise
    ever commit that progress again, and its lag would stay for good."""
    flow = new_flow()
    produce(flow, 20)

    def coordinator_moving() -> None:
        for _ in range(4):
            flow.engine.consumer.fail_next_commit(KafkaError.NOT_COORDINATOR)  # type: ignore[attr-defined]

    def said_again() -> bool:
        return any("working again" in r.getMessage() for r in caplog.records)

    with caplog.at_level("INFO", logger="drsvc.runtime.replication.at_least_once"):
        flow.run(
            (lambda: True, coordinator_moving),
            (both(caught_up(flow), progress_at_end(flow)), None),
            (said_again, None),
        )
    assert len(flow.engine.consumer.failed_commits) == 4  # type: ignore[attr-defined]
    said = [r.getMessage() for r in caplog.records if "committing progress" in r.getMessage()]
    assert len(said) == 2, said
    assert "failing" in said[0] and "NOT_COORDINATOR" in said[0]
    assert "working again after 4 failed attempt(s)" in said[1]


@pytest.mark.parametrize("delivery", MODES)
def test_the_next_engine_continues_from_the_committed_progress(delivery: str) -> None:
    """A worker stopped (graceful shutdown: settled, committed) and the next one of the flow
    takes over: it copies what came since, and nothing twice."""
    flow = new_flow(delivery)
    produce(flow, 40)
    flow.run((both(caught_up(flow), progress_at_end(flow)), None))
    produce(flow, 40, first=40)
    settings = flow.engine.settings
    flow.engine = ReplicationEngine(
        settings, kafka=flow.kafka, clock=flow.clock, control=lambda: flow.control[0]
    )
    flow.run((both(caught_up(flow), progress_at_end(flow)), None))
    for partition in range(2):
        assert flow.copied(partition) == flow.source_values(partition)
    assert flow.engine.stats.records_copied == 80


def test_a_clean_handover_lets_the_next_worker_read_only_past_the_copies_it_left(
    caplog: pytest.LogCaptureFixture,
) -> None:
    flow = new_flow()
    produce(flow, 40)
    flow.run((both(caught_up(flow), progress_at_end(flow)), None))
    settings = flow.engine.settings
    for partition in range(2):
        committed = flow.east.group_offsets[settings.group_id][(TOPIC, partition)]
        assert decode_synced_to(committed.metadata) == (
            flow.west.topic_id(REMOTE),
            flow.west.end_offset(REMOTE, partition),
        )
    sync_log = flow.kafka.sync_log()
    sync_log.tail_reads.clear()
    produce(flow, 10, first=40)
    # A worker that lost partition 1 with a copy still in flight (a zombie) adds it after.
    zombie = provenance.encode(provenance.Provenance("east", TOPIC, 1, 40))
    flow.west.append(REMOTE, 1, b"1-40", headers=[(provenance.PROVENANCE_HEADER, zombie)])
    flow.engine = ReplicationEngine(
        settings, kafka=flow.kafka, clock=flow.clock, control=lambda: flow.control[0]
    )
    flow.run((both(caught_up(flow), progress_at_end(flow)), None))
    reads = {partition: after for _topic, partition, after in sync_log.tail_reads}
    assert reads == {0: 40, 1: 40}  # only past the copies the first worker left
    assert "rebuilding offset syncs of 1 copies" in caplog.text  # the zombie's, now mapped


def test_an_exactly_once_slot_taken_over_is_taken_back_and_nothing_is_copied_twice() -> None:
    """Another producer initialises the slots' transactional ids (a worker that took them over,
    then went away): the engine's open transactions are fenced, it drops the slots, takes them
    back after the takeover wait, and a read_committed reader sees every record once."""
    flow = new_flow("exactly-once")
    produce(flow, 100)
    fenced_at = [0]

    def take_over() -> None:
        fenced_at[0] = flow.engine.stats.transactions_failed
        produce(flow, 100, first=100)
        for slot in range(2):
            intruder = FakeProducer(
                flow.west,
                {
                    "bootstrap.servers": flow.west.bootstrap,
                    "transactional.id": naming.transactional_id("east", "west", slot),
                },
                flow.clock,
            )
            intruder.init_transactions(10)

    flow.run(
        (lambda: flow.engine.stats.records_copied >= 50, take_over),
        (both(caught_up(flow), progress_at_end(flow)), None),
    )
    assert flow.engine.stats.transactions_failed > fenced_at[0]
    for partition in range(2):
        assert flow.copied(partition) == flow.source_values(partition)


def test_the_garbage_collector_runs_rarely_while_copying_and_as_before_afterwards() -> None:
    flow = new_flow()
    produce(flow, 20)
    before = gc.get_threshold()
    seen: list[tuple[int, ...]] = []
    flow.run((caught_up(flow), lambda: seen.append(gc.get_threshold())))
    assert seen == [COPYING_GC_THRESHOLDS]
    assert COPYING_GC_THRESHOLDS[0] > 100 * before[0]
    assert gc.get_threshold() == before


# ------------------------------------------------------------------- stale epochs


@pytest.mark.parametrize("delivery", MODES)
def test_records_past_a_watch_with_an_older_epoch_are_counted_listed_and_still_copied(
    delivery: str,
) -> None:
    flow = new_flow(delivery)
    published: list[list[StaleEntry]] = []
    flow.engine.stale_records = StaleRecordsLog(flow.engine.flow_id, published.append)

    def write(partition: int, value: str, epoch: int | None, copy: bool = False) -> int:
        headers: list[tuple[str, bytes]] = []
        if copy:
            hop = provenance.Provenance("west", TOPIC, partition, 0)
            headers.append((provenance.PROVENANCE_HEADER, provenance.encode(hop)))
        if epoch is not None:
            headers.append((EPOCH_HEADER, encode_epoch(epoch)))
        return flow.east.append(TOPIC, partition, value, headers=headers or None)

    # Before the switch: epoch 3 is the application's; nothing here is judged.
    for i in range(3):
        write(0, f"before-{i}", 3)
    boundary = flow.east.end_offset(TOPIC, 0)
    # A planned failover activated west at epoch 5 once east's partition 0 ended at `boundary`.
    flow.control[0] = FlowControl(
        epoch_watch={TOPIC: EpochWatch("orders-service", 5, {0: boundary})}
    )
    stale = [write(0, "zombie-1", 3), write(0, "zombie-2", 4)]
    write(0, "current", 5)  # the epoch of the switch: not stale
    write(0, "unstamped", None)  # a producer that does not follow failovers: not judged
    write(0, "a-copy", 1, copy=True)  # a copy of another cluster's record: judged there
    write(1, "other-partition", 1)  # no boundary for partition 1: not watched
    flow.run((both(caught_up(flow), lambda: bool(published)), None))

    assert flow.engine.stats.stale_epoch_records == 2
    found = [entry for batch in published for entry in batch]
    assert found == [StaleEntry("orders-service", TOPIC, 0, 5, tuple(stale))]
    # Reported, not filtered: every record crossed.
    assert flow.copied(0) == flow.source_values(0)


def test_a_watch_follows_the_control_document_and_goes_when_it_goes() -> None:
    flow = new_flow()
    flow.control[0] = FlowControl(epoch_watch={TOPIC: EpochWatch("orders-service", 5, {0: 7})})
    seen: list[tuple[int, int, str]] = []

    def look() -> None:
        lanes = flow.engine.lanes
        seen.extend(
            (lane.watch_from, lane.watch_epoch, lane.watch_app) for _, lane in sorted(lanes.items())
        )
        flow.control[0] = FlowControl()  # the next refresh drops the watch

    flow.run(
        (lambda: len(flow.engine.lanes) == 2, look),
        (lambda: flow.engine.lanes[(TOPIC, 0)].watch_from == NOT_WATCHED, None),
    )
    assert seen == [(7, 5, "orders-service"), (NOT_WATCHED, 0, "")]


@pytest.mark.parametrize("delivery", MODES)
def test_records_copied_before_the_worker_learned_of_the_watch_are_judged_again(
    delivery: str,
) -> None:
    # The failover writes the watch when it activates; the worker reads it at its next refresh.
    # A client that missed the switch writes right away: its records are copied before the
    # worker knows, and judged once it does.
    flow = new_flow(delivery)
    published: list[list[StaleEntry]] = []
    flow.engine.stale_records = StaleRecordsLog(flow.engine.flow_id, published.append)
    stamped = [(EPOCH_HEADER, encode_epoch(3))]
    for i in range(3):
        flow.east.append(TOPIC, 0, f"before-{i}", headers=stamped)
    boundary = flow.east.end_offset(TOPIC, 0)
    late = [flow.east.append(TOPIC, 0, f"late-{i}", headers=stamped) for i in range(2)]
    watch = FlowControl(epoch_watch={TOPIC: EpochWatch("orders-service", 5, {0: boundary})})
    flow.run(
        (caught_up(flow), lambda: flow.control.__setitem__(0, watch)),
        (lambda: bool(published), None),
    )
    found = [entry for batch in published for entry in batch]
    assert found == [StaleEntry("orders-service", TOPIC, 0, 5, tuple(late))]
    assert flow.engine.stats.stale_epoch_records == 2
    assert flow.copied(0) == flow.source_values(0)  # copied once each, nothing again


@pytest.mark.parametrize("delivery", MODES)
def test_every_client_of_the_worker_comes_from_the_factory_by_cluster_alias(delivery: str) -> None:
    flow = new_flow(delivery)
    produce(flow, 50)
    flow.run((both(caught_up(flow), progress_at_end(flow)), None))
    kafka = flow.kafka
    assert kafka.consumers and kafka.producers
    assert kafka.clients.consumers == kafka.consumers
    # The source consumer reads east; every other client is on the target.
    source, *others = kafka.consumers
    assert source.cluster is flow.east and all(c.cluster is flow.west for c in others)
    assert all(p.cluster is flow.west for p in kafka.producers)
    # The cluster's settings are the ones the worker's settings resolved, merged by the port.
    settings = flow.engine.settings
    for client in [*kafka.consumers, *kafka.producers]:
        resolved = settings.source_client if client.cluster is flow.east else settings.target_client
        assert {k: client.config[k] for k in resolved} == dict(resolved)


# ---------------------------------------------------------------------------------- the seam


@pytest.mark.parametrize("delivery", MODES)
def test_a_delivery_mode_holds_no_reference_to_its_engine(delivery: str) -> None:
    """The seam runs one way: the mode is handed what it needs, never the engine (it says what
    it wants of the engine with effects)."""
    flow = new_flow(delivery)
    produce(flow, 10)
    flow.run((both(caught_up(flow), progress_at_end(flow)), None))
    mode = flow.engine.delivery
    held = [*vars(mode).values(), *vars(mode.ctx).values()]  # type: ignore[union-attr]
    assert all(value is not flow.engine for value in held)


def test_a_late_report_of_a_slot_taken_again_never_fails_the_new_taking() -> None:
    """A delivery report of the producer a slot had before it was taken again (librdkafka serves
    reports late) belongs to the earlier taking: the slot copying now is not failed by it."""
    flow = new_flow("exactly-once")
    produce(flow, 50)
    mode = flow.engine.delivery
    assert isinstance(mode, ExactlyOnce)
    seen: dict[str, Any] = {}

    def take_again() -> None:
        number = min(mode.owned_slots)
        first = mode._slots[number]
        seen["number"], seen["lane"] = number, next(iter(first.lanes.values())).lane
        flow.engine.delivery.skip_below([(seen["lane"], seen["lane"].progress.next_offset)])

    def late_report() -> None:
        failed = flow.engine.stats.transactions_failed
        report = KafkaError(KafkaError._MSG_TIMED_OUT)
        mode.on_delivery(seen["lane"], 0, report, None)  # type: ignore[arg-type]
        mode.refused(seen["lane"], 0, 0, report)
        seen["failed"] = (failed, flow.engine.stats.transactions_failed)
        seen["state"] = mode._states[seen["number"]]

    flow.run(
        (lambda: bool(mode.owned_slots) and flow.engine.stats.records_copied >= 10, take_again),
        (lambda: seen["number"] in mode.owned_slots, late_report),
        (both(caught_up(flow), progress_at_end(flow)), None),
    )
    assert seen["failed"][0] == seen["failed"][1]
    assert copies_state(seen["state"])
    for partition in range(2):
        assert flow.copied(partition) == flow.source_values(partition)
