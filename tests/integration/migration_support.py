"""Helpers for migration tests on real clusters and a real Consul: producers of an application
that follow its active cluster, consumer groups that read part of their topics and commit, the
migration CLI as a subprocess, and committed offsets as Kafka reports them."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from typer.testing import CliRunner

from drsvc.adapters.consul_client import ConsulClient
from drsvc.cli.main import build_app
from failover.active import decode_active
from failover.naming import app_active_key

Partition = tuple[str, int]


def partition_count(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "drsvc-test-meta"})
    try:
        meta = consumer.list_topics(topic, timeout=10).topics[topic]
        return len(meta.partitions)
    finally:
        consumer.close()


@dataclass
class AppProducer:
    """Writes records (``<topic>:<seq>``) round-robin to an application's topics on whichever
    cluster its active key names, pausing while it is none; each small batch is acknowledged
    before the key is read again, so nothing is in flight when the cluster changes. Records of
    ``timed_topics`` get explicit timestamps (an hour back) and headers."""

    consul: ConsulClient
    namespace: str
    app: str
    bootstraps: Mapping[str, str]
    topics: Sequence[str]
    timed_topics: Sequence[str] = ()
    interval_s: float = 0.02
    acked: list[tuple[str, str, bytes]] = field(default_factory=list)
    clusters_seen: list[str | None] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _errors: list[str] = field(default_factory=list)

    def start(self) -> AppProducer:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> list[tuple[str, str, bytes]]:
        self._stop.set()
        assert self._thread is not None
        self._thread.join(60)
        assert not self._errors, self._errors[:3]
        return self.acked

    def on(self, cluster: str, topic: str) -> list[bytes]:
        return [v for c, t, v in self.acked if c == cluster and t == topic]

    def _run(self) -> None:
        producers: dict[str, Producer] = {}
        seq = 0
        base_ts = int(time.time() * 1000) - 3_600_000
        key = app_active_key(self.namespace, self.app)
        while not self._stop.is_set():
            cluster = decode_active(self.consul.kv_get(key), "east").cluster
            if not self.clusters_seen or self.clusters_seen[-1] != cluster:
                self.clusters_seen.append(cluster)
            if cluster is None:
                time.sleep(0.05)
                continue
            producer = producers.get(cluster)
            if producer is None:
                producer = Producer(
                    {"bootstrap.servers": self.bootstraps[cluster], "acks": "all",
                     "enable.idempotence": True, "linger.ms": 2}
                )  # fmt: skip
                producers[cluster] = producer
            for topic in self.topics:
                value = f"{topic}:{seq:07d}".encode()

                def acked(err: Any, _msg: Any, c: str = cluster, t: str = topic,
                          v: bytes = value) -> None:  # fmt: skip
                    if err is None:
                        self.acked.append((c, t, v))
                    else:
                        self._errors.append(err.str())

                extra: dict[str, Any] = {}
                if topic in self.timed_topics:
                    extra = {
                        "timestamp": base_ts + seq,
                        "headers": [("trace", f"t-{seq}".encode()), ("empty", b"")],
                    }
                producer.produce(
                    topic, value=value, key=f"k{seq % 50}".encode(), on_delivery=acked, **extra
                )
            producer.flush(10)
            seq += 1
            time.sleep(self.interval_s)
        for producer in producers.values():
            producer.flush(10)


def consume_some(
    bootstrap: str, group: str, topics: Sequence[str], fraction: float
) -> tuple[list[bytes], dict[Partition, int]]:
    """Group ``group`` reads ``fraction`` of what each partition of ``topics`` holds past its
    committed offset (or the start), and commits where it stopped. Returns what it read and the
    offsets it committed (every partition it has read, ever, with ``committed`` after)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
         "enable.partition.eof": True}
    )  # fmt: skip
    values: list[bytes] = []
    try:
        partitions = [
            TopicPartition(t, p) for t in topics for p in range(partition_count(bootstrap, t))
        ]
        committed = {
            (tp.topic, tp.partition): tp.offset
            for tp in consumer.committed(partitions, timeout=10)
            if tp.offset >= 0
        }
        starts: dict[Partition, int] = {}
        stops: dict[Partition, int] = {}
        for tp in partitions:
            low, high = consumer.get_watermark_offsets(tp, timeout=10)
            key = (tp.topic, tp.partition)
            starts[key] = committed.get(key, low)
            stops[key] = starts[key] + int((high - starts[key]) * fraction)
        todo = {k for k in stops if stops[k] > starts[k]}
        if todo:
            consumer.assign([TopicPartition(t, p, starts[(t, p)]) for t, p in todo])
        deadline = time.monotonic() + 60
        while todo:
            assert time.monotonic() < deadline, f"{group}: not read up to {stops}"
            for msg in consumer.consume(500, 1.0):
                key = (msg.topic(), msg.partition())
                offset = msg.offset()
                if msg.error() is not None:
                    assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                    continue
                if key in todo and offset < stops[key]:
                    values.append(msg.value())
                if offset + 1 >= stops[key]:
                    todo.discard(key)
        commits = {k: v for k, v in stops.items() if v > starts[k]}
        if commits:
            consumer.commit(
                offsets=[TopicPartition(t, p, o) for (t, p), o in commits.items()],
                asynchronous=False,
            )
    finally:
        consumer.close()
    return values, {**committed, **commits}


