"""A failover and an immediate failback of groups that stand at the start of partitions (issue 32).

As a group reset to earliest does, two groups stand at offset 0 of a topic's partitions, one of
them in the middle of one partition, on east; real replication workers copy the topic both ways
(active/active, prefix naming). A planned failover to west and, straight after it, a failback to
east must both be exact: each group's committed offsets after each move are the positions the
failover record names, and a consumer starting there reads exactly the records the group had
not read, in order: 0 skipped, 0 re-read.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient
from failover_support import (
    active_cluster,
    failover_env,
    run_cli,
    wait_for_remote_copies,
    wait_until,
    write_failover_topology,
)
from replication_support import create, end_offsets, produce, running_workers

from drsvc.adapters.consul_client import ConsulClient
from drsvc.devenv.environment import EnvironmentInfo
from drsvc.kafka.admin import committed_offsets

pytestmark = pytest.mark.timeout(900)

PARTITIONS = 12
RECORDS_PER_PARTITION = 20
GROUPS = ("g1", "g2")
MIDDLE = (5, 8)
"""g2 has read the first 8 records of partition 5; every other position is offset 0."""

Positions = dict[str, dict[int, int]]


def _start_positions() -> Positions:
    positions = {group: dict.fromkeys(range(PARTITIONS), 0) for group in GROUPS}
    partition, offset = MIDDLE
    positions["g2"][partition] = offset
    return positions


def _commit(bootstrap: str, group: str, topic: str, offsets: Mapping[int, int]) -> None:
    """Commit ``offsets`` for ``group`` without joining it (as a reset to earliest does)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
    )
    try:
        consumer.commit(
            offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False
        )
    finally:
        consumer.close()


def _values(bootstrap: str, topic: str) -> dict[int, list[tuple[int, bytes]]]:
    """Every record of ``topic`` as ``(offset, value)``, by partition."""
    return _read_from(bootstrap, topic, dict.fromkeys(range(PARTITIONS), 0))


def _all_values(bootstrap: str, topic: str) -> set[bytes]:
    return {value for records in _values(bootstrap, topic).values() for _o, value in records}


def _read_from(
    bootstrap: str, topic: str, starts: Mapping[int, int]
) -> dict[int, list[tuple[int, bytes]]]:
    """What a ``read_committed`` consumer starting at ``starts`` reads of ``topic`` up to its
    current ends, as ``(offset, value)``: it reaches an end that is a transaction marker too."""
    ends = end_offsets(bootstrap, topic)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
            "auto.offset.reset": "error",
        }
    )
    read: dict[int, list[tuple[int, bytes]]] = {p: [] for p in starts}
    try:
        todo = {p for p, start in starts.items() if start < ends[p]}
        consumer.assign([TopicPartition(topic, p, starts[p]) for p in todo])
        deadline = time.monotonic() + 60
        while todo:
            assert time.monotonic() < deadline, f"{topic}: not read to the end: {sorted(todo)}"
            for msg in consumer.consume(1000, 0.5):
                partition, offset = msg.partition(), msg.offset()
                assert partition is not None and offset is not None
                error = msg.error()
                if error is not None:
                    assert error.code() == KafkaError._PARTITION_EOF, error
                    if offset >= ends[partition]:
                        todo.discard(partition)
                    continue
                value = msg.value()
                assert value is not None
                if offset < ends[partition]:
                    read[partition].append((offset, value))
    finally:
        consumer.close()
    return read


def _unread(
    records: Mapping[int, list[tuple[int, bytes]]], positions: Mapping[int, int]
) -> dict[int, list[bytes]]:
    """East's records at or after each position: what the group had not read."""
    return {p: [value for offset, value in records[p] if offset >= positions[p]] for p in positions}


def _targets(doc: dict[str, Any], topic: str) -> Positions:
    """Each group's positions on ``topic`` as the failover record names them, all exact."""
    found: Positions = {group: {} for group in GROUPS}
    for target in doc["groups"]:
        assert target["exact"], target
        assert target["topic"] == topic, target
        found[target["group"]][target["partition"]] = target["target_offset"]
    return found


