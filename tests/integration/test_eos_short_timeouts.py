"""Exactly-once replication to a target with short timeouts (real brokers, a cluster of its own
with broker overrides): progress of idle and paused partitions outlives the target's offsets
retention, and a transaction the coordinator aborts for its timeout is retaken promptly."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from replication_support import (
    WorkerProcess,
    create,
    produce,
    wait_for,
    watermarks,
    write_topology,
)
from test_exactly_once import _read_committed, committed_reader

from drsvc.devenv.environment import EnvironmentInfo, LocalEnvironment
from failover import offset_syncs
from failover.slots import SlotNames, SlotProgress

TARGET = "eosshort"
RETENTION_S = 60
SHORT = {
    # Group offsets expire a minute after their last commit, checked every two seconds.
    "offsets.retention.minutes": "1",
    "offsets.retention.check.interval.ms": "2000",
    # The coordinator looks for timed-out transactions every second (default: ten).
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
}
FLOW = SlotNames("east", TARGET)


@pytest.fixture(scope="module")
def short_target(local_env: LocalEnvironment, cluster_pair: EnvironmentInfo) -> EnvironmentInfo:
    """``east`` (from the shared pair) and a target cluster with the short timeouts above."""
    return local_env.up(["east", TARGET], broker_overrides={TARGET: SHORT})


def _topology(tmp_path: Path, env: EnvironmentInfo, topics: list[str]) -> Path:
    return write_topology(
        tmp_path / "eos-short.yaml",
        "eos-short",
        {"east": env.clusters["east"], TARGET: env.clusters[TARGET]},
        [
            {
                "source": "east",
                "target": TARGET,
                "delivery": "exactly-once",
                "topics": {"include": [f"^{t}$" for t in topics]},
            }
        ],
    )


def _worker(topology: Path, log: Path, *extra: str) -> WorkerProcess:
    return WorkerProcess(topology, f"east->{TARGET}", log, "--slots", "2", *extra)


def _values(bootstrap: str, topic: str, timeout_s: float = 20.0) -> list[bytes]:
    """Committed values of ``topic`` up to the end offsets it had when called.

    Not "to the end": while a worker keeps committing transactions every 200 ms, a fetch at the
    last stable offset waits for the next commit instead of coming back empty, so the reader may
    never see an end-of-partition event (one CI run waited 120 s for one). Stops at the offsets
    of the call's start, at an end-of-partition event, or after ``timeout_s`` with what it read:
    callers wait for "at least" conditions and ask again."""
    try:
        marks = watermarks(bootstrap, topic)
    except KafkaException:
        return []  # a brand-new remote topic may not be readable yet
    ends = {p: high for p, (low, high) in marks.items() if high > low}
    consumer = committed_reader(bootstrap)
    values: list[bytes] = []
    try:
        consumer.assign([TopicPartition(topic, p, marks[p][0]) for p in ends])
        deadline = time.monotonic() + timeout_s
        while ends and time.monotonic() < deadline:
            for msg in consumer.consume(10_000, 0.5):
                p, offset, err = msg.partition(), msg.offset(), msg.error()
                if p is None or p not in ends:
                    continue
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        del ends[p]
                    continue
                end = ends[p]
                if offset is not None and offset < end and msg.value() is not None:
                    values.append(msg.value())
                if offset is None or offset >= end - 1:
                    del ends[p]  # the last offset may be a marker: the next record is past it
    except KafkaException:
        return values
    finally:
        consumer.close()
    return values


def _check_sequences(bootstrap: str, remote: str, expected: set[bytes]) -> None:
    """Every expected record exactly once, and per partition in source order."""
    records = _read_committed(bootstrap, remote)
    values = [r.value for r in records if r.value is not None]
    duplicated = {v: n for v, n in Counter(values).items() if n > 1}
    missing = expected - set(values)
    assert not duplicated, f"{len(duplicated)} duplicated in {remote}, e.g. {list(duplicated)[:3]}"
    assert not missing, f"{len(missing)} missing in {remote}, e.g. {sorted(missing)[:3]}"
    assert set(values) == expected
    last: dict[int, int] = {}
    for record in records:
        seq = int((record.value or b"").split(b"-")[-1])
        assert seq > last.get(record.partition, -1), f"{remote}-{record.partition} went back"
        last[record.partition] = seq


def _committed(
    bootstrap: str, group: str, tps: list[tuple[str, int]]
) -> dict[tuple[str, int], TopicPartition]:
    reader = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed"}
    )
    try:
        found = reader.committed([TopicPartition(t, p) for t, p in tps], timeout=30)
    finally:
        reader.close()
    return {(tp.topic, tp.partition): tp for tp in found if tp.offset >= 0}


def _records(
    topic: str, partition: int, first: int, count: int
) -> list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]], int]]:
    now = int(time.time() * 1000)
    return [
        (partition, None, f"{topic}-{partition}-{seq}".encode(), [], now)
        for seq in range(first, first + count)
    ]


def _syncs(bootstrap: str) -> list[offset_syncs.OffsetSync]:
    syncs = []
    for record in _read_committed(bootstrap, "drsvc.offset-syncs.east"):
        assert record.key is not None and record.value is not None
        syncs.append(offset_syncs.decode_sync(record.key, record.value))
    return syncs


def _canary_commit(bootstrap: str, group: str) -> None:
    """An offset committed in a transaction, as the worker's progress is, then never again."""
    create(bootstrap, f"{group}-topic", 1)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": group})
    producer.init_transactions(30)
    producer.begin_transaction()
    metadata = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    producer.send_offsets_to_transaction(
        [TopicPartition(f"{group}-topic", 0, 1)], metadata.consumer_group_metadata(), 30
    )
    producer.commit_transaction(30)
    metadata.close()