def committed_offsets(bootstrap: str, group: str, topics: Sequence[str]) -> dict[Partition, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        partitions = [
            TopicPartition(t, p) for t in topics for p in range(partition_count(bootstrap, t))
        ]
        return {
            (tp.topic, tp.partition): tp.offset
            for tp in consumer.committed(partitions, timeout=10)
            if tp.offset >= 0
        }
    finally:
        consumer.close()


def read_from_committed(bootstrap: str, group: str, topics: Sequence[str]) -> list[bytes]:
    """What ``group`` reads from its committed offsets (or the start) to the current ends."""
    committed = committed_offsets(bootstrap, group, topics)
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
    )
    values: list[bytes] = []
    try:
        assign = []
        ends: dict[Partition, int] = {}
        for t in topics:
            for p in range(partition_count(bootstrap, t)):
                low, high = consumer.get_watermark_offsets(TopicPartition(t, p), timeout=10)
                start = committed.get((t, p), low)
                if start < high:
                    ends[(t, p)] = high
                    assign.append(TopicPartition(t, p, start))
        todo = set(ends)
        if assign:
            consumer.assign(assign)
        deadline = time.monotonic() + 60
        while todo and time.monotonic() < deadline:
            for msg in consumer.consume(1000, 1.0):
                if msg.error() is not None:
                    continue
                key = (msg.topic(), msg.partition())
                if msg.offset() < ends[key]:
                    values.append(msg.value())
                if msg.offset() + 1 >= ends[key]:
                    todo.discard(key)
        assert not todo, f"not read to the end: {todo}"
    finally:
        consumer.close()
    return values


def drsvc(*args: str, env: Mapping[str, str] | None = None) -> tuple[int, Any, str]:
    """``drsvc <args>`` run in this process (a new interpreter per command costs seconds here):
    exit code, the JSON document on stdout (if any), stderr."""
    result = CliRunner().invoke(build_app(), list(args), env=dict(env or {}))
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    out = result.stdout.strip()
    doc = json.loads(out) if out.startswith(("{", "[")) else None
    return result.exit_code, doc, result.stderr


class StartProcess:
    """``drsvc migrate start`` in the background, logging to a file."""

    def __init__(self, *args: str, log_file: Path, env: Mapping[str, str]) -> None:
        self.log_file = log_file
        self._log = log_file.open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "drsvc.cli.main", "migrate", "start", *args],
            stdout=self._log, stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **env},
        )  # fmt: skip

    def tail(self, lines: int = 30) -> str:
        return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])

    def log_size(self) -> int:
        return self.log_file.stat().st_size

    def paused_since(self, offset: int) -> int:
        """Partitions the copier said it paused in what it logged after ``offset``."""
        with self.log_file.open("rb") as log:
            log.seek(offset)
            text = log.read().decode(errors="replace")
        return sum(int(n) for n in re.findall(r"paused (\d+) partition\(s\)", text))

    def stop(self, timeout_s: float = 60) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()
        return self.proc.returncode

    def wait(self, timeout_s: float) -> int:
        code = self.proc.wait(timeout_s)
        self._log.close()
        return code
