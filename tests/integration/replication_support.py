"""Helpers for replication tests on real clusters: topologies, workloads, workers, reads."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from drsvc.kafka.admin import admin_client, create_topic
from drsvc.kafka.errors import LEADERLESS as _NO_LEADER
from drsvc.kafka.errors import UNAVAILABLE
from failover import offset_syncs, provenance
from failover.topic_rules import InternalTopicNames

#: answers of a partition whose leadership is settling (a broker just restarted)
LEADERLESS = _NO_LEADER | UNAVAILABLE

Headers = list[tuple[str, bytes | None]]


@dataclass(frozen=True)
class Record:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers
    timestamp: int


def write_topology(
    path: Path, name: str, clusters: dict[str, str], flows: list[dict[str, Any]]
) -> Path:
    """Write a topology file (JSON is YAML) with explicit bootstrap servers."""
    document = {
        "name": name,
        "clusters": {alias: {"bootstrap_servers": bs} for alias, bs in clusters.items()},
        "flows": flows,
    }
    path.write_text(json.dumps(document, indent=2))
    return path


def produce(
    bootstrap: str,
    topic: str,
    records: Sequence[tuple[int, bytes | None, bytes | None, Headers, int]],
) -> None:
    """Produce ``(partition, key, value, headers, timestamp)`` tuples and wait for all acks."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
    errors: list[str] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(err.str())

    for i, (partition, key, value, headers, timestamp) in enumerate(records):
        while True:
            try:
                producer.produce(
                    topic,
                    value,
                    key,
                    partition=partition,
                    headers=headers,
                    timestamp=timestamp,
                    on_delivery=on_delivery,
                )
                break
            except BufferError:
                producer.poll(0.1)
        if i % 5000 == 0:
            producer.poll(0)
    remaining = producer.flush(60)
    assert remaining == 0 and not errors, f"producing to {topic}: {remaining} left, {errors[:3]}"


def sequence_records(
    count: int, partitions: int, first: int = 0, tag: str = ""
) -> list[tuple[int, bytes | None, bytes | None, Headers, int]]:
    """Sequence-numbered records spread over ``partitions``, with varied headers and timestamps."""
    base_ts = int(time.time() * 1000) - 3_600_000
    out: list[tuple[int, bytes | None, bytes | None, Headers, int]] = []
    for seq in range(first, first + count):
        headers: Headers = [("seq", str(seq).encode())]
        if seq % 3 == 0:
            headers += [("null", None), ("empty", b""), ("seq", b"dup")]
        key = None if seq % 7 == 0 else f"k{seq}".encode()
        out.append((seq % partitions, key, f"{tag}{seq}".encode(), headers, base_ts + seq))
    return out


def create(
    bootstrap: str, topic: str, partitions: int, settings: Mapping[str, str] | None = None
) -> None:
    """Create ``topic``; ``settings``: an administrator's client settings (a secured cluster)."""
    admin = admin_client(bootstrap, settings)
    assert create_topic(admin, topic, partitions), f"{topic} already existed"


def topics_of(bootstrap: str, settings: Mapping[str, str] | None = None) -> set[str]:
    return set(admin_client(bootstrap, settings).list_topics(timeout=10).topics)