def test_idle_and_paused_partitions_keep_their_progress_past_the_offsets_retention(  # noqa: PLR0915 (one scenario)
    short_target: EnvironmentInfo, tmp_path: Path
) -> None:
    east, target = short_target.clusters["east"], short_target.clusters[TARGET]
    consul = short_target.consul_http_addr
    assert consul is not None
    busy, paused = "eos-idle", "eos-paused"
    create(east, busy, 2)
    create(east, paused, 1)
    topology = _topology(tmp_path, short_target, [busy, paused])
    expected: dict[str, set[bytes]] = {busy: set(), paused: set()}

    def add(topic: str, partition: int, first: int, count: int) -> None:
        records = _records(topic, partition, first, count)
        produce(east, topic, records)
        expected[topic] |= {r[2] for r in records if r[2] is not None}

    def flow_cli(*args: str) -> None:
        subprocess.run(
            [sys.executable, "-m", "drsvc.cli.main", "flow", *args, f"east->{TARGET}", "-t",
             str(topology), "--consul", consul],
            check=True, capture_output=True, timeout=60,
        )  # fmt: skip

    def copied_all() -> bool:
        return all(
            set(_values(target, f"east.{topic}")) >= values for topic, values in expected.items()
        )

    extra = ("--consul", consul, "--progress-refresh-s", "5", "--sync-keepalive-s", "10")
    add(busy, 0, 0, 100)
    add(busy, 1, 0, 100)
    add(paused, 0, 0, 100)
    worker = _worker(topology, tmp_path / "idle-1.log", *extra)
    try:
        wait_for(copied_all, 90, "the first copies")
        flow_cli("pause", "--topic", paused)
        wait_for(lambda: "paused 1 partition(s)" in worker.log_tail(300), 30, "the pause")
        # Proof that the target really expires offsets like the worker's: a transactional commit
        # for a group without members, made once.
        canary = f"eos-canary-{time.time_ns()}"
        _canary_commit(target, canary)
        assert _committed(target, canary, [(f"{canary}-topic", 0)])
        idle_since = time.monotonic()
        # Partition 0 of the busy topic keeps moving; its partition 1 is idle, the other topic
        # paused, for longer than the target keeps offsets of a group without members.
        seq = 100
        while time.monotonic() - idle_since < RETENTION_S + 15:
            add(busy, 0, seq, 10)
            seq += 10
            time.sleep(3)
        wait_for(copied_all, 60, "partition 0's copies")
        assert not _committed(target, canary, [(f"{canary}-topic", 0)]), "nothing expired"
    finally:
        worker.kill()
    # The idle partition's last copy (source 99) was written again as keepalive syncs.
    keepalives = [
        sync
        for sync in _syncs(target)
        if (sync.topic, sync.partition) == (busy, 1)
        and len(sync.segments) == 1
        and sync.segments[0].length == 1
        and (sync.source_begin, sync.source_end) == (99, 100)
    ]
    assert len(keepalives) >= 2, f"{len(keepalives)} keepalive syncs for {busy}-1"
    progress = _committed(
        target,
        FLOW.progress_group,
        [(f"east.{busy}", 0), (f"east.{busy}", 1), (f"east.{paused}", 0)],
    )
    assert set(progress) == {(f"east.{busy}", 0), (f"east.{busy}", 1), (f"east.{paused}", 0)}, (
        f"progress expired: only {sorted(progress)} left"
    )
    assert SlotProgress.decode(progress[(f"east.{busy}", 1)].metadata).next_source_offset == 100
    assert SlotProgress.decode(progress[(f"east.{paused}", 0)].metadata).next_source_offset == 100
    # After the restart (kill -9 above), more records everywhere: each is copied once.
    add(busy, 0, seq, 50)
    add(busy, 1, 100, 50)
    add(paused, 0, 100, 50)
    worker = _worker(topology, tmp_path / "idle-2.log", *extra)
    try:
        wait_for(lambda: "paused 1 partition(s)" in worker.log_tail(300), 60, "the pause again")
        flow_cli("resume", "--topic", paused)
        wait_for(copied_all, 90, "every record after the restart")
        time.sleep(2)  # would a duplicate still arrive?
    finally:
        worker.stop()
    assert worker.proc.returncode == 0, worker.log_tail()
    for topic, values in expected.items():
        _check_sequences(target, f"east.{topic}", values)


