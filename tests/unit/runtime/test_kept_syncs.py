"""A kept offset index, extended with the syncs written since its last read, is the index a full
read of the sync topic builds now: the same bytes, the same conflicts, the same answers. On the
in-memory Kafka, with transactions (markers, aborted syncs), restarts, duplicates, contradicting
syncs, a recreated topic, retention and a topic that grows partitions."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

import pytest
from fake_kafka import FakeClock, FakeCluster, FakeKafkaClients
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from stalling_kafka import StallingKafkaClients

from drsvc.errors import KafkaUnavailableError
from drsvc.kafka.read_progress import ReadLimits
from drsvc.runtime.translation.kept_syncs import KeptSyncs, KeptSyncTopic
from drsvc.runtime.translation.sync_reader import SyncTopicRead, read_sync_topic
from failover import naming
from failover.offset_syncs import OffsetSync, Segment, TopicPartition, encode_sync
from failover.sync_extension import KeptRead, plan_extension

SYNC_TOPIC = "drsvc.offset-syncs.east"
SOURCE_ID, TARGET_ID = b"S" * 16, b"T" * 16
ORDERS_0 = TopicPartition("orders", 0)
PARTITIONS = (ORDERS_0, TopicPartition("orders", 1), TopicPartition("payments", 0))


# -- the decision ---------------------------------------------------------------------------------


def kept(next_offsets: dict[int, int], origins: dict[int, int] | None = None) -> KeptRead:
    return KeptRead(
        b"id", next_offsets, origins if origins is not None else dict.fromkeys(next_offsets, 0)
    )


def test_nothing_kept_reads_the_whole_topic() -> None:
    plan = plan_extension(None, {0: (5, 20), 1: (0, 0)}, b"id")
    assert (plan.ranges, plan.rebuild, plan.full) == ({0: (5, 20), 1: (0, 0)}, None, True)


def test_a_kept_read_goes_on_from_where_it_stopped_and_reads_new_partitions_whole() -> None:
    plan = plan_extension(kept({0: 12}), {0: (0, 20), 1: (3, 9)}, b"id")
    assert (plan.ranges, plan.rebuild, plan.full) == ({0: (12, 20), 1: (3, 9)}, None, False)
    assert plan_extension(kept({0: 20}), {0: (0, 20)}, b"id").ranges == {}


@pytest.mark.parametrize(
    ("before", "bounds", "topic_id", "why"),
    [
        (kept({0: 12}), {0: (0, 20)}, b"other", "topic id changed"),
        (kept({0: 12}), {0: (0, 7)}, b"id", "ends at 7, below the 12 already read"),
        (kept({0: 12, 1: 3}), {0: (0, 20)}, b"id", "partition 1 is gone"),
        (kept({0: 12}), {0: (4, 20)}, b"id", "retention deleted syncs of partition 0"),
    ],
)
def test_a_recreated_topic_or_deleted_syncs_the_index_holds_mean_reading_it_all_again(
    before: KeptRead, bounds: dict[int, tuple[int, int]], topic_id: bytes, why: str
) -> None:
    plan = plan_extension(before, bounds, topic_id)
    assert plan.rebuild is not None and why in plan.rebuild
    assert plan.full and plan.ranges == {p: b for p, b in sorted(bounds.items())}


def test_retention_past_offsets_the_index_never_held_changes_nothing() -> None:
    # Nothing was read of partition 0 (it was empty): its log start moving is no news.
    plan = plan_extension(kept({0: 5}, {0: 5}), {0: (5, 9)}, None)
    assert (plan.ranges, plan.rebuild) == ({0: (5, 9)}, None)


# -- the kept index on the in-memory Kafka --------------------------------------------------------


def west_cluster() -> tuple[FakeCluster, FakeKafkaClients]:
    west = FakeCluster("west", FakeClock())
    west.create_topic(SYNC_TOPIC, 1)
    return west, FakeKafkaClients(west)


def extend(
    kept_topic: KeptSyncTopic,
    west: FakeCluster,
    clients: FakeKafkaClients,
    topics: list[str] | None = None,
    batch: int = 10_000,
) -> SyncTopicRead:
    topic_id = west.topic_id(SYNC_TOPIC) if SYNC_TOPIC in west.topics else None
    with clients.reader(
        "west",
        SYNC_TOPIC,
        what="offset-sync topic",
        group=naming.TRANSLATE_READER_GROUP,
        committed=True,
        limits=ReadLimits(stall_s=5.0, batch=batch),
    ) as reader:
        return kept_topic.extend(reader, topic_id, topics)


def fresh(clients: FakeKafkaClients, topics: list[str] | None = None) -> SyncTopicRead:
    return read_sync_topic({}, SYNC_TOPIC, cluster="west", topics=topics, clients=clients)


def assert_same_as_a_fresh_read(read: SyncTopicRead, clients: FakeKafkaClients) -> None:
    full = fresh(clients)
    assert read.exists == full.exists
    assert read.index.snapshot() == full.index.snapshot()  # the same state, byte for byte
    assert read.conflicts == full.conflicts
    assert read.ends == full.ends
    for topics in (["orders"], ["payments"]):
        only = fresh(clients, topics)
        assert {tp: m for tp, m in read.conflicts.items() if tp.topic in topics} == only.conflicts
        for tp in (tp for tp in PARTITIONS if tp.topic in topics):
            for c in range(-1, 60):
                assert read.index.translate_downstream(tp, c) == only.index.translate_downstream(
                    tp, c
                )
                assert read.index.translate_upstream(tp, c) == only.index.translate_upstream(tp, c)


def orders_sync(n: int, begin: int | None = None) -> OffsetSync:
    start = n * 10 if begin is None else begin
    return OffsetSync(
        "orders", 0, SOURCE_ID, TARGET_ID, 0, start, n * 10 + 10, (Segment(n * 10, n * 10, 10),)
    )


def write(west: FakeCluster, *syncs: OffsetSync, partition: int = 0) -> None:
    for s in syncs:
        key, value = encode_sync(s)
        west.append(SYNC_TOPIC, partition, value, key)


def test_a_second_read_reads_only_the_syncs_written_since() -> None:
    west, clients = west_cluster()
    write(west, *(orders_sync(n) for n in range(50)))
    kept_topic = KeptSyncTopic("west", SYNC_TOPIC)

    first = extend(kept_topic, west, clients)
    write(west, *(orders_sync(n) for n in range(50, 57)))
    second = extend(kept_topic, west, clients)
    third = extend(kept_topic, west, clients)

    assert (first.full, first.records) == (True, 50)
    assert (second.full, second.records, second.applied) == (False, 7, 7)
    assert (third.full, third.records) == (False, 0)
    assert kept_topic.full_reads == 1
    assert second.index.replicated_end(ORDERS_0) == 570
    assert_same_as_a_fresh_read(third, clients)


def test_a_recreated_sync_topic_is_read_again_from_its_start(
    caplog: pytest.LogCaptureFixture,
) -> None:
    west, clients = west_cluster()
    write(west, *(orders_sync(n) for n in range(5)))
    kept_topic = KeptSyncTopic("west", SYNC_TOPIC)
    extend(kept_topic, west, clients)

    west.recreate_topic(SYNC_TOPIC)
    # Longer than before: only the topic id tells it is another topic.
    write(west, *(orders_sync(n) for n in range(20, 28)))
    with caplog.at_level(logging.INFO, logger="drsvc.runtime.translation.kept_syncs"):
        read = extend(kept_topic, west, clients)

    assert (read.full, read.records, kept_topic.full_reads) == (True, 8, 2)
    assert any("topic id changed" in r.getMessage() for r in caplog.records)
    assert_same_as_a_fresh_read(read, clients)


def test_a_deleted_sync_topic_reads_as_missing_and_its_index_is_dropped() -> None:
    west, clients = west_cluster()
    write(west, orders_sync(0))
    kept_topic = KeptSyncTopic("west", SYNC_TOPIC)
    extend(kept_topic, west, clients)

    west.delete_topic(SYNC_TOPIC)
    gone = extend(kept_topic, west, clients)
    assert not gone.exists and gone.index.partitions() == []

    west.create_topic(SYNC_TOPIC, 1)
    write(west, orders_sync(3))
    again = extend(kept_topic, west, clients)
    assert (again.full, again.records) == (True, 1)
    assert_same_as_a_fresh_read(again, clients)


def test_retention_deleting_syncs_the_index_holds_rebuilds_it_as_a_fresh_read_would() -> None:
    west, clients = west_cluster()
    write(west, *(orders_sync(n) for n in range(6)))
    kept_topic = KeptSyncTopic("west", SYNC_TOPIC)
    before = extend(kept_topic, west, clients)
    assert before.index.translate_downstream(ORDERS_0, 15).exact

    west.delete_records(SYNC_TOPIC, 0, before=3)
    write(west, orders_sync(6))
    read = extend(kept_topic, west, clients)

    assert (read.full, read.records) == (True, 4)
    # A fresh read no longer knows the position: neither does the kept index.
    assert str(read.index.translate_downstream(ORDERS_0, 15).reason) == "before-syncs"
    assert_same_as_a_fresh_read(read, clients)


def test_a_partition_added_to_the_sync_topic_is_read_from_its_start() -> None:
    west, clients = west_cluster()
    write(west, *(orders_sync(n) for n in range(3)))
    kept_topic = KeptSyncTopic("west", SYNC_TOPIC)
    extend(kept_topic, west, clients)

    west.add_partitions(SYNC_TOPIC, 2)
    payments = OffsetSync("payments", 0, SOURCE_ID, TARGET_ID, 0, 0, 4, (Segment(0, 0, 4),))
    write(west, payments, partition=1)
    write(west, orders_sync(3))
    read = extend(kept_topic, west, clients)

    assert (read.full, read.records, read.ends) == (False, 2, {0: 4, 1: 1})
    assert_same_as_a_fresh_read(read, clients)


def test_conflicts_are_handed_out_for_the_topics_asked_for() -> None:
    west, clients = west_cluster()
    bad = OffsetSync("payments", 0, SOURCE_ID, TARGET_ID, 0, 0, 4, (Segment(0, 0, 4),))
    worse = OffsetSync("payments", 0, SOURCE_ID, TARGET_ID, 0, 4, 8, (Segment(4, 2, 4),))
    write(west, orders_sync(0), bad, worse)
    kept_topic = KeptSyncTopic("west", SYNC_TOPIC)

    orders = extend(kept_topic, west, clients, ["orders"])
    payments = extend(kept_topic, west, clients, ["payments"])

    assert orders.conflicts == {} == fresh(clients, ["orders"]).conflicts
    assert list(payments.conflicts) == [TopicPartition("payments", 0)]
    assert payments.conflicts == fresh(clients, ["payments"]).conflicts


def test_a_read_that_fails_half_way_goes_on_later_without_applying_a_sync_twice() -> None:
    west = FakeCluster("west", FakeClock())
    west.create_topic(SYNC_TOPIC, 1)
    clients = StallingKafkaClients(west)
    kept_topic = KeptSyncTopic("west", SYNC_TOPIC)
    write(west, *(orders_sync(n) for n in range(10)))
    extend(kept_topic, west, clients)
    # Runs without copies among them: one applied twice would read as a worker restart.
    for n in range(10, 50):
        empty = OffsetSync("orders", 0, SOURCE_ID, TARGET_ID, 0, n * 10, n * 10 + 10, ())
        write(west, empty if n % 2 else orders_sync(n))
    clients.stall_after = clients.delivered + 15
    clients.record_cost_s = 0.001
    with pytest.raises(KafkaUnavailableError):
        extend(kept_topic, west, clients, batch=4)

    west.down = False
    clients.stall_after = None
    read = extend(kept_topic, west, clients)
    assert not read.full and 0 < read.records < 40
    assert_same_as_a_fresh_read(read, clients)


def test_threads_translate_while_another_extends_and_never_see_a_sync_half_applied() -> None:
    west, clients = west_cluster()
    write(west, *(orders_sync(n) for n in range(10)))
    kept = KeptSyncs()
    kept_topic = kept.topic("west", SYNC_TOPIC)
    read = extend(kept_topic, west, clients)
    assert kept.topic("west", SYNC_TOPIC) is kept_topic
    failures: list[BaseException] = []
    stop = threading.Event()

    def translate() -> None:
        try:
            while not stop.is_set():
                frontier = read.index.replicated_end(ORDERS_0)
                assert frontier is not None and frontier % 10 == 0
                answer = read.index.translate_downstream(ORDERS_0, frontier)
                assert answer.exact and answer.offset == frontier
        except BaseException as err:  # handed to the test thread
            failures.append(err)

    threads = [threading.Thread(target=translate) for _ in range(3)]
    for thread in threads:
        thread.start()
    for n in range(10, 200, 10):
        write(west, *(orders_sync(k) for k in range(n, n + 10)))
        extend(kept_topic, west, clients)
    stop.set()
    for thread in threads:
        thread.join()
    assert failures == []
    assert_same_as_a_fresh_read(extend(kept_topic, west, clients), clients)


# -- the property: extended in any steps, the kept index is a fresh read --------------------------


@dataclass(frozen=True)
class Step:
    """One sync written (or, as ``cut``, a read of the kept index now)."""

    partition: int  # which of PARTITIONS
    kind: str  # "next", "restart", "duplicate", "contradict", "empty", "cut"
    size: int
    transaction: str  # "", "commit", "abort"


steps = st.lists(
    st.builds(
        Step,
        st.integers(0, len(PARTITIONS) - 1),
        st.sampled_from(
            ["next"] * 6 + ["restart", "duplicate", "contradict", "empty", "cut", "cut"]
        ),
        st.integers(1, 4),
        st.sampled_from(["", "", "commit", "abort"]),
    ),
    max_size=40,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps)
def test_an_index_extended_in_any_steps_is_the_index_a_full_read_builds(
    history: list[Step],
) -> None:
    west, clients = west_cluster()
    kept_topic = KeptSyncTopic("west", SYNC_TOPIC)
    source = dict.fromkeys(PARTITIONS, 0)
    target = dict.fromkeys(PARTITIONS, 0)
    written: dict[TopicPartition, list[OffsetSync]] = {tp: [] for tp in PARTITIONS}
    for step in history:
        if step.kind == "cut":
            extend(kept_topic, west, clients)
            continue
        tp = PARTITIONS[step.partition]
        begin, at = source[tp], target[tp]
        if step.kind == "restart":
            begin = max(0, begin - 3 * step.size)
        if step.kind == "duplicate" and written[tp]:
            sync = written[tp][-1]
        else:
            count = 0 if step.kind == "empty" else step.size
            if step.kind == "contradict":
                at = max(0, at - 1)  # a target offset already taken: a second writer
            sync = OffsetSync(
                tp.topic,
                tp.partition,
                SOURCE_ID,
                TARGET_ID,
                0,
                begin,
                begin + step.size,
                (Segment(begin, at, count),) if count else (),
            )
            if step.transaction != "abort":
                source[tp] = begin + step.size
                target[tp] = max(target[tp], at + count + 1)  # a gap: a marker, an abort
                written[tp].append(sync)
        key, value = encode_sync(sync)
        transaction = step.transaction or None
        west.append(SYNC_TOPIC, 0, value, key, transaction=transaction and "t")
        if transaction is not None:
            west.end_transaction("t", commit=step.transaction == "commit")
    assert_same_as_a_fresh_read(extend(kept_topic, west, clients), clients)