def watermarks(bootstrap: str, topic: str, timeout_s: float = 30.0) -> dict[int, tuple[int, int]]:
    """(log start, log end) of every partition of ``topic``; empty if it does not exist.

    Retries while leadership settles: a cluster whose broker just restarted answers "not leader"
    for a few seconds."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "drsvc-test-reader"})
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            try:
                metadata = consumer.list_topics(topic, timeout=10).topics.get(topic)
                if metadata is None or metadata.error is not None:
                    return {}
                return {
                    p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
                    for p in metadata.partitions
                }
            except KafkaException as err:
                if err.args[0].code() not in LEADERLESS or time.monotonic() >= deadline:
                    raise
                time.sleep(0.5)
    finally:
        consumer.close()


def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    return {p: high for p, (_low, high) in watermarks(bootstrap, topic).items()}


def read_all(bootstrap: str, topic: str, isolation: str = "read_uncommitted") -> list[Record]:
    """Every record of ``topic`` up to its current end, ordered by partition and offset."""
    marks = watermarks(bootstrap, topic)
    ends = {p: high for p, (_low, high) in marks.items()}
    starts = {p: low for p, (low, _high) in marks.items()}
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "drsvc-test-reader",
            "enable.auto.commit": False,
            "isolation.level": isolation,
        }
    )
    records: list[Record] = []
    try:
        todo = {p: end for p, end in ends.items() if end > starts.get(p, 0)}
        consumer.assign([TopicPartition(topic, p, starts.get(p, 0)) for p in todo])
        deadline = time.monotonic() + 120
        while todo and time.monotonic() < deadline:
            for msg in consumer.consume(10_000, 1.0):
                if msg.error() is not None:
                    continue
                p, offset = msg.partition(), msg.offset()
                assert p is not None and offset is not None
                records.append(
                    Record(
                        p,
                        offset,
                        msg.key(),
                        msg.value(),
                        list(msg.headers() or []),
                        msg.timestamp()[1],
                    )
                )
                if offset + 1 >= todo.get(p, 0):
                    todo.pop(p, None)
        assert not todo, f"could not read {topic} to its end: {todo}"
    finally:
        consumer.close()
    return sorted(records, key=lambda r: (r.partition, r.offset))


def read_syncs(bootstrap: str, source_alias: str) -> list[offset_syncs.OffsetSync]:
    topic = InternalTopicNames().offset_syncs_topic(source_alias)
    syncs = []
    for record in read_all(bootstrap, topic):
        assert record.key is not None and record.value is not None
        syncs.append(offset_syncs.decode_sync(record.key, record.value))
    return syncs


def original_headers(record: Record) -> Headers:
    return [(k, v) for k, v in record.headers if k != provenance.PROVENANCE_HEADER]


def wait_for(
    predicate: Callable[[], bool], timeout_s: float, what: str, interval_s: float = 0.5
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval_s)
    raise AssertionError(f"timed out after {timeout_s:.0f}s waiting for {what}")


def check_syncs_map_every_copy(
    target_records: list[Record], syncs: list[offset_syncs.OffsetSync], source_topic: str
) -> None:
    """Every copy on the target is mapped by a sync to the source offset its provenance names,
    and every mapping a sync claims points at such a copy."""
    claimed: dict[tuple[int, int], int] = {}
    for sync in syncs:
        if sync.topic != source_topic:
            continue
        for source_offset, target_offset in sync.copies():
            previous = claimed.setdefault((sync.partition, target_offset), source_offset)
            assert previous == source_offset, f"two syncs disagree on target offset {target_offset}"
    copies = {}
    for record in target_records:
        hops = provenance.chain(record.headers)
        assert hops, f"target record {record.partition}@{record.offset} has no provenance"
        copies[(record.partition, record.offset)] = hops[-1].offset
    unmapped = sorted(set(copies) - set(claimed))
    phantom = sorted(set(claimed) - set(copies))
    wrong = sorted(k for k in set(claimed) & set(copies) if claimed[k] != copies[k])
    assert not (unmapped or phantom or wrong), (
        f"{len(unmapped)} copies without a sync (first {unmapped[:5]}), "
        f"{len(phantom)} sync claims without a copy (first {phantom[:5]}), "
        f"{len(wrong)} claims naming another source offset "
        f"(first {[(k, claimed[k], copies[k]) for k in wrong[:5]]})"
    )


class WorkerProcess:
    """A ``drsvc replicate`` process for one flow, logging to a file."""

    def __init__(self, topology: Path, flow: str, log_file: Path, *extra: str) -> None:
        self.log_file = log_file
        self._log = log_file.open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "drsvc.cli.main", "replicate", "-t", str(topology),
             "--flow", flow, "--report-every-s", "1", *extra],
            stdout=self._log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )  # fmt: skip

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])

    def stop(self, timeout_s: float = 60) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        self._log.close()


@contextmanager
def running_workers(
    topology: Path, flows: Sequence[str], log_dir: Path, *extra: str
) -> Iterator[list[WorkerProcess]]:
    workers = [
        WorkerProcess(topology, flow, log_dir / f"worker-{flow.replace('->', '-to-')}.log", *extra)
        for flow in flows
    ]
    try:
        yield workers
    finally:
        for worker in workers:
            worker.stop()
        for worker in workers:
            assert worker.proc.returncode == 0, (
                f"worker exited with {worker.proc.returncode}:\n{worker.log_tail()}"
            )
