"""Helpers for translation tests on real clusters: groups that consume and commit, the
``drsvc translate`` command, reading from translated offsets, and the exactness check."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    IsolationLevel,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import OffsetSpec
from replication_support import (
    create,
    produce,
    running_workers,
    sequence_records,
    wait_for,
    write_topology,
)

from drsvc.kafka.admin import admin_client, create_topic, set_topic_configs
from failover import naming

Values = dict[int, list[bytes]]


def delete_before(bootstrap: str, topic: str, offsets: Mapping[int, int]) -> None:
    """Delete the records before ``offsets[p]`` (the log start moves there)."""
    wanted = [TopicPartition(topic, p, o) for p, o in offsets.items() if o > 0]
    if not wanted:
        return
    admin = admin_client(bootstrap)  # kept while its futures are pending
    futures = admin.delete_records(wanted, request_timeout=15)
    for future in futures.values():
        future.result(timeout=15)


def stable_ends(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    """Last stable offsets of ``topic``."""
    request = {TopicPartition(topic, p): OffsetSpec.latest() for p in range(partitions)}
    admin = admin_client(bootstrap)
    futures = admin.list_offsets(
        request, isolation_level=IsolationLevel.READ_COMMITTED, request_timeout=10
    )
    return {tp.partition: f.result(timeout=10).offset for tp, f in futures.items()}


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    """The group's committed offsets of ``topic`` (through a consumer that never joins it: the
    Admin API call for this can crash librdkafka while the group's coordinator moves)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        wanted = [TopicPartition(topic, p) for p in range(partitions)]
        return {tp.partition: tp.offset for tp in consumer.committed(wanted, timeout=10)}
    except KafkaException as err:
        if err.args[0].code() != KafkaError.NOT_COORDINATOR:
            raise
        return {}  # the group's coordinator is still being chosen: nothing known yet
    finally:
        consumer.close()


def caught_up(bootstrap: str, flow: str, topic: str, partitions: int) -> bool:
    """The flow's worker committed every partition up to its end: everything is copied and
    every copy has its sync (progress is committed only over acknowledged syncs)."""
    source, target = flow.split("->")
    progress = committed(bootstrap, naming.replicator_group(source, target), topic, partitions)
    ends = stable_ends(bootstrap, topic, partitions)
    return all(progress.get(p, -1) >= end for p, end in ends.items())


def by_partition(
    bootstrap: str, topic: str, isolation: str = "read_committed"
) -> dict[int, list[tuple[int, bytes]]]:
    """Every record of ``topic`` from its log start: ``{p: [(offset, value), ...]}``."""
    partitions = len(
        admin_client(bootstrap).list_topics(topic, timeout=10).topics[topic].partitions
    )
    starts = dict.fromkeys(range(partitions), OFFSET_BEGINNING)
    return read_records(bootstrap, topic, "tr-reader", starts, isolation)