def _committed(bootstrap: str, topic: str) -> Positions:
    partitions = [(topic, p) for p in range(PARTITIONS)]
    config = {"bootstrap.servers": bootstrap}
    return {
        group: {p: o for (_t, p), o in committed_offsets(config, group, partitions).items()}
        for group in GROUPS
    }


def _check_exact_move(
    bootstrap: str,
    topic: str,
    doc: dict[str, Any],
    east_records: dict[int, list[tuple[int, bytes]]],
) -> Positions:
    """The groups are committed where the record says, and read exactly what they had not."""
    targets = _targets(doc, topic)
    assert _committed(bootstrap, topic) == targets
    for group, start in _start_positions().items():
        assert sorted(targets[group]) == list(range(PARTITIONS)), (group, targets[group])
        read = _read_from(bootstrap, topic, targets[group])
        values = {p: [value for _offset, value in records] for p, records in read.items()}
        assert values == _unread(east_records, start), group
    return targets


@pytest.mark.parametrize("delivery", ["at-least-once", "exactly-once"])
def test_groups_at_the_start_of_partitions_fail_over_and_straight_back_exactly(
    cluster_pair: EnvironmentInfo, tmp_path: Path, delivery: str
) -> None:
    tag = uuid.uuid4().hex[:6]
    topic = f"fs-{tag}"
    bootstraps = dict(cluster_pair.clusters)
    for alias in ("east", "west"):
        create(bootstraps[alias], topic, PARTITIONS)
    now_ms = int(time.time() * 1000)
    produce(
        bootstraps["east"],
        topic,
        [
            (p, f"{i}".encode(), f"p{p}-{i:03d}".encode(), [], now_ms)
            for p in range(PARTITIONS)
            for i in range(RECORDS_PER_PARTITION)
        ],
    )
    east_records = _values(bootstraps["east"], topic)
    assert all(len(r) == RECORDS_PER_PARTITION for r in east_records.values())
    for group, positions in _start_positions().items():
        _commit(bootstraps["east"], group, topic, positions)

    namespace = f"fs-{tag}"
    topology = write_failover_topology(
        tmp_path / "topology.json", namespace, bootstraps, topic, groups=GROUPS, delivery=delivery
    )
    assert cluster_pair.consul_http_addr is not None
    consul = ConsulClient(cluster_pair.consul_http_addr)
    env = failover_env(cluster_pair.consul_http_addr)
    copy = f"east.{topic}"

    def cli(*args: str) -> dict[str, Any]:
        code, doc, err = run_cli(*args, "--app", "app", "--json", "-t", str(topology), env=env)
        assert code == 0 and doc is not None, err
        return doc

    with running_workers(
        topology, ["east->west", "west->east"], tmp_path, "--consul", cluster_pair.consul_http_addr
    ):
        wait_for_remote_copies(bootstraps, topic)
        every_value = {value for records in east_records.values() for _o, value in records}
        wait_until(
            lambda: every_value <= _all_values(bootstraps["west"], copy),
            120,
            f"{copy} on west to hold every record",
        )

        over = cli("failover", "--to", "west")
        assert (over["state"], over["kind"], over["to"]) == ("completed", "planned", "west"), over
        assert active_cluster(consul, namespace) == "west"
        _check_exact_move(bootstraps["west"], copy, over, east_records)

        # The groups' old offsets on east go: the failback must commit every position itself.
        admin = AdminClient({"bootstrap.servers": bootstraps["east"]})
        for future in admin.delete_consumer_groups(list(GROUPS), request_timeout=30).values():
            future.result()
        assert _committed(bootstraps["east"], topic) == {group: {} for group in GROUPS}

        back = cli("failback")
        assert (back["state"], back["kind"], back["to"]) == ("completed", "planned", "east"), back
        assert active_cluster(consul, namespace) == "east"
        on_east = _check_exact_move(bootstraps["east"], topic, back, east_records)
        assert on_east == _start_positions()