def test_a_transaction_the_coordinator_timed_out_is_retaken_promptly(
    short_target: EnvironmentInfo, tmp_path: Path
) -> None:
    """The worker stalls (SIGSTOP) for longer than its transaction timeout but far shorter than
    the membership session: the coordinator aborts the open transactions and fences their
    producers, the slots stay ours. The worker must take them again at once (not after the 15 s
    it waits for a real takeover) and copy every record exactly once."""
    east, target = short_target.clusters["east"], short_target.clusters[TARGET]
    topic = "eos-slow"
    create(east, topic, 2)
    topology = _topology(tmp_path, short_target, [topic])
    remote = f"east.{topic}"
    expected: set[bytes] = set()
    stop_producing = threading.Event()

    def keep_producing() -> None:
        producer = Producer({"bootstrap.servers": east, "linger.ms": 5, "enable.idempotence": True})
        seq = 0
        while not stop_producing.is_set():
            for partition in (0, 1):
                value = f"{topic}-{partition}-{seq}".encode()
                producer.produce(topic, value, partition=partition)
                expected.add(value)
            seq += 1
            producer.poll(0)
            time.sleep(0.005)
        assert producer.flush(30) == 0

    writer = threading.Thread(target=keep_producing, daemon=True)
    worker = _worker(topology, tmp_path / "slow.log", "--transaction-timeout-ms", "2000")
    writer.start()
    try:
        wait_for(lambda: len(_values(target, remote)) >= 1000, 90, "the first copies")
        # At least three stalls, and more (up to six) until one caught a transaction open: a
        # stall that begins between two transactions leaves nothing for the coordinator to time
        # out (one CI run in many had none in three).
        for stall in range(6):
            timed_out = "timed out on the coordinator" in worker.log_file.read_text(
                errors="replace"
            )
            if stall >= 3 and timed_out:
                break
            os.kill(worker.proc.pid, signal.SIGSTOP)
            try:
                time.sleep(4)  # past the 2 s timeout and the 1 s abort check; session is 10 s
            finally:
                os.kill(worker.proc.pid, signal.SIGCONT)
            before = len(_values(target, remote))
            # A slot fenced after a takeover waits 15 s: progress within 8 s rules that out.
            wait_for(
                lambda: len(_values(target, remote)) > before + 200,  # noqa: B023 (used at once)
                8,
                "copies right after the stall",
            )
            time.sleep(2)
        stop_producing.set()
        writer.join(30)
        wait_for(lambda: set(_values(target, remote)) >= expected, 60, "every record")
        time.sleep(2)  # would a duplicate still arrive?
    finally:
        stop_producing.set()
        worker.stop()
    log = worker.log_file.read_text(errors="replace")
    assert worker.proc.returncode == 0, worker.log_tail()
    assert "timed out on the coordinator" in log, "no transaction was timed out: nothing tested"
    assert "taken over by another worker" not in log, worker.log_tail(80)
    _check_sequences(target, remote, expected)
