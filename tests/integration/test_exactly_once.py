"""Exactly-once replication on real clusters: kill -9, fencing of a paused worker, slots moving
between workers, aborted source transactions never copied."""

from __future__ import annotations

import concurrent.futures
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
from checkpoint_support import AgentProcess, CheckpointTail, commit
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from replication_support import (
    Record,
    WorkerProcess,
    check_syncs_map_every_copy,
    create,
    wait_for,
    watermarks,
    write_topology,
)
from test_translate import (
    by_partition,
    check_moved_exactly,
    consume_and_commit,
    read_from,
    translate,
    translated,
)

from drsvc.devenv.environment import EnvironmentInfo
from failover import offset_syncs
from failover.checkpoints import CheckpointKey
from failover.slots import SlotNames, SlotProgress, slot_of

SLOTS = 4
#: a group's coordinator cannot answer yet: the group is new, or its coordinator moves or loads
COORDINATOR_NOT_READY = (
    KafkaError.NOT_COORDINATOR,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
)


def _topology(tmp_path: Path, pair: EnvironmentInfo, topic: str) -> Path:
    east, west = pair.clusters["east"], pair.clusters["west"]
    return write_topology(
        tmp_path / "eos.yaml",
        "eos",
        {"east": east, "west": west},
        [
            {
                "source": "east",
                "target": "west",
                "delivery": "exactly-once",
                "topics": {"include": [f"^{topic}$"]},
            }
        ],
    )


def _worker(topology: Path, log: Path, *extra: str) -> WorkerProcess:
    return WorkerProcess(topology, "east->west", log, "--slots", str(SLOTS), *extra)


