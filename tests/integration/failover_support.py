"""Helpers for failover tests on real clusters and a real Consul: an application's producer that
follows its active key, consumers that commit part-way, the CLI, and the sequence check."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from replication_support import read_all, topics_of

from drsvc.adapters.consul_client import ConsulClient
from failover.active import decode_active
from failover.checkpoints import decode_key, decode_value
from failover.naming import app_active_key

PARTITIONS = 2


def write_failover_topology(
    path: Path,
    name: str,
    clusters: Mapping[str, str],
    topic: str,
    *,
    policy: str = "prefix",
    both_ways: bool = True,
    lease_s: float = 2.0,
    groups: tuple[str, ...] = ("g1", "g2"),
    on_recovery: str = "quarantine",
    delivery: str = "at-least-once",
) -> Path:
    flows: list[dict[str, Any]] = [
        {
            "source": "east",
            "target": "west",
            "topics": {"include": [f"^{topic}$"]},
            "policy": policy,
        }
    ]
    if both_ways:
        flows.append(
            {"source": "west", "target": "east", "topics": {"include": [f"^{topic}$"]},
             "policy": policy}
        )  # fmt: skip
        if policy == "identity":
            flows[-1]["standby"] = True  # active/passive: the way back
    for flow in flows:
        flow["delivery"] = delivery
    document = {
        "name": name,
        "clusters": {alias: {"bootstrap_servers": bs} for alias, bs in clusters.items()},
        "flows": flows,
        "applications": [
            {
                "name": "app",
                "groups": list(groups),
                "topics": [topic],
                "preferred": "east",
                "lease_s": lease_s,
                "on_recovery": on_recovery,
            }
        ],
    }
    path.write_text(json.dumps(document, indent=2))
    return path


@dataclass
class FollowingProducer:
    """Writes sequence-numbered records to the application's topic on whichever cluster its
    active key names, pausing while it is none: what a client honouring the protocol does."""

    consul: ConsulClient
    key: str
    bootstraps: Mapping[str, str]
    topic: str
    interval_s: float = 0.01
    #: the application's client security settings (a secured cluster)
    settings: Mapping[str, str] = field(default_factory=dict)
    acked: list[tuple[str, bytes]] = field(default_factory=list)
    clusters_seen: list[str | None] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _errors: list[str] = field(default_factory=list)

    def start(self) -> FollowingProducer:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> list[tuple[str, bytes]]:
        self._stop.set()
        assert self._thread is not None
        self._thread.join(60)
        assert not self._errors, self._errors[:3]
        return self.acked

    def _run(self) -> None:
        producers: dict[str, Producer] = {}
        seq = 0
        lock = threading.Lock()
        while not self._stop.is_set():
            cluster = decode_active(self.consul.kv_get(self.key), "east").cluster
            if not self.clusters_seen or self.clusters_seen[-1] != cluster:
                self.clusters_seen.append(cluster)
            if cluster is None:
                time.sleep(0.05)
                continue
            producer = producers.get(cluster)
            if producer is None:
                producer = Producer(
                    {"bootstrap.servers": self.bootstraps[cluster], "acks": "all",
                     "enable.idempotence": True, "linger.ms": 5, **self.settings}
                )  # fmt: skip
                producers[cluster] = producer
            value = f"seq-{seq:07d}".encode()

            def acked(err: Any, _msg: Any, c: str = cluster, v: bytes = value) -> None:
                with lock:
                    if err is None:
                        self.acked.append((c, v))
                    else:
                        self._errors.append(err.str())

            producer.produce(self.topic, value=value, key=str(seq).encode(), on_delivery=acked)
            # Each record is acknowledged before the key is read again: none is left in flight
            # when the cluster changes (a real client flushes on a switch).
            producer.flush(10)
            seq += 1
            time.sleep(self.interval_s)
        for producer in producers.values():
            producer.flush(10)


def consume_part(
    bootstrap: str,
    group: str,
    topics: list[str],
    fraction: float,
    settings: Mapping[str, str] | None = None,
) -> tuple[list[bytes], dict[tuple[str, int], int]]:
    """Group ``group`` reads ``fraction`` of what ``topics`` hold now (per partition, from its
    committed offset or the start) and commits where it stopped. Returns the values it read and
    the offsets it committed. ``settings``: client security settings (a secured cluster)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
            **(settings or {}),
        }
    )
    values: list[bytes] = []
    commits: dict[tuple[str, int], int] = {}
    try:
        partitions = [TopicPartition(t, p) for t in topics for p in range(PARTITIONS)]
        committed = {
            (tp.topic, tp.partition): tp.offset
            for tp in consumer.committed(partitions, timeout=10)
            if tp.offset >= 0
        }
        stops: dict[tuple[str, int], int] = {}
        starts: dict[tuple[str, int], int] = {}
        for tp in partitions:
            low, high = consumer.get_watermark_offsets(tp, timeout=10)
            start = committed.get((tp.topic, tp.partition), low)
            starts[(tp.topic, tp.partition)] = start
            stops[(tp.topic, tp.partition)] = start + int((high - start) * fraction)
        todo = {k for k in stops if stops[k] > starts[k]}
        if todo:
            consumer.assign([TopicPartition(t, p, starts[(t, p)]) for t, p in todo])
        deadline = time.monotonic() + 120
        while todo:
            assert time.monotonic() < deadline, f"{group}: not read up to {stops} ({todo} left)"
            for msg in consumer.consume(500, 1.0):
                key = (msg.topic(), msg.partition())
                offset = msg.offset()
                assert offset is not None
                if msg.error() is not None:
                    assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                    if offset >= stops.get(key, offset + 1):
                        todo.discard(key)  # the end is past the stop: all below it was read
                    continue
                if key in todo and offset < stops[key]:
                    value = msg.value()
                    assert value is not None
                    values.append(value)
                # A stop on a transaction marker or an aborted record (exactly-once copies) is
                # never delivered: the first record at or past it ends the partition too.
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
    return values, commits


