"""The in-memory Kafka the engine's unit tests run on behaves as the parts of Kafka they rely on."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from confluent_kafka import OFFSET_INVALID, KafkaError, KafkaException, TopicPartition
from fake_kafka import (
    DeliveryCallback,
    FakeClock,
    FakeCluster,
    FakeConsumer,
    FakeKafka,
    FakeKafkaClients,
    FakeMessage,
    FakeProducer,
    bootstrap_servers,
)

from drsvc.errors import ConfigError, KafkaUnavailableError
from drsvc.runtime.replication.settings import WorkerSettings, worker_settings
from drsvc.topology import load_topology_text
from failover import offset_syncs, provenance
from failover.keepalive import LastCopy

PAIR = """
name: pair
clusters:
  east: {}
  west: {}
flows:
  - {source: east, target: west}
"""

Report = tuple[KafkaError | None, FakeMessage]
COOPERATIVE = {"partition.assignment.strategy": "cooperative-sticky"}


def clusters() -> tuple[FakeClock, FakeCluster, FakeCluster]:
    clock = FakeClock()
    return clock, FakeCluster("east", clock), FakeCluster("west", clock)


def settings_for(east: FakeCluster, west: FakeCluster) -> WorkerSettings:
    topology = load_topology_text(PAIR)
    return worker_settings(topology, topology.flow("east", "west"), bootstrap_servers(east, west))


def consumer(cluster: FakeCluster, config: Mapping[str, Any] | None = None) -> FakeConsumer:
    settings: dict[str, Any] = {"group.id": "g", "auto.offset.reset": "earliest"}
    settings.update(config or {})
    return FakeConsumer(cluster, settings, cluster.clock)


def producer(cluster: FakeCluster, config: Mapping[str, Any] | None = None) -> FakeProducer:
    return FakeProducer(cluster, dict(config or {}), cluster.clock)


def collector() -> tuple[list[Report], DeliveryCallback]:
    reports: list[Report] = []

    def on_delivery(err: KafkaError | None, msg: FakeMessage) -> None:
        reports.append((err, msg))

    return reports, on_delivery


def values(messages: list[FakeMessage]) -> list[bytes | None]:
    return [m.value() for m in messages if m.error() is None]


def codes(messages: list[FakeMessage]) -> list[int]:
    return [err.code() for m in messages if (err := m.error()) is not None]


# ---------------------------------------------------------------------------------- clock


def test_the_clock_starts_at_a_realistic_epoch_and_moves_only_when_advanced() -> None:
    clock = FakeClock()
    assert clock.time() == 1_800_000_000.0
    start = clock.monotonic()
    clock.advance(2.5)
    assert clock.monotonic() == start + 2.5
    assert clock.now_ms() == clock.time_ms() == 1_800_000_002_500
    with pytest.raises(ValueError):
        clock.advance(-1)
    clock.sleep(1.5)  # the port's clocks wait by sleeping: the time passes at once
    assert clock.monotonic() == start + 4.0
    with pytest.raises(ValueError):
        clock.sleep(-0.1)  # as time.sleep refuses it


def test_clients_advance_the_clock_instead_of_waiting() -> None:
    clock, east, _ = clusters()
    east.create_topic("t", 1)
    c = consumer(east)
    c.assign([TopicPartition("t", 0, 0)])
    p = producer(east)
    start = clock.monotonic()

    assert c.consume(10, 0.5) == []
    assert c.poll(0.25) is None
    assert p.poll(1.0) == 0
    assert clock.monotonic() == pytest.approx(start + 1.75)

    p.produce("t", b"x")
    assert p.poll(5.0) == 1  # something to serve: no wait
    assert c.consume(10, 5.0)[0].value() == b"x"
    assert p.flush(5.0) == 0
    assert clock.monotonic() == pytest.approx(start + 1.75)


# ------------------------------------------------------------------------------- producing


def test_poll_writes_queued_records_in_order_and_reports_their_offsets() -> None:
    clock, east, _ = clusters()
    east.create_topic("t", 2)
    east.append("t", 0, b"earlier")
    reports, on_delivery = collector()
    p = producer(east)

    p.produce("t", b"a", b"k", partition=0, headers=[("h", b"1")], on_delivery=on_delivery)
    p.produce("t", "b", partition=0, timestamp=123, on_delivery=on_delivery)
    p.produce("t", b"c", partition=1, on_delivery=on_delivery)
    assert len(p) == 3 and east.end_offset("t", 0) == 1  # queued, not written yet

    assert p.poll(0) == 3
    assert [(err, m.topic(), m.partition(), m.offset()) for err, m in reports] == [
        (None, "t", 0, 1),
        (None, "t", 0, 2),
        (None, "t", 1, 0),
    ]
    first, second = east.records("t", 0)[1:]
    assert (first.key, first.value, first.headers) == (b"k", b"a", (("h", b"1"),))
    assert first.timestamp == clock.now_ms() and second.timestamp == 123
    assert second.value == b"b" and second.headers is None
    assert p.delivered == 3 and len(p) == 0


def test_a_full_queue_raises_buffer_error() -> None:
    _, east, _ = clusters()
    east.create_topic("t", 1)
    p = producer(east, {"queue.buffering.max.messages": 2})
    p.produce("t", b"1")
    p.produce("t", b"2")
    with pytest.raises(BufferError):
        p.produce("t", b"3")
    p.poll(0)
    p.produce("t", b"3")


def test_refused_and_failed_produces() -> None:
    _, east, _ = clusters()
    east.create_topic("t", 1)
    reports, on_delivery = collector()
    p = producer(east)

    with pytest.raises(KafkaException) as refused:
        p.produce("t", b"x", partition=5)
    assert refused.value.args[0].code() == KafkaError._UNKNOWN_PARTITION

    east.refuse_next_produce("t", KafkaError.MSG_SIZE_TOO_LARGE)
    with pytest.raises(KafkaException) as too_large:
        p.produce("t", b"x", partition=0)
    assert too_large.value.args[0].code() == KafkaError.MSG_SIZE_TOO_LARGE

    east.fail_next_deliveries("t", 2, KafkaError.NOT_ENOUGH_REPLICAS)
    for value in (b"a", b"b", b"c"):
        p.produce("t", value, partition=0, on_delivery=on_delivery)
    p.produce("missing", b"d", partition=0, on_delivery=on_delivery)
    p.flush()

    assert [None if err is None else err.code() for err, _ in reports] == [
        KafkaError.NOT_ENOUGH_REPLICAS,
        KafkaError.NOT_ENOUGH_REPLICAS,
        None,
        KafkaError._UNKNOWN_TOPIC,
    ]
    assert reports[0][1].offset() is None and reports[2][1].offset() == 0
    assert east.values("t", 0) == [b"c"]


def test_purged_records_are_reported_at_the_next_poll_and_never_written() -> None:
    _, east, _ = clusters()
    east.create_topic("t", 1)
    reports, on_delivery = collector()
    p = producer(east)
    p.produce("t", b"a", partition=0, on_delivery=on_delivery)
    p.purge(in_queue=True, in_flight=False)
    assert reports == []
    p.poll(0)
    assert [err.code() for err, _ in reports if err is not None] == [KafkaError._PURGE_QUEUE]
    assert east.end_offset("t", 0) == 0


def test_a_fatal_error_reaches_error_cb_at_the_next_poll_and_fails_everything() -> None:
    _, east, _ = clusters()
    east.create_topic("t", 1)
    errors: list[KafkaError] = []
    reports, on_delivery = collector()
    p = producer(east, {"error_cb": errors.append})
    p.produce("t", b"a", partition=0, on_delivery=on_delivery)

    p.raise_fatal(KafkaError._FATAL, "idempotence broke")
    assert errors == []
    p.poll(0)

    assert [e.fatal() for e in errors] == [True]
    assert reports[0][0] is not None and reports[0][0].fatal()
    with pytest.raises(KafkaException):
        p.produce("t", b"b", partition=0)


def test_a_cluster_that_is_down_times_records_and_requests_out() -> None:
    clock, east, _ = clusters()
    east.create_topic("t", 1)
    reports, on_delivery = collector()
    p = producer(east, {"message.timeout.ms": 5000})
    c = consumer(east)
    c.assign([TopicPartition("t", 0, 0)])
    east.down = True

    p.produce("t", b"a", partition=0, on_delivery=on_delivery)
    start = clock.monotonic()
    assert p.flush(2.0) == 1
    assert clock.monotonic() == pytest.approx(start + 2.0)
    assert p.poll(10.0) == 1  # waits only until the record times out
    assert clock.monotonic() == pytest.approx(start + 5.0)
    assert [err.code() for err, _ in reports if err is not None] == [KafkaError._MSG_TIMED_OUT]

    with pytest.raises(KafkaException) as raised:
        c.get_watermark_offsets(TopicPartition("t", 0), timeout=1.0)
    assert raised.value.args[0].retriable()

    east.down = False
    east.append("t", 0, b"b")
    assert values(c.consume(5, 0)) == [b"b"]


# ------------------------------------------------------------------------------- transactions


def test_read_committed_readers_stop_at_open_transactions_and_skip_aborted_ones() -> None:
    _, east, _ = clusters()
    east.create_topic("t", 1)
    east.append("t", 0, b"a")  # 0
    east.append("t", 0, b"aborted", transaction="t1")  # 1
    east.append("t", 0, b"open", transaction="t2")  # 2
    east.end_transaction("t1", commit=False)  # marker at 3
    east.append("t", 0, b"b")  # 4

    committed = consumer(east)
    committed.assign([TopicPartition("t", 0, 0)])
    uncommitted = consumer(east, {"isolation.level": "read_uncommitted"})
    uncommitted.assign([TopicPartition("t", 0, 0)])

    assert values(committed.consume(10, 0)) == [b"a"]
    assert committed.position([TopicPartition("t", 0)])[0].offset == 2
    assert values(uncommitted.consume(10, 0)) == [b"a", b"aborted", b"open", b"b"]
    assert committed.get_watermark_offsets(TopicPartition("t", 0)) == (0, 2)  # last stable
    assert uncommitted.get_watermark_offsets(TopicPartition("t", 0)) == (0, 5)
    assert committed.get_watermark_offsets(TopicPartition("t", 0), cached=True) == (0, 5)

    east.end_transaction("t2", commit=True)  # marker at 5
    assert values(committed.consume(10, 0)) == [b"open", b"b"]
    # Past the trailing marker: caught up exactly.
    assert committed.position([TopicPartition("t", 0)])[0].offset == 6
    assert east.values("t", 0) == [b"a", b"open", b"b"]
    assert east.end_offset("t", 0) == 6


def test_a_transaction_makes_its_records_and_offsets_visible_together() -> None:
    _, _, west = clusters()
    west.create_topic("copy", 1)
    progress = consumer(west, {"group.id": "progress"})
    p = producer(west, {"transactional.id": "slot-0"})
    p.init_transactions(10)

    p.begin_transaction()
    p.produce("copy", b"a", partition=0)
    p.poll(0)
    offsets = [TopicPartition("copy", 0, 1, metadata='{"next": 7}')]
    p.send_offsets_to_transaction(offsets, progress.consumer_group_metadata(), 10)
    assert west.values("copy", 0) == [] and west.last_stable_offset("copy", 0) == 0
    assert progress.committed([TopicPartition("copy", 0)])[0].offset == OFFSET_INVALID

    p.commit_transaction(10)

    assert west.values("copy", 0) == [b"a"]
    assert west.end_offset("copy", 0) == 2  # the commit marker takes an offset
    (found,) = progress.committed([TopicPartition("copy", 0)])
    assert (found.offset, found.metadata) == (1, '{"next": 7}')
    assert p.transactions_committed == 1


def test_a_second_producer_of_the_same_transactional_id_fences_the_first() -> None:
    _, _, west = clusters()
    west.create_topic("copy", 1)
    errors: list[KafkaError] = []
    old = producer(west, {"transactional.id": "slot-0", "error_cb": errors.append})
    old.init_transactions(10)
    old.begin_transaction()
    old.produce("copy", b"zombie", partition=0)
    old.poll(0)

    new = producer(west, {"transactional.id": "slot-0"})
    new.init_transactions(10)

    assert west.values("copy", 0) == []
    assert west.values("copy", 0, committed_only=False) == [b"zombie"]
    assert west.records("copy", 0, committed_only=False)[0].state == "aborted"
    assert west.transactional_owner("slot-0") is new
    for call in (
        old.begin_transaction,
        lambda: old.produce("copy", b"x", partition=0),
        lambda: old.send_offsets_to_transaction([], "g"),
        old.commit_transaction,
    ):
        with pytest.raises(KafkaException) as raised:
            call()
        err = raised.value.args[0]
        assert (err.code(), err.fatal()) == (KafkaError._FENCED, True)
    old.poll(0)
    assert [e.code() for e in errors] == [KafkaError._FENCED]

    new.begin_transaction()
    new.produce("copy", b"ok", partition=0)
    new.commit_transaction(10)
    assert west.values("copy", 0) == [b"ok"]


def test_the_coordinator_aborts_a_transaction_older_than_its_timeout() -> None:
    clock, _, west = clusters()
    west.create_topic("copy", 1)
    p = producer(west, {"transactional.id": "slot-0", "transaction.timeout.ms": 1000})
    p.init_transactions()
    p.begin_transaction()
    p.produce("copy", b"slow", partition=0)
    p.poll(0)

    clock.advance(1.5)
    reader = consumer(west)
    reader.assign([TopicPartition("copy", 0, 0)])
    assert reader.consume(10, 0) == []
    assert west.last_stable_offset("copy", 0) == west.end_offset("copy", 0)
    with pytest.raises(KafkaException) as raised:
        p.commit_transaction(5)
    assert raised.value.args[0].code() == KafkaError._FENCED
    assert p.fenced


def test_a_failed_delivery_or_an_injected_failure_makes_the_commit_fail() -> None:
    _, _, west = clusters()
    west.create_topic("copy", 1)
    p = producer(west, {"transactional.id": "slot-0"})
    p.init_transactions()

    p.begin_transaction()
    west.fail_next_deliveries("copy", 1, KafkaError.NOT_ENOUGH_REPLICAS)
    p.produce("copy", b"lost", partition=0)
    p.produce("copy", b"landed", partition=0)
    with pytest.raises(KafkaException) as failed:
        p.commit_transaction()
    assert failed.value.args[0].txn_requires_abort()
    p.abort_transaction()
    assert west.values("copy", 0) == []

    p.begin_transaction()
    p.produce("copy", b"a", partition=0)
    west.fail_next_commit_transaction(KafkaError._TIMED_OUT, retriable=True)
    with pytest.raises(KafkaException) as timed_out:
        p.commit_transaction()
    assert timed_out.value.args[0].retriable()
    p.commit_transaction()  # a retriable failure: committing again works
    assert west.values("copy", 0) == [b"a"]


def test_offsets_sent_to_an_aborted_transaction_are_never_committed() -> None:
    _, _, west = clusters()
    p = producer(west, {"transactional.id": "slot-0"})
    p.init_transactions()
    p.begin_transaction()
    p.send_offsets_to_transaction([TopicPartition("copy", 0, 5)], "progress")
    p.abort_transaction()
    assert west.committed_offset("progress", "copy", 0) is None


# ------------------------------------------------------------------------------- consuming


def test_consume_interleaves_partitions_in_offset_order_and_never_repeats() -> None:
    _, east, _ = clusters()
    east.create_topic("t", 2)
    for i in range(8):
        east.append("t", 0, f"a{i}")
        east.append("t", 1, f"b{i}")
    c = consumer(east)
    c.assign([TopicPartition("t", 0, 0), TopicPartition("t", 1, 2)])

    batch = c.consume(100, 0)

    assert [m.partition() for m in batch[:10]] == [0] * 5 + [1] * 5
    for partition, first in ((0, 0), (1, 2)):
        offsets = [m.offset() for m in batch if m.partition() == partition]
        assert offsets == list(range(first, 8))
    assert c.consume(100, 0) == []
    msg = batch[0]
    assert msg.timestamp()[0] == 1 and msg.leader_epoch() == 0 and msg.key() is None
    headers = east.append("t", 0, b"h", headers={"x": "1"})
    (with_headers,) = c.consume(1, 0)
    assert with_headers.offset() == headers and with_headers.headers() == [("x", b"1")]
    copy = with_headers.headers()
    assert copy is not None
    copy.append(("y", b"2"))
    assert with_headers.headers() == [("x", b"1")]  # a new list every time


def test_seek_pause_resume_and_position() -> None:
    _, east, _ = clusters()
    east.create_topic("t", 1)
    for i in range(5):
        east.append("t", 0, f"{i}")
    c = consumer(east)
    tp = TopicPartition("t", 0, 0)

    with pytest.raises(KafkaException) as unassigned:
        c.seek(TopicPartition("t", 0, 1))
    assert unassigned.value.args[0].code() == KafkaError._STATE

    c.assign([tp])
    assert c.position([tp])[0].offset == OFFSET_INVALID  # not fetched yet
    assert len(c.consume(3, 0)) == 3
    c.seek(TopicPartition("t", 0, 1))
    assert c.position([tp])[0].offset == 1
    c.pause([tp])
    assert c.consume(10, 0) == []
    c.resume([tp])
    assert values(c.consume(10, 0)) == [b"1", b"2", b"3", b"4"]

    c.refuse_next_seek()
    with pytest.raises(KafkaException):
        c.seek(TopicPartition("t", 0, 0))


def test_incremental_assignment_refuses_duplicates_and_strangers() -> None:
    _, east, _ = clusters()
    east.create_topic("t", 2)
    c = consumer(east)
    c.incremental_assign([TopicPartition("t", 0, 0)])
    with pytest.raises(KafkaException) as conflict:
        c.incremental_assign([TopicPartition("t", 0, 0)])
    assert conflict.value.args[0].code() == KafkaError._CONFLICT
    with pytest.raises(KafkaException) as stranger:
        c.incremental_unassign([TopicPartition("t", 1)])
    assert stranger.value.args[0].code() == KafkaError._INVALID_ARG
    c.incremental_assign([TopicPartition("t", 1, 0)])
    c.incremental_unassign([TopicPartition("t", 0)])
    assert c.assignment() == [TopicPartition("t", 1)]


def test_the_end_of_a_partition_is_reported_once_each_time_it_is_reached() -> None:
    _, east, _ = clusters()
    east.create_topic("t", 1)
    east.append("t", 0, b"a")
    c = consumer(east, {"enable.partition.eof": True})
    c.assign([TopicPartition("t", 0, 0)])

    first = c.consume(10, 0)
    assert values(first) == [b"a"] and codes(first) == [KafkaError._PARTITION_EOF]
    assert first[-1].offset() == 1
    assert c.consume(10, 0) == []
    east.append("t", 0, b"b")
    assert codes(c.consume(10, 0)) == [KafkaError._PARTITION_EOF]


def test_fetching_costs_its_time_per_log_entry_and_a_consume_lasts_at_most_its_timeout() -> None:
    clock, east, _ = clusters()
    east.create_topic("t", 1)
    for i in range(100):
        east.append("t", 0, f"{i}")
    for _ in range(300):
        east.append("t", 0, b"aborted", transaction="t1")
    east.end_transaction("t1", commit=False)  # marker at 400
    east.append("t", 0, b"last")  # 401
    c = consumer(east, {"enable.partition.eof": True})
    c.record_cost_s = 0.01
    c.assign([TopicPartition("t", 0, 0)])
    start = clock.monotonic()

    first = c.consume(1000, 0.5)  # 50 entries fit in the timeout
    assert values(first) == [f"{i}".encode() for i in range(50)]
    assert clock.monotonic() == pytest.approx(start + 0.5)
    second = c.consume(20, 0.5)  # the count is the limit now: 20 entries' time
    assert len(second) == 20 and clock.monotonic() == pytest.approx(start + 0.7)

    # Passing over aborted records costs time too: calls that hand out nothing last their whole
    # timeout, and the position moves all the same.
    assert len(c.consume(1000, 0.5)) == 30  # and 20 aborted records passed over
    assert c.position([TopicPartition("t", 0)])[0].offset == 120
    positions = []
    while not (batch := c.consume(1000, 0.5)):
        positions.append(c.position([TopicPartition("t", 0)])[0].offset)
    assert positions == [170, 220, 270, 320, 370]
    # The last 30 aborted records, the marker, and the last record: 32 entries
    assert values(batch) == [b"last"] and codes(batch) == [KafkaError._PARTITION_EOF]
    assert clock.monotonic() == pytest.approx(start + 1.2 + 5 * 0.5 + 0.32)

    c.record_cost_s = 0.0  # no cost: free, as before
    c.seek(TopicPartition("t", 0, 0))
    before = clock.monotonic()
    assert len(values(c.consume(1000, 0.5))) == 101 and clock.monotonic() == before


def test_a_partition_without_a_leader_serves_nothing_until_one_is_elected() -> None:
    clock, east, _ = clusters()
    east.create_topic("t", 2)
    east.append("t", 0, b"a")
    east.append("t", 1, b"b")
    c = consumer(east, {"enable.partition.eof": True})
    c.assign([TopicPartition("t", 0, 0), TopicPartition("t", 1, 0)])
    east.lose_leader("t", 1, until=clock.monotonic() + 2)

    with pytest.raises(KafkaException) as raised:
        c.get_watermark_offsets(TopicPartition("t", 1))
    assert raised.value.args[0].code() == KafkaError._NO_OFFSET
    partitions = c.list_topics("t").topics["t"].partitions
    assert partitions[1].leader == -1
    assert partitions[1].error.code() == KafkaError.LEADER_NOT_AVAILABLE
    assert (partitions[0].leader, partitions[0].error) == (1, None)
    first = c.consume(10, 1.0)  # partition 0 only, and no end-of-partition for partition 1
    assert [(m.partition(), m.error() is None) for m in first] == [(0, True), (0, False)]
    assert c.consume(10, 1.0) == []  # a second has passed
    assert c.consume(10, 1.0) == []  # two have passed: elected by the next fetch
    assert values(c.consume(10, 1.0)) == [b"b"]
    assert c.get_watermark_offsets(TopicPartition("t", 1)) == (0, 1)

    east.lose_leader("t", 0)  # until elected
    clock.advance(3600)
    with pytest.raises(KafkaException):
        c.get_watermark_offsets(TopicPartition("t", 0))
    east.elect_leader("t", 0)
    assert c.get_watermark_offsets(TopicPartition("t", 0)) == (0, 1)
    with pytest.raises(KeyError):
        east.lose_leader("t", 2)


def test_metadata_lists_the_topics_and_names_an_unknown_one_as_such() -> None:
    clock, east, _ = clusters()
    east.create_topic("a", 2)
    east.create_topic("b", 1)
    c, p = consumer(east), producer(east)

    everything = c.list_topics(timeout=5)
    assert sorted(everything.topics) == ["a", "b"] and list(everything.brokers) == [1]
    assert sorted(everything.topics["a"].partitions) == [0, 1]
    assert everything.topics["a"].error is None
    missing = p.list_topics("nope", timeout=5).topics["nope"]
    assert missing.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART and not missing.partitions

    east.down = True
    start = clock.monotonic()
    with pytest.raises(KafkaException) as raised:
        c.list_topics("a", timeout=5)
    assert raised.value.args[0].code() == KafkaError._TIMED_OUT
    assert clock.monotonic() == start + 5


def test_retention_overtaking_the_position_gives_one_offset_reset_error() -> None:
    _, east, _ = clusters()
    east.create_topic("t", 1)
    for i in range(10):
        east.append("t", 0, f"{i}")
    strict = consumer(east, {"auto.offset.reset": "error"})
    strict.assign([TopicPartition("t", 0, 2)])
    lenient = consumer(east, {"auto.offset.reset": "earliest"})
    lenient.assign([TopicPartition("t", 0, 2)])

    east.delete_records("t", 0, 6)

    first = strict.consume(10, 0)
    assert codes(first) == [KafkaError._AUTO_OFFSET_RESET] and first[0].offset() == 2
    assert strict.consume(10, 0) == []  # stopped until a seek
    strict.seek(TopicPartition("t", 0, 6))
    assert values(strict.consume(10, 0)) == [b"6", b"7", b"8", b"9"]
    assert values(lenient.consume(10, 0)) == [b"6", b"7", b"8", b"9"]
    assert strict.get_watermark_offsets(TopicPartition("t", 0)) == (6, 10)


def test_a_recreated_topic_has_a_new_id_empty_logs_and_no_committed_offsets() -> None:
    _, east, _ = clusters()
    east.create_topic("t", 2)
    east.append("t", 0, b"a")
    east.set_committed("g", "t", 0, 1)
    old_id = east.topic_id("t")
    c = consumer(east, {"auto.offset.reset": "error"})
    c.assign([TopicPartition("t", 0, 1)])

    east.recreate_topic("t")

    assert east.topic_id("t") != old_id and len(east.topic_id("t")) == 16
    assert east.end_offset("t", 0) == 0 and east.partition_count("t") == 2
    assert east.committed_offset("g", "t", 0) is None
    assert codes(c.consume(10, 0)) == [KafkaError._AUTO_OFFSET_RESET]


def test_committed_offsets_carry_metadata_and_leader_epoch() -> None:
    _, east, _ = clusters()
    east.create_topic("t", 1)
    for i in range(3):
        east.append("t", 0, f"{i}", timestamp=1000 * (i + 1))
    c = consumer(east)
    tp = TopicPartition("t", 0)
    assert c.committed([tp])[0].offset == OFFSET_INVALID

    c.commit(offsets=[TopicPartition("t", 0, 2, metadata="m", leader_epoch=4)], asynchronous=False)

    (found,) = c.committed([tp], timeout=5)
    assert (found.offset, found.metadata, found.leader_epoch) == (2, "m", 4)
    assert east.committed_offset("g", "t", 0) == 2
    c.assign([TopicPartition("t", 0, OFFSET_INVALID)])  # starts at the committed offset
    assert values(c.consume(10, 0)) == [b"2"]
    (at,) = c.offsets_for_times([TopicPartition("t", 0, 1500)])
    (late,) = c.offsets_for_times([TopicPartition("t", 0, 9000)])
    assert (at.offset, late.offset) == (1, -1)


# ------------------------------------------------------------------------------- groups


class Callbacks:
    def __init__(self, name: str, log: list[tuple[str, str, list[int]]]) -> None:
        self.name = name
        self.log = log

    def assign(self, consumer: FakeConsumer, partitions: list[TopicPartition]) -> None:
        self.log.append((self.name, "assign", [tp.partition for tp in partitions]))

    def revoke(self, consumer: FakeConsumer, partitions: list[TopicPartition]) -> None:
        self.log.append((self.name, "revoke", [tp.partition for tp in partitions]))

    def lost(self, consumer: FakeConsumer, partitions: list[TopicPartition]) -> None:
        self.log.append((self.name, "lost", [tp.partition for tp in partitions]))


def member(
    cluster: FakeCluster, name: str, log: list[tuple[str, str, list[int]]], strategy: str
) -> FakeConsumer:
    c = consumer(cluster, {"client.id": name, "partition.assignment.strategy": strategy})
    calls = Callbacks(name, log)
    c.subscribe(["t"], on_assign=calls.assign, on_revoke=calls.revoke, on_lost=calls.lost)
    return c


def owned(c: FakeConsumer) -> list[int]:
    return [tp.partition for tp in c.assignment()]


def test_an_eager_group_revokes_everything_then_assigns_round_robin() -> None:
    _, east, _ = clusters()
    east.create_topic("t", 4)
    log: list[tuple[str, str, list[int]]] = []
    a = member(east, "a", log, "roundrobin")
    a.poll(0)
    assert log == [("a", "assign", [0, 1, 2, 3])] and owned(a) == [0, 1, 2, 3]

    b = member(east, "b", log, "roundrobin")
    b.poll(0)  # a still holds everything: b waits
    assert owned(b) == []
    a.poll(0)
    b.poll(0)

    assert log[1:] == [
        ("a", "revoke", [0, 1, 2, 3]),
        ("a", "assign", [0, 2]),
        ("b", "assign", [1, 3]),
    ]
    assert (owned(a), owned(b)) == ([0, 2], [1, 3])
    assert east.group_stable("g")


def test_a_cooperative_group_moves_only_what_it_must_and_never_shares_a_partition() -> None:
    _, east, _ = clusters()
    east.create_topic("t", 4)
    log: list[tuple[str, str, list[int]]] = []
    a = member(east, "a", log, "cooperative-sticky")
    a.poll(0)
    b = member(east, "b", log, "cooperative-sticky")
    b.poll(0)
    assert owned(b) == []  # waits for a to give two up
    a.poll(0)
    b.poll(0)

    assert log == [
        ("a", "assign", [0, 1, 2, 3]),
        ("b", "assign", []),
        ("a", "revoke", [2, 3]),
        ("b", "assign", [2, 3]),
    ]
    assert (owned(a), owned(b)) == ([0, 1], [2, 3])
    assert east.group_stable("g")


def test_a_kicked_member_hears_on_lost_and_joins_again() -> None:
    _, east, _ = clusters()
    east.create_topic("t", 2)
    log: list[tuple[str, str, list[int]]] = []
    a = member(east, "a", log, "cooperative-sticky")
    b = member(east, "b", log, "cooperative-sticky")
    for c in (a, b, a, b):
        c.poll(0)
    assert (owned(a), owned(b)) == ([0], [1])
    old_id = a.memberid()
    log.clear()

    east.kick(a)
    b.poll(0)  # takes a's partition at once
    assert owned(b) == [0, 1] and owned(a) == [0]  # a does not know yet
    with pytest.raises(KafkaException) as commit:
        a.commit(offsets=[TopicPartition("t", 0, 1)], asynchronous=False)
    assert commit.value.args[0].code() == KafkaError.UNKNOWN_MEMBER_ID
    a.poll(0)
    assert ("a", "lost", [0]) in log and owned(a) == []
    assert a.memberid() not in (None, old_id)
    b.poll(0)
    a.poll(0)
    assert sorted(owned(a) + owned(b)) == [0, 1] and owned(a)


def test_closing_revokes_and_leaves_the_group() -> None:
    _, east, _ = clusters()
    east.create_topic("t", 2)
    log: list[tuple[str, str, list[int]]] = []
    a = member(east, "a", log, "roundrobin")
    b = member(east, "b", log, "roundrobin")
    for c in (a, b, a, b):
        c.poll(0)
    a.close()
    assert ("a", "revoke", [0]) in log
    assert east.group_members("g") == [b.memberid()]
    b.poll(0)
    assert owned(b) == [0, 1]
    with pytest.raises(RuntimeError):
        a.poll(0)


def test_new_partitions_of_a_subscribed_topic_are_assigned() -> None:
    _, east, _ = clusters()
    east.create_topic("t", 1)
    log: list[tuple[str, str, list[int]]] = []
    a = member(east, "a", log, "roundrobin")
    a.poll(0)
    east.add_partitions("t", 3)
    a.poll(0)
    assert owned(a) == [0, 1, 2]


# ------------------------------------------------------------------------- the engine's boundary


def test_fake_kafka_hands_out_clients_by_alias_through_the_ports_factory() -> None:
    clock, east, west = clusters()
    settings = settings_for(east, west)
    kafka = FakeKafka(east, west, settings)

    kafka.consumer("east", {"group.id": "g"})
    kafka.producer("west", {"linger.ms": 7})
    assert kafka.consumers[0].cluster is east and kafka.producers[0].cluster is west
    assert kafka.clients.consumers == kafka.consumers
    # The settings' resolved client settings merged by the real factory, the overlay kept.
    assert kafka.consumers[0].config["bootstrap.servers"] == east.bootstrap
    assert kafka.producers[0].config["linger.ms"] == 7
    with pytest.raises(ConfigError, match=r"bootstrap\.servers"):
        kafka.consumer("east", {"group.id": "g", "bootstrap.servers": "elsewhere:9092"})
    with pytest.raises(ConfigError, match="north"):
        kafka.consumer("north", {"group.id": "g"})
    copier = kafka.heartbeat_copier()
    copier.start()
    copier.stop()
    assert copier.started and copier.stopped

    topology = load_topology_text(PAIR)
    other = worker_settings(topology, topology.flow("east", "west"), {"east": "x:1", "west": "y:1"})
    with pytest.raises(ValueError, match="bootstrap_servers"):
        FakeKafka(east, west, other)
    with pytest.raises(ValueError, match="one FakeClock"):
        FakeKafka(FakeCluster("east"), west, settings)
    assert kafka.clock is clock


def test_fake_kafka_clients_hand_out_fake_clients_by_alias_with_the_ports_settings() -> None:
    clock, east, west = clusters()
    clients = FakeKafkaClients(east, west)
    clients.record_cost_s = 0.25

    c = clients.consumer("west", {"group.id": "g"})
    p = clients.producer("east")
    assert isinstance(c, FakeConsumer) and c.cluster is west and c.record_cost_s == 0.25
    assert isinstance(p, FakeProducer) and p.cluster is east
    assert clients.consumers == [c] and clients.producers == [p]
    # The real factory's settings: the topology's reach and security, the port's defaults.
    assert c.config["bootstrap.servers"] == west.bootstrap
    assert c.config["security.protocol"] == "PLAINTEXT" and c.config["log_level"] == 2
    assert clients.clock is clock
    with pytest.raises(ConfigError, match=r"security\.protocol"):
        clients.consumer("west", {"group.id": "g", "security.protocol": "SSL"})
    with pytest.raises(ConfigError):
        clients.consumer("north", {"group.id": "g"})
    with pytest.raises(NotImplementedError):
        clients.admin("east")
    with pytest.raises(ValueError, match="one FakeClock"):
        FakeKafkaClients(east, FakeCluster("north"))

    named = load_topology_text(PAIR)
    assert FakeKafkaClients(east, west, topology=named).topology is named


def test_the_catalog_mirrors_the_flows_topics_and_grows_them() -> None:
    _, east, west = clusters()
    settings = settings_for(east, west)
    catalog = FakeKafka(east, west, settings).topics()
    for name, partitions in (("orders", 2), ("__consumer_offsets", 3), ("heartbeats", 1)):
        east.create_topic(name, partitions)
    east.create_topic("drsvc-smoke", 1)
    east.create_topic("west.payments", 1)  # came from west: copying it back would loop

    mirrored = catalog.refresh()

    assert list(mirrored) == ["orders"]
    orders = mirrored["orders"]
    assert (orders.remote_name, orders.remote.partitions) == ("east.orders", 2)
    assert orders.source.topic_id == east.topic_id("orders")
    assert orders.remote.topic_id == west.topic_id("east.orders")

    east.add_partitions("orders", 3)
    assert catalog.refresh()["orders"].remote.partitions == 3
    assert west.partition_count("east.orders") == 3

    catalog.ensure_sync_topic()
    assert west.partition_count(settings.sync_topic) == 1
    assert catalog.ensure_topic("slots", 4) == 4 and catalog.ensure_topic("slots", 8) == 4

    catalog.unreachable = True
    with pytest.raises(KafkaUnavailableError):
        catalog.refresh()
    catalog.unreachable = False
    east.down = True
    with pytest.raises(KafkaUnavailableError):
        catalog.refresh()


def test_slot_assigned_answers_from_the_target_group() -> None:
    _, east, west = clusters()
    catalog = FakeKafka(east, west, settings_for(east, west)).topics()
    west.create_topic("slots", 2)
    a = consumer(west, COOPERATIVE)
    a.subscribe(["slots"])
    a.poll(0)
    member_id = a.memberid()
    assert member_id is not None

    assert catalog.slot_assigned("g", member_id, "slots", 1) is True
    assert catalog.slot_assigned("g", "someone-else", "slots", 1) is False
    assert catalog.slot_assigned("g", "", "slots", 1) is None
    b = consumer(west, COOPERATIVE)
    b.subscribe(["slots"])  # a rebalance is under way until both polled
    assert catalog.slot_assigned("g", member_id, "slots", 1) is None
    for c in (b, a, b):
        c.poll(0)
    assert catalog.slot_assigned("g", member_id, "slots", 1) is (1 in owned(a))


def test_the_sync_log_reads_copies_and_syncs_as_written() -> None:
    _, east, west = clusters()
    settings = settings_for(east, west)
    kafka = FakeKafka(east, west, settings)
    west.create_topic("east.orders", 1)
    west.create_topic(settings.sync_topic, 1)
    sync_log = kafka.sync_log()
    ids = (b"s" * 16, b"t" * 16)
    tp = offset_syncs.TopicPartition("orders", 0)
    assert sync_log.written_last_copy(tp, ids, 1000, 1.0) is None
    assert sync_log.written_sync_end(tp, ids, 1.0) == 0

    def copy_of(offset: int, partition: int = 0, topic: str = "orders") -> list[tuple[str, bytes]]:
        hop = provenance.Provenance("east", topic, partition, offset)
        return [("app", b"1"), (provenance.PROVENANCE_HEADER, provenance.encode(hop))]

    for source in (10, 11, 12):
        west.append("east.orders", 0, b"v", headers=copy_of(source))  # targets 0, 1, 2
    west.append("east.orders", 0, b"v", headers=copy_of(13, topic="other"))  # not ours
    west.append("east.orders", 0, b"v", headers=copy_of(14), transaction="eos")  # open: counted
    sync = offset_syncs.OffsetSync(
        "orders", 0, ids[0], ids[1], 3, 10, 12, (offset_syncs.Segment(10, 0, 2),)
    )
    key, value = offset_syncs.encode_sync(sync)
    west.append(settings.sync_topic, 0, value, key=key)
    other = offset_syncs.OffsetSync(
        "orders", 0, b"x" * 16, ids[1], 0, 10, 20, (offset_syncs.Segment(10, 7, 1),)
    )
    west.append(settings.sync_topic, 0, offset_syncs.encode_value(other), key=key)

    assert sync_log.unsynced_copies("east.orders", 0, "orders", 11, 1.0) == [
        (11, 1),
        (12, 2),
        (14, 4),
    ]
    assert sync_log.unsynced_copies("east.orders", 1, "orders", 0, 1.0) == []
    assert sync_log.written_last_copy(tp, ids, 1000, 1.0) == LastCopy(11, 1, 3)
    assert sync_log.written_sync_end(tp, ids, 1.0) == 2
    assert sync_log.syncs() == [
        sync,
        offset_syncs.decode_sync(key, offset_syncs.encode_value(other)),
    ]
    west.down = True
    with pytest.raises(KafkaUnavailableError):
        sync_log.written_sync_end(tp, ids, 1.0)
