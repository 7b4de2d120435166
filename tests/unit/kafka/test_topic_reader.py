"""The port's topic reader on the in-memory Kafka and its fake clock: it reads ranges, tails and
single records to an end, and gives up only when the read stops moving or its caller's deadline
passes, never because the history is long."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable

import pytest
from fake_kafka import FakeClock, FakeCluster, FakeKafkaClients

from drsvc.errors import ConfigError, KafkaUnavailableError
from drsvc.kafka.clients import KafkaClients
from drsvc.kafka.read_progress import ReadLimits
from drsvc.kafka.reader import TopicReader, reader_settings
from drsvc.kafka.types import Message
from drsvc.topology import load_topology_text

TOPIC = "t"
GROUP = "drsvc-test-reader"
STALL_S = 2.0
LIMITS = ReadLimits(stall_s=STALL_S, progress_log_s=5.0, batch=1000, poll_s=0.5)
PROGRESS_LOGGER = "drsvc.kafka.read_progress"


def east_with(partitions: int = 1) -> tuple[FakeClock, FakeCluster, FakeKafkaClients]:
    clock = FakeClock()
    east = FakeCluster("east", clock)
    east.create_topic(TOPIC, partitions)
    return clock, east, FakeKafkaClients(east)


def reader_of(
    clients: FakeKafkaClients, *, committed: bool = True, limits: ReadLimits = LIMITS
) -> TopicReader:
    return clients.reader(
        "east", TOPIC, what="test topic", group=GROUP, committed=committed, limits=limits
    )


def fill(east: FakeCluster, partition: int, count: int) -> None:
    for n in range(count):
        east.append(TOPIC, partition, f"{partition}-{n}")


def offsets(batches: Iterable[list[Message]]) -> dict[int, list[int]]:
    """Per partition, the offsets handed out, in the order they came."""
    found: dict[int, list[int]] = {}
    for batch in batches:
        for message in batch:
            partition, offset = message.partition(), message.offset()
            assert partition is not None and offset is not None
            found.setdefault(partition, []).append(offset)
    return found


# ------------------------------------------------------------------------------- forward reads


def test_a_forward_read_hands_out_each_range_in_order_and_leaves_no_trace() -> None:
    _, east, clients = east_with(partitions=3)
    for partition in range(3):
        fill(east, partition, 20)
    small_batches = ReadLimits(stall_s=STALL_S, batch=4)

    with reader_of(clients, limits=small_batches) as reader:
        batches = list(reader.forward({0: (5, 15), 1: (0, 3), 2: (7, 7)}))
        state = reader.state

    assert all(0 < len(batch) <= 4 for batch in batches)
    assert offsets(batches) == {0: list(range(5, 15)), 1: [0, 1, 2]}
    assert state.reached == {0: 15, 1: 3, 2: 7} and state.finished == {0, 1, 2}
    assert state.records == 13 and state.where() == "every partition read"
    # Assigned only: it never joined its group, never committed, and is closed.
    (consumer,) = clients.consumers
    assert consumer.group_id == GROUP and consumer.memberid() is None
    assert east.group_members(GROUP) == [] and GROUP not in east.group_offsets
    assert consumer.closed


@pytest.mark.parametrize("committed", [True, False])
def test_a_partition_ending_in_a_transaction_marker_is_done_at_its_end_of_partition(
    committed: bool,
) -> None:
    clock, east, clients = east_with()
    for n in range(5):
        east.append(TOPIC, 0, f"{n}", transaction="tx")
    east.end_transaction("tx")  # the commit marker takes offset 5, never delivered
    started = clock.monotonic()

    with reader_of(clients, committed=committed) as reader:
        assert reader.bounds() == {0: (0, 6)}
        read = offsets(reader.to_end())
        state = reader.state

    assert read == {0: [0, 1, 2, 3, 4]}
    assert state.reached == {0: 6} and state.finished == {0}
    assert clock.monotonic() - started < LIMITS.poll_s  # done at once, not waited out


def test_a_committed_read_stops_at_the_last_stable_offset() -> None:
    clock, east, clients = east_with()
    fill(east, 0, 3)
    east.append(TOPIC, 0, b"open", transaction="open")  # 3, and an open transaction holds 4
    east.append(TOPIC, 0, b"open too", transaction="open")
    started = clock.monotonic()

    with reader_of(clients, committed=True) as reader:
        assert reader.bounds() == {0: (0, 3)}  # what a committed reader can read
        read = offsets(reader.forward({0: (0, east.end_offset(TOPIC, 0))}))
        stopped = reader.state
    with reader_of(clients, committed=False) as uncommitted:
        everything = offsets(uncommitted.to_end())

    assert read == {0: [0, 1, 2]}
    assert stopped.reached == {0: 3} and stopped.finished == {0}
    assert clock.monotonic() - started < LIMITS.poll_s
    assert everything == {0: [0, 1, 2, 3, 4]}


def test_passing_over_a_long_aborted_stretch_is_movement() -> None:
    clock, east, clients = east_with()
    east.append(TOPIC, 0, b"first")  # 0
    for _ in range(20_000):  # 1..20000: a committed reader never sees them
        east.append(TOPIC, 0, b"aborted", transaction="tx")
    east.end_transaction("tx", commit=False)  # marker at 20001
    east.append(TOPIC, 0, b"last")  # 20002
    clients.record_cost_s = 0.001  # passing over the stretch takes 20 s: 10 stall periods
    started = clock.monotonic()

    with reader_of(clients) as reader:
        read = offsets(reader.to_end())

    assert read == {0: [0, 20_002]}
    assert clock.monotonic() - started >= 10 * STALL_S


def test_a_long_history_is_read_however_long_it_takes_and_says_how_far_it_is(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock, east, clients = east_with(partitions=2)
    for partition in range(2):
        fill(east, partition, 50_000)
    clients.record_cost_s = 0.0002  # 100,000 records: 20 s, 10 stall periods
    started = clock.monotonic()

    with caplog.at_level(logging.INFO, logger=PROGRESS_LOGGER), reader_of(clients) as reader:
        read = offsets(reader.to_end())
        records = reader.state.records

    assert read == {0: list(range(50_000)), 1: list(range(50_000))}
    assert records == 100_000
    assert clock.monotonic() - started >= 10 * STALL_S
    lines = [r.getMessage() for r in caplog.records if r.name == PROGRESS_LOGGER]
    assert len(lines) >= 3, "a long read says how far it is every progress_log_s"
    assert all(line.startswith("reading test topic t on east: partition 0 at ") for line in lines)
    counts = [int(m.group(1)) for m in (re.search(r"; (\d+) records read", x) for x in lines) if m]
    assert len(counts) == len(lines) and counts == sorted(counts) and counts[0] > 0


def test_a_read_that_stops_moving_raises_naming_where_each_partition_stopped() -> None:
    clock, east, clients = east_with(partitions=2)
    fill(east, 0, 10)
    fill(east, 1, 10)
    reader = reader_of(clients)
    assert reader.bounds() == {0: (0, 10), 1: (0, 10)}
    east.lose_leader(TOPIC, 1)  # and no leader comes back
    started = clock.monotonic()

    with reader, pytest.raises(KafkaUnavailableError) as raised:
        for _ in reader.forward({0: (0, 10), 1: (0, 10)}):
            pass

    assert str(raised.value) == (
        "reading test topic t on east made no progress for 2s "
        "(partition 1 at 0 of 10; 10 records read)"
    )
    # Partition 0 was read at once; it gave up one stall period later, not sooner.
    assert STALL_S <= clock.monotonic() - started <= STALL_S + LIMITS.poll_s


def test_a_cluster_going_down_mid_read_is_named_where_the_read_stopped() -> None:
    _, east, clients = east_with()
    fill(east, 0, 10)

    with reader_of(clients, limits=ReadLimits(stall_s=STALL_S, batch=4)) as reader:
        batches = reader.to_end()
        assert len(next(batches)) == 4
        east.down = True
        with pytest.raises(KafkaUnavailableError, match=r"\(partition 0 at 4 of 10; 4 records"):
            next(batches)


def test_the_callers_deadline_ends_a_read_that_still_moves() -> None:
    clock, east, clients = east_with()
    fill(east, 0, 10_000)
    clients.record_cost_s = 0.001  # 10 s to read, moving all the way
    deadline = clock.monotonic() + 3.0
    reader = reader_of(clients, limits=ReadLimits(stall_s=60.0, poll_s=0.5, deadline=deadline))

    with reader, pytest.raises(KafkaUnavailableError) as raised:
        for _ in reader.to_end():
            pass

    assert "did not finish within its caller's time budget" in str(raised.value)
    assert "partition 0 at 3000 of 10000" in str(raised.value)
    assert deadline <= clock.monotonic() <= deadline + 0.5


# ------------------------------------------------------------------------------ bounds and gaps


def test_a_partition_without_a_leader_is_waited_for() -> None:
    clock, east, clients = east_with(partitions=2)
    fill(east, 0, 3)
    fill(east, 1, 3)
    elected_at = clock.monotonic() + 1.5  # within one stall period
    east.lose_leader(TOPIC, 1, until=elected_at)

    with reader_of(clients) as reader:
        read = offsets(reader.to_end())

    assert read == {0: [0, 1, 2], 1: [0, 1, 2]}
    assert clock.monotonic() >= elected_at


def test_a_partition_that_gets_no_leader_ends_the_wait_after_a_stall_period() -> None:
    clock, east, clients = east_with(partitions=2)
    east.lose_leader(TOPIC, 1)
    started = clock.monotonic()

    with reader_of(clients) as reader, pytest.raises(KafkaUnavailableError) as raised:
        reader.bounds()

    assert str(raised.value) == (
        "reading test topic t on east made no progress for 2s "
        "(finding where partition 1 ends: _NO_OFFSET: no leader for the partition)"
    )
    assert STALL_S <= clock.monotonic() - started <= STALL_S + LIMITS.poll_s


def test_the_deadline_bounds_the_wait_for_a_leader_too() -> None:
    clock, east, clients = east_with()
    east.lose_leader(TOPIC, 0)
    deadline = clock.monotonic() + 1.0

    reader = reader_of(clients, limits=ReadLimits(stall_s=60.0, deadline=deadline))
    with reader, pytest.raises(KafkaUnavailableError) as raised:
        reader.bounds()

    assert "time budget" in str(raised.value) and "partition 0" in str(raised.value)
    assert clock.monotonic() == pytest.approx(deadline)


def test_a_topic_that_does_not_exist_reads_as_empty() -> None:
    _, _, clients = east_with()

    with clients.reader(
        "east", "nope", what="test topic", group=GROUP, committed=True, limits=LIMITS
    ) as reader:
        assert reader.bounds() is None and not reader.state.exists
        assert list(reader.to_end()) == [] and not reader.state.exists
        assert list(reader.backwards(0)) == [] and not reader.state.exists
        assert reader.record_at(0, 0) is None


# ------------------------------------------------------------------------------ backward scans


def test_backward_windows_grow_by_the_factor_up_to_max_scan() -> None:
    _, east, clients = east_with()
    fill(east, 0, 1000)

    def windows(**scan: int) -> list[tuple[int, int]]:
        """(first offset, one past the last) of each window, in the order they came."""
        found = []
        for window in reader.backwards(0, first_window=10, growth=4, **scan):
            window_offsets = [m.offset() for m in window]
            first, last = window_offsets[0], window_offsets[-1]
            assert first is not None and last is not None
            assert window_offsets == list(range(first, last + 1))  # whole and in order
            found.append((first, last + 1))
        return found

    with reader_of(clients) as reader:
        assert windows(max_scan=500) == [(990, 1000), (950, 990), (790, 950), (500, 790)]
        assert windows(floor=960) == [(990, 1000), (960, 990)]
        east.delete_records(TOPIC, 0, 900)  # the log's start ends the scan
        assert windows() == [(990, 1000), (950, 990), (900, 950)]

        # A caller that found what it wanted stops asking; the reader reads on afterwards.
        newest = next(iter(reader.backwards(0, first_window=5)))
        assert [m.offset() for m in newest] == [995, 996, 997, 998, 999]
        found = reader.record_at(0, 950)
        assert found is not None and found.value() == b"0-950"


def test_a_backward_window_of_markers_and_aborted_records_comes_empty() -> None:
    _, east, clients = east_with()
    fill(east, 0, 5)
    for _ in range(4):
        east.append(TOPIC, 0, b"aborted", transaction="tx")
    east.end_transaction("tx", commit=False)  # 5..8 aborted, marker at 9

    with reader_of(clients) as reader:
        windows = [[m.offset() for m in w] for w in reader.backwards(0, first_window=5)]

    assert windows == [[], [0, 1, 2, 3, 4]]


# ------------------------------------------------------------------------------ single records


def test_record_at_is_none_only_where_no_record_is() -> None:
    _, east, clients = east_with()
    fill(east, 0, 5)  # 0..4
    east.append(TOPIC, 0, b"in a transaction", transaction="tx")  # 5
    east.end_transaction("tx")  # marker at 6
    east.append(TOPIC, 0, b"after")  # 7
    east.compact(TOPIC, 0, [2])
    east.delete_records(TOPIC, 0, 1)

    for committed in (True, False):
        with reader_of(clients, committed=committed) as reader:
            found = {offset: reader.record_at(0, offset) for offset in range(-1, 10)}
            assert {o: m.value() for o, m in found.items() if m is not None} == {
                1: b"0-1",
                3: b"0-3",
                4: b"0-4",
                5: b"in a transaction",
                7: b"after",
            }
            assert reader.record_at(1, 0) is None  # no such partition


def test_record_at_raises_when_the_cluster_does_not_answer() -> None:
    _, east, clients = east_with(partitions=2)
    fill(east, 0, 3)
    fill(east, 1, 3)
    east.lose_leader(TOPIC, 1)

    with reader_of(clients) as reader:
        with pytest.raises(KafkaUnavailableError, match="partition 1"):
            reader.record_at(1, 1)  # a record is there: a slow cluster is no absent record
        east.down = True
        with pytest.raises(KafkaUnavailableError):
            reader.record_at(0, 1)


# ------------------------------------------------------------------------------ the reader's life


def test_a_read_started_while_another_is_unfinished_supersedes_it() -> None:
    _, east, clients = east_with()
    fill(east, 0, 10)

    with reader_of(clients, limits=ReadLimits(stall_s=STALL_S, batch=2)) as reader:
        first = reader.forward({0: (0, 10)})
        assert [m.offset() for m in next(first)] == [0, 1]
        assert offsets(reader.forward({0: (6, 8)})) == {0: [6, 7]}
        assert list(first) == []  # it stopped: the later read took the consumer over
        assert offsets(reader.forward({0: (8, 10)})) == {0: [8, 9]}
        unfinished = reader.forward({0: (0, 10)})
        next(unfinished)
    assert list(unfinished) == []  # closing the reader ended it


def test_a_range_past_the_end_of_the_log_reads_nothing() -> None:
    clock, east, clients = east_with()
    fill(east, 0, 10)
    started = clock.monotonic()

    with reader_of(clients) as reader:
        # The consumer starts over from the log's start: what it hands out is not in the range.
        assert offsets(reader.forward({0: (50, 60)})) == {}
        assert reader.state.finished == {0} and reader.state.reached == {0: 50}

    assert clock.monotonic() - started < LIMITS.poll_s


def test_a_closed_reader_closes_its_consumer_and_reads_no_more() -> None:
    _, east, clients = east_with()
    fill(east, 0, 3)
    reader = reader_of(clients)
    reader.close()
    reader.close()

    assert clients.consumers[0].closed
    with pytest.raises(RuntimeError, match="closed"):
        reader.bounds()
    with pytest.raises(RuntimeError, match="closed"):
        list(reader.forward({0: (0, 3)}))


def test_read_limits_refuse_values_that_would_never_wait_or_never_read() -> None:
    for wrong in ({"stall_s": 0}, {"progress_log_s": -1}, {"poll_s": 0}, {"batch": 0}):
        with pytest.raises(ConfigError):
            ReadLimits(**wrong)
    _, _, clients = east_with()
    with reader_of(clients) as reader, pytest.raises(ConfigError):
        list(reader.backwards(0, growth=0))


def test_the_real_factory_builds_a_reader_on_a_real_consumer() -> None:
    # librdkafka checks the settings when the consumer is built; no broker is needed for that.
    topology = load_topology_text("name: one\nclusters:\n  east: {}\n")
    clients = KafkaClients(topology, {"east": "127.0.0.1:9"})

    with clients.reader("east", TOPIC, what="test topic", group=GROUP, committed=False) as reader:
        assert (reader.topic, reader.cluster) == (TOPIC, "east")
        assert reader.limits == ReadLimits()

    assert reader_settings(GROUP, committed=True)["isolation.level"] == "read_committed"
    uncommitted = reader_settings(GROUP, committed=False)
    assert uncommitted["isolation.level"] == "read_uncommitted"
    assert uncommitted["group.id"] == GROUP and uncommitted["enable.auto.commit"] is False
    assert uncommitted["enable.partition.eof"] is True