def read_rest(
    bootstrap: str, group: str, topics: list[str], settings: Mapping[str, str] | None = None
) -> list[bytes]:
    """What a consumer of ``group`` reads from its committed offsets (or the start where it has
    none) to the current ends; commits nothing."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            **(settings or {}),
        }
    )
    values: list[bytes] = []
    try:
        partitions = [TopicPartition(t, p) for t in topics for p in range(PARTITIONS)]
        committed = {(tp.topic, tp.partition): tp.offset for tp in consumer.committed(partitions)}
        assign = []
        ends = {}
        for tp in partitions:
            low, high = consumer.get_watermark_offsets(tp, timeout=10)
            start = committed.get((tp.topic, tp.partition), -1)
            start = start if start >= 0 else OFFSET_BEGINNING
            ends[(tp.topic, tp.partition)] = high
            if (start if start >= 0 else low) < high:
                assign.append(TopicPartition(tp.topic, tp.partition, start))
        todo = {(tp.topic, tp.partition) for tp in assign}
        if assign:
            consumer.assign(assign)
        deadline = time.monotonic() + 60
        while todo and time.monotonic() < deadline:
            for msg in consumer.consume(500, 1.0):
                key = (msg.topic(), msg.partition())
                offset = msg.offset()
                assert offset is not None
                if msg.error() is not None:
                    # An exactly-once copy ends on a transaction marker, never delivered: the
                    # end of the partition at or past the end read says all before it was read.
                    if msg.error().code() == KafkaError._PARTITION_EOF and offset >= ends[key]:
                        todo.discard(key)
                    continue
                value = msg.value()
                assert value is not None
                if offset < ends[key]:
                    values.append(value)
                if offset + 1 >= ends[key]:
                    todo.discard(key)
        assert not todo, f"not read to the end: {todo}"
    finally:
        consumer.close()
    return values


def run_cli(
    *args: str, env: Mapping[str, str] | None = None, timeout_s: float = 180
) -> tuple[int, dict[str, Any] | None, str]:
    """``drsvc <args> --json``: exit code, the JSON object on stdout (if any), stderr."""
    done = subprocess.run(
        [sys.executable, "-m", "drsvc.cli.main", *args],
        capture_output=True, text=True, timeout=timeout_s, check=False,
        env={**os.environ, **(env or {})},
    )  # fmt: skip
    doc = json.loads(done.stdout) if done.stdout.strip().startswith(("{", "[")) else None
    return done.returncode, doc, done.stderr


FAILOVER_ID = re.compile(r"failover (f-[0-9TZ]+-[0-9a-f]{8})")


def failover_id_in(text: str) -> str:
    found = FAILOVER_ID.search(text)
    assert found is not None, f"no failover id in:\n{text}"
    return found.group(1)


def check_exactly_once(acked: list[tuple[str, bytes]], consumed: list[bytes]) -> None:
    """Every acknowledged record was consumed exactly once (before or after the move)."""
    sent = sorted(v for _c, v in acked)
    got = sorted(consumed)
    missing = sorted(set(sent) - set(got))
    extra = sorted(set(got) - set(sent))
    twice = len(got) - len(set(got))
    assert not missing and not extra and twice == 0, (
        f"{len(sent)} sent, {len(got)} consumed: {len(missing)} missing (first {missing[:3]}), "
        f"{twice} read twice, {len(extra)} never sent (first {extra[:3]})"
    )


def failover_env(consul: str) -> dict[str, str]:
    """Environment of failover commands in tests: the Consul agent, and a short executor lock
    (2 s TTL, 1 s lock delay) so that a resumed failover takes over quickly."""
    return {
        "DRSVC_CONSUL_HTTP_ADDR": consul,
        "DRSVC_FAILOVER_LOCK_TTL_S": "2",
        "DRSVC_FAILOVER_LOCK_DELAY_S": "1",
    }


def wait_for_remote_copies(
    bootstraps: Mapping[str, str], topic: str, settings: Mapping[str, str] | None = None
) -> None:
    """Until the flows both ways have created ``topic``'s copies (prefix naming)."""
    wait_until(
        lambda: (
            f"east.{topic}" in topics_of(bootstraps["west"], settings)
            and f"west.{topic}" in topics_of(bootstraps["east"], settings)
        ),
        60,
        "the remote copies to be created",
    )


def wait_until(predicate: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout_s:.0f}s waiting for {what}")


def active_cluster(consul: ConsulClient, namespace: str) -> str | None:
    return decode_active(consul.kv_get(app_active_key(namespace, "app")), "east").cluster


def checkpoints_at(west: str, committed: dict[str, dict[tuple[str, int], int]]) -> bool:
    """The newest checkpoint of every committed partition of both groups names its offset and
    translates it (a stream whose sync follower has not applied the partition's syncs yet
    honestly checkpoints it as unknown first)."""
    latest = {}
    for record in read_all(west, "east.checkpoints.internal"):
        if record.key is None or record.value is None:
            continue
        key = decode_key(record.key)
        checkpoint = decode_value(record.value)
        translated = checkpoint.target_offset is not None
        latest[(key.group, key.partition, checkpoint.source_topic)] = (
            checkpoint.source_offset if translated else None
        )
    return all(
        latest.get((group, partition, topic)) == offset
        for group, offsets in committed.items()
        for (topic, partition), offset in offsets.items()
    )