def consume_and_commit(
    bootstrap: str, topic: str, group: str, stops: Mapping[int, int], isolation: str
) -> Values:
    """Group ``group`` reads each partition from its start and commits ``stops[p]``: it has
    consumed exactly the records before that offset. Returns what it consumed."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "enable.partition.eof": True,
        }
    )
    consumed: Values = {p: [] for p in stops}
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in stops])
        reading = set(stops)
        while reading:
            for msg in consumer.consume(1000, 1.0):
                p, offset = msg.partition(), msg.offset()
                assert p is not None and offset is not None
                if msg.error() is not None:
                    assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                    reading.discard(p)
                elif offset < stops[p]:
                    consumed[p].append(msg.value())
                else:
                    reading.discard(p)
        consumer.commit(
            offsets=[TopicPartition(topic, p, o) for p, o in stops.items()], asynchronous=False
        )
    finally:
        consumer.close()
    return consumed


def read_records(
    bootstrap: str, topic: str, group: str, starts: Mapping[int, int], isolation: str
) -> dict[int, list[tuple[int, bytes]]]:
    """Group ``group`` assigns ``topic`` at ``starts`` and reads every partition to its end."""
    ends = stable_ends(bootstrap, topic, max(starts) + 1)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "enable.partition.eof": True,
            "auto.offset.reset": "error",
        }
    )
    read: dict[int, list[tuple[int, bytes]]] = {p: [] for p in starts}
    try:
        consumer.assign([TopicPartition(topic, p, o) for p, o in starts.items()])
        reading = {p for p in starts if starts[p] < ends[p]}
        while reading:
            for msg in consumer.consume(1000, 1.0):
                p, offset = msg.partition(), msg.offset()
                assert p is not None and offset is not None
                if msg.error() is not None:
                    assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                    if offset >= ends[p]:
                        reading.discard(p)
                    continue
                value = msg.value()
                assert value is not None
                read[p].append((offset, value))
                if offset + 1 >= ends[p]:
                    reading.discard(p)
    finally:
        consumer.close()
    return read


def read_from(
    bootstrap: str, topic: str, group: str, starts: Mapping[int, int], isolation: str
) -> Values:
    """The values :func:`read_records` reads."""
    records = read_records(bootstrap, topic, group, starts, isolation)
    return {p: [value for _offset, value in values] for p, values in records.items()}


def translate(topology: Path, group: str, source: str, target: str) -> dict[str, Any]:
    """Run ``drsvc translate --json``; its stdout is exactly one JSON object."""
    done = subprocess.run(
        [sys.executable, "-m", "drsvc.cli.main", "translate", "-t", str(topology),
         "--group", group, "--from", source, "--to", target, "--json"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def translated(result: Mapping[str, Any], topic: str) -> dict[int, dict[str, Any]]:
    return {p["partition"]: p for p in result["partitions"] if p["topic"] == topic}


def replicate(
    topology: Path, flows: list[str], log_dir: Path, bootstrap: dict[str, str], topics: list[str]
) -> None:
    """Run the flows' workers until every topic is copied with its syncs, then stop them
    gracefully. ``topics`` are ``(flow, topic, partitions)`` strings: ``east->west:tr-x:3``."""
    with running_workers(topology, flows, log_dir):
        for spec in topics:
            flow, topic, partitions = spec.split(":")
            source = bootstrap[flow.split("->")[0]]
            wait_for(
                lambda f=flow, t=topic, n=int(partitions), b=source: caught_up(b, f, t, n),
                60,
                f"{flow} to copy {topic} with its syncs",
            )


def check_moved_exactly(
    everything: Mapping[int, list[tuple[int, bytes]]],
    consumed: Values,
    read_after_move: Values,
) -> None:
    """What the group consumed before the move, then what it read after it, is every record of
    the original partition once, in order: zero skipped, zero read twice."""
    for p, records in everything.items():
        values = [value for _offset, value in records]
        before, after = consumed.get(p, []), read_after_move.get(p, [])
        assert before + after == values, (
            f"partition {p}: consumed {len(before)} before the move and read {len(after)} after "
            f"it, of {len(values)} records; first after the move: {after[:1]}, expected "
            f"{values[len(before) : len(before) + 1]}"
        )


def replicated_topic(
    east: str,
    west: str,
    tmp_path: Path,
    topic: str,
    count: int,
    tag: str,
    deleted: Mapping[int, int],
) -> Path:
    """A 3-partition ``topic`` on east with ``count`` records, its start trimmed by ``deleted``
    (so offsets on west differ from east's), copied to west by one east->west run; returns the
    topology file."""
    create(east, topic, 3)
    produce(east, topic, sequence_records(count, 3, tag=tag))
    delete_before(east, topic, deleted)
    topology = write_topology(
        tmp_path / "tr.yaml",
        "tr",
        {"east": east, "west": west},
        [{"source": "east", "target": "west", "topics": {"include": ["tr-.*"]}}],
    )
    replicate(topology, ["east->west"], tmp_path, {"east": east}, [f"east->west:{topic}:3"])
    return topology


# -- compacted topics -----------------------------------------------------------------------------

Keyed = dict[int, list[tuple[int, bytes | None, bytes | None]]]


def read_keyed(bootstrap: str, topic: str, starts: Mapping[int, int]) -> Keyed:
    """``{p: [(offset, key, value), ...]}`` from ``starts[p]`` to the end (tombstones kept)."""
    ends = stable_ends(bootstrap, topic, max(starts) + 1)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "tr-keyed-reader",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    read: Keyed = {p: [] for p in starts}
    try:
        consumer.assign([TopicPartition(topic, p, o) for p, o in starts.items()])
        reading = {p for p in starts if starts[p] < ends[p]}
        while reading:
            for msg in consumer.consume(1000, 1.0):
                p, offset = msg.partition(), msg.offset()
                assert p is not None and offset is not None
                if msg.error() is not None:
                    assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                    reading.discard(p)
                    continue
                read[p].append((offset, msg.key(), msg.value()))
                if offset + 1 >= ends[p]:
                    reading.discard(p)
    finally:
        consumer.close()
    return read


def compacted_history(bootstrap: str, topic: str) -> None:
    """Create ``topic`` (2 partitions) compacted, write three rounds of overwrites and tombstones
    and wait until the log cleaner has left holes in both partitions; then calm its configs, so
    the log stays as it is and copies that take its configs are not compacted further."""
    admin = admin_client(bootstrap)
    aggressive = {
        "cleanup.policy": "compact",
        "segment.ms": "100",
        "min.cleanable.dirty.ratio": "0.01",
        "min.compaction.lag.ms": "0",
        "delete.retention.ms": "86400000",  # tombstones stay: they must be copied too
    }
    assert create_topic(admin, topic, 2, config=aggressive)
    rounds: list[list[tuple[int, bytes | None, bytes | None, Any, int]]] = [
        [(k % 2, f"k{k}".encode(), f"v1-{k}".encode(), [], 0) for k in range(300)],
        [(k % 2, f"k{k}".encode(), None if k % 5 == 0 else f"v2-{k}".encode(), [], 0)
         for k in range(0, 300, 3)],
        [(k % 2, f"k{k}".encode(), f"v3-{k}".encode(), [], 0) for k in range(0, 300, 7)],
    ]  # fmt: skip
    for records in rounds:
        produce(bootstrap, topic, records)
        time.sleep(1.2)  # past segment.ms: the next round rolls a new segment
    produce(bootstrap, topic, [(p, b"roll", b"roll", [], 0) for p in range(2)])

    def compacted() -> bool:
        records = read_keyed(bootstrap, topic, {0: 0, 1: 0})
        return all(len(r) < r[-1][0] + 1 for r in records.values())

    wait_for(compacted, 60, "the log cleaner to compact both partitions")
    set_topic_configs(admin, topic, {"segment.ms": "604800000", "min.cleanable.dirty.ratio": "0.9"})


def hole_and_tombstone(log: Keyed) -> dict[int, int]:
    """Where a group stops in the hardest places: partition 0 in a hole the cleaner left,
    partition 1 on a tombstone."""
    offsets = {o for o, _k, _v in log[0]}
    assert any(v is None for r in log.values() for _o, _k, v in r), "no tombstone left"
    gap = next(o for o in range(max(offsets)) if o not in offsets)
    tombstone = next(o for o, _k, v in log[1] if v is None)
    return {0: gap, 1: tombstone}


def commit_at(bootstrap: str, topic: str, group: str, stops: Mapping[int, int]) -> None:
    """Group ``group`` commits ``stops[p]`` on ``topic`` (as if it had consumed up to there)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        consumer.commit(
            offsets=[TopicPartition(topic, p, o) for p, o in stops.items()], asynchronous=False
        )
    finally:
        consumer.close()