def _produce_transactions(
    bootstrap: str, topic: str, partitions: int, first: int, count: int, abort_every: int
) -> set[bytes]:
    """Produce ``count`` committed sequence-numbered records in transactions of 500, with an
    aborted transaction (whose records must never be copied) after every ``abort_every``-th.
    Returns the committed values."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": f"eos-test-{uuid.uuid4()}",
            "linger.ms": 5,
        }
    )
    producer.init_transactions(30)
    committed: set[bytes] = set()
    seq = first
    batch = 0
    while seq < first + count:
        producer.begin_transaction()
        for _ in range(min(500, first + count - seq)):
            value = f"seq-{seq}".encode()
            producer.produce(topic, value, f"k{seq}".encode(), partition=seq % partitions)
            committed.add(value)
            seq += 1
        producer.commit_transaction(30)
        batch += 1
        if abort_every and batch % abort_every == 0:
            producer.begin_transaction()
            for n in range(50):
                producer.produce(topic, f"aborted-{seq}-{n}".encode(), partition=n % partitions)
            producer.flush(30)
            producer.abort_transaction(30)
    return committed


def committed_reader(bootstrap: str) -> Consumer:
    """A read_committed consumer that reports the end of each partition it is assigned."""
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "drsvc-test-reader",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )


def _read_committed(bootstrap: str, topic: str) -> list[Record]:
    """Every committed record of ``topic`` up to its last stable offset, by partition and offset.
    (A transactional log ends with a marker, so "offset + 1 == end" never holds: stop at EOF.)"""
    marks = watermarks(bootstrap, topic)
    consumer = committed_reader(bootstrap)
    records: list[Record] = []
    try:
        todo = {p for p, (low, high) in marks.items() if high > low}
        consumer.assign([TopicPartition(topic, p, marks[p][0]) for p in todo])
        deadline = time.monotonic() + 120
        while todo and time.monotonic() < deadline:
            for msg in consumer.consume(10_000, 1.0):
                p, offset = msg.partition(), msg.offset()
                assert p is not None and offset is not None
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        todo.discard(p)
                    continue
                records.append(
                    Record(
                        p, offset, msg.key(), msg.value(), list(msg.headers() or []),
                        msg.timestamp()[1],
                    )
                )  # fmt: skip
        assert not todo, f"could not read {topic} to its end: {todo}"
    finally:
        consumer.close()
    return sorted(records, key=lambda r: (r.partition, r.offset))


def _copied(west: str, remote: str) -> list[bytes]:
    return [r.value for r in _read_committed(west, remote) if r.value]


def _check_syncs(west: str, topic: str) -> None:
    syncs = []
    for record in _read_committed(west, "drsvc.offset-syncs.east"):
        assert record.key is not None and record.value is not None
        syncs.append(offset_syncs.decode_sync(record.key, record.value))
    check_syncs_map_every_copy(_read_committed(west, f"east.{topic}"), syncs, topic)


def _count_committed(west: str, remote: str) -> int:
    try:
        return len(_copied(west, remote))
    except KafkaException:
        return 0  # the remote topic is brand new: its leader is not known everywhere yet


def _assert_exactly(west: str, remote: str, expected: set[bytes]) -> None:
    values = _copied(west, remote)
    counts = Counter(values)
    duplicates = {v: n for v, n in counts.items() if n > 1}
    aborted = [v for v in values if v.startswith(b"aborted")]
    missing = expected - set(values)
    assert not aborted, f"{len(aborted)} aborted records copied, e.g. {aborted[:3]}"
    assert not duplicates, f"{len(duplicates)} duplicated, e.g. {list(duplicates.items())[:3]}"
    assert not missing, f"{len(missing)} missing, e.g. {sorted(missing)[:3]}"
    assert len(values) == len(expected)


def _in_order(west: str, remote: str) -> None:
    """Per partition, sequence numbers only grow (no re-ordering, no re-copy of a range)."""
    last: dict[int, int] = {}
    for record in _read_committed(west, remote):
        seq = int((record.value or b"seq-0").split(b"-")[1])
        assert seq > last.get(record.partition, -1), f"partition {record.partition} went back"
        last[record.partition] = seq


def _slot_owners(west: str, flow: SlotNames) -> dict[str, list[int]]:
    """Member client host/id -> slots, from the membership group on the target."""
    admin = AdminClient({"bootstrap.servers": west})
    described = admin.describe_consumer_groups([flow.membership_group])[flow.membership_group]
    try:
        group = described.result(30)
    except concurrent.futures.TimeoutError:
        return {}  # asked again by the caller's wait
    except KafkaException as err:
        # A group just created, or its coordinator moving or loading: not known yet.
        if err.args[0].code() in COORDINATOR_NOT_READY:
            return {}
        raise
    owners: dict[str, list[int]] = {}
    for member in group.members:
        owners[member.member_id] = sorted(tp.partition for tp in member.assignment.topic_partitions)
    return owners


def test_kill_minus_9_with_aborted_source_transactions(
    cluster_pair: EnvironmentInfo, tmp_path: Path
) -> None:
    east, west = cluster_pair.clusters["east"], cluster_pair.clusters["west"]
    topic = "eos-kill"
    create(east, topic, 6)
    topology = _topology(tmp_path, cluster_pair, topic)
    expected = _produce_transactions(east, topic, 6, 0, 60_000, abort_every=7)
    worker = _worker(topology, tmp_path / "w1.log")
    try:
        wait_for(lambda: _count_committed(west, f"east.{topic}") >= 15_000, 120, "first copies")
    finally:
        worker.kill()
    expected |= _produce_transactions(east, topic, 6, 60_000, 50_000, abort_every=5)
    worker = _worker(topology, tmp_path / "w2.log")
    try:
        wait_for(
            lambda: _count_committed(west, f"east.{topic}") >= len(expected),
            180,
            "every record after the restart",
        )
        time.sleep(2)  # would any duplicate still arrive?
    finally:
        worker.stop()
    assert worker.proc.returncode == 0, worker.log_tail()
    _assert_exactly(west, f"east.{topic}", expected)
    _in_order(west, f"east.{topic}")
    _check_syncs(west, topic)
    _check_progress(west, topic, 6)


def _check_progress(west: str, topic: str, partitions: int) -> None:
    """The committed progress on the target names the end of the source log once caught up."""
    reader = Consumer(
        {
            "bootstrap.servers": west,
            "group.id": SlotNames("east", "west").progress_group,
            "isolation.level": "read_committed",
        }
    )
    try:
        committed = reader.committed(
            [TopicPartition(f"east.{topic}", p) for p in range(partitions)], timeout=30
        )
    finally:
        reader.close()
    for tp in committed:
        progress = SlotProgress.decode(tp.metadata)
        assert progress.next_source_offset > 0
        assert slot_of(topic, tp.partition, SLOTS) in range(SLOTS)


def test_paused_worker_cannot_commit_after_its_slots_moved(
    cluster_pair: EnvironmentInfo, tmp_path: Path
) -> None:
    east, west = cluster_pair.clusters["east"], cluster_pair.clusters["west"]
    topic = "eos-pause"
    create(east, topic, 4)
    topology = _topology(tmp_path, cluster_pair, topic)
    expected = _produce_transactions(east, topic, 4, 0, 20_000, abort_every=4)
    first = _worker(topology, tmp_path / "first.log")
    second: WorkerProcess | None = None
    try:
        wait_for(lambda: _count_committed(west, f"east.{topic}") >= 20_000, 120, "first copies")
        second = _worker(topology, tmp_path / "second.log")
        wait_for(lambda: len(_slot_owners(west, SlotNames("east", "west"))) == 2, 60, "two members")
        # Pause the first worker in the middle of a stream: its slots move to the second.
        expected |= _produce_transactions(east, topic, 4, 20_000, 20_000, abort_every=3)
        os.kill(first.proc.pid, signal.SIGSTOP)
        try:
            wait_for(
                lambda: len(_slot_owners(west, SlotNames("east", "west"))) == 1,
                60,
                "the paused worker to lose its slots",
            )
            expected |= _produce_transactions(east, topic, 4, 40_000, 20_000, abort_every=3)
            wait_for(
                lambda: _count_committed(west, f"east.{topic}") >= len(expected),
                120,
                "the second worker to copy everything",
            )
        finally:
            os.kill(first.proc.pid, signal.SIGCONT)
        # Resumed, the first worker still holds open transactions: they must not commit.
        expected |= _produce_transactions(east, topic, 4, 60_000, 10_000, abort_every=0)
        wait_for(lambda: _count_committed(west, f"east.{topic}") >= len(expected), 120, "the rest")
        time.sleep(5)
    finally:
        first.stop()
        if second is not None:
            second.stop()
    _assert_exactly(west, f"east.{topic}", expected)
    _in_order(west, f"east.{topic}")
    _check_syncs(west, topic)


def test_slots_move_between_workers_without_loss_or_duplicates(
    cluster_pair: EnvironmentInfo, tmp_path: Path
) -> None:
    east, west = cluster_pair.clusters["east"], cluster_pair.clusters["west"]
    topic = "eos-scale"
    create(east, topic, 8)
    topology = _topology(tmp_path, cluster_pair, topic)
    flow = SlotNames("east", "west")
    expected = _produce_transactions(east, topic, 8, 0, 20_000, abort_every=0)
    workers = [_worker(topology, tmp_path / "a.log"), _worker(topology, tmp_path / "b.log")]
    try:
        wait_for(
            lambda: len(_slot_owners(west, flow)) == 2 and all(_slot_owners(west, flow).values()),
            90,
            "two members with slots",
        )
        owners = _slot_owners(west, flow)
        assert sorted(s for slots in owners.values() for s in slots) == list(range(SLOTS))
        assert all(slots for slots in owners.values()), f"one worker has no slot: {owners}"
        expected |= _produce_transactions(east, topic, 8, 20_000, 20_000, abort_every=0)
        # Stop one cleanly mid-stream: its slots move to the other.
        workers[0].stop()
        assert workers[0].proc.returncode == 0, workers[0].log_tail()
        wait_for(lambda: len(_slot_owners(west, flow)) == 1, 60, "one member left")
        expected |= _produce_transactions(east, topic, 8, 40_000, 20_000, abort_every=0)
        # A third worker joins: slots are shared again.
        workers.append(_worker(topology, tmp_path / "c.log"))
        wait_for(lambda: len(_slot_owners(west, flow)) == 2, 90, "the third worker to join")
        wait_for(lambda: all(s for s in _slot_owners(west, flow).values()), 60, "slots rebalanced")
        expected |= _produce_transactions(east, topic, 8, 60_000, 20_000, abort_every=0)
        wait_for(
            lambda: _count_committed(west, f"east.{topic}") >= len(expected), 180, "every record"
        )
        time.sleep(3)
    finally:
        for worker in workers:
            worker.stop()
    _assert_exactly(west, f"east.{topic}", expected)
    _in_order(west, f"east.{topic}")
    _check_syncs(west, topic)


@pytest.mark.parametrize("slots", ["0", "2000"])
def test_bad_slot_count_is_refused(
    cluster_pair: EnvironmentInfo, tmp_path: Path, slots: str
) -> None:
    topology = _topology(tmp_path, cluster_pair, "eos-bad")
    log = tmp_path / f"bad-{slots}.log"
    worker = WorkerProcess(topology, "east->west", log, "--slots", slots)
    worker.proc.wait(60)
    assert worker.proc.returncode == 2
    assert "slots" in json.dumps(log.read_text())


def test_pause_resume_and_throttle_in_exactly_once_mode(
    cluster_pair: EnvironmentInfo, tmp_path: Path
) -> None:
    east, west = cluster_pair.clusters["east"], cluster_pair.clusters["west"]
    consul = cluster_pair.consul_http_addr
    assert consul is not None
    topic = "eos-ctl"
    create(east, topic, 2)
    topology = _topology(tmp_path, cluster_pair, topic)

    def flow_cli(*args: str) -> None:
        subprocess.run(
            [sys.executable, "-m", "drsvc.cli.main", "flow", *args, "east->west", "-t",
             str(topology), "--consul", consul],
            check=True, capture_output=True, timeout=60,
        )  # fmt: skip

    worker = _worker(topology, tmp_path / "ctl.log", "--consul", consul)
    try:
        expected = _produce_transactions(east, topic, 2, 0, 1000, abort_every=0)
        wait_for(lambda: _count_committed(west, f"east.{topic}") >= 1000, 60, "first copies")
        flow_cli("pause", "--topic", topic)
        wait_for(lambda: "paused 2 partition(s)" in worker.log_tail(200), 30, "the pause")
        expected |= _produce_transactions(east, topic, 2, 1000, 1000, abort_every=2)
        time.sleep(6)  # more than a refresh interval: a paused topic copies nothing
        assert _count_committed(west, f"east.{topic}") == 1000
        flow_cli("resume", "--topic", topic)
        wait_for(lambda: _count_committed(west, f"east.{topic}") >= 2000, 60, "after resume")
        flow_cli("throttle", "--bytes-per-s", "50000")
        wait_for(lambda: '"throttle_bytes_per_s":50000' in worker.log_tail(200).replace(" ", ""),
                 30, "the throttle")  # fmt: skip
        started = time.monotonic()
        big = Producer({"bootstrap.servers": east})
        for n in range(200):
            big.produce(topic, f"seq-{2000 + n}".encode() + b"x" * 1000, partition=n % 2)
            expected.add(f"seq-{2000 + n}".encode() + b"x" * 1000)
        big.flush(30)
        wait_for(lambda: _count_committed(west, f"east.{topic}") >= 2200, 60, "throttled copies")
        # 200 kB at 50 kB/s cannot take less than about 3 s, however fast the machine.
        assert time.monotonic() - started >= 2.5
        flow_cli("throttle")
    finally:
        worker.stop()
    assert worker.proc.returncode == 0, worker.log_tail()
    _assert_exactly(west, f"east.{topic}", expected)


def test_exact_translation_through_transactional_syncs(
    cluster_pair: EnvironmentInfo, tmp_path: Path
) -> None:
    """Syncs written in the slots' transactions translate a group exactly: the copies' offsets
    skip the transaction markers of the target, the source's skip its own and aborted records."""
    east, west = cluster_pair.clusters["east"], cluster_pair.clusters["west"]
    topic = "eos-tr"
    create(east, topic, 3)
    topology = _topology(tmp_path, cluster_pair, topic)
    expected = _produce_transactions(east, topic, 3, 0, 6000, abort_every=2)
    worker = _worker(topology, tmp_path / "tr.log")
    try:
        wait_for(lambda: _count_committed(west, f"east.{topic}") >= len(expected), 90, "copies")
    finally:
        worker.stop()
    everything = by_partition(east, topic)
    # Partition 0 read to its end, 1 a third of the way, 2 not at all.
    stops = {
        0: everything[0][-1][0] + 1,
        1: everything[1][len(everything[1]) // 3][0],
        2: everything[2][0][0],
    }
    consumed = consume_and_commit(east, topic, "eos-tr-group", stops, "read_committed")
    result = translate(topology, "eos-tr-group", "east", "west")
    rows = translated(result, f"east.{topic}")
    assert result["exact"], result
    starts = {p: row["target_offset"] for p, row in rows.items()}
    after = read_from(west, f"east.{topic}", "eos-tr-group", starts, "read_committed")
    check_moved_exactly(everything, consumed, after)


def test_checkpoints_follow_a_transactional_sync_topic(
    cluster_pair: EnvironmentInfo, tmp_path: Path
) -> None:
    """The checkpoint stream keeps up with an exactly-once flow, whose sync topic has a commit
    marker after every transaction, and its checkpoints equal ``drsvc translate``'s answer."""
    east, west = cluster_pair.clusters["east"], cluster_pair.clusters["west"]
    topic = "eos-ck"
    create(east, topic, 2)
    topology = _topology(tmp_path, cluster_pair, topic)
    expected = _produce_transactions(east, topic, 2, 0, 4000, abort_every=3)
    worker = _worker(topology, tmp_path / "ck-worker.log")
    agent = AgentProcess(topology, tmp_path / "ck-agent.log", tmp_path)
    tail: CheckpointTail | None = None
    try:
        wait_for(lambda: _count_committed(west, f"east.{topic}") >= len(expected), 90, "copies")
        # Many more transactions while the agent follows: markers everywhere in the syncs.
        expected |= _produce_transactions(east, topic, 2, 4000, 6000, abort_every=4)
        wait_for(lambda: _count_committed(west, f"east.{topic}") >= len(expected), 90, "more")
        tail = CheckpointTail(west, "east.checkpoints.internal")
        everything = by_partition(east, topic)
        stops = {p: records[len(records) // 2][0] for p, records in everything.items()}
        commit(east, "eos-ck-group", topic, stops)
        seen = {
            p: tail.wait_for(CheckpointKey("eos-ck-group", f"east.{topic}", p), stop, 60)[1]
            for p, stop in stops.items()
        }
        rows = translated(translate(topology, "eos-ck-group", "east", "west"), f"east.{topic}")
        for p, checkpoint in seen.items():
            assert checkpoint.target_offset == rows[p]["target_offset"] is not None, (
                agent.log_tail()
            )
    finally:
        if tail is not None:
            tail.close()
        assert agent.stop() == 0, agent.log_tail()
        worker.stop()
